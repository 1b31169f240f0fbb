"""`canine validate`'s two row rules of its own (pipeline/output/validate.py): whole CANINE-C spans (of the rule
the output was made with) and the
tokenizer's spans, named like the shared rules (contract/rows.py); and its check of the
per-language validation split against the job's rule."""

import pytest

from contract import schema
from pipeline.rows.masks import MaskPlanConfig
from pipeline.rows.tokenizer import train_wordpiece
from pipeline.output.validate import Problems, Unread, check_row, check_split

from contract_rows import contract_row


def problems(row, tokenizer=None, plans=MaskPlanConfig()) -> list[str]:
    out = Problems()
    check_row(row, 32, tokenizer, "train/part-0.parquet", out, plans)
    return out.items


@pytest.mark.parametrize("positions, problem", [
    ([3], "index 0: position on whitespace"),  # "ab cd ef": spans 1-2, 4-5, 7-8
    ([4], "index 0: positions cover part of a bounded span, not whole spans"),
    ([1, 2, 7], "index 2: positions cover part of a bounded span, not whole spans"),
])
def test_char_positions_must_be_whole_spans(positions, problem):
    assert problems(contract_row("ok", "ab cd ef", char_positions=[1, 2, 7, 8])) == []
    assert problems(contract_row("x", " ", char_positions=[1])) == [
        "train/part-0.parquet: example 'x' (row 0), field 'char_mask_positions', index 0: position on whitespace"]
    found = problems(contract_row("bad", "ab cd ef", char_positions=positions))
    assert found == [f"train/part-0.parquet: example 'bad' (row 0), field 'char_mask_positions', {problem}"]


def test_char_positions_are_checked_against_the_span_rule_they_were_made_with():
    """A bounded span (at most 8 characters of Han) is part of a whitespace span, and the other way round."""
    text = "ab 中华人民共和国成立于一九四九年十月一日"  # spans: ab | 19 Han -> 6 + 6 + 7
    bounded, paper = MaskPlanConfig(), MaskPlanConfig(char_spans="whitespace")
    piece, run = list(range(4, 10)), list(range(4, 23))
    assert problems(contract_row("ok", text, char_positions=piece)) == []
    assert problems(contract_row("ok", text, char_positions=run), plans=paper) == []
    assert problems(contract_row("bad", text, char_positions=piece), plans=paper) == [
        "train/part-0.parquet: example 'bad' (row 0), field 'char_mask_positions', index 0: "
        "positions cover part of a whitespace span, not whole spans"]
    # three whole pieces, but touching: the training side would read one 19-character span
    assert problems(contract_row("bad", text, char_positions=run), plans=bounded) == [
        "train/part-0.parquet: example 'bad' (row 0), field 'char_mask_positions', index 6: "
        "positions join two touching bounded spans into one run"]
    assert problems(contract_row("ok", text, char_positions=piece + list(range(16, 23))), plans=bounded) == []
    assert len(problems(contract_row("bad", text, char_positions=run[:-1]), plans=bounded)) == 2


def test_validate_reads_the_span_rule_from_the_manifest():
    assert MaskPlanConfig.from_fingerprint({"char_spans": "bounded", "char_span_max": 4}).char_span_max == 4
    assert MaskPlanConfig.from_fingerprint({"seed": 0}).char_spans == "whitespace"  # an output made before the option


def test_subword_spans_must_be_the_tokenizers():
    tokenizer = train_wordpiece(["ab cd ef"] * 4, vocab_size=100)
    starts, lengths, ids = tokenizer.spans_of_codepoints(contract_row("r", "ab cd ef")["codepoints"])
    spans = [(int(s), int(n), int(i), 0, schema.ACTION_MASK) for s, n, i in zip(starts, lengths, ids)]
    assert problems(contract_row("ok", "ab cd ef", subwords=spans), tokenizer) == []
    start, length, subword, _, _ = spans[-1]
    other = next(i for i in range(tokenizer.vocab_size) if i not in ids)
    found = problems(contract_row("bad", "ab cd ef", subwords=spans[:-1] + [(start, length, other, 0, 0)]), tokenizer)
    assert found == [f"train/part-0.parquet: example 'bad' (row 0), field 'subword_starts', index {len(spans) - 1}: "
                     "a subword span is not what the tokenizer produces on that segment"]


