"""pipeline/sources.py: planning, every input kind, multistream ranges, bad input, flat memory."""

import bz2
import gzip
import json
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import fsspec
import pytest

from pipeline import sources
from pipeline.sources import InputError, WorkItem, plan_work_items, read_pages, work_item_key


def fields(page):
    """Everything but `source`, which names the file and so differs between input kinds."""
    return (page.page_id, page.title, page.ns, page.redirect, page.text, page.lang, page.error, page.markup)


def read_all(items):
    return [page for item in items for page in read_pages(item)]


# --- planning ------------------------------------------------------------------------------


def test_plan_reads_language_from_each_dump_header(sample_xml):
    items = plan_work_items([str(sample_xml["en"].parent / "*.xml")])
    assert [it.lang for it in items] == sorted(sample_xml)  # sorted by path = by language here
    assert all(it.kind == "xml" and it.start == 0 and it.end is None for it in items)
    assert [it.path for it in items] == sorted(it.path for it in items)


def test_plan_lists_a_directory_and_skips_other_files(sample_xml):
    items = plan_work_items([str(sample_xml["en"].parent)])  # holds README.md, generate.py, source/
    assert {it.lang for it in items} == set(sample_xml)


def test_missing_input_fails_before_any_item_is_returned(sample_xml, tmp_path):
    missing = str(tmp_path / "nope-pages-articles.xml.bz2")
    with pytest.raises(InputError, match="nope-pages-articles.xml.bz2: input not found"):
        plan_work_items([str(sample_xml["en"]), missing])
    with pytest.raises(InputError, match=r"\*.xml: no input files match"):
        plan_work_items([str(tmp_path / "*.xml")])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="notes.txt: unrecognized input kind"):
        plan_work_items([str(tmp_path / "notes.txt")])


def test_work_item_keys_are_stable_and_distinct(input_variants):
    items = plan_work_items([str(input_variants["multistream"])])
    keys = [work_item_key(it) for it in items]
    assert len(set(keys)) == len(keys) > 1
    assert keys == [work_item_key(it) for it in plan_work_items([str(input_variants["multistream"])])]
    assert keys[0] == f"{items[0].path}@0:{items[0].end}" and keys[-1].endswith(":eof")


# --- every input kind yields the same pages --------------------------------------------------


@pytest.mark.parametrize("kind", ["xml_bz2", "xml_gz", "multistream"])
def test_compressed_and_multistream_dumps_yield_the_plain_dump_pages(kind, input_variants, sample_pages):
    pages = read_all(plan_work_items([str(input_variants[kind])]))
    assert [fields(p) for p in pages] == [fields(p) for p in sample_pages["en"]]


def test_multi_member_gzip_is_read_whole(sample_xml, sample_pages, tmp_path):
    data = sample_xml["ru"].read_bytes()
    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]  # three gzip members, as `cat a.gz b.gz` makes
    path = tmp_path / "ruwiki-20261101-pages-articles.xml.gz"
    path.write_bytes(b"".join(gzip.compress(data[a:b]) for a, b in zip(cut, cut[1:])))
    assert [fields(p) for p in read_all(plan_work_items([str(path)]))] == [fields(p) for p in sample_pages["ru"]]


@pytest.mark.parametrize("kind", ["jsonl", "jsonl_gz", "parquet"])
def test_row_inputs_yield_their_rows_as_plain_pages(kind, input_variants, sample_pages, pages_as_rows):
    pages = read_all(plan_work_items([str(input_variants[kind])]))
    assert [{"id": p.page_id, "title": p.title, "text": p.text, "lang": p.lang} for p in pages] == pages_as_rows(sample_pages["en"])
    assert all(p.markup == "plain" and p.ns == 0 and p.error is None for p in pages)
    sep = "#" if kind == "parquet" else ":"
    assert pages[2].source == f"{input_variants[kind]}{sep}3"


def test_sample_pages_carry_their_position(sample_pages, sample_xml):
    first = sample_pages["en"][0]
    lines = sample_xml["en"].read_text(encoding="utf-8").splitlines()
    path, line = first.source.rsplit(":", 1)
    assert path == str(sample_xml["en"]) and lines[int(line) - 1].strip() == "<page>"


def test_memory_urls_are_planned_and_read(input_variants, sample_pages):
    fs = fsspec.filesystem("memory")
    dump = input_variants["multistream"]
    index = dump.with_name(dump.name.replace("multistream.xml", "multistream-index.txt"))
    for path in (dump, index):
        fs.pipe(f"/canine-test/{path.name}", path.read_bytes())
    try:
        items = plan_work_items(["memory://canine-test/*.bz2"])
        assert len(items) > 1 and all(it.path.startswith("memory://") for it in items)
        assert [fields(p) for p in read_all(items)] == [fields(p) for p in sample_pages["en"]]
    finally:
        fs.rm("/canine-test", recursive=True)


# --- multistream split -----------------------------------------------------------------------


