"""`canine validate DIR`: check an output against the shard contract and its own manifest.

Every problem is reported with where it is (shard path, example_id, column); nothing is fixed.
The checks are the contract's rules (pipeline/contract.py) plus what the manifest promises:
hashes, counts, the per-language accounting identity, train/validation page disjointness, and
that the folder holds nothing the manifest does not account for (a stray Parquet file would be
read by every dataset reader; issue 10).
"""

import hashlib
import io
import json

import numpy as np
import pyarrow.parquet as pq

from pipeline import contract
from pipeline.examples import is_special, ranges_to_positions
from pipeline.masks import whitespace_spans
from pipeline.output import OutputExistsError, _fs, read_manifest
from pipeline.tokenizer import WordPieceTokenizer

MAX_PROBLEMS = 50  # enough to see a pattern; the count says how many more there were


class Problems:
    def __init__(self):
        self.items, self.count = [], 0

    def add(self, where, what):
        self.count += 1
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(f"{where}: {what}")


def _check_manifest(m: dict, out: Problems) -> None:
    where = contract.MANIFEST
    if m.get("schema_version") != contract.SCHEMA_VERSION:
        out.add(where, f"schema_version {m.get('schema_version')!r}, expected {contract.SCHEMA_VERSION}")
    for key in ("config", "config_sha256", "splits", "languages"):
        if key not in m:
            out.add(where, f"missing key {key!r}")
    if "config" in m:
        blob = json.dumps(m["config"], sort_keys=True, separators=(",", ":")).encode()
        if hashlib.sha256(blob).hexdigest() != m.get("config_sha256"):
            out.add(where, "config_sha256 does not match config")
    for lang, c in m.get("languages", {}).items():
        missing = [k for k in contract.LANGUAGE_KEYS if k not in c]
        if missing:
            out.add(f"{contract.MANIFEST} languages.{lang}", f"missing {missing}")
            continue
        parts = sum(c[k] for k in contract.PAGE_OUTCOMES)
        if c["pages_read"] != parts:
            out.add(f"{contract.MANIFEST} languages.{lang}", f"pages_read {c['pages_read']} != {' + '.join(contract.PAGE_OUTCOMES)} = {parts}")


