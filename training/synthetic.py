"""Synthetic rows in the shard contract's format, for tests, benchmarks and smoke runs without
shards. Not real text: "words" of random letters separated by spaces, with mask plans drawn the
way the pipeline draws them (15% of whitespace spans / subwords, 80/10/10 actions), so every
code path of training/batch.py gets exercised with the real column types (pipeline.contract.SCHEMA).
"""

import numpy as np
import pyarrow as pa

from pipeline import contract


def synthetic_rows(num_rows: int, length: int, seed: int = 0, vocab_size: int = 1000,
                   min_length: int | None = None) -> pa.Table:
    """`num_rows` examples of `min_length`..`length` codepoints (CLS A SEP [B SEP])."""
    rng = np.random.default_rng(seed)
    rows = {name: [] for name in contract.COLUMNS}
    for i in range(num_rows):
        n = int(rng.integers(min_length or length, length + 1))
        body = rng.integers(ord("a"), ord("z") + 1, size=n - 3)
        body[rng.random(n - 3) < 0.2] = ord(" ")
        body[0] = body[-1] = ord("x")  # no leading / trailing space
        split = n // 2 if i % 2 else None  # odd rows have two segments
        codepoints = np.concatenate([[contract.CLS], body, [contract.SEP]])
        segments = np.zeros(len(codepoints), dtype=np.int8)
        if split:
            codepoints = np.concatenate([codepoints[:split], [contract.SEP], codepoints[split:]])
            segments = np.concatenate([segments[: split + 1], np.ones(len(codepoints) - split - 1, np.int8)])
        codepoints = codepoints[:n]
        segments = segments[:n]
        codepoints[-1] = contract.SEP
        spans = word_spans(codepoints)
        chosen = [s for s in spans if rng.random() < contract.MASK_RATE]
        char_positions = np.concatenate([np.arange(a, b) for a, b in chosen] or [np.zeros(0, int)])
        char_positions = char_positions[: contract.MAX_CHAR_PREDICTIONS]
        # Subwords: each word cut into pieces of at most 4 characters.
        pieces = [(a + k, min(b, a + k + 4)) for a, b in spans for k in range(0, b - a, 4)]
        picked = [p for p in pieces if rng.random() < contract.MASK_RATE][: contract.MAX_SUBWORD_PREDICTIONS]
        starts = np.array([a for a, _ in picked], dtype=np.int32)
        lengths = np.array([b - a for a, b in picked], dtype=np.int32)
        actions = rng.choice([contract.ACTION_MASK, contract.ACTION_RANDOM, contract.ACTION_KEEP],
                             p=[0.8, 0.1, 0.1], size=len(picked)).astype(np.int8)
        replacement_length = int(lengths[actions == contract.ACTION_RANDOM].sum())
        values = {
            "example_id": f"synthetic-{seed}-{i}",
            "lang": "xx",
            "page_ids": [i],
            "codepoints": codepoints.astype(np.int32),
            "segment_ids": segments,
            "sop_label": (contract.SOP_SWAPPED if rng.random() < 0.5 else contract.SOP_IN_ORDER)
            if split else contract.SOP_NO_PAIR,
            "char_mask_positions": char_positions.astype(np.int32),
            "subword_starts": starts,
            "subword_lengths": lengths,
            "subword_ids": rng.integers(0, vocab_size, size=len(picked)).astype(np.int32),
            "subword_predict_offsets": (rng.random(len(picked)) * lengths).astype(np.int32),
            "subword_actions": actions,
            "subword_replacements": rng.integers(ord("a"), ord("z") + 1, size=replacement_length).astype(np.int32),
        }
        for name in contract.COLUMNS:
            rows[name].append(values[name])
    return pa.Table.from_pydict(rows, schema=contract.SCHEMA)


def word_spans(codepoints) -> list[tuple[int, int]]:
    """[start, end) of each maximal run of non-space, non-special characters."""
    word = np.array([c != ord(" ") and not contract.is_aliased(int(c)) for c in codepoints] + [False])
    edges = np.flatnonzero(np.diff(np.concatenate([[False], word]).astype(np.int8)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))