@pytest.mark.parametrize("per_item", [1, 3])
def test_multistream_ranges_cover_every_page_once(per_item, input_variants, sample_pages):
    dump = input_variants["multistream"]
    items = plan_work_items([str(dump)], streams_per_item=per_item)
    n_streams = -(-len(sample_pages["en"]) // 5)  # the fixture puts 5 pages in a stream
    assert len(items) == -(-n_streams // per_item)
    assert items[0].start == 0 and items[-1].end is None
    assert all(a.end == b.start for a, b in zip(items, items[1:]))  # contiguous, no overlap
    # Parallel-safe: each range decodes on its own, in any order, on any thread.
    with ThreadPoolExecutor(4) as pool:
        per_range = list(pool.map(lambda it: list(read_pages(it)), reversed(items)))[::-1]
    assert all(per_range) and [fields(p) for r in per_range for p in r] == [fields(p) for p in sample_pages["en"]]
    assert all(p.source.startswith(f"{dump}@{it.start}:") for it, r in zip(items[1:], per_range[1:]) for p in r)


def test_range_boundaries_are_the_index_offsets(input_variants):
    dump = input_variants["multistream"]
    index = dump.with_name(dump.name.replace("multistream.xml", "multistream-index.txt"))
    offsets = sorted({int(line.split(":")[0]) for line in bz2.decompress(index.read_bytes()).decode().splitlines()})
    items = plan_work_items([str(dump)])
    assert [it.start for it in items[1:]] == offsets[1:]
    for start in offsets:  # each is a real bz2 stream start
        with open(dump, "rb") as f:
            f.seek(start)
            assert f.read(3) == b"BZh"


# --- language ------------------------------------------------------------------------------


def test_language_precedence_for_dumps(sample_xml, tmp_path):
    assert plan_work_items([str(sample_xml["de"])], lang="fr")[0].lang == "de"  # xml:lang wins
    no_lang = tmp_path / "xxwiki-20261101-pages-articles.xml"
    no_lang.write_text(sample_xml["en"].read_text(encoding="utf-8").replace(' xml:lang="en"', "", 1), encoding="utf-8")
    item = plan_work_items([str(no_lang)], lang="sco")[0]
    assert item.lang == "sco" and {p.lang for p in read_pages(item)} == {"sco"}
    with pytest.raises(InputError, match=f"{no_lang}: no language"):
        plan_work_items([str(no_lang)])


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_language_precedence_for_rows(suffix, tmp_path, write_rows):
    rows = [{"id": 1, "title": "A", "text": "a", "lang": "fr"}, {"id": 2, "title": "B", "text": "b", "lang": None}]
    path = write_rows(rows, tmp_path / f"mixed{suffix}")
    pages = read_all(plan_work_items([str(path)], lang="de"))
    assert [p.lang for p in pages] == ["fr", "de"] and all(p.error is None for p in pages)
    unnamed = write_rows([{"id": 1, "title": "A", "text": "a"}], tmp_path / f"unnamed{suffix}")
    with pytest.raises(InputError, match=f"{unnamed}.*no language"):
        plan_work_items([str(unnamed)])
    assert [p.lang for p in read_all(plan_work_items([str(unnamed)], lang="de"))] == ["de"]


def test_parquet_without_required_columns_fails_at_plan_time(tmp_path, write_rows):
    path = write_rows([{"id": 1, "body": "x", "lang": "en"}], tmp_path / "x.parquet")
    with pytest.raises(InputError, match=r"x.parquet: missing column\(s\) text \(has id, body, lang\)"):
        plan_work_items([str(path)])


# --- bad input -----------------------------------------------------------------------------


def _xml_line(path, needle):
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


# name in bad_inputs -> the message expected, as a function of the file's path. Cut files are
# seen from their last bytes when planning; the rest when reading.
PLAN_TIME_MESSAGES = {
    "truncated_bz2": lambda p: rf"{p}: truncated bz2 file: it does not end with a bz2 end-of-stream marker \({p.stat().st_size} bytes",
    "truncated_xml": lambda p: rf"{p}: truncated XML: it does not end with </mediawiki>",
    "stale_index": lambda p: rf"{str(p).replace('multistream.xml', 'multistream-index.txt')}: offset \d+ is not the start of a bz2 stream of {p} \(the index of another dump\?\)",
}
READ_TIME_MESSAGES = {
    "corrupt_gz": lambda p: rf"{p}: corrupt gzip data in the stream starting at byte 0 \(within bytes \d+-\d+\)",
    "malformed_xml": lambda p: rf"{p}: malformed XML at line {_xml_line(p, '</titel>')}, column \d+, in the <page> at line \d+ .*mismatched tag",
}


@pytest.mark.parametrize("name", PLAN_TIME_MESSAGES)
def test_cut_input_fails_when_planning(name, bad_inputs):
    path = bad_inputs[name]
    with pytest.raises(InputError, match=PLAN_TIME_MESSAGES[name](path)):
        plan_work_items([str(path)])


@pytest.mark.parametrize("name", READ_TIME_MESSAGES)
def test_bad_input_fails_naming_file_and_position(name, bad_inputs):
    path = bad_inputs[name]
    with pytest.raises(InputError, match=READ_TIME_MESSAGES[name](path)):
        read_all(plan_work_items([str(path)]))


def test_cut_input_is_named_by_the_reader_too(bad_inputs):
    """A file cut or an index changed after planning (or a gzip file: it has no end marker)."""
    bz2_path, xml_path = bad_inputs["truncated_bz2"], bad_inputs["truncated_xml"]
    with pytest.raises(InputError, match=rf"{bz2_path}: truncated bz2 data: input ends at byte {bz2_path.stat().st_size} inside the stream starting at byte \d+"):
        read_all([WorkItem(str(bz2_path), "xml", lang="en")])
    with pytest.raises(InputError, match=rf"{xml_path}: malformed XML at line \d+, column \d+, in the <page> at line \d+ \('.*'\) .*: (no element found|unclosed token)"):
        read_all([WorkItem(str(xml_path), "xml", lang="en")])
    stale = bad_inputs["stale_index"]
    with pytest.raises(InputError, match=rf"{stale}: not bz2 data at byte 99 \(a stale multistream index\?\): it starts with b'.*', a bz2 stream with b'BZh'"):
        read_all([WorkItem(str(stale), "xml", 99, 400, lang="en")])
    with pytest.raises(InputError, match=rf"{stale}: the work item ends at byte 400, inside the bz2 stream starting at byte 0 \(a stale multistream index\?\)"):
        read_all([WorkItem(str(stale), "xml", 0, 400, lang="en")])


def test_malformed_index_line_is_named(input_variants, tmp_path, make_multistream, sample_xml):
    dump, index = make_multistream(sample_xml["ko"], tmp_path)
    index.write_bytes(bz2.compress(bz2.decompress(index.read_bytes()) + b"garbage line\n"))
    n = bz2.decompress(index.read_bytes()).count(b"\n")
    with pytest.raises(InputError, match=rf"{index}:{n}: expected 'offset:page_id:title'"):
        plan_work_items([str(dump)])


def test_malformed_pages_are_marked_not_raised(sample_pages):
    bad = {p.title: p for p in sample_pages["en"] if p.error}
    assert bad["Brennock/Old revision"].error == "non-integer <id> '41x'" and bad["Brennock/Old revision"].page_id == -1
    assert bad["Harbour Lights (novel)"].error.startswith("missing <text>")
    assert all(len([p for p in pages if p.error]) >= 1 for pages in sample_pages.values())


def test_malformed_rows_are_marked_with_their_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = [
        {"id": 1, "title": "ok", "text": "fine", "lang": "en"},
        "{not json",
        {"id": "7a", "text": "x", "lang": "en"},
        {"id": 3, "title": "no text", "lang": "en"},
        [1, 2],
        {"id": 4, "text": 5, "lang": "en"},
        '{"id": 5, "text": "a \\ud800 b", "lang": "en"}',
    ]
    path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n\n")
    pages = list(read_pages(WorkItem(str(path), "jsonl", lang="en")))
    assert [(p.source.rsplit(":", 1)[1], p.error is None) for p in pages] == [
        ("1", True), ("2", False), ("3", False), ("4", False), ("5", False), ("6", False), ("7", False)
    ]
    assert [p.error for p in pages[1:]] == [
        "invalid JSON at line 2, column 2: Expecting property name enclosed in double quotes", "non-integer id '7a'",
        "missing text", "expected a JSON object at line 5, got list", "text is int, not a string",
        "text has a lone surrogate U+D800 at character 2",
    ]


# --- memory --------------------------------------------------------------------------------


def peak_bytes(path) -> tuple[int, int]:
    """(pages, peak traced bytes) of streaming through a dump without keeping its pages."""
    tracemalloc.start()
    try:
        pages = sum(1 for item in plan_work_items([str(path)]) for _ in read_pages(item))
        return pages, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_as_the_dump_grows(tmp_path, make_synthetic_dump):
    # gzip, not bz2: bz2 takes seconds to compress these repetitive pages (the reader is the same).
    small = make_synthetic_dump(tmp_path / "small-pages-articles.xml.gz", 600)
    large = make_synthetic_dump(tmp_path / "large-pages-articles.xml.gz", 2400)
    (n_small, peak_small), (n_large, peak_large) = peak_bytes(small), peak_bytes(large)
    assert (n_small, n_large) == (600, 2400)
    assert large.stat().st_size > 3.5 * small.stat().st_size
    # Streaming: the peak is a read block, its decompressed piece and its pages, not the dump
    # (measured: about 2.1 MB for both; 11 MB of XML in the large one).
    assert peak_large < 1.25 * peak_small + 256 * 1024, (peak_small, peak_large)


@pytest.mark.parametrize("codec", ["bz2", "gzip"])
def test_decompressed_pieces_are_bounded_whatever_the_ratio(codec, tmp_path):
    data = b"<page>" + b"a" * (12 << 20) + b"</page>"  # compresses ~1000x
    path = tmp_path / f"zeros.{'bz2' if codec == 'bz2' else 'gz'}"
    path.write_bytes(bz2.compress(data) if codec == "bz2" else gzip.compress(data))
    pieces = list(sources._decoded_chunks(str(path), codec))
    assert b"".join(pieces) == data and max(map(len, pieces)) <= sources._OUT_BYTES