def check_row(row: dict, seq_len: int, tokenizer: WordPieceTokenizer | None, where: str, out: Problems) -> None:
    """One example against the contract's rules."""
    cps = np.asarray(row["codepoints"], dtype=np.int64)
    seg = np.asarray(row["segment_ids"], dtype=np.int64)
    n = len(cps)
    if n < 2 or n > seq_len:
        out.add(where, f"length {n} outside [2, seq_len={seq_len}]")
        return
    if len(seg) != n:
        out.add(where, f"segment_ids has {len(seg)} values for {n} codepoints")
        return
    seps = np.flatnonzero(cps == contract.SEP)
    specials = np.flatnonzero(is_special(cps))
    expected_specials = np.concatenate([[0], seps])
    if cps[0] != contract.CLS or cps[-1] != contract.SEP or not np.array_equal(specials, expected_specials):
        out.add(where, "codepoints must be CLS text SEP [text SEP] with no other special or aliased codepoint")
    pair = len(seps) == 2
    if len(seps) not in (1, 2):
        out.add(where, f"{len(seps)} SEPs (expected 1 or 2)")
    expected_seg = np.zeros(n, np.int64)
    if pair:
        expected_seg[seps[0] + 1 :] = 1
    if not np.array_equal(seg, expected_seg):
        out.add(where, "segment_ids do not follow the SEPs")
    if (row["sop_label"] == contract.SOP_NO_PAIR) == pair or row["sop_label"] not in (-1, 0, 1):
        out.add(where, f"sop_label {row['sop_label']} does not fit {'a pair' if pair else 'one segment'}")

    # CANINE-C: sorted, inside the text, at most 320, whole whitespace spans.
    pos = np.asarray(row["char_mask_positions"], dtype=np.int64)
    if len(pos) > contract.MAX_CHAR_PREDICTIONS:
        out.add(where, f"{len(pos)} char_mask_positions > {contract.MAX_CHAR_PREDICTIONS}")
    if len(pos) and (np.any(np.diff(pos) <= 0) or pos[0] < 1 or pos[-1] >= n):
        out.add(where, "char_mask_positions not strictly increasing inside the sequence")
    elif len(pos):
        if np.any(is_special(cps[pos])):
            out.add(where, "char_mask_positions on a special codepoint")
        starts, ends = whitespace_spans(cps)
        span_of = np.full(n, -1)
        span_len = ends - starts
        span_of[ranges_to_positions(starts, span_len)] = np.repeat(np.arange(len(starts)), span_len)
        hit = span_of[pos]
        if np.any(hit < 0):
            out.add(where, "char_mask_positions on whitespace")
        else:
            chosen, counts = np.unique(hit, return_counts=True)
            if not np.array_equal(counts, span_len[chosen]):
                out.add(where, "char_mask_positions cover part of a whitespace span, not whole spans")

    # CANINE-S: equal lengths, at most 80, offsets inside spans, replacements of the right length,
    # spans that the tokenizer itself produces on that segment.
    names = ("subword_starts", "subword_lengths", "subword_ids", "subword_predict_offsets", "subword_actions")
    cols = [np.asarray(row[k], dtype=np.int64) for k in names]
    starts, lengths, ids, offsets, actions = cols
    if len({len(c) for c in cols}) != 1:
        out.add(where, "subword_* columns have different lengths")
        return
    if len(starts) > contract.MAX_SUBWORD_PREDICTIONS:
        out.add(where, f"{len(starts)} subwords > {contract.MAX_SUBWORD_PREDICTIONS}")
    if len(starts) == 0:
        if len(row["subword_replacements"]):
            out.add(where, "subword_replacements without subwords")
        return
    if np.any(lengths < 1) or np.any(offsets < 0) or np.any(offsets >= lengths):
        out.add(where, "subword_predict_offsets outside their span (or a span of length < 1)")
    if np.any(np.diff(starts) <= 0) or starts[0] < 1 or np.any(starts + lengths > n):
        out.add(where, "subword spans not increasing inside the sequence")
        return
    if not np.isin(actions, (contract.ACTION_MASK, contract.ACTION_RANDOM, contract.ACTION_KEEP)).all():
        out.add(where, "subword_actions outside {0, 1, 2}")
    expected = int(lengths[actions == contract.ACTION_RANDOM].sum())
    if len(row["subword_replacements"]) != expected:
        out.add(where, f"subword_replacements has {len(row['subword_replacements'])} codepoints, random spans need {expected}")
    if tokenizer is not None:
        if np.any(ids >= tokenizer.vocab_size) or np.any(ids < 0):
            out.add(where, "subword_ids outside the tokenizer's vocabulary")
        # One call over the whole example: specials break words, so each segment gets exactly
        # the spans the tokenizer gives its text alone (pipeline/tokenizer.py).
        s, l, i = tokenizer.spans_of_codepoints(cps)
        produced = set(zip(s.tolist(), l.tolist(), i.tolist()))
        if not set(zip(starts.tolist(), lengths.tolist(), ids.tolist())) <= produced:
            out.add(where, "a subword span is not what the tokenizer produces on that segment")


def check_files(fs, root: str, manifest: dict, out: Problems) -> None:
    """Every file under the output must be one the manifest lists: its shards, tokenizer and
    rejects, plus the manifest itself and a live run's lock. A staging folder is one finding."""
    expected = {contract.MANIFEST, contract.LOCK, manifest.get("tokenizer", {}).get("path", contract.TOKENIZER),
                *manifest.get("rejects", []),
                *(s["path"] for info in manifest.get("splits", {}).values() for s in info.get("shards", []))}
    stray = {}
    for name in fs.find(root):
        rel = name[len(root) + 1 :]
        if rel in expected:
            continue
        top = rel.split("/", 1)[0]
        key = top if top.startswith(contract.STAGING_PREFIX) else rel
        stray[key] = stray.get(key, 0) + 1
    for rel, n in sorted(stray.items()):
        if rel.startswith(contract.STAGING_PREFIX):
            out.add(rel, f"staging of an unfinished run ({n} files); a run of that config resumes from it, "
                         "or remove it")
        else:
            out.add(rel, "not accounted for by the manifest: Parquet readers of this folder would read it; "
                         "remove it")


