"""`canine validate DIR`: check an output against the shard contract and its own manifest.

Every problem is reported with where it is (shard path, example_id, column); nothing is fixed.
The checks are the contract's: the manifest's schema (contract/manifest.py), the row rules the
batch builder applies too (contract/rows.py) and two that need the pipeline's own definitions
(whole CANINE-C spans of the rule the output was made with, the tokenizer's spans); plus what the manifest promises:
hashes, counts, at least one training example, the per-language accounting identity, train/validation page
disjointness, the per-language validation split (each language's held-out pages are the ones the job's rule
picks, pipeline/beam/split.py), and that the folder holds nothing the manifest does not
account for (a stray Parquet file would be
read by every dataset reader).

A shard that is missing or unreadable is one problem, said once: what follows from it alone is
not reported again (`Unread`). Its examples are absent from the per-language counts and, when it
is a validation shard, its pages from the split; so a count short by exactly the rows the
manifest lists for the unread shards is not a second problem, and the split is checked only as
far as the pages read allow (every validation page's hash below every train page's).
"""

import hashlib
import io

import numpy as np
import pyarrow.parquet as pq

from contract import schema
from contract.manifest import Manifest, config_sha256
from contract.rows import RowError, Rows, Violation, violations
from pipeline.rows.masks import MaskPlanConfig
from pipeline.output.output import OutputExistsError, _fs, published_manifest
from pipeline.rows.tokenizer import WordPieceTokenizer

MAX_PROBLEMS = 50  # enough to see a pattern; the count says how many more there were


class Problems:
    def __init__(self):
        self.items, self.count = [], 0

    def add(self, where, what):
        self.count += 1
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(f"{where}: {what}")


def _check_manifest(m: Manifest, out: Problems) -> None:
    """What the manifest promises of itself (its schema is checked as it is read)."""
    if config_sha256(m.config) != m.config_sha256:
        out.add(schema.MANIFEST, "config_sha256 does not match config")
    if not (m.splits.get("train") and m.splits["train"].rows):  # canine preprocess no longer publishes one
        out.add(f"{schema.MANIFEST} splits.train", "no training example: nothing to pretrain on (every page of the "
                "input rejected? its rejects files say why)")
    for lang, c in m.languages.items():
        if problem := c.accounting_error():
            out.add(f"{schema.MANIFEST} languages.{lang}", problem)
    for name, split in m.splits.items():
        for field in ("rows", "codepoints"):
            if getattr(split, field) != sum(getattr(s, field) for s in split.shards):
                out.add(f"{schema.MANIFEST} splits.{name}", f"{field} differ from the sum over its shards")


def check_rows(rows, seq_len: int, tokenizer: WordPieceTokenizer | None, where: str, out: Problems,
               plans: MaskPlanConfig = MaskPlanConfig()) -> None:
    """Examples (a pyarrow Table, or a dict of columns) against the contract: the row rules the
    batch builder applies too (contract/rows.py), then two that need the pipeline's own
    definitions: whole CANINE-C spans of `plans`' rule (an output's is in its manifest:
    MaskPlanConfig.from_fingerprint), and the tokenizer's subword spans."""
    try:
        r = Rows(rows)
        more = [_whole_spans(plans)] + ([_tokenizer_spans(tokenizer)] if tokenizer is not None else [])
        for v in violations(r, seq_len, vocab_size=tokenizer and tokenizer.vocab_size, more=more):
            out.add(where, v.describe(r.ids))
    except RowError as e:  # a missing or null column: no row can be checked
        out.add(where, str(e))


def check_row(row: dict, seq_len: int, tokenizer: WordPieceTokenizer | None, where: str, out: Problems,
              plans: MaskPlanConfig = MaskPlanConfig()) -> None:
    """One example (a dict of its columns, as Table.to_pylist gives) against the contract."""
    check_rows({k: [v] for k, v in row.items()}, seq_len, tokenizer, where, out, plans)


