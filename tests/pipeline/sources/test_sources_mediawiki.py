"""pipeline/sources/mediawiki.py: every compression of a dump yields the plain dump's pages with
their positions, the dump's language, malformed pages marked and malformed XML named."""

import gzip

import pytest

from pipeline.sources import InputError, plan_work_items, read_pages


@pytest.mark.parametrize("kind", ["xml_bz2", "xml_gz", "multistream"])
def test_compressed_and_multistream_dumps_yield_the_plain_dump_pages(kind, input_variants, sample_pages, fields, read_all):
    pages = read_all(plan_work_items([str(input_variants[kind])]))
    assert [fields(p) for p in pages] == [fields(p) for p in sample_pages["en"]]


def test_multi_member_gzip_is_read_whole(sample_xml, sample_pages, tmp_path, fields, read_all):
    data = sample_xml["ru"].read_bytes()
    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]  # three gzip members, as `cat a.gz b.gz` makes
    path = tmp_path / "ruwiki-20261101-pages-articles.xml.gz"
    path.write_bytes(b"".join(gzip.compress(data[a:b]) for a, b in zip(cut, cut[1:])))
    assert [fields(p) for p in read_all(plan_work_items([str(path)]))] == [fields(p) for p in sample_pages["ru"]]


def test_sample_pages_carry_their_position(sample_pages, sample_xml):
    first = sample_pages["en"][0]
    lines = sample_xml["en"].read_text(encoding="utf-8").splitlines()
    path, line = first.source.rsplit(":", 1)
    assert path == str(sample_xml["en"]) and lines[int(line) - 1].strip() == "<page>"


def test_language_precedence_for_dumps(sample_xml, tmp_path):
    assert plan_work_items([str(sample_xml["de"])], lang="fr")[0].lang == "de"  # xml:lang wins
    no_lang = tmp_path / "xxwiki-20261101-pages-articles.xml"
    no_lang.write_text(sample_xml["en"].read_text(encoding="utf-8").replace(' xml:lang="en"', "", 1), encoding="utf-8")
    item = plan_work_items([str(no_lang)], lang="sco")[0]
    assert item.lang == "sco" and {p.lang for p in read_pages(item)} == {"sco"}
    with pytest.raises(InputError, match=f"{no_lang}: no language"):
        plan_work_items([str(no_lang)])


def test_malformed_pages_are_marked_not_raised(sample_pages):
    bad = {p.title: p for p in sample_pages["en"] if p.error}
    assert bad["Brennock/Old revision"].error == "non-integer <id> '41x'" and bad["Brennock/Old revision"].page_id == -1
    assert bad["Harbour Lights (novel)"].error.startswith("missing <text>")
    assert all(len([p for p in pages if p.error]) >= 1 for pages in sample_pages.values())


def _xml_line(path, needle):
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


# name in bad_inputs -> the message expected, as a function of the file's path: seen when
# reading (the cut files seen when planning: test_sources_plan.py).
READ_TIME_MESSAGES = {
    "corrupt_gz": lambda p: rf"{p}: corrupt gzip data in the stream starting at byte 0 \(within bytes \d+-\d+\)",
    "malformed_xml": lambda p: rf"{p}: malformed XML at line {_xml_line(p, '</titel>')}, column \d+, in the <page> at line \d+ .*mismatched tag",
}


@pytest.mark.parametrize("name", READ_TIME_MESSAGES)
def test_bad_input_fails_naming_file_and_position(name, bad_inputs, read_all):
    path = bad_inputs[name]
    with pytest.raises(InputError, match=READ_TIME_MESSAGES[name](path)):
        read_all(plan_work_items([str(path)]))
