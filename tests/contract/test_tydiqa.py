"""contract/tydiqa.py: byte <-> codepoint offsets in every script's widths, the document's ends, offsets
inside a character rejected and counted, and the official tiny_dev file read exactly."""

import gzip
import json
import os

import pytest

from contract.tydiqa import (ByteOffsets, Example, OffsetInsideCharacter, OffsetOutOfRange, ReadStats, Rejected,
                             parse_example, read_examples, to_bytes)

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "tydiqa")
TINY_DEV = os.path.join(DATA, "tiny_dev.jsonl.gz")
SMALL_GOLD = os.path.join(DATA, "small_gold_annotation.jsonl")

# One character of each UTF-8 width and of each TyDi script, with its width in bytes.
CHARACTERS = [
    ("a", 1),  # ASCII (English, Finnish, Indonesian, Swahili)
    ("ä", 2),  # Latin-1 supplement (Finnish)
    ("ж", 2),  # Cyrillic (Russian)
    ("م", 2),  # Arabic
    ("ก", 3),  # Thai
    ("ক", 3),  # Bengali
    ("త", 3),  # Telugu
    ("日", 3),  # CJK (Japanese)
    ("ア", 3),  # Katakana (Japanese)
    ("한", 3),  # Hangul (Korean)
    ("😀", 4),  # an emoji, outside the BMP
    ("𠀀", 4),  # U+20000, CJK Extension B
]
TEXT = "".join(c for c, _ in CHARACTERS) + " end"


def test_widths_of_every_script():
    for c, width in CHARACTERS:
        assert len(c.encode("utf-8")) == width  # the table itself is right
        o = ByteOffsets(c)
        assert (o.chars, o.bytes) == (1, width)
        assert (o.to_char(0), o.to_char(width), o.to_byte(0), o.to_byte(1)) == (0, 1, 0, width)


def test_every_offset_against_encoding():
    """Every byte offset of a mixed text: a boundary converts both ways as encoding the prefix
    does; any other offset raises OffsetInsideCharacter naming the character it falls in."""
    data = TEXT.encode("utf-8")
    o = ByteOffsets(TEXT, example_id=42)
    boundaries = {len(TEXT[:i].encode("utf-8")): i for i in range(len(TEXT) + 1)}
    assert o.chars == len(TEXT) and o.bytes == len(data)
    for b in range(len(data) + 1):
        if b in boundaries:
            assert o.to_char(b) == boundaries[b]
            assert o.to_byte(boundaries[b]) == b
        else:
            with pytest.raises(OffsetInsideCharacter) as e:
                o.to_char(b)
            i = e.value.char_index
            assert e.value.example_id == 42 and e.value.offset == b
            assert e.value.char_start == o.to_byte(i) < b < o.to_byte(i + 1)
            assert "example 42" in str(e.value) and f"byte offset {b}" in str(e.value)
    assert sum(1 for b in range(len(data) + 1) if b not in boundaries) == sum(w - 1 for _, w in CHARACTERS)


def test_document_ends_and_out_of_range():
    o = ByteOffsets(TEXT)
    n = len(TEXT.encode("utf-8"))
    assert o.to_char(0) == 0 and o.to_char(n) == len(TEXT)
    assert o.to_byte(0) == 0 and o.to_byte(len(TEXT)) == n
    for bad in (-1, n + 1):
        with pytest.raises(OffsetOutOfRange):
            o.to_char(bad)
    for bad in (-1, len(TEXT) + 1):
        with pytest.raises(OffsetOutOfRange):
            o.to_byte(bad)
    empty = ByteOffsets("")
    assert (empty.to_char(0), empty.to_byte(0)) == (0, 0)


def test_lone_surrogate_has_no_offsets():
    with pytest.raises(UnicodeEncodeError):
        ByteOffsets("a\ud800b")


def _record(example_id=1, document=TEXT, candidates=((0, 7),), annotations=((0, 3, 7, "NONE"),)):
    """A line of the official files (the fields read_examples reads, and document_html's absence)."""
    return {"example_id": example_id, "language": "thai", "question_text": "q?", "document_url": "u",
            "document_title": "t", "document_plaintext": document,
            "passage_answer_candidates": [{"plaintext_start_byte": s, "plaintext_end_byte": e} for s, e in candidates],
            "annotations": [{"annotation_id": k, "passage_answer": {"candidate_index": p},
                             "minimal_answer": {"plaintext_start_byte": s, "plaintext_end_byte": e},
                             "yes_no_answer": yn} for k, (p, s, e, yn) in enumerate(annotations)]}


