"""CharBERT's noisy language modeling in the batch builder (training/noise.py): edits, invariants, determinism."""

import zlib

import numpy as np
import pytest

from contract import schema
from pipeline.synthetic import synthetic_rows
from training import noise
from training.batch import build_batch_numpy
from training import seeds
from training.seeds import Stream, batch_uniform
from training.train import config, stream
from training.train.schema import PretrainConfig

CLS, SEP, MASK = schema.CLS, schema.SEP, schema.MASK
CLEAN_KEYS = ("char_targets", "char_gold_ids", "char_order", "char_weights", "subword_labels", "subword_weights",
              "sop_labels")


def _row(example_id, text, char_positions=()):
    codepoints = [CLS] + [ord(c) for c in text] + [SEP]
    return {"example_id": [example_id], "codepoints": [codepoints], "segment_ids": [[0] * len(codepoints)],
            "char_mask_positions": [list(char_positions)]}


def _text(ids) -> str:
    names = {CLS: "[", SEP: "]", MASK: "#"}
    return "".join(names.get(c, chr(c)) for c in ids if c)


def _flat(b):
    """The examples' characters back to one flat array, and the row offsets."""
    lengths = b["attention_mask"].sum(1)
    return b["input_ids"][b["attention_mask"] > 0], np.concatenate([[0], np.cumsum(lengths)])


def _assert_same(a, b):
    assert list(a) == list(b)
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes(), key


@pytest.mark.parametrize("objective", ["char", "subword"])
def test_off_by_default_and_a_rate_without_sites_change_nothing(objective):
    table = synthetic_rows(8, 300, seed=1)
    default = build_batch_numpy(table, 320, objective, seed=4)
    _assert_same(default, build_batch_numpy(table, 320, objective, seed=4, noise_rate=0.0))
    # The noise path with no site at all (remapping, re-padding) is the identity too.
    tiny, noised = build_batch_numpy(table, 320, objective, seed=4, noise_rate=1e-12, return_noise=True)
    assert noised.counts["sites"] == 0 and noised.counts["eligible"] > 1000
    _assert_same(default, tiny)
    assert build_batch_numpy(table, 320, objective, seed=4, return_noise=True)[1] is None


def test_the_edits_by_hand():
    # "hello" at seed 11, rate 0.3: the site draws batch_uniform(11, crc32("hand"), i, 3) at i = 1..5 are
    # .49 .47 .48 .25 .21, so 'l' (4) and 'o' (5) are sites; both draw swap (kind draws x 4 = 2, 2).
    # 'l' swaps with 'o'; 'o' is right after a swap site, so it does nothing (the left site wins).
    key = np.full(7, zlib.crc32(b"hand"), np.uint64)
    assert np.flatnonzero(batch_uniform(11, key, np.arange(7), Stream.NOISE_SITE)[1:6] < 0.3).tolist() == [3, 4]
    b, n = build_batch_numpy(_row("hand", "hello"), 10, "char", seed=11, noise_rate=0.3, return_noise=True)
    assert _text(b["input_ids"][0]) == "[helol]"
    assert n.edits.tolist() == [-1, -1, -1, -1, noise.SWAP, -1, -1]
    assert {k: v for k, v in n.counts.items() if v} == {"eligible": 5, "sites": 2, "swap": 1, "skipped": 1}
    # Seed 5: one site, 'o', draws swap: the last character of its word has no partner, so nothing changes.
    b, n = build_batch_numpy(_row("hand", "hello"), 10, "char", seed=5, noise_rate=0.3, return_noise=True)
    assert _text(b["input_ids"][0]) == "[hello]" and n.counts["skipped"] == 1 and n.counts["sites"] == 1
    # Seed 10: 'l' (3) and 'l' (4) are deleted; the row is two shorter.
    b, n = build_batch_numpy(_row("hand", "hello"), 10, "char", seed=10, noise_rate=0.3, return_noise=True)
    assert _text(b["input_ids"][0]) == "[heo]" and n.counts["delete"] == 2
    assert b["attention_mask"][0].tolist() == [1] * 5 + [0] * 5 and n.new_index.tolist() == [0, 1, 2, -1, -1, 3, 4]


