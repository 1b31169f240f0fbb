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
    lines += _quality_lines(m.languages)
    if run is not None:
        lines.append(f"{run.work_items} work items ({run.items_parsed} parsed, {run.items_reused} reused "
                     f"from an interrupted run), {run.elapsed_s} s")
    return "\n".join(lines)


def _quality_lines(languages) -> list[str]:
    """Per language: the CANINE-C masks, variant markup, and the headings the end-matter rule
    dropped and those that most often end a page after cleaning (pipeline/stats.py)."""
    lines = []
    masks = {lang: c.masks for lang, c in languages.items() if c.masks}
    if masks:
        lines.append("  ".join(f"{h:>9}" for h in ("lang", "masked%p10", "median", "span-med", "span-p90", "span-max")))
        for lang, k in masks.items():
            vals = (lang, k.get("masked_share_p10_pct"), k.get("masked_share_median_pct"), k.get("span_median"),
                    k.get("span_p90"), k.get("span_max"))
            lines.append("  ".join(f"{'-' if v is None else v!s:>9}" for v in vals))
    for lang, c in languages.items():
        text = c.text
        if not text:
            continue
        if text.get("variant_pages"):
            lines.append(f"{lang}: variant markup on {text['variant_pages']} pages, "
                         f"{text.get('variant_constructs', 0)} constructs rendered")
        for key, what in (("end_matter_dropped", "end matter dropped"), ("last_headings_kept", "last headings kept")):
            if text.get(key):
                lines.append(f"{lang}: {what}: " + ", ".join(f"{title} {n}" for title, n in text[key][:8]))
    return lines


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
