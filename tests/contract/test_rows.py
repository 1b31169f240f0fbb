"""The contract's row rules (contract/rows.py): each broken row named once, at its row, field and index,
among good ones; shape errors keep a row out of the rules on values."""

import pyarrow as pa
import pytest

from contract import schema
from contract.rows import RowError, Rows, check, violations

from contract_rows import columns, contract_row

CLS, SEP, MASK = schema.CLS, schema.SEP, schema.MASK
a, b, c, d, e, f, sp = map(ord, "abcdef ")
GOOD = contract_row("good", "ab cd ef", char_positions=[4, 5], subwords=[(1, 2, 7, 0, schema.ACTION_MASK)])
PAIR = [CLS, a, b, SEP, c, d, sp, e, f, SEP]  # two segments


@pytest.mark.parametrize("change, field, index, problem", [
    ({"codepoints": [CLS], "segment_ids": [0]}, "codepoints", None, "length 1 is shorter than CLS SEP"),
    ({"codepoints": [CLS] + [a] * 40 + [SEP], "segment_ids": [0] * 42}, "codepoints", None, "length 42 exceeds seq_len 32"),
    ({"segment_ids": [0, 0]}, "segment_ids", None, "length 2 differs from codepoints (10)"),
    ({"subword_ids": [7, 8]}, "subword_ids", None, "2 values: count differs from subword_starts (1)"),
    ({"codepoints": [CLS, a, MASK, sp, c, d, sp, e, f, SEP]}, "codepoints", None, "no other special"),
    ({"codepoints": [CLS, a, b, SEP, c, d, SEP, e, f, SEP], "segment_ids": [0] * 4 + [1] * 6}, "codepoints", None,
     "3 SEPs (expected 1 or 2)"),
    ({"segment_ids": [0, 0, 0, 1] + [0] * 6}, "segment_ids", 3, "0 up to the first SEP and 1 after it"),
    ({"codepoints": PAIR, "sop_label": schema.SOP_IN_ORDER}, "segment_ids", 4, "0 up to the first SEP and 1 after"),
    ({"codepoints": PAIR, "segment_ids": [0] * 4 + [1] * 6}, "sop_label", None, "sop_label -1 does not fit a pair"),
    ({"sop_label": schema.SOP_SWAPPED}, "sop_label", None, "sop_label 1 does not fit one segment"),
    ({"char_mask_positions": [0]}, "char_mask_positions", 0, "outside the example"),
    ({"char_mask_positions": [5, 4]}, "char_mask_positions", 1, "not strictly increasing"),
    ({"char_mask_positions": [9]}, "char_mask_positions", 0, "on a special codepoint"),
    ({"subword_starts": [1, 2], "subword_lengths": [2, 1], "subword_ids": [7, 8], "subword_predict_offsets": [0, 0],
      "subword_actions": [0, 0]}, "subword_starts", 1, "spans overlap"),
    ({"subword_starts": [8], "subword_lengths": [5]}, "subword_lengths", 0, "past the example's end"),
    ({"subword_predict_offsets": [2]}, "subword_predict_offsets", 0, "offset outside its span"),
    ({"subword_actions": [7]}, "subword_actions", 0, "unknown action"),
    ({"subword_ids": [-1]}, "subword_ids", 0, "id outside the vocabulary"),
    ({"subword_replacements": [a]}, "subword_replacements", None, "total length 1 differs from the summed lengths"),
])
def test_each_broken_row_is_named_once_among_good_ones(change, field, index, problem):
    rows = Rows(columns(GOOD, {**GOOD, "example_id": "bad", **change}, GOOD))
    found = list(violations(rows, 32))
    assert [(v.row, v.field, v.index) for v in found] == [(1, field, index)]
    assert problem in found[0].problem
    with pytest.raises(RowError, match=f"^example 'bad' \\(row 1\\), field '{field}'"):
        check(rows, 32)


def test_good_rows_pass_in_every_container():
    table = pa.Table.from_pylist([GOOD, {**GOOD, "codepoints": PAIR, "segment_ids": [0] * 4 + [1] * 6,
                                          "sop_label": schema.SOP_SWAPPED}], schema=schema.SCHEMA)
    for rows in (table, table.to_batches()[0], table.to_pydict()):
        assert list(violations(Rows(rows), 32, vocab_size=8)) == []
    assert [v.field for v in violations(Rows(table), 32, vocab_size=7)] == ["subword_ids"] * 2  # id 7 of 7


def test_shape_errors_keep_a_row_from_the_value_rules_and_more_rules_see_clean_rows():
    shape = {**GOOD, "example_id": "shape", "segment_ids": [0, 0], "char_mask_positions": [0]}
    value = {**GOOD, "example_id": "value", "char_mask_positions": [0]}
    seen = []

    def more(cols):
        seen.append(cols.rows_of.tolist())
        yield from cols.bad_rows(cols.rows_of == 0, "codepoints", "named by a further rule")

    found = list(violations(Rows(columns(GOOD, shape, value)), 32, more=[more]))
    assert [(v.row, v.field) for v in found] == [(1, "segment_ids"), (2, "char_mask_positions"), (0, "codepoints")]
    assert seen == [[0]]  # the rows that broke no rule


def test_missing_and_null_columns_are_named():
    with pytest.raises(RowError, match="lack contract column"):
        Rows({"example_id": ["x"], "codepoints": [[CLS, SEP]]})
    table = pa.Table.from_pylist([GOOD], schema=schema.SCHEMA)
    nulls = table.set_column(table.schema.get_field_index("char_mask_positions"), "char_mask_positions",
                             pa.array([None], pa.list_(pa.int32())))
    with pytest.raises(RowError, match="'char_mask_positions': null list at row 0"):
        check(Rows(nulls), 32)
