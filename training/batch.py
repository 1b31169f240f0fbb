"""Rows of the shard contract (pipeline/contract.py) -> fixed-shape training arrays.

    arrays = build_batch_numpy(table, 2048, "char", seed=s)  # numpy in and out (the input pipeline's Ray tasks)
    batch = build_batch(table, 2048, "char", seed=s)          # the same arrays as torch tensors
Applies the mask plans the pipeline stored (it only decided them) and builds the prediction arrays:
  * char (CANINE-C): MASK at `char_mask_positions`, except whole spans kept as they are with
    probability IDENTITY_SPAN_RATE (paper Figure 2: 90% masked, 10% identity; we decide per span,
    since the spans are what is chosen). char_order is a shuffled order of the real slots followed
    by the padding slots, so a left-to-right layer never lets a real step see padding.
  * subword (CANINE-S): per span MASK, the stored same-length replacement, or keep
    (`subword_actions`); predictions at start + offset.
  * noise (off by default): CharBERT's typos in the input characters, targets clean (training/noise.py).
Randomness (identity spans, shuffled order, noise) is a pure function of (seed, crc32(example_id), index):
the same rows and seed give the same batch in any process, in any row order. No per-character
Python loop: ragged columns are handled as flat arrays plus offsets.
"""

import functools
import zlib

import numpy as np
import pyarrow as pa

from pipeline import contract
from training import noise
from training.config import OBJECTIVES, CanineConfig

IDENTITY_SPAN_RATE = 0.1  # CANINE-C spans left unmasked but still predicted (paper Figure 2)
_DEFAULT_BUCKETS = CanineConfig.num_hash_buckets
_STREAM_IDENTITY, _STREAM_ORDER = 1, 2  # independent random streams per example; noise.py draws 3-5

SUBWORD_COLUMNS = ("subword_starts", "subword_lengths", "subword_ids", "subword_predict_offsets", "subword_actions")


class BatchError(ValueError):
    """A row breaks the shard contract; the message names the example, field and position."""


def _ragged(column, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A list column (Arrow, or a sequence of sequences / numpy arrays) -> (flat int64 values, offsets)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, (pa.ListArray, pa.LargeListArray)):
        if column.null_count:
            raise BatchError(f"field {name!r}: null list at row {column.is_null().index(True).as_py()}")
        offsets = column.offsets.to_numpy().astype(np.int64)
        return column.flatten().to_numpy(zero_copy_only=False).astype(np.int64), offsets - offsets[0]
    try:
        parts = [np.asarray(x, dtype=np.int64).reshape(-1) for x in column]
    except (TypeError, ValueError) as exc:
        raise BatchError(f"field {name!r}: not a list of integer lists ({exc})") from None
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return (np.concatenate(parts) if parts else np.zeros(0, np.int64)), offsets


def _scalars(column) -> list:
    if isinstance(column, (pa.ChunkedArray, pa.Array)):
        return column.to_pylist()
    return list(column)


def _pad(values, offsets, width: int, fill=0, dtype=np.int64) -> np.ndarray:
    """Ragged rows -> (rows, width), row i left-aligned; assumes every row fits."""
    lengths = np.diff(offsets)
    out = np.full((len(lengths), width), fill, dtype=dtype)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    out[rows, np.arange(len(values)) - offsets[rows]] = values
    return out


def _uniform(seed: int, keys: np.ndarray, index: np.ndarray, stream: int) -> np.ndarray:
    """Deterministic U[0, 1) per (seed, example key, index, stream): splitmix64 finalizer."""
    with np.errstate(over="ignore"):
        x = (np.uint64(seed & (2**64 - 1)) * np.uint64(0x9E3779B97F4A7C15)
             + keys.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
             + index.astype(np.uint64) * np.uint64(0x94D049BB133111EB) + np.uint64(stream))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(2**53)


class _Rows:
    """Column access with contract checks; messages name the example id, field and position."""

    def __init__(self, rows):
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        names = rows.column_names if isinstance(rows, pa.Table) else list(rows)
        self.rows = rows
        missing = [c for c in ("example_id", "codepoints", "segment_ids") if c not in names]
        if missing:
            raise BatchError(f"rows lack contract column(s) {missing}; have {sorted(names)}")
        self.names = set(names)
        self.ids = [str(x) for x in _scalars(rows["example_id"])]
        self.keys = np.array([zlib.crc32(i.encode("utf-8")) for i in self.ids], dtype=np.uint64)

    def ragged(self, name):
        if name not in self.names:
            raise BatchError(f"rows lack contract column {name!r}")
        values, offsets = _ragged(self.rows[name], name)
        if len(offsets) != len(self.ids) + 1:
            raise BatchError(f"field {name!r} has {len(offsets) - 1} rows, example_id has {len(self.ids)}")
        return values, offsets

    def fail(self, flat_index, offsets, field, problem):
        """Raise for the first offending flat element: which example, field and position."""
        row = int(np.searchsorted(offsets, flat_index, side="right") - 1)
        raise BatchError(f"example {self.ids[row]!r} (row {row}), field {field!r}, "
                         f"index {int(flat_index - offsets[row])}: {problem}")

    def check(self, bad: np.ndarray, offsets, field, problem):
        if bad.any():
            self.fail(int(np.flatnonzero(bad)[0]), offsets, field, problem)

    def check_rows(self, bad_rows: np.ndarray, field, problem):
        if bad_rows.any():
            row = int(np.flatnonzero(bad_rows)[0])
            raise BatchError(f"example {self.ids[row]!r} (row {row}), field {field!r}: {problem}")


