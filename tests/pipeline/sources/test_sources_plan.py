"""pipeline/sources/plan.py: globs and directories to work items, stable keys, fsspec URLs, and
the cut inputs seen before anything is read."""

import fsspec
import pytest

from pipeline.sources import InputError, plan_work_items, work_item_key


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


def test_memory_urls_are_planned_and_read(input_variants, sample_pages, fields, read_all):
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


# name in bad_inputs -> the message expected, as a function of the file's path. Cut files are
# seen from their last bytes when planning; the rest when reading (test_sources_mediawiki.py).
PLAN_TIME_MESSAGES = {
    "truncated_bz2": lambda p: rf"{p}: truncated bz2 file: it does not end with a bz2 end-of-stream marker \({p.stat().st_size} bytes",
    "truncated_xml": lambda p: rf"{p}: truncated XML: it does not end with </mediawiki>",
    "stale_index": lambda p: rf"{str(p).replace('multistream.xml', 'multistream-index.txt')}: offset \d+ is not the start of a bz2 stream of {p} \(the index of another dump\?\)",
}


@pytest.mark.parametrize("name", PLAN_TIME_MESSAGES)
def test_cut_input_fails_when_planning(name, bad_inputs):
    path = bad_inputs[name]
    with pytest.raises(InputError, match=PLAN_TIME_MESSAGES[name](path)):
        plan_work_items([str(path)])
