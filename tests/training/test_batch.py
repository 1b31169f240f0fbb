"""The batch builder against the shard contract: mask placement, replacements, padding, order, errors."""

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contract import schema
from pipeline.synthetic import synthetic_rows
from pipeline.output.validate import Problems, check_rows
from training.batch import IDENTITY_SPAN_RATE, BatchError, build_batch, build_batch_numpy

from contract_rows import columns, contract_row

CLS, SEP, MASK = schema.CLS, schema.SEP, schema.MASK


def _table(*rows):
    return pa.Table.from_pylist(list(rows), schema=schema.SCHEMA)


def test_char_masks_whole_spans_and_builds_prediction_arrays():
    # "ab cd efg": spans at 1-2, 4-5, 7-9 (position 0 is CLS); mask "cd" and "efg".
    table = _table(contract_row("r0", "ab cd efg", char_positions=[4, 5, 7, 8, 9]), contract_row("r1", "xyz"))
    # Find a seed where no span of row 0 is drawn as identity, so every position must be MASK.
    for seed in range(50):
        b = build_batch_numpy(table, 16, "char", seed=seed, num_hash_buckets=64)
        if (b["input_ids"][0, [4, 5, 7, 8, 9]] == MASK).all():
            break
    else:
        pytest.fail("no seed masked both spans; identity rate far above 10%?")
    ids = b["input_ids"]
    assert ids.shape == (2, 16) and ids.dtype == np.int64
    expected = [CLS, ord("a"), ord("b"), ord(" "), MASK, MASK, ord(" "), MASK, MASK, MASK, SEP] + [0] * 5
    assert ids[0].tolist() == expected
    assert ids[1, :5].tolist() == [CLS, ord("x"), ord("y"), ord("z"), SEP] and not ids[1, 5:].any()
    assert b["attention_mask"].tolist() == [[1] * 11 + [0] * 5, [1] * 5 + [0] * 11]
    P = schema.MAX_CHAR_PREDICTIONS
    for key in ("char_positions", "char_targets", "char_gold_ids", "char_order", "char_weights"):
        assert b[key].shape == (2, P), key
    assert b["char_positions"][0, :6].tolist() == [4, 5, 7, 8, 9, 0]
    assert b["char_gold_ids"][0, :5].tolist() == [ord(c) for c in "cdefg"]
    assert b["char_targets"][0, :5].tolist() == [ord(c) % 64 for c in "cdefg"]
    assert b["char_weights"][0].sum() == 5 and b["char_weights"][1].sum() == 0
    order = b["char_order"][0]
    assert sorted(order.tolist()) == list(range(P))  # a permutation of the slots
    assert sorted(order[:5].tolist()) == [0, 1, 2, 3, 4]  # real slots first, padding after
    assert b["sop_labels"].tolist() == [schema.SOP_NO_PAIR] * 2


def test_char_identity_spans_are_whole_spans_at_about_ten_percent():
    table = synthetic_rows(40, 600, seed=5)
    b = build_batch_numpy(table, 600, "char", seed=11)
    positions, weights = b["char_positions"], b["char_weights"] > 0
    rows = np.repeat(np.arange(len(positions)), weights.sum(1))
    kept = b["input_ids"][rows, positions[weights]] != MASK
    gold = b["char_gold_ids"][weights]
    assert (b["input_ids"][rows, positions[weights]][kept] == gold[kept]).all()  # identity = original
    # Whole spans: within a run of consecutive positions, all kept or all masked.
    pos = positions[weights]
    same_span = (np.diff(pos) == 1) & (np.diff(rows) == 0)
    assert (kept[1:][same_span] == kept[:-1][same_span]).all()
    span_starts = np.concatenate([[True], ~same_span])
    rate = kept[span_starts].mean()
    assert abs(rate - IDENTITY_SPAN_RATE) < 0.05, rate
    # Nothing outside the plan changes.
    untouched = np.ones_like(b["input_ids"], dtype=bool)
    untouched[rows, pos] = False
    original = build_batch_numpy(table.drop_columns(["char_mask_positions"]).append_column(
        "char_mask_positions", pa.array([[]] * len(table), pa.list_(pa.int32()))), 600, "char")["input_ids"]
    assert (b["input_ids"][untouched] == original[untouched]).all()


def test_char_randomness_is_a_function_of_seed_and_example_id():
    table = synthetic_rows(6, 300, seed=2)
    a = build_batch_numpy(table, 300, "char", seed=7)
    again = build_batch_numpy(table, 300, "char", seed=7)
    reversed_rows = build_batch_numpy(table.take(list(range(5, -1, -1))), 300, "char", seed=7)
    other_seed = build_batch_numpy(table, 300, "char", seed=8)
    for key in a:
        assert np.array_equal(a[key], again[key])
        assert np.array_equal(a[key], reversed_rows[key][::-1]), key  # per example, not per row index
    assert not np.array_equal(a["char_order"], other_seed["char_order"])


def test_subword_actions_mask_replace_keep_and_predict_at_offsets():
    # "hello world": subwords "hel"(1-3) MASK, "lo"(4-5) RANDOM -> "XY", "wor"(7-9) KEEP, "ld"(10-11) RANDOM -> "Q!"
    subwords = [(1, 3, 11, 2, schema.ACTION_MASK), (4, 2, 12, 0, schema.ACTION_RANDOM),
                (7, 3, 13, 1, schema.ACTION_KEEP), (10, 2, 14, 1, schema.ACTION_RANDOM)]
    table = _table(contract_row("s0", "hello world", subwords=subwords, replacements="XYQ!"), contract_row("s1", "hi"))
    b = build_batch_numpy(table, 20, "subword")
    expected = [CLS, MASK, MASK, MASK, ord("X"), ord("Y"), ord(" "), *map(ord, "wor"), *map(ord, "Q!"), SEP]
    assert b["input_ids"][0].tolist() == expected + [0] * 7
    assert b["input_ids"][1, :4].tolist() == [CLS, ord("h"), ord("i"), SEP]
    P = schema.MAX_SUBWORD_PREDICTIONS
    assert b["subword_positions"].shape == (2, P)
    assert b["subword_positions"][0, :5].tolist() == [3, 4, 8, 11, 0]
    assert b["subword_labels"][0, :4].tolist() == [11, 12, 13, 14]
    assert b["subword_weights"].sum(1).tolist() == [4, 0]
    assert "char_order" not in b