def validate(output: str) -> tuple[list[str], int, dict]:
    """Returns (first problems, number of problems, summary). An empty list means valid."""
    out = Problems()
    try:
        manifest = read_manifest(output)
    except OutputExistsError as e:  # an output of an older schema
        out.add(output, str(e))
        return out.items, out.count, {}
    if manifest is None:
        out.add(output, f"no {contract.MANIFEST}: not a complete output")
        return out.items, out.count, {}
    _check_manifest(manifest, out)
    fs, root = _fs(output)
    check_files(fs, root, manifest, out)
    seq_len = manifest.get("config", {}).get("seq_len", contract.DEFAULT_SEQ_LEN)
    tokenizer = None
    tok_path = f"{root}/{contract.TOKENIZER}"
    if fs.exists(tok_path):
        with fs.open(tok_path, "r", encoding="utf-8") as f:
            tokenizer = WordPieceTokenizer.from_str(f.read(), source=tok_path)
    else:
        out.add(contract.TOKENIZER, "missing")
    seen_ids, pages_by_split = set(), {}
    examples_by_lang = {}
    for split, info in manifest.get("splits", {}).items():
        pages = pages_by_split.setdefault(split, set())
        for shard in info.get("shards", []):
            path = f"{root}/{shard['path']}"
            if not fs.exists(path):
                out.add(shard["path"], "listed in the manifest but missing")
                continue
            with fs.open(path, "rb") as f:
                data = f.read()
            if hashlib.sha256(data).hexdigest() != shard["sha256"]:
                out.add(shard["path"], "sha256 differs from the manifest")
            try:
                table = pq.read_table(io.BytesIO(data))
            except Exception as e:  # a corrupt file is a finding, not a crash
                out.add(shard["path"], f"unreadable Parquet: {e}")
                continue
            for field in contract.SCHEMA:
                got = table.schema.field(field.name).type if field.name in table.schema.names else None
                if got != field.type:
                    out.add(shard["path"], f"column {field.name}: {got} (contract: {field.type})")
            if table.num_rows != shard["rows"]:
                out.add(shard["path"], f"{table.num_rows} rows, manifest says {shard['rows']}")
            cps_total = len(table.column("codepoints").combine_chunks().flatten())
            if cps_total != shard["codepoints"]:
                out.add(shard["path"], f"{cps_total} codepoints, manifest says {shard['codepoints']}")
            for row in table.to_pylist():
                where = f"{shard['path']} example {row['example_id']}"
                if row["example_id"] in seen_ids:
                    out.add(where, "duplicate example_id")
                seen_ids.add(row["example_id"])
                if row["lang"] not in manifest.get("languages", {}):
                    out.add(where, f"lang {row['lang']!r} not in the manifest")
                if not row["page_ids"]:
                    out.add(where, "empty page_ids")
                examples_by_lang[row["lang"]] = examples_by_lang.get(row["lang"], 0) + 1
                pages.update((row["lang"], p) for p in row["page_ids"])
                check_row(row, seq_len, tokenizer, where, out)
        shards = info.get("shards", [])
        if info.get("rows") != sum(s["rows"] for s in shards):
            out.add(f"{contract.MANIFEST} splits.{split}", "rows differ from the sum over its shards")
    both = pages_by_split.get("train", set()) & pages_by_split.get("validation", set())
    if both:
        out.add("splits", f"{len(both)} pages are in both train and validation, e.g. {sorted(both)[0]}")
    for lang, c in manifest.get("languages", {}).items():
        if c.get("examples") != examples_by_lang.get(lang, 0):
            out.add(f"{contract.MANIFEST} languages.{lang}", f"examples {c.get('examples')} but shards hold {examples_by_lang.get(lang, 0)}")
    summary = {"examples": len(seen_ids), "shards": sum(len(i.get("shards", [])) for i in manifest.get("splits", {}).values())}
    return out.items, out.count, summary