def test_parse_example_converts_to_codepoints():
    # TEXT's bytes: a 0, ä 1-2, ж 3-4, م 5-6, ก 7-9, ক 10-12, ...
    ex = parse_example(_record(candidates=((0, 7), (7, 13)), annotations=((1, 7, 13, "NONE"), (-1, -1, -1, "NONE"),
                                                                           (0, -1, -1, "yes"))))
    assert isinstance(ex, Example)
    assert ex.passages == [(0, 4), (4, 6)]
    assert [ex.document[s:e] for s, e in ex.passages] == ["aäжم", "กক"]
    assert [(a.passage, a.minimal, a.yes_no) for a in ex.annotations] == [(1, (4, 6), "NONE"), (-1, None, "NONE"),
                                                                          (0, None, "YES")]
    assert to_bytes(ex, 4, 6) == (7, 13)
    assert to_bytes(ex, 0, len(TEXT)) == (0, len(TEXT.encode("utf-8")))


@pytest.mark.parametrize("annotations, candidates, reason", [
    (((0, 8, 13, "NONE"),), ((0, 7),), "offset_inside_character"),  # starts inside ก (bytes 7-9)
    (((0, 7, 12, "NONE"),), ((0, 7),), "offset_inside_character"),  # ends inside ক (bytes 10-12)
    (((0, -1, -1, "NONE"),), ((0, 6),), "offset_inside_character"),  # a passage candidate inside م
    (((0, 7, 999, "NONE"),), ((0, 7),), "offset_out_of_range"),
    (((0, 9, 7, "NONE"),), ((0, 7),), "bad_span"),
    (((0, 7, -1, "NONE"),), ((0, 7),), "bad_span"),
    (((1, -1, -1, "NONE"),), ((0, 7),), "passage_index_out_of_range"),
    (((0, -1, -1, "MAYBE"),), ((0, 7),), "bad_yes_no"),
])
def test_rejections_name_their_reason(annotations, candidates, reason):
    r = parse_example(_record(example_id=7, candidates=candidates, annotations=annotations))
    assert isinstance(r, Rejected) and (r.example_id, r.reason) == (7, reason)


def test_read_examples_counts_rejections(tmp_path):
    """Streamed from gzip; the bad examples are left out, counted by reason and listed by id."""
    records = [_record(1), _record(2, annotations=((0, 8, 13, "NONE"),)), _record(3),
               _record(4, annotations=((0, 11, 13, "NONE"),)), _record(5, document="a\ud800b", candidates=())]
    path = tmp_path / "dev.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")  # json escapes the lone surrogate as \ud800, as a file could
    stats = ReadStats()
    assert [ex.example_id for ex in read_examples(str(path), stats)] == [1, 3]
    assert (stats.read, stats.kept) == (5, 2)
    assert stats.rejected == {"offset_inside_character": 2, "not_utf8": 1}
    assert [(r.example_id, r.reason) for r in stats.rejects] == [(2, "offset_inside_character"),
                                                                 (4, "offset_inside_character"), (5, "not_utf8")]
    assert "byte offset 8" in stats.rejects[0].detail and "byte offset 11" in stats.rejects[1].detail


def test_read_examples_streams(tmp_path):
    """Examples come out before the file is read to its end: a broken third line is met only then."""
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(_record(1)) + "\n" + json.dumps(_record(2)) + "\n{broken\n", encoding="utf-8")
    it = read_examples(str(path))
    assert next(it).example_id == 1 and next(it).example_id == 2
    with pytest.raises(ValueError, match=r"x.jsonl:3: not JSON"):
        next(it)