def _whole_spans(plans: MaskPlanConfig):
    def rule(k):
        """CANINE-C: char_mask_positions are whole spans of the plans' rule (pipeline/rows/masks.py)."""
        name = "char_mask_positions"
        pos, offsets, row, _ = k.positions(name)  # inside the text: the shared rules passed
        starts, ends = plans.spans(k.cps)  # specials end spans: none crosses two rows
        starts, ends = np.append(0, starts), np.append(0, ends)  # span 0: an empty one before them all
        flat = k.offsets[row] + pos
        span = np.searchsorted(starts, flat, side="right") - 1  # the span that starts at or before each position
        off = flat >= ends[span]  # past that span's end: on whitespace
        yield from k.bad_items(off, offsets, name, "position on whitespace")
        partial = ~off & (np.bincount(span[~off], minlength=len(starts)) != ends - starts)[span]
        yield from k.bad_items(partial, offsets, name,
                               f"positions cover part of a {plans.char_spans} span, not whole spans")
        # two chosen spans that touch read as one on the training side (its identity choice is per run)
        chosen = np.bincount(span[~off], minlength=len(starts)) > 0
        joined = np.zeros(len(starts), bool)
        joined[1:] = chosen[1:] & chosen[:-1] & (starts[1:] == ends[:-1])
        yield from k.bad_items(~off & joined[span], offsets, name,
                               f"positions join two touching {plans.char_spans} spans into one run")

    return rule


def _tokenizer_spans(tokenizer: WordPieceTokenizer):
    def rule(k):
        """CANINE-S: each subword span is one the tokenizer gives that segment. One call over all
        the rows: specials break words, so each segment gets the spans of its text alone."""
        s, l, i = tokenizer.spans_of_codepoints(k.cps)
        starts, offsets, row, _ = k.positions("subword_starts")
        lengths, ids = k.ragged("subword_lengths")[0], k.ragged("subword_ids")[0]
        # (start, length, id) as one int64: starts < 2^31, lengths <= seq_len, ids < vocab_size
        # (the shared rules checked both), so the key is unique below 2^63 for any real shard.
        width = int(max(lengths.max(initial=0), l.max(initial=0))) + 1

        def key(start, length, subword):
            return (start.astype(np.int64) * width + length) * tokenizer.vocab_size + subword

        unknown = ~np.isin(key(k.offsets[row] + starts, lengths, ids), key(s, l, i))
        yield from k.bad_items(unknown, offsets, "subword_starts",
                               "a subword span is not what the tokenizer produces on that segment")

    return rule


class Unread:
    """The shards listed in the manifest whose rows could not be read (missing, unreadable, of
    another schema): each is reported once, by `_read_shard`; the checks after it leave out what
    it alone explains (the module docstring)."""

    def __init__(self):
        self.rows, self.splits = 0, set()

    def add(self, split: str, shard) -> None:
        self.rows += shard.rows
        self.splits.add(split)


def check_examples(manifest: Manifest, examples_by_lang: dict, unread: Unread, out: Problems) -> None:
    """Each language's examples in the manifest against the rows the shards hold. Languages short
    by, together, exactly the unread shards' rows (and none over) are what those shards explain."""
    short = {lang: c.examples - examples_by_lang.get(lang, 0) for lang, c in manifest.languages.items()}
    if unread.rows and min(short.values(), default=0) >= 0 and sum(short.values()) == unread.rows:
        return
    for lang, n in short.items():
        if n:
            out.add(f"{schema.MANIFEST} languages.{lang}",
                    f"examples {manifest.languages[lang].examples} but shards hold {examples_by_lang.get(lang, 0)}")


