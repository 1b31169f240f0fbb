"""Rows of the shard contract (contract/schema.py) -> fixed-shape training arrays.

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
training/seeds.py's counter streams, so the same rows and seed give the same batch in any process, in
any row order. No per-character Python loop: ragged columns are handled as flat arrays plus offsets.
Rows are checked first with the contract's row rules (contract/rows.py), the ones `canine validate`
applies: a broken row is named (BatchError), never trained on.
"""

import functools

import numpy as np

from contract import schema
from contract.rows import SUBWORD_COLUMNS, RowError, Rows, check
from training import noise, seeds
from training.canine_config import OBJECTIVES, CanineConfig

IDENTITY_SPAN_RATE = 0.1  # CANINE-C spans left unmasked but still predicted (paper Figure 2)
_DEFAULT_BUCKETS = CanineConfig.num_hash_buckets

BatchError = RowError  # a row breaks the shard contract: the message names the example, field and position


def _pad(values, offsets, width: int, fill=0, dtype=np.int64) -> np.ndarray:
    """Ragged rows -> (rows, width), row i left-aligned; assumes every row fits."""
    lengths = np.diff(offsets)
    out = np.full((len(lengths), width), fill, dtype=dtype)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    out[rows, np.arange(len(values)) - offsets[rows]] = values
    return out


def build_batch_numpy(rows, seq_len: int, objective: str, seed: int = 0, *, noise_rate: float = 0.0,
                      num_hash_buckets: int = _DEFAULT_BUCKETS,
                      max_char_predictions: int = schema.MAX_CHAR_PREDICTIONS,
                      max_subword_predictions: int = schema.MAX_SUBWORD_PREDICTIONS,
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
    r = Rows(rows)
    check(r, seq_len, char=objective == "char", subword=objective == "subword",
          max_char_predictions=max_char_predictions, max_subword_predictions=max_subword_predictions)
    keys = seeds.example_keys(r.ids)
    codepoints, offsets = r.ragged("codepoints")
    segments, _ = r.ragged("segment_ids")
    masked = codepoints.copy()
    if objective == "char":
        plan, protected, predicted = _char_plan(r, keys, codepoints, offsets, masked, seed, num_hash_buckets,
                                                max_char_predictions)
    else:
        plan, protected, predicted = _subword_plan(r, offsets, masked, max_subword_predictions)
    noised = None
    if noise_rate > 0:
        noised = noise.add_noise(masked, segments, offsets, keys, protected, predicted, rate=noise_rate,
                                 seq_len=seq_len, draw=functools.partial(seeds.batch_uniform, seed))
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
        out["sop_labels"] = np.asarray(r.scalars("sop_label"), dtype=np.int64)
    out.update(plan)
    out["input_ids"] = _pad(masked, offsets, seq_len)
    return (out, noised) if return_noise else out


def _positions(r: Rows, name: str):
    """A list column of positions, checked by contract/rows.py: (values, offsets, row of each value)."""
    values, offsets = r.ragged(name)
    return values, offsets, np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def _char_plan(r, keys, codepoints, offsets, masked, seed, num_buckets, limit):
    positions, pos_offsets, rows = _positions(r, "char_mask_positions")
    same_row = np.diff(rows) == 0
    flat = offsets[rows] + positions  # index into the flat codepoints
    gold = codepoints[flat]
    # Spans = runs of consecutive positions: chosen spans never touch (pipeline/rows/masks.py _apart,
    # checked by canine validate), also the bounded pieces of one unspaced run.
    starts_span = np.concatenate([[True], ~same_row | (np.diff(positions) != 1)]) if len(positions) else np.zeros(0, bool)
    span_global = np.cumsum(starts_span) - 1
    first_span_of_row = np.zeros(len(pos_offsets) - 1, dtype=np.int64)
    nonempty = np.diff(pos_offsets) > 0
    first_span_of_row[nonempty] = span_global[pos_offsets[:-1][nonempty]]
    span_in_row = span_global - first_span_of_row[rows]
    identity = seeds.batch_uniform(seed, keys[rows], span_in_row, seeds.Stream.IDENTITY) < IDENTITY_SPAN_RATE
    masked[flat[~identity]] = schema.MASK  # the rest of `flat` is predicted but visible

    weights = _pad(np.ones(len(positions), np.float32), pos_offsets, limit, dtype=np.float32)
    slot = np.broadcast_to(np.arange(limit), weights.shape)
    order_keys = seeds.batch_uniform(seed, keys[:, None], slot, seeds.Stream.CHAR_ORDER)
    order_keys += weights == 0  # padding sorts last
    return {
        "char_positions": _pad(positions, pos_offsets, limit),
        "char_gold_ids": _pad(gold, pos_offsets, limit),
        "char_targets": _pad(gold % num_buckets, pos_offsets, limit),
        "char_order": np.argsort(order_keys, axis=1, kind="stable").astype(np.int64),
        "char_weights": weights,
    }, flat[~identity], flat  # protected from noise (the masked), predicted


def _subword_plan(r, offsets, masked, limit):
    starts, span_offsets, rows = _positions(r, "subword_starts")
    span_lengths, ids, predict, actions = (r.ragged(name)[0] for name in SUBWORD_COLUMNS[1:])

    # Every character of every span, flat: span index repeated, plus its offset inside the span.
    span_of_char = np.repeat(np.arange(len(starts)), span_lengths)
    within = np.arange(len(span_of_char)) - np.repeat(np.cumsum(span_lengths) - span_lengths, span_lengths)
    flat = offsets[rows[span_of_char]] + starts[span_of_char] + within
    action_of_char = actions[span_of_char]
    masked[flat[action_of_char == schema.ACTION_MASK]] = schema.MASK

    replacements, _ = r.ragged("subword_replacements")
    # Row-major flattening keeps the replacements aligned with the RANDOM spans in order.
    masked[flat[action_of_char == schema.ACTION_RANDOM]] = replacements
    return {
        "subword_positions": _pad(starts + predict, span_offsets, limit),
        "subword_labels": _pad(ids, span_offsets, limit),
        "subword_weights": _pad(np.ones(len(starts), np.float32), span_offsets, limit, dtype=np.float32),
    }, flat, offsets[rows] + starts + predict  # protected from noise (every span character), predicted


def build_batch(rows, seq_len: int, objective: str, seed: int = 0, **kwargs) -> dict:
    """`build_batch_numpy` as torch tensors (int64 / float32, CPU; move them with .to(device))."""
    import torch  # here: the input pipeline's Ray tasks run build_batch_numpy in processes that need no torch

    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in
            build_batch_numpy(rows, seq_len, objective, seed, **kwargs).items()}