def test_an_insertion_moves_the_predicted_positions_with_their_characters():
    # "hello ab", "ab" (7-8) predicted. Seed 14: "ab" masked, an 'e' (copied from "hello") inserted before 'o'.
    row = _row("hand2", "hello ab", char_positions=[7, 8])
    b, n = build_batch_numpy(row, 12, "char", seed=14, noise_rate=0.3, return_noise=True)
    assert _text(b["input_ids"][0]) == "[helleo ##]" and n.edits[5] == noise.INSERT
    assert b["char_positions"][0, :3].tolist() == [8, 9, 0]
    assert b["char_gold_ids"][0, :2].tolist() == [ord("a"), ord("b")]  # the clean characters
    assert b["attention_mask"][0].tolist() == [1] * 11 + [0]
    # Seed 24: "ab" is an identity span (visible); an 'a' inserted before the second 'l'.
    b = build_batch_numpy(row, 12, "char", seed=24, noise_rate=0.3)
    assert _text(b["input_ids"][0]) == "[helalo ab]"
    assert b["input_ids"][0, b["char_positions"][0, :2]].tolist() == [ord("a"), ord("b")]
    # With no room left (seq_len = the row's length), seed 14's insertion is dropped from the row's end.
    b, n = build_batch_numpy(row, 10, "char", seed=14, noise_rate=0.3, return_noise=True)
    assert _text(b["input_ids"][0]) == "[hello ##]" and n.counts["dropped_insertions"] == 1


def test_a_row_without_room_keeps_its_first_insertions():
    # Seed 0 inserts before 'e' (2) and before the first 'l' (3): "heehllo". One free slot keeps the first.
    assert _text(build_batch_numpy(_row("hand", "hello"), 9, "char", seed=0, noise_rate=0.3)["input_ids"][0]) \
        == "[heehllo]"
    b, n = build_batch_numpy(_row("hand", "hello"), 8, "char", seed=0, noise_rate=0.3, return_noise=True)
    assert _text(b["input_ids"][0]) == "[heello]" and n.counts["dropped_insertions"] == 1


def test_a_swap_never_pulls_a_subword_span_character():
    # "hello" with the span "lo" (3-4) kept. Seed 21: the one site is 'e' (2), drawn swap; its partner
    # 'l' is the span's, so the swap does nothing and the span keeps its characters and length.
    row = {**_row("keep", "hello"), "subword_starts": [[3]], "subword_lengths": [[2]], "subword_ids": [[7]],
           "subword_predict_offsets": [[1]], "subword_actions": [[schema.ACTION_KEEP]], "subword_replacements": [[]]}
    key = np.full(7, zlib.crc32(b"keep"), np.uint64)
    assert np.flatnonzero(batch_uniform(21, key, np.arange(7), Stream.NOISE_SITE) < 0.3).tolist() == [2]
    assert int(batch_uniform(21, key, np.array([2]), Stream.NOISE_KIND)[0] * 4) == noise.SWAP
    b, n = build_batch_numpy(row, 10, "subword", seed=21, noise_rate=0.3, return_noise=True)
    assert _text(b["input_ids"][0]) == "[hello]" and n.counts["skipped"] == 1 and n.counts["swap"] == 0
    assert b["subword_positions"][0, 0] == 4


def test_noise_is_a_function_of_seed_example_and_epoch():
    table = synthetic_rows(8, 300, seed=2)
    a = build_batch_numpy(table, 300, "char", seed=7, noise_rate=0.1)
    _assert_same(a, build_batch_numpy(table, 300, "char", seed=7, noise_rate=0.1))
    reverse = build_batch_numpy(table.take(list(range(7, -1, -1))), 300, "char", seed=7, noise_rate=0.1)
    chunks = [build_batch_numpy(table.slice(i, 3), 300, "char", seed=7, noise_rate=0.1) for i in (0, 3, 6)]
    for key in a:
        assert np.array_equal(a[key], reverse[key][::-1]), key  # per example, not per row index
        assert np.array_equal(a[key], np.concatenate([c[key] for c in chunks])), key
    epochs = [build_batch_numpy(table, 300, "char", seed=seeds.build_seed(0, e), noise_rate=0.1) for e in (0, 1)]
    clean = [build_batch_numpy(table, 300, "char", seed=seeds.build_seed(0, e)) for e in (0, 1)]
    # Another epoch: other noise at the characters no mask decision touched.
    unmasked = (clean[0]["input_ids"] != MASK) & (clean[1]["input_ids"] != MASK)
    assert not np.array_equal(epochs[0]["input_ids"][unmasked], epochs[1]["input_ids"][unmasked])


