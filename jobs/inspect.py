"""`canine inspect DIR [--json]`: the manifest of a shard directory as a table."""

import json
import sys

from contract import schema
from contract.files import redact

# Headings of the per-language table's columns, schema.LANGUAGE_KEYS in order.
_HEADINGS = ("read", "redirect", "non-art", "parse-err", "empty", "kept", "examples", "weight", "replaced")


def add_arguments(p):
    p.add_argument("directory", metavar="DIR", help="a shard directory (fsspec URL), the output of canine preprocess")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")


def format_manifest(m, run=None) -> str:
    """A contract.manifest.Manifest as a table; `run`: output.RunStats of the run that made it."""
    lines = [f"schema v{m.schema_version}  config {m.config_sha256[:12]}  seq_len {m.seq_len}"]
    for name, split in m.splits.items():
        lines.append(f"{name:<11} {len(split.shards):>4} shards {split.rows:>9} examples {split.codepoints:>12} codepoints")
    lines.append("  ".join(f"{h:>9}" for h in ("lang", *_HEADINGS)))
    for lang, c in m.languages.items():
        vals = [lang] + [f"{c.sampling_weight:.3f}" if k == "sampling_weight" else str(getattr(c, k))
                         for k in schema.LANGUAGE_KEYS]
        lines.append("  ".join(f"{v:>9}" for v in vals))
    if run is not None:
        lines.append(f"{run.work_items} work items ({run.items_parsed} parsed, {run.items_reused} reused "
                     f"from an interrupted run), {run.elapsed_s} s")
    return "\n".join(lines)


def print_manifest(m, as_json: bool = False) -> None:
    """`m`: a Manifest, or what pipeline.output.run returns (a RunResult: the manifest and how the run went)."""
    if as_json:
        print(json.dumps(m.to_dict(), indent=1, sort_keys=True, ensure_ascii=False))
    else:
        print(format_manifest(getattr(m, "manifest", m), getattr(m, "run", None)))


def main(args) -> int:
    from pipeline.output import OutputExistsError, published_manifest

    try:
        m = published_manifest(args.directory)
    except (ValueError, OutputExistsError) as e:  # a broken manifest, or schema 1's
        print(f"canine inspect: {redact(str(e))}", file=sys.stderr)
        return 2
    if m is None:
        print(f"canine inspect: {args.directory} has no {schema.MANIFEST} (not a complete output)", file=sys.stderr)
        return 2
    print_manifest(m, args.json)
    return 0
