"""`canine inspect DIR [--json]`: the manifest of a shard directory as a table."""

import json
import sys

from pipeline import contract


def add_arguments(p):
    p.add_argument("directory", metavar="DIR", help="a shard directory (fsspec URL), the output of canine preprocess")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")


def format_manifest(m: dict) -> str:
    lines = [f"schema v{m['schema_version']}  config {m['config_sha256'][:12]}  seq_len {m['config']['seq_len']}"]
    for split, info in m["splits"].items():
        lines.append(f"{split:<11} {len(info['shards']):>4} shards {info['rows']:>9} examples {info['codepoints']:>12} codepoints")
    cols = ("pages_read",) + contract.PAGE_OUTCOMES + ("examples", "sampling_weight", "replaced_characters")
    heads = ("lang", "read", "redirect", "non-art", "parse-err", "empty", "kept", "examples", "weight", "replaced")
    lines.append("  ".join(f"{h:>9}" for h in heads))
    for lang, c in m["languages"].items():
        vals = [lang] + [f"{c[k]:.3f}" if k == "sampling_weight" else str(c[k]) for k in cols]
        lines.append("  ".join(f"{v:>9}" for v in vals))
    if "run" in m:
        r = m["run"]
        lines.append(f"{r['work_items']} work items ({r['items_parsed']} parsed, {r['items_reused']} reused "
                     f"from an interrupted run), {r['elapsed_s']} s")
    return "\n".join(lines)


def print_manifest(m: dict, as_json: bool = False) -> None:
    print(json.dumps(m, indent=1, sort_keys=True, ensure_ascii=False) if as_json else format_manifest(m))


def main(args) -> int:
    from pipeline.output import read_manifest

    m = read_manifest(args.directory)
    if m is None:
        print(f"canine inspect: {args.directory} has no {contract.MANIFEST} (not a complete output)", file=sys.stderr)
        return 2
    print_manifest(m, args.json)
    return 0
