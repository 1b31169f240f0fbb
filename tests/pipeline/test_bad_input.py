"""Bad preprocessing input: whole-input errors name the file and stop before anything
is written; row-level rejects keep their title and are counted. pipeline/sources/__init__.py's docstring
says which case is which and why."""

import bz2
import gzip
import json
import os
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contract import schema
from jobs import cli
from pipeline.beam import itemcache
from pipeline.wikitext.clean import clean_page
from pipeline.sources import InputError, WorkItem, plan_work_items, read_pages

SAMPLE_XML = Path(__file__).resolve().parents[2] / "pipeline" / "sample" / "enwiki-20261101-pages-articles.xml"
FAST = ["--seq-len", "256", "--vocab-size", "300"]


def jsonl(path, lines) -> Path:
    """Rows given as dicts are dumped; str lines are written as they are (bad JSON, escapes)."""
    path.write_bytes(b"\n".join(l if isinstance(l, bytes) else (l if isinstance(l, str) else json.dumps(l)).encode() for l in lines) + b"\n")
    return path


def two_streams(data: bytes) -> bytes:
    """A bz2 file of two streams, as pbzip2 or a multistream dump is: the first one is whole even
    when the file is cut in the second."""
    return bz2.compress(data[: len(data) // 2]) + bz2.compress(data[len(data) // 2 :])


def outcomes(path, lang=None):
    """(lang, outcome, reason, title) of every page of one input, as the job would count it."""
    pages = [p for item in plan_work_items([str(path)], lang=lang) for p in read_pages(item)]
    return [(p.lang, r.outcome, r.reason, p.title) for p, r in ((p, clean_page(p)) for p in pages)]


# --- 1. empty files --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x.xml", "x.xml.bz2", "x.xml.gz", "x.jsonl", "x.jsonl.gz", "x.parquet"])
def test_an_empty_file_fails_when_planning(name, tmp_path):
    (tmp_path / name).write_bytes(b"")
    with pytest.raises(InputError, match=rf"^{tmp_path / name}: empty file \(0 bytes\)$"):
        plan_work_items([str(tmp_path / name)], lang="en")


# gzip stamps the time it compressed at (mtime): fixed here, or two xdist workers collecting a
# second apart see different parameters and the run stops ("Different tests were collected").
@pytest.mark.parametrize("name, data, message", [
    ("x.xml.bz2", bz2.compress(b""), "no <mediawiki> root element in the file: it decompresses to nothing"),
    ("x.xml.gz", gzip.compress(b"", mtime=0), "no <mediawiki> root element in the file: it decompresses to nothing"),
    ("x.jsonl.gz", gzip.compress(b"\n  \n", mtime=0), "no rows: it holds only blank lines"),
])
def test_a_file_that_decompresses_to_nothing_fails_when_planning(name, data, message, tmp_path):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(InputError, match=f"^{tmp_path / name}: {message}$"):
        plan_work_items([str(tmp_path / name)], lang="en")


# --- 2. not the format its name says ---------------------------------------------------------


@pytest.mark.parametrize("name, magic", [("x.xml.bz2", "b'BZh'"), ("x.jsonl.gz", r"b'\\x1f\\x8b'")])
def test_random_bytes_fail_when_planning_naming_the_header(name, magic, tmp_path):
    # Seeded, and without quote characters: a quote in the first bytes changes how repr() quotes them.
    noise = bytes(b for b in random.Random(7).randbytes(4000) if b not in b"'\"")[:2000]
    (tmp_path / name).write_bytes(b"\x8fPK" + noise)
    with pytest.raises(InputError, match=rf"^{tmp_path / name}: not {name.split('.')[-1].replace('gz', 'gzip')} data at byte 0: "
                                         rf"it starts with b'\\x8fPK.*', a .* stream with {magic}$"):
        plan_work_items([str(tmp_path / name)], lang="en")


# --- 3. a cut bz2 file -------------------------------------------------------------------------


def test_a_cut_bz2_fails_when_planning_before_any_page_is_read(tmp_path):
    """Pages before the cut are not used: a shorter corpus that looks complete is worse than a
    failed run. Two streams, cut in the second: the first decompresses fine on its own."""
    whole = two_streams(SAMPLE_XML.read_bytes())
    path = tmp_path / "enwiki-20261101-pages-articles.xml.bz2"
    path.write_bytes(whole[: len(whole) - 100])
    with pytest.raises(InputError, match=rf"^{path}: truncated bz2 file: it does not end with a bz2 end-of-stream marker"):
        plan_work_items([str(path)])
    with pytest.raises(InputError, match=rf"^{path}: truncated bz2 data: input ends at byte {len(whole) - 100} inside the stream starting at byte \d+$"):
        list(read_pages(WorkItem(str(path), "xml", lang="en")))  # the reader says the same if the file is cut later


# --- 4. an unclosed last page ----------------------------------------------------------------


def test_an_unclosed_last_page_names_its_line_and_title(tmp_path):
    text = SAMPLE_XML.read_text(encoding="utf-8")
    cut = text.rindex("</page>")
    page_line = text[: text.rindex("<page>")].count("\n") + 1
    title = text[text.rindex("<title>") + 7 : text.rindex("</title>")]
    path = tmp_path / "enwiki-20261101-pages-articles.xml.gz"  # gzip: no end marker, so it is the reader that finds it
    path.write_bytes(gzip.compress(text[:cut].encode()))
    (item,) = plan_work_items([str(path)])
    with pytest.raises(InputError, match=rf"^{path}: malformed XML at line \d+, column \d+, in the <page> at line {page_line} "
                                         rf"\({re.escape(repr(title))}\) \(decompressed byte {len(text[:cut].encode())}\): no element found"):
        list(read_pages(item))
    plain = tmp_path / "enwiki-20261101-pages-articles.xml"
    plain.write_text(text[:cut], encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{plain}: truncated XML: it does not end with </mediawiki>"):
        plan_work_items([str(plain)])  # uncompressed: seen from its last bytes when planning


# --- 5. JSON Lines that are not JSON ---------------------------------------------------------


def test_a_line_that_is_not_json_is_a_reject_counted_under_the_files_language(tmp_path):
    path = jsonl(tmp_path / "fr.jsonl", [
        {"id": 1, "title": "Un", "text": "un", "lang": "fr"}, '{"id": 2, "title": "Deux", "text": ', b'{"id": 3, "text": "\xff"}',
        "[" * 100_000, {"id": 4, "title": "Quatre", "text": "quatre", "lang": "fr"}, {"id": 5, "text": "x", "lang": "../../etc"},
        {"id": "6a", "text": "x", "lang": "../x"},
    ])
    assert outcomes(path) == [
        ("fr", "kept", "", "Un"),
        ("fr", "parse_errors", "parse error: invalid JSON at line 2, column 36: Expecting value", ""),
        ("fr", "parse_errors", "parse error: invalid UTF-8 at line 3, byte 20: b'\\xff\"}'", ""),
        ("fr", "parse_errors", "parse error: JSON nested too deeply at line 4", ""),
        ("fr", "kept", "", "Quatre"),
        ("fr", "parse_errors", "parse error: lang '../../etc' is not a language code", ""),  # never a rejects/ path
        ("fr", "parse_errors", "parse error: non-integer id '6a'", ""),  # a reject's lang is a path too
    ]
    assert {lang for lang, *_ in outcomes(path, lang="de")} == {"fr", "de"}  # --lang for rows that name none


def test_a_language_that_is_not_a_code_fails_when_planning(tmp_path):
    with pytest.raises(InputError, match=r"--lang 'en/\.\.': not a language code"):
        plan_work_items([str(SAMPLE_XML)], lang="en/..")
    path = tmp_path / "xxwiki-20261101-pages-articles.xml"
    path.write_text(SAMPLE_XML.read_text(encoding="utf-8").replace('xml:lang="en"', 'xml:lang="../en"', 1), encoding="utf-8")
    with pytest.raises(InputError, match=rf"{path}: xml:lang '\.\./en' is not a language code"):
        plan_work_items([str(path)])


def test_a_file_name_that_is_not_utf8_fails_when_planning(tmp_path):
    folder = os.fsencode(tmp_path / "odd")
    os.mkdir(folder)
    with open(folder + b"/rows-\xff.jsonl", "wb") as f:
        f.write(b'{"id": 1, "text": "a", "lang": "en"}\n')
    with pytest.raises(InputError, match=r"rows-\\udcff.jsonl': the file name is not valid UTF-8; rename the file"):
        plan_work_items([str(tmp_path / "odd")])


# --- 6. Parquet without its text column: tests/pipeline/sources/test_sources_rows.py and the CLI test below --


# --- 7. lone surrogates ----------------------------------------------------------------------


def surrogate_parquet(path, texts, titles) -> Path:
    """Arrow checks UTF-8 only on the way in from Python: bytes viewed as strings skip it, as a
    writer in another language could."""
    table = pa.table({"id": list(range(1, len(texts) + 1)), "title": pa.array(titles, pa.binary()).view(pa.string()),
                      "text": pa.array(texts, pa.binary()).view(pa.string()), "lang": ["sw"] * len(texts)})
    pq.write_table(table, path)
    return path


def test_lone_surrogates_in_rows_are_rejects_that_keep_their_title(tmp_path):
    rows = jsonl(tmp_path / "sw.jsonl", [
        {"id": 1, "title": "Sawa", "text": "sawa", "lang": "sw"},
        '{"id": 2, "title": "Jina", "text": "ab \\ud800 c", "lang": "sw"}',  # a JSON escape
        b'{"id": 3, "title": "J\xed\xb0\x80", "text": "x", "lang": "sw"}',  # UTF-8 bytes of U+DC00
    ])
    assert outcomes(rows) == [
        ("sw", "kept", "", "Sawa"),
        ("sw", "parse_errors", "parse error: text has a lone surrogate U+D800 at character 3", "Jina"),
        ("sw", "parse_errors", "parse error: title has a lone surrogate U+DC00 at character 1", "J\\udc00"),
    ]
    table = surrogate_parquet(tmp_path / "sw.parquet", [b"sawa", b"ab \xed\xa0\x80", b"x"], [b"Sawa", b"Jina", b"J\xff"])
    assert outcomes(table) == [
        ("sw", "kept", "", "Sawa"),
        ("sw", "parse_errors", "parse error: text has a lone surrogate U+D800 at character 3", "Jina"),
        ("sw", "parse_errors", "parse error: title is not UTF-8 at byte 1: b'\\xff'", "J\\xff"),
    ]


def test_pages_with_surrogates_are_cached_and_replayed(tmp_path):
    """The cache Parquet and the rejects file are UTF-8: what reaches them must encode."""
    path = jsonl(tmp_path / "sw.jsonl", ['{"id": 2, "title": "J\\udfff", "text": "\\ud800", "lang": "sw"}'])
    (item,) = plan_work_items([str(path)])
    url = str(tmp_path / "items" / "one.parquet")
    written = list(itemcache.parse_and_store(item, url))
    assert list(itemcache.replay(url)) == written and [c.outcome for c in written] == ["parse_errors"]
    assert json.dumps(written[0]._asdict(), ensure_ascii=False).encode("utf-8")  # raised before: surrogates not allowed
    assert os.listdir(tmp_path / "items") == ["one.parquet"]  # no temp file left


def test_a_failed_item_leaves_no_temp_file_in_the_cache(tmp_path):
    path = tmp_path / "enwiki-20261101-pages-articles.xml.gz"
    path.write_bytes(gzip.compress(SAMPLE_XML.read_bytes()[:-200]))
    with pytest.raises(InputError, match=f"{path}: malformed XML"):
        list(itemcache.parse_and_store(WorkItem(str(path), "xml", lang="en"), str(tmp_path / "items" / "x.parquet")))
    assert not [p.name for p in tmp_path.rglob("*") if p.name != path.name]  # no cache file, no temp file


def test_a_surrogate_reference_in_xml_fails_naming_its_page(tmp_path):
    """expat refuses `&#xD800;` (XML 1.0 §4.1): the file is not XML, so it is a whole-input error."""
    text = SAMPLE_XML.read_text(encoding="utf-8")
    last = text.rindex("<text")
    path = tmp_path / "enwiki-20261101-pages-articles.xml"
    path.write_text(text[: text.index(">", last) + 1] + "&#xD800;" + text[text.index(">", last) + 1 :], encoding="utf-8")
    (item,) = plan_work_items([str(path)])
    with pytest.raises(InputError, match=rf"^{path}: malformed XML at line \d+, column \d+, in the <page> at line \d+ \('.+'\) .*reference to invalid character number"):
        list(read_pages(item))


# --- through `canine preprocess` -------------------------------------------------------------


def run_cli(capsys, *args):
    code = cli.main(["preprocess", *map(str, args), *FAST])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name, data, message", [
    ("enwiki-20261101-pages-articles.xml.bz2", b"", "empty file (0 bytes)"),
    ("enwiki-20261101-pages-articles.xml.bz2", random.Random(3).randbytes(3000), "not bz2 data at byte 0"),
    ("enwiki-20261101-pages-articles.xml.bz2", two_streams(SAMPLE_XML.read_bytes())[:-50], "truncated bz2 file"),
])
def test_cli_refuses_bad_input_before_writing(name, data, message, tmp_path, capsys):
    (tmp_path / name).write_bytes(data)
    code, err = run_cli(capsys, tmp_path / name, "--output", tmp_path / "out")
    assert code == 2 and f"canine preprocess: {tmp_path / name}: {message}" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_cli_refuses_parquet_without_text_naming_its_columns(tmp_path, capsys):
    pq.write_table(pa.table({"id": [1], "body": ["x"], "lang": ["en"]}), tmp_path / "rows.parquet")
    code, err = run_cli(capsys, tmp_path / "rows.parquet", "--output", tmp_path / "out")
    assert code == 2 and f"{tmp_path / 'rows.parquet'}: missing column(s) text (has id, body, lang)" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_names_the_file_when_a_worker_finds_bad_input(tmp_path, capsys):
    """gzip has no end marker, so the cut is found inside the Beam job (in_memory DirectRunner:
    Beam re-raises the InputError with " [while running '...']" appended)."""
    path = tmp_path / "enwiki-20261101-pages-articles.xml.gz"
    path.write_bytes(gzip.compress(SAMPLE_XML.read_bytes())[:-30])
    code, err = run_cli(capsys, path, "--output", tmp_path / "out")
    assert code == 2 and f"canine preprocess: {path}: truncated gzip data" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_publishes_row_rejects_with_their_titles(tmp_path, capsys):
    """Rejected rows, surrogates included, reach the published rejects file and the manifest's
    counts of their file's language; the good rows are shards."""
    good = [{"id": i, "title": f"T{i}", "text": f"Habari ya {i}. " * 40, "lang": "sw"} for i in range(1, 30)]
    path = jsonl(tmp_path / "sw.jsonl", [*good, "{oops", '{"id": 90, "title": "S\\ud800", "text": "\\udc00", "lang": "sw"}'])
    out = tmp_path / "out"
    code, err = run_cli(capsys, path, "--output", out)
    assert code == 0, err
    manifest = json.loads((out / schema.MANIFEST).read_text())
    assert manifest["languages"]["sw"]["parse_errors"] == 2 and manifest["languages"]["sw"]["kept"] == len(good)
    rejects = [json.loads(line) for line in (out / schema.REJECTS / "sw.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["title"], r["reason"]) for r in rejects] == [
        ("", "parse error: invalid JSON at line 30, column 2: Expecting property name enclosed in double quotes"),
        ("S\\ud800", "parse error: title has a lone surrogate U+D800 at character 1"),
    ]