def check_split(pages_by_split: dict, kept: dict, fraction: float, out: Problems, unread: Unread | None = None) -> dict:
    """Each language's validation pages against the job's rule (pipeline/beam/split.py validation_cut),
    recomputed from the pages the shards hold; returns {lang: validation pages}. The shards need
    not hold every kept page (SampleLanguages may drop a train page of a big language), but
    they hold every validation page, and those have the smallest hashes: the rule's cut comes
    out the same. `kept`: the manifest's kept pages per language; `pages_by_split`:
    {split: {(lang, page id)}}. With a validation shard unread (`unread`, reported already) the
    cut cannot be recomputed: a train page then has the smallest hash the pages read hold, and
    the rule's is checked as far as they allow, every validation page below every train page."""
    from pipeline.beam import split as rule

    by_lang = {}
    for split, pages in pages_by_split.items():
        for lang, page in pages:
            by_lang.setdefault(lang, []).append((rule.split_hash(lang, page), page, split))
    held = {}
    partial = unread is not None and "validation" in unread.splits
    for lang, items in sorted(by_lang.items()):
        items.sort()
        held[lang] = sum(split == "validation" for _, _, split in items)
        if lang not in kept:
            continue  # reported with the rows
        if partial:
            _check_split_order(lang, items, out)
            continue
        k = rule.validation_pages(kept[lang], fraction)
        if k <= rule.EXACT_VALIDATION_PAGES and len(items) < k:  # a tampered output: no cut to compute
            out.add(f"splits.{lang}", f"the shards hold {len(items)} of its pages, the rule holds out {k}")
            continue
        cut = rule.validation_cut(kept[lang], [h for h, _, _ in items[: rule.EXACT_VALIDATION_PAGES]], fraction)
        wrong = [(page, split) for h, page, split in items if (split == "validation") != (h < cut)]
        if wrong:
            out.add(f"splits.{lang}", f"{len(wrong)} pages are not in the split the job's rule gives "
                                      f"({held[lang]} of {kept[lang]} kept pages held out at fraction {fraction}, "
                                      f"the rule holds out {k}), "
                                      f"e.g. page {wrong[0][0]} is in {wrong[0][1]}")
    return held


def _check_split_order(lang: str, items: list, out: Problems) -> None:
    """`items` ((hash, page, split), ascending) of a language some of whose validation pages are
    unread: whatever they were, the rule's cut lies between the validation pages and the train
    pages, so every validation page read must come before every train page read."""
    top = max((h for h, _, split in items if split == "validation"), default=-1)
    wrong = [(page, split) for h, page, split in items if split == "train" and h < top]
    if wrong:
        out.add(f"splits.{lang}", f"{len(wrong)} train pages hash below a validation page: no cut of the job's "
                                  f"rule gives that (a validation shard is unread, so the pages held out "
                                  f"are not counted), e.g. page {wrong[0][0]} is in {wrong[0][1]}")


def check_files(fs, root: str, manifest: Manifest, out: Problems) -> None:
    """Every file under the output must be one the manifest lists: its shards, tokenizer and
    rejects, plus the manifest itself and a live run's lock. A staging folder is one finding."""
    expected = {schema.MANIFEST, schema.LOCK, manifest.tokenizer.path, *manifest.rejects,
                *(s.path for split in manifest.splits.values() for s in split.shards)}
    stray = {}
    for name in fs.find(root):
        rel = name[len(root) + 1 :]
        if rel in expected:
            continue
        top = rel.split("/", 1)[0]
        key = top if top.startswith(schema.STAGING_PREFIX) else rel
        stray[key] = stray.get(key, 0) + 1
    for rel, n in sorted(stray.items()):
        if rel.startswith(schema.STAGING_PREFIX):
            out.add(rel, f"staging of an unfinished run ({n} files); a run of that config resumes from it, "
                         "or remove it")
        else:
            out.add(rel, "not accounted for by the manifest: Parquet readers of this folder would read it; "
                         "remove it")