@pytest.mark.parametrize("path", [TINY_DEV, SMALL_GOLD])
def test_official_files_every_span_is_its_byte_slice(path):
    """The official files, every passage candidate and annotated minimal answer: the codepoint
    slice equals the UTF-8 byte slice decoded, and to_bytes gives the file's offsets back."""
    stats = ReadStats()
    examples = list(read_examples(path, stats))
    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
        raw = {r["example_id"]: r for r in map(json.loads, f)}
    assert stats.kept == stats.read == len(raw) and not stats.rejected
    minimal = 0
    for ex in examples:
        r = raw[ex.example_id]
        data = r["document_plaintext"].encode("utf-8")
        spans = [((c["plaintext_start_byte"], c["plaintext_end_byte"]), ex.passages[i])
                 for i, c in enumerate(r["passage_answer_candidates"])]
        for a, ann in zip(r["annotations"], ex.annotations):
            m = a["minimal_answer"]
            if m["plaintext_start_byte"] >= 0:
                spans.append(((m["plaintext_start_byte"], m["plaintext_end_byte"]), ann.minimal))
                minimal += 1
            else:
                assert ann.minimal is None
            assert ann.passage == a["passage_answer"]["candidate_index"]
        for (sb, eb), (sc, ec) in spans:
            assert ex.document[sc:ec] == data[sb:eb].decode("utf-8")
            assert to_bytes(ex, sc, ec) == (sb, eb)
    if path == TINY_DEV:
        assert len(examples) == 11 and minimal == 6
        assert {ex.language for ex in examples} == {"arabic", "bengali", "english", "finnish", "indonesian",
                                                    "japanese", "korean", "russian", "swahili", "telugu", "thai"}
        by_lang = {ex.language: ex for ex in examples}
        ind = by_lang["indonesian"]
        assert [ind.document[slice(*a.minimal)] for a in ind.annotations if a.minimal] == [
            "orang-orang Viking", "orang-orang Viking dari Eropa Utara"]
        assert [a.yes_no for a in by_lang["russian"].annotations] == ["NO", "NO", "NO"]
        thai = by_lang["thai"]  # a 3-byte script: codepoints and bytes differ
        assert len(thai.document.encode("utf-8")) == 34275 and len(thai.document) == 12289
    else:
        assert minimal == 6  # thai's three annotators and arabic's three


def test_the_windows_contract(tmp_path):
    """The windows' codepoints follow CANINE's specials (Google's char_splitter.py), AnswerType is
    data.py's numbering, the schema's columns are the contract's, and a role's manifest is read
    with its format checked."""
    from contract import schema
    from contract.tydiqa import (PASSAGE_0, QUESTION, WINDOW_COLUMN_NAMES, WINDOW_SCHEMA_VERSION, WINDOWS_FORMAT,
                                 AnswerType, passage_marker, read_windows_manifest, segment_ids, window_schema,
                                 window_shard_urls)

    assert (schema.CLS, schema.SEP, schema.RESERVED, QUESTION, PASSAGE_0) == (0xE000, 0xE001, 0xE004, 0xE005, 0xE006)
    assert passage_marker(44) == 0xE032 and passage_marker(249) == schema.ALIASED_RANGE[1]
    with pytest.raises(ValueError):
        passage_marker(250)
    assert [(t.name, int(t)) for t in AnswerType] == [("UNKNOWN", 0), ("YES", 1), ("NO", 2), ("MINIMAL", 3),
                                                      ("PASSAGE", 4)]
    assert tuple(window_schema().names) == WINDOW_COLUMN_NAMES
    assert segment_ids(3, 5).tolist() == [0, 0, 0, 1, 1]
    with pytest.raises(FileNotFoundError, match="not prepared"):
        read_windows_manifest(str(tmp_path), "dev")
    (tmp_path / "dev").mkdir()
    manifest = {"format": WINDOWS_FORMAT, "version": WINDOW_SCHEMA_VERSION,
                "shards": [{"path": "part-00000-of-00001.parquet"}]}
    (tmp_path / "dev" / "_manifest.json").write_text(json.dumps(manifest))
    assert window_shard_urls(str(tmp_path), "dev") == [f"{tmp_path}/dev/part-00000-of-00001.parquet"]
    (tmp_path / "dev" / "_manifest.json").write_text(json.dumps(manifest | {"version": 0}))
    with pytest.raises(ValueError, match="prepare the windows again"):
        read_windows_manifest(str(tmp_path), "dev")