@pytest.mark.parametrize("objective", ["char", "subword"])
def test_every_edit_kind_keeps_the_invariants(objective):
    table = synthetic_rows(24, 400, seed=3)  # every row 400 long: insertions must be dropped
    clean = build_batch_numpy(table, 400, objective, seed=9)
    b, n = build_batch_numpy(table, 400, objective, seed=9, noise_rate=0.3, return_noise=True)
    assert min(n.counts[k] for k in noise.KINDS + ("skipped", "dropped_insertions")) > 0, n.counts
    for key in CLEAN_KEYS:  # targets, weights, order: the clean ones
        if key in clean:
            assert np.array_equal(b[key], clean[key]), key
    before, off = _flat(clean)
    after, new_off = _flat(b)
    assert np.array_equal(after, n.ids) and np.array_equal(new_off, n.offsets)
    lengths = np.diff(new_off)
    assert lengths.max() <= 400 and (lengths == 400).any()
    assert np.array_equal(b["attention_mask"], (np.arange(400) < lengths[:, None]).astype(np.int64))
    padding = b["attention_mask"] == 0
    assert not b["input_ids"][padding].any() and not b["token_type_ids"][padding].any()
    assert (lengths - np.diff(off)).sum() == n.counts["insert"] - n.counts["delete"]

    # Character by character: a kept character is where new_index says, changed only by its own edit.
    kept = n.new_index >= 0
    word = noise.is_word_char(before)
    swapped_in = np.zeros(len(before), bool)
    swapped_in[1:] = n.edits[:-1] == noise.SWAP  # the partner of a swap
    same = ~np.isin(n.edits, [noise.SWAP, noise.SUBSTITUTE]) & ~swapped_in
    assert np.array_equal(after[n.new_index[kept & same]], before[kept & same])
    swaps = np.flatnonzero(n.edits == noise.SWAP)
    assert np.array_equal(after[n.new_index[swaps]], before[swaps + 1])
    assert np.array_equal(after[n.new_index[swaps + 1]], before[swaps])
    assert (n.new_index[swaps + 1] == n.new_index[swaps] + 1).all()
    assert np.array_equal(~kept, n.edits == noise.DELETE)
    # Edits only inside words: no special or whitespace is edited, deleted or moved past a word character,
    # and what is inserted or substituted is a word character.
    assert (n.edits[~word] == -1).all() and (n.edits[np.flatnonzero(n.edits == noise.SWAP) + 1] == -1).all()
    assert word[swaps + 1].all()
    for r in range(len(lengths)):
        old, new = before[off[r]:off[r + 1]], after[new_off[r]:new_off[r + 1]]
        assert np.array_equal(old[~noise.is_word_char(old)], new[~noise.is_word_char(new)]), r
        runs = lambda x: int(np.sum(np.diff(np.concatenate([[0], noise.is_word_char(x).astype(np.int8)])) == 1))
        assert runs(old) == runs(new), f"row {r}: a word was emptied"
    assert np.array_equal(n.segments, b["token_type_ids"][b["attention_mask"] > 0])
    segments = clean["token_type_ids"][clean["attention_mask"] > 0]
    inserted = np.flatnonzero(n.edits == noise.INSERT)
    assert np.array_equal(n.segments[n.new_index[kept]], segments[kept])
    assert np.array_equal(n.segments[n.new_index[inserted] - 1], segments[inserted])  # the next character's
    assert (segments == 1).any()

    rows = np.flatnonzero(b[f"{objective}_weights"])  # flat slots, row-major
    row_of = rows // b[f"{objective}_weights"].shape[1]
    old_pos, new_pos = clean[f"{objective}_positions"].ravel()[rows], b[f"{objective}_positions"].ravel()[rows]
    old_flat, new_flat = off[row_of] + old_pos, new_off[row_of] + new_pos
    assert np.array_equal(n.new_index[old_flat], new_flat)  # predicted: never deleted, moved with its character
    if objective == "char":
        masked = before[old_flat] == MASK
        assert masked.any() and (after[new_flat][masked] == MASK).all()
        visible = ~masked & same[old_flat]
        gold = b["char_gold_ids"].ravel()[rows]
        assert visible.any() and np.array_equal(after[new_flat][visible], gold[visible])
        assert (~same[old_flat] & ~masked).any()  # substituted or swapped identity characters: targets still clean
    else:
        # Every span character untouched: its span still contiguous and unchanged in the noisy input.
        starts = np.concatenate(table["subword_starts"].to_numpy(zero_copy_only=False))
        span_len = np.concatenate(table["subword_lengths"].to_numpy(zero_copy_only=False))
        span_row = np.repeat(np.arange(len(table)), [len(x) for x in table["subword_starts"].to_pylist()])
        chars = np.repeat(off[span_row] + starts, span_len) + np.concatenate([np.arange(k) for k in span_len])
        assert (n.edits[chars] == -1).all() and kept[chars].all()
        assert np.array_equal(after[n.new_index[chars]], before[chars])
        first = np.repeat(n.new_index[off[span_row] + starts], span_len)
        assert np.array_equal(n.new_index[chars] - first, np.concatenate([np.arange(k) for k in span_len]))
        assert np.array_equal(after[new_flat], before[old_flat])


