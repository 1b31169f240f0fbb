"""`canine inspect DIR [--json] [--examples N]`: the manifest of a shard directory as a table, and
examples as text with their masking plans visible.

    canine inspect out/shards --examples 2                 # 2 examples per split and language
    canine inspect out/shards --examples 1 --split validation --lang zh --chars 0

An example prints as its text (special codepoints as [CLS] [SEP] ..., a line break as ⏎), with
the CANINE-C span plan bracketed ⟦like this⟧ (char_mask_positions: the characters the model
predicts), then the CANINE-S plan: each chosen subword span with its action (mask, random ->
its replacement, keep) and the character predicted (subword_predict_offsets).
"""

import json
import sys

from contract import schema
from contract.files import join, redact

# Headings of the per-language table's columns, schema.LANGUAGE_KEYS in order.
# How many headings of each kind a manifest records: pipeline/beam/stats.py TOP_HEADINGS, copied so that
# inspect does not import Beam for it (tests/jobs/test_inspect_headings.py keeps the two equal).
TOP_HEADINGS = 20
_HEADINGS = ("read", "redirect", "non-art", "disambig", "parse-err", "empty", "kept", "examples", "weight", "replaced")


def add_arguments(p):
    p.add_argument("directory", metavar="DIR", help="a shard directory (fsspec URL), the output of canine preprocess")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON (with --examples: one JSON "
                   "object per example, a line each)")
    p.add_argument("--examples", type=int, default=0, metavar="N",
                   help="also print the first N examples of each split and language as text, masked spans "
                   "bracketed (reads the shards in the manifest's order until each has N)")
    p.add_argument("--split", choices=("all", *schema.SPLITS), default="all", help="the split of --examples")
    p.add_argument("--lang", action="append", default=[], metavar="LANG",
                   help="only these languages for --examples (repeatable; default: every language)")
    p.add_argument("--chars", type=int, default=600,
                   help="show at most this many characters of each example's text (0: all of it)")


_SPECIAL = {schema.PAD: "[PAD]", schema.CLS: "[CLS]", schema.SEP: "[SEP]", schema.BOS: "[BOS]",
            schema.MASK: "[MASK]", schema.RESERVED: "[RESERVED]"}
_OPEN, _CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧: not brackets a wiki's text is likely to hold
_ACTIONS = {schema.ACTION_MASK: "mask", schema.ACTION_RANDOM: "random", schema.ACTION_KEEP: "keep"}
_SOP = {schema.SOP_IN_ORDER: "segments in order", schema.SOP_SWAPPED: "segments swapped",
        schema.SOP_NO_PAIR: "one segment"}


def _char(cp: int) -> str:
    return _SPECIAL.get(cp) or ("\u23ce" if cp == 10 else chr(cp))


def _text(cps, start: int = 0, stop: int | None = None) -> str:
    return "".join(_char(cp) for cp in cps[start:stop])


def render_example(row: dict, chars: int = 600) -> str:
    """One shard row (a dict of contract.schema's columns) as text: the CANINE-C plan bracketed
    in the text, the CANINE-S plan as a list. `chars` > 0 cuts the text (and the lists follow it)."""
    cps, masked = row["codepoints"], set(row["char_mask_positions"])
    shown = len(cps) if chars <= 0 else min(chars, len(cps))
    out, inside = [], False
    for i in range(shown):
        if (i in masked) != inside:
            out.append(_OPEN if not inside else _CLOSE)
            inside = not inside
        out.append(_char(cps[i]))
    if inside:
        out.append(_CLOSE)
    more = f" ... (+{len(cps) - shown} characters)" if shown < len(cps) else ""
    head = (f"{row['example_id']} [{row['lang']}] pages {', '.join(map(str, row['page_ids']))}; "
            f"{len(cps)} codepoints, {_SOP.get(row['sop_label'], row['sop_label'])}; CANINE-C "
            f"{len(masked)} characters predicted; CANINE-S {len(row['subword_starts'])} subwords")
    lines = [head, "  " + "".join(out) + more]
    replacements, at = row["subword_replacements"], 0
    spans = []
    for start, length, offset, action in zip(row["subword_starts"], row["subword_lengths"],
                                             row["subword_predict_offsets"], row["subword_actions"]):
        word = _text(cps, start, start + length)
        what = _ACTIONS.get(action, str(action))
        if action == schema.ACTION_RANDOM:
            what += " -> " + "".join(_char(c) for c in replacements[at:at + length])
            at += length
        if start < shown:
            spans.append(f"{word!r} {what}, predicts {_char(cps[start + offset])!r}")
    if spans:
        lines.append("  CANINE-S: " + "; ".join(spans))
    return "\n".join(lines)