def test_inputs_as_table_record_batch_dict_and_numpy_objects_agree():
    table = synthetic_rows(3, 200, seed=9, min_length=50)
    want = build_batch_numpy(table, 256, "subword", seed=1)
    as_dict = table.to_pydict()
    ray_style = {k: np.array([np.asarray(x) for x in v] + [None], dtype=object)[:-1]
                 if isinstance(v[0], list) else np.asarray(v) for k, v in as_dict.items()}
    for rows in (table.to_batches()[0], as_dict, ray_style, table.slice(0, 3)):
        got = build_batch_numpy(rows, 256, "subword", seed=1)
        assert got.keys() == want.keys()
        for key in want:
            assert np.array_equal(got[key], want[key]), key
    tensors = build_batch(table, 256, "subword", seed=1)
    assert tensors["input_ids"].dtype.is_floating_point is False
    assert np.array_equal(tensors["input_ids"].numpy(), want["input_ids"])
    # A slice in the middle of a table (offsets not starting at 0) reads the right rows.
    middle = build_batch_numpy(table.slice(1, 2), 256, "subword", seed=1)
    assert np.array_equal(middle["input_ids"], want["input_ids"][1:])


def test_parquet_shards_via_fsspec(contract_shards):
    fs = fsspec.filesystem("file")
    path = f"{contract_shards}/train/part-00000.parquet"
    with fs.open(path, "rb") as f:
        table = pq.read_table(f)
    assert table.schema.equals(schema.SCHEMA, check_metadata=False)
    for objective in ("char", "subword"):
        b = build_batch(table, 256, objective, seed=3, num_hash_buckets=2048)
        assert b["input_ids"].shape == (len(table), 256)
        weights = b["char_weights"] if objective == "char" else b["subword_weights"]
        assert weights.sum() > 0
        lengths = [len(c) for c in table["codepoints"].to_pylist()]
        assert b["attention_mask"].sum(1).tolist() == lengths


# Rows that break one rule each: (change to a good row, the field named, the problem).
BAD_ROWS = [
    ({"char_mask_positions": [1, 40]}, "char_mask_positions", "outside the example"),
    ({"char_mask_positions": [3, 2]}, "char_mask_positions", "strictly increasing"),
    ({"char_mask_positions": list(range(1, 322))}, "char_mask_positions", "exceed the limit of 320"),
    ({"codepoints": [CLS] + [97] * 40 + [SEP]}, "codepoints", "exceeds seq_len 32"),
    ({"segment_ids": [0, 0]}, "segment_ids", "differs from codepoints"),
    ({"subword_starts": [2], "subword_lengths": [9], "subword_ids": [1], "subword_predict_offsets": [0],
      "subword_actions": [0]}, "subword_lengths", "past the example's end"),
    ({"subword_starts": [2], "subword_lengths": [2], "subword_ids": [1], "subword_predict_offsets": [2],
      "subword_actions": [0]}, "subword_predict_offsets", "outside its span"),
    ({"subword_starts": [2], "subword_lengths": [2], "subword_ids": [1], "subword_predict_offsets": [0],
      "subword_actions": [1]}, "subword_replacements", "differs from the summed lengths"),
    ({"subword_starts": [2], "subword_lengths": [2], "subword_ids": [1, 2], "subword_predict_offsets": [0],
      "subword_actions": [0]}, "subword_ids", "count differs"),
]


@pytest.mark.parametrize("change, field, message", BAD_ROWS)
def test_bad_rows_are_named(change, field, message):
    row = contract_row("good", "ab cd ef")
    bad = {**contract_row("bad-one", "ab cd ef"), **change}
    objective = "subword" if field.startswith("subword") else "char"
    with pytest.raises(BatchError, match=message) as err:
        build_batch_numpy(columns(row, bad), 32, objective)
    assert "'bad-one' (row 1)" in str(err.value) and repr(field) in str(err.value)


@pytest.mark.parametrize("change, field, message", BAD_ROWS)
def test_validate_names_a_broken_row_as_the_batch_builder_does(change, field, message):
    """One set of row rules (contract/rows.py): `canine validate` finds what the batch builder
    refuses, in the same words, after the shard's path."""
    rows = columns(contract_row("good", "ab cd ef"), {**contract_row("bad-one", "ab cd ef"), **change})
    with pytest.raises(BatchError) as err:
        build_batch_numpy(rows, 32, "subword" if field.startswith("subword") else "char")
    problems = Problems()
    check_rows(rows, 32, None, "train/part-00000-of-00001.parquet", problems)
    assert f"train/part-00000-of-00001.parquet: {err.value}" in problems.items
    assert all("'bad-one' (row 1)" in p for p in problems.items)


def test_missing_column_is_named():
    row = contract_row("x", "ab")
    del row["codepoints"]
    with pytest.raises(BatchError, match="codepoints"):
        build_batch_numpy({k: [v] for k, v in row.items()}, 8, "char")
    with pytest.raises(ValueError, match="objective"):
        build_batch_numpy(_table(contract_row("x", "ab")), 8, "mlm")
