"""`canine validate`'s two row rules of its own (pipeline/validate.py): whole whitespace spans and the
tokenizer's spans, named like the shared rules (pipeline/rows.py)."""

import pytest

from pipeline import contract
from pipeline.tokenizer import train_wordpiece
from pipeline.validate import Problems, check_row

from contract_rows import contract_row


def problems(row, tokenizer=None) -> list[str]:
    out = Problems()
    check_row(row, 32, tokenizer, "train/part-0.parquet", out)
    return out.items


@pytest.mark.parametrize("positions, problem", [
    ([3], "index 0: position on whitespace"),  # "ab cd ef": spans 1-2, 4-5, 7-8
    ([4], "index 0: positions cover part of a whitespace span, not whole spans"),
    ([1, 2, 7], "index 2: positions cover part of a whitespace span, not whole spans"),
])
def test_char_positions_must_be_whole_whitespace_spans(positions, problem):
    assert problems(contract_row("ok", "ab cd ef", char_positions=[1, 2, 7, 8])) == []
    assert problems(contract_row("x", " ", char_positions=[1])) == [
        "train/part-0.parquet: example 'x' (row 0), field 'char_mask_positions', index 0: position on whitespace"]
    found = problems(contract_row("bad", "ab cd ef", char_positions=positions))
    assert found == [f"train/part-0.parquet: example 'bad' (row 0), field 'char_mask_positions', {problem}"]


def test_subword_spans_must_be_the_tokenizers():
    tokenizer = train_wordpiece(["ab cd ef"] * 4, vocab_size=100)
    starts, lengths, ids = tokenizer.spans_of_codepoints(contract_row("r", "ab cd ef")["codepoints"])
    spans = [(int(s), int(n), int(i), 0, contract.ACTION_MASK) for s, n, i in zip(starts, lengths, ids)]
    assert problems(contract_row("ok", "ab cd ef", subwords=spans), tokenizer) == []
    start, length, subword, _, _ = spans[-1]
    other = next(i for i in range(tokenizer.vocab_size) if i not in ids)
    found = problems(contract_row("bad", "ab cd ef", subwords=spans[:-1] + [(start, length, other, 0, 0)]), tokenizer)
    assert found == [f"train/part-0.parquet: example 'bad' (row 0), field 'subword_starts', index {len(spans) - 1}: "
                     "a subword span is not what the tokenizer produces on that segment"]