def iter_examples(directory: str, manifest, n: int, splits, langs):
    """(split, row) for the first `n` rows of each split and language, reading the shards of the
    manifest in order and stopping as soon as every language asked for has its `n`."""
    import fsspec
    import pyarrow.parquet as pq

    for split in splits:
        wanted = set(langs or manifest.languages)
        seen = dict.fromkeys(wanted, 0)
        for shard in manifest.splits[split].shards:
            if all(seen[lang] >= n for lang in wanted):
                break
            with fsspec.open(join(directory, shard.path), "rb") as f:
                parquet = pq.ParquetFile(f)
                for g in range(parquet.num_row_groups):
                    for row in parquet.read_row_group(g).to_pylist():
                        lang = row["lang"]
                        if lang in seen and seen[lang] < n:
                            seen[lang] += 1
                            yield split, row
                    if all(seen[lang] >= n for lang in wanted):
                        break


def print_examples(directory: str, manifest, args) -> None:
    splits = schema.SPLITS if args.split == "all" else (args.split,)
    unknown = sorted(set(args.lang) - set(manifest.languages))
    if unknown:
        raise ValueError(f"--lang {', '.join(unknown)}: not in {directory} (its languages: "
                         f"{', '.join(manifest.languages) or 'none'})")
    count = 0
    for split, row in iter_examples(directory, manifest, args.examples, splits, args.lang):
        count += 1
        if args.json:
            print(json.dumps({"split": split, **row}, ensure_ascii=False))
        else:
            print(f"\n{split}: " + render_example(row, args.chars))
    if not count and not args.json:
        print(f"\nno examples in {', '.join(splits)}" + (f" for {', '.join(args.lang)}" if args.lang else ""))


def format_manifest(m, run=None) -> str:
    """A contract.manifest.Manifest as a table; `run`: output.RunStats of the run that made it."""
    lines = [f"schema v{m.schema_version}  config {m.config_sha256[:12]}  seq_len {m.seq_len}"]
    if m.trial_slice:  # second, before any count: every count below is of the slice
        lines.append(f"trial slice: {m.trial_slice}")
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
    dropped and those that most often end a page after cleaning (pipeline/beam/stats.py)."""
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
        if text.get("converted_pages"):
            lines.append(f"{lang}: converted to one variant (--convert): {text['converted_pages']} pages, "
                         f"{text['converted_characters']} characters changed")
        for key, what in (("end_matter_dropped", "end matter dropped"), ("last_headings_kept", "last headings kept")):
            if text.get(key):  # all the manifest holds: its commonest TOP_HEADINGS (pipeline/beam/stats.py)
                lines.append(f"{lang}: {what}: " + ", ".join(f"{title} {n}" for title, n in text[key])
                             + (f" (the commonest {len(text[key])}; rarer ones are not recorded)"
                                if len(text[key]) >= TOP_HEADINGS else ""))
    return lines


def print_manifest(m, as_json: bool = False) -> None:
    """`m`: a Manifest, or what pipeline.run.run_job returns (a RunResult: the manifest and how the run went)."""
    if as_json:
        print(json.dumps(m.to_dict(), indent=1, sort_keys=True, ensure_ascii=False))
    else:
        print(format_manifest(getattr(m, "manifest", m), getattr(m, "run", None)))


def main(args) -> int:
    from pipeline.output.output import OutputExistsError, published_manifest

    try:
        m = published_manifest(args.directory)
    except (ValueError, OutputExistsError) as e:  # a broken manifest, or schema 1's
        print(f"canine inspect: {redact(str(e))}", file=sys.stderr)
        return 2
    if m is None:
        print(f"canine inspect: {args.directory} has no {schema.MANIFEST} (not a complete output)", file=sys.stderr)
        return 2
    if args.examples < 0 or args.chars < 0:
        raise ValueError("--examples and --chars take a count >= 0")
    if not (args.examples and args.json):  # --json --examples: stdout is one example per line
        print_manifest(m, args.json)
    if args.examples:
        print_examples(args.directory, m, args)
    return 0