def test_realized_rate_and_kinds():
    table = synthetic_rows(96, 1000, seed=6)
    _, n = build_batch_numpy(table, 1100, "char", seed=3, noise_rate=0.05, return_noise=True)
    c = n.counts
    assert c["eligible"] > 60000 and c["dropped_insertions"] == 0
    assert abs(c["sites"] / c["eligible"] - 0.05) < 0.004, c  # ~5 standard deviations
    applied = sum(c[k] for k in noise.KINDS)
    assert applied == (n.edits >= 0).sum() == c["sites"] - c["skipped"]
    assert 0.85 * 0.05 < applied / c["eligible"] <= 0.05, c  # skipped: swaps at word ends, next to swaps, ...
    for k in noise.KINDS:  # a quarter of the sites each (+-6 standard deviations); swaps skip at word ends
        low, high = (0.15, 0.25) if k == "swap" else (0.205, 0.295)
        assert low < c[k] / c["sites"] < high, (k, c)


def test_config_field_and_wiring(monkeypatch):
    cfg = config.load_config("tiny", {"data.noise_rate": "0.1", "data.seq_len": "256"})
    assert cfg.data.noise_rate == 0.1 and PretrainConfig().data.noise_rate == 0.0
    for bad in ("1.5", "-0.1"):
        with pytest.raises(ValueError, match=r"data\.noise_rate must be in \[0, 1\)"):
            config.load_config("tiny", {"data.noise_rate": bad})
    # Training batches get the rate; validation batches are built clean.
    captured = []
    monkeypatch.setattr(stream, "batches", lambda descriptors, **kw: captured.append(kw["build_kwargs"]) or iter(()))
    manifest = type("M", (), {"splits": {"train": [], "validation": [type("S", (), {"rows": 64})()]}})()
    monkeypatch.setattr(stream.data, "make_units", lambda shards, rows: [])
    monkeypatch.setattr(stream.data, "segments", lambda *a: [])
    stream.eval_batches(manifest, cfg, 0, 1, 2048)
    assert "noise_rate" not in captured[0]
    built = stream.TrainStream(manifest, cfg, 0, 1, num_hash_buckets=2048).build_kwargs
    assert built["noise_rate"] == 0.1 and built["seq_len"] == captured[0]["seq_len"] == 256  # the config's, once