def build_batch_numpy(rows, seq_len: int, objective: str, seed: int = 0, *, noise_rate: float = 0.0,
                      num_hash_buckets: int = _DEFAULT_BUCKETS,
                      max_char_predictions: int = contract.MAX_CHAR_PREDICTIONS,
                      max_subword_predictions: int = contract.MAX_SUBWORD_PREDICTIONS,
                      return_noise: bool = False):
    """Contract rows (pyarrow Table / RecordBatch, or a dict of columns) -> dict of numpy arrays.

    Keys: input_ids (B, L) int64 after masking, attention_mask (B, L) int64, token_type_ids (B, L),
    sop_labels (B,); char: char_positions, char_targets (codepoint % num_hash_buckets),
    char_gold_ids, char_order, char_weights, each (B, max_char_predictions); subword:
    subword_positions (start + offset), subword_labels, subword_weights, each (B, max_subword_predictions).
    noise_rate > 0: typos in input_ids at that rate per eligible character (training/noise.py);
    positions follow their characters, targets stay clean. Protected: CANINE-C's masked characters,
    every character of a CANINE-S span (their length must not change); predicted ones are never
    deleted. return_noise: return (arrays, noise.Noised or None), for tests and edit counts.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    r = _Rows(rows)
    codepoints, offsets = r.ragged("codepoints")
    lengths = np.diff(offsets)
    r.check_rows(lengths > seq_len, "codepoints", f"length exceeds seq_len {seq_len}")
    r.check_rows(lengths < 1, "codepoints", "empty (needs at least CLS)")
    segments, seg_offsets = r.ragged("segment_ids")
    r.check_rows(np.diff(seg_offsets) != lengths, "segment_ids", "length differs from codepoints")
    masked = codepoints.copy()
    if objective == "char":
        plan, protected, predicted = _char_plan(r, codepoints, offsets, masked, seed, num_hash_buckets,
                                                max_char_predictions)
    else:
        plan, protected, predicted = _subword_plan(r, codepoints, offsets, masked, max_subword_predictions)
    noised = None
    if noise_rate > 0:
        noised = noise.add_noise(masked, segments, offsets, r.keys, protected, predicted, rate=noise_rate,
                                 seq_len=seq_len, draw=functools.partial(_uniform, seed))
        key = "char" if objective == "char" else "subword"
        slot = plan[f"{key}_weights"] > 0  # padding slots stay 0
        moved = noised.new_index[offsets[:-1, None] + np.where(slot, plan[f"{key}_positions"], 0)]
        plan[f"{key}_positions"] = np.where(slot, moved - noised.offsets[:-1, None], 0)
        masked, segments, offsets = noised.ids, noised.segments, noised.offsets
    out = {
        "attention_mask": (np.arange(seq_len)[None, :] < np.diff(offsets)[:, None]).astype(np.int64),
        "token_type_ids": _pad(segments, offsets, seq_len),
    }
    if "sop_label" in r.names:
        out["sop_labels"] = np.asarray(_scalars(r.rows["sop_label"]), dtype=np.int64)
    out.update(plan)
    out["input_ids"] = _pad(masked, offsets, seq_len)
    return (out, noised) if return_noise else out


def _positions(r: _Rows, name: str, codepoints_offsets, limit: int):
    """A ragged column of absolute positions: checked against the row's length and the slot limit."""
    values, offsets = r.ragged(name)
    counts = np.diff(offsets)
    r.check_rows(counts > limit, name, f"{counts.max()} entries exceed the limit of {limit}")
    rows = np.repeat(np.arange(len(counts)), counts)
    lengths = np.diff(codepoints_offsets)
    r.check((values < 1) | (values >= lengths[rows]), offsets, name,
            "position outside the example (must be in 1..length-1; 0 is CLS)")
    return values, offsets, rows