def test_the_validation_split_must_be_each_languages_smallest_hashes():
    from pipeline.beam.split import split_hash

    kept = {"en": 100, "bg": 25}  # at 5%: en holds out 5 pages, bg 1 (1.25)
    ranked = {lang: sorted(range(n), key=lambda i: split_hash(lang, i)) for lang, n in kept.items()}
    held = {(lang, i) for lang, k in (("en", 5), ("bg", 1)) for i in ranked[lang][:k]}
    every = {(lang, i) for lang, n in kept.items() for i in range(n)}
    # a train page of en missing from the shards (subsampled away) changes nothing
    pages = {"validation": held, "train": every - held - {("en", ranked["en"][50])}}
    out = Problems()
    assert check_split(pages, kept, 0.05, out) == {"bg": 1, "en": 5} and out.items == []
    # bg's held-out page swapped for another: two pages in the wrong split
    first, second = ("bg", ranked["bg"][0]), ("bg", ranked["bg"][1])
    swapped = {"validation": held - {first} | {second}, "train": every - held - {second} | {first}}
    out = Problems()
    assert check_split(swapped, kept, 0.05, out) == {"bg": 1, "en": 5}
    assert out.items == [f"splits.bg: 2 pages are not in the split the job's rule gives (1 of 25 kept pages held "
                         f"out at fraction 0.05, the rule holds out 1), e.g. page {first[1]} is in train"]


def test_a_missing_validation_shard_leaves_the_split_checked_only_as_far_as_the_pages_read_allow():
    """Without its validation pages a language's cut cannot be recomputed: the train page with the
    smallest hash looked held out. What the pages read still show is checked."""
    from types import SimpleNamespace

    from pipeline.beam.split import split_hash

    kept = {"en": 100}  # at 5%: 5 pages held out
    ranked = sorted(range(100), key=lambda i: split_hash("en", i))
    held, every = {("en", i) for i in ranked[:5]}, {("en", i) for i in range(100)}
    unread = Unread()
    unread.add("validation", SimpleNamespace(rows=2))
    read = {"validation": held - {("en", ranked[0]), ("en", ranked[3])}, "train": every - held}
    out = Problems()
    assert check_split(read, kept, 0.05, out, unread) == {"en": 3} and out.items == []
    out = Problems()
    check_split(read, kept, 0.05, out)  # what it said before: a false second problem
    assert len(out.items) == 1 and f"page {ranked[5]} is in train" in out.items[0]
    # a held-out page read in train is still found: it hashes below a validation page read
    swapped = {"validation": read["validation"], "train": read["train"] | {("en", ranked[0])}}
    out = Problems()
    check_split(swapped, kept, 0.05, out, unread)
    assert out.items == [f"splits.en: 1 train pages hash below a validation page: no cut of the job's rule gives "
                         f"that (a validation shard is unread, so the pages held out are not counted), "
                         f"e.g. page {ranked[0]} is in train"]


@pytest.mark.slow
@pytest.mark.parametrize("split", ["validation", "train"])
def test_canine_validate_says_a_missing_shard_once(split, tmp_path, capsys):
    """README's commands: `canine preprocess`, a shard deleted, `canine validate`. The missing file
    is the one problem: the examples its rows held and, for a validation shard, the split of the
    pages it held are what it explains (it said 3 problems for a missing validation shard)."""
    from pathlib import Path

    from jobs import cli

    sample = Path(__file__).resolve().parents[2] / "pipeline" / "sample" / "zhwiki-20261101-pages-articles.xml"
    out = tmp_path / "out"
    assert cli.main(["preprocess", str(sample), "--output", str(out), "--seq-len", "512", "--vocab-size", "800",
                     "--shard-codepoints", "4000"]) == 0
    assert cli.main(["validate", str(out)]) == 0
    shards = sorted((out / split).glob("*.parquet"))
    assert len(shards) >= 1 + (split == "train")
    rows = __import__("pyarrow.parquet", fromlist=["read_metadata"]).read_metadata(shards[-1]).num_rows
    shards[-1].unlink()
    capsys.readouterr()
    assert cli.main(["validate", str(out)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"canine validate: {out}: 1 problem(s)",
        f"  {split}/{shards[-1].name}: listed in the manifest but missing (its {rows} examples are not checked)"]