def _read_shard(fs, root: str, shard, out: Problems):
    """The shard's table, checked against what the manifest records of it (bytes, schema, rows,
    codepoints); None if it is missing, unreadable or of another schema (its rows go unchecked)."""
    path = f"{root}/{shard.path}"
    if not fs.exists(path):
        out.add(shard.path, f"listed in the manifest but missing (its {shard.rows} examples are not checked)")
        return None
    with fs.open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != shard.sha256:
        out.add(shard.path, "sha256 differs from the manifest")
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as e:  # a corrupt file is a finding, not a crash
        out.add(shard.path, f"unreadable Parquet: {e}")
        return None
    schema_ok = True
    for field in schema.SCHEMA:
        got = table.schema.field(field.name).type if field.name in table.schema.names else None
        if got != field.type:
            out.add(shard.path, f"column {field.name}: {got} (contract: {field.type})")
            schema_ok = False
    if table.num_rows != shard.rows:
        out.add(shard.path, f"{table.num_rows} rows, manifest says {shard.rows}")
    if not schema_ok:
        return None
    codepoints = len(table.column("codepoints").combine_chunks().flatten())
    if codepoints != shard.codepoints:
        out.add(shard.path, f"{codepoints} codepoints, manifest says {shard.codepoints}")
    return table


def validate(output: str) -> tuple[list[str], int, dict]:
    """Returns (first problems, number of problems, summary). An empty list means valid."""
    out = Problems()
    try:
        manifest = published_manifest(output)
    except (OutputExistsError, ValueError) as e:  # an output of an older schema, a manifest that breaks its own
        out.add(output, str(e))
        return out.items, out.count, {}
    if manifest is None:
        out.add(output, f"no {schema.MANIFEST}: not a complete output")
        return out.items, out.count, {}
    _check_manifest(manifest, out)
    fs, root = _fs(output)
    check_files(fs, root, manifest, out)
    tokenizer = None
    tok_path = f"{root}/{manifest.tokenizer.path}"
    if fs.exists(tok_path):
        with fs.open(tok_path, "r", encoding="utf-8") as f:
            tokenizer = WordPieceTokenizer.from_str(f.read(), source=tok_path)
    else:
        out.add(manifest.tokenizer.path, "missing")
    try:
        plans = MaskPlanConfig.from_fingerprint(manifest.config)  # the span rule the shards were made with
    except (TypeError, ValueError) as e:
        out.add(f"{schema.MANIFEST} config", str(e))
        plans = MaskPlanConfig()
    seen_ids, pages_by_split, examples_by_lang, unread = set(), {}, {}, Unread()
    for split, info in manifest.splits.items():
        pages = pages_by_split.setdefault(split, set())
        for shard in info.shards:
            table = _read_shard(fs, root, shard, out)
            if table is None:
                unread.add(split, shard)
                continue
            check_rows(table, manifest.seq_len or schema.DEFAULT_SEQ_LEN, tokenizer, shard.path, out, plans)
            ids = table["example_id"].to_pylist()
            for i, (example_id, lang, page_ids) in enumerate(zip(ids, table["lang"].to_pylist(),
                                                                  table["page_ids"].to_pylist())):
                if example_id in seen_ids:
                    out.add(shard.path, Violation(i, "example_id", "duplicate example_id").describe(ids))
                seen_ids.add(example_id)
                if lang not in manifest.languages:
                    out.add(shard.path, Violation(i, "lang", f"{lang!r} not in the manifest").describe(ids))
                if not page_ids:
                    out.add(shard.path, Violation(i, "page_ids", "empty").describe(ids))
                examples_by_lang[lang] = examples_by_lang.get(lang, 0) + 1
                pages.update((lang, p) for p in page_ids)
    both = pages_by_split.get("train", set()) & pages_by_split.get("validation", set())
    if both:
        out.add("splits", f"{len(both)} pages are in both train and validation, e.g. {sorted(both)[0]}")
    check_examples(manifest, examples_by_lang, unread, out)
    summary = {"examples": len(seen_ids), "shards": sum(len(split.shards) for split in manifest.splits.values())}
    fraction = manifest.config.get("validation_fraction")
    if fraction is not None:  # a pipeline output (pipeline/synthetic.py's shards name no fraction)
        kept = {lang: c.kept for lang, c in manifest.languages.items()}
        summary["validation_pages"] = check_split(pages_by_split, kept, fraction, out, unread)
    return out.items, out.count, summary