def _char_plan(r, codepoints, offsets, masked, seed, num_buckets, limit):
    positions, pos_offsets, rows = _positions(r, "char_mask_positions", offsets, limit)
    same_row = np.diff(rows) == 0
    r.check(np.concatenate([[False], same_row & (np.diff(positions) <= 0)]), pos_offsets,
            "char_mask_positions", "positions not strictly increasing")
    flat = offsets[rows] + positions  # index into the flat codepoints
    gold = codepoints[flat]
    # Spans = runs of consecutive positions (chosen whitespace spans are never adjacent).
    starts_span = np.concatenate([[True], ~same_row | (np.diff(positions) != 1)]) if len(positions) else np.zeros(0, bool)
    span_global = np.cumsum(starts_span) - 1
    first_span_of_row = np.zeros(len(pos_offsets) - 1, dtype=np.int64)
    nonempty = np.diff(pos_offsets) > 0
    first_span_of_row[nonempty] = span_global[pos_offsets[:-1][nonempty]]
    span_in_row = span_global - first_span_of_row[rows]
    identity = _uniform(seed, r.keys[rows], span_in_row, _STREAM_IDENTITY) < IDENTITY_SPAN_RATE
    masked[flat[~identity]] = contract.MASK  # the rest of `flat` is predicted but visible

    weights = _pad(np.ones(len(positions), np.float32), pos_offsets, limit, dtype=np.float32)
    slot = np.broadcast_to(np.arange(limit), weights.shape)
    keys = _uniform(seed, r.keys[:, None], slot, _STREAM_ORDER) + (weights == 0)  # padding sorts last
    return {
        "char_positions": _pad(positions, pos_offsets, limit),
        "char_gold_ids": _pad(gold, pos_offsets, limit),
        "char_targets": _pad(gold % num_buckets, pos_offsets, limit),
        "char_order": np.argsort(keys, axis=1, kind="stable").astype(np.int64),
        "char_weights": weights,
    }, flat[~identity], flat  # protected from noise (the masked), predicted


def _subword_plan(r, codepoints, offsets, masked, limit):
    starts, span_offsets, rows = _positions(r, "subword_starts", offsets, limit)
    columns = {}
    for name in SUBWORD_COLUMNS[1:]:
        values, col_offsets = r.ragged(name)
        r.check_rows(np.diff(col_offsets) != np.diff(span_offsets), name, "count differs from subword_starts")
        columns[name] = values
    span_lengths = columns["subword_lengths"]
    actions = columns["subword_actions"]
    predict = columns["subword_predict_offsets"]
    lengths = np.diff(offsets)
    r.check((span_lengths < 1) | (starts + span_lengths > lengths[rows]), span_offsets, "subword_lengths",
            "span empty or running past the example's end")
    r.check((predict < 0) | (predict >= span_lengths), span_offsets, "subword_predict_offsets",
            "offset outside its span")
    r.check(~np.isin(actions, [contract.ACTION_MASK, contract.ACTION_RANDOM, contract.ACTION_KEEP]),
            span_offsets, "subword_actions", "unknown action")

    # Every character of every span, flat: span index repeated, plus its offset inside the span.
    span_of_char = np.repeat(np.arange(len(starts)), span_lengths)
    within = np.arange(len(span_of_char)) - np.repeat(np.cumsum(span_lengths) - span_lengths, span_lengths)
    flat = offsets[rows[span_of_char]] + starts[span_of_char] + within
    action_of_char = actions[span_of_char]
    masked[flat[action_of_char == contract.ACTION_MASK]] = contract.MASK

    replacements, rep_offsets = r.ragged("subword_replacements")
    random_chars = action_of_char == contract.ACTION_RANDOM
    expected = np.bincount(rows[span_of_char][random_chars], minlength=len(lengths))
    r.check_rows(np.diff(rep_offsets) != expected, "subword_replacements",
                 "total length differs from the summed lengths of its ACTION_RANDOM spans")
    # Row-major flattening keeps the replacements aligned with the RANDOM spans in order.
    masked[flat[random_chars]] = replacements
    return {
        "subword_positions": _pad(starts + predict, span_offsets, limit),
        "subword_labels": _pad(columns["subword_ids"], span_offsets, limit),
        "subword_weights": _pad(np.ones(len(starts), np.float32), span_offsets, limit, dtype=np.float32),
    }, flat, offsets[rows] + starts + predict  # protected from noise (every span character), predicted


def build_batch(rows, seq_len: int, objective: str, seed: int = 0, **kwargs) -> dict:
    """`build_batch_numpy` as torch tensors (int64 / float32, CPU; move them with .to(device))."""
    import torch  # here: the input pipeline's Ray tasks run build_batch_numpy in processes that need no torch

    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in
            build_batch_numpy(rows, seq_len, objective, seed, **kwargs).items()}
