"""pipeline/sources/mediawiki.py: every compression of a dump yields the plain dump's pages with
their positions, the dump's language and <siteinfo> names, malformed pages marked and malformed
XML named."""

import gzip

import pytest

from pipeline.sources import InputError, WorkItem, plan_work_items, read_pages
from pipeline.sources.common import SiteInfo


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


# --- <siteinfo>: the dump's namespace names, carried by every work item and page -----------------
DE_NAMES = ((-2, "Medium"), (6, "Datei"), (14, "Kategorie"))  # pipeline/sample/dewiki-*.xml: the names the cleaner reads


def _without_siteinfo(xml_path, out_dir):
    text = xml_path.read_text(encoding="utf-8")
    out = out_dir / xml_path.name
    out.write_text(text[: text.index("<siteinfo>")] + text[text.index("</siteinfo>") + len("</siteinfo>") :], encoding="utf-8")
    return out


def test_siteinfo_names_are_read_once_and_shared_by_every_page(sample_xml):
    (item,) = plan_work_items([str(sample_xml["de"])])
    pages = list(read_pages(item))
    assert item.site.namespaces == DE_NAMES and all(p.site is item.site for p in pages)  # one object, by reference
    assert (2, "Benutzer") in item.site.prefixes and (0, "") not in item.site.prefixes  # every name, for title prefixes
    hand_made = list(read_pages(WorkItem(str(sample_xml["de"]), "xml", lang="de")))  # read from the stream
    assert {p.site for p in hand_made} == {item.site} and len({id(p.site) for p in hand_made}) == 1


@pytest.mark.parametrize("per_item", [1, 2])
def test_every_multistream_range_gets_the_header_streams_names(per_item, sample_xml, make_multistream, tmp_path):
    dump, _ = make_multistream(sample_xml["de"], tmp_path, pages_per_stream=2)
    items = plan_work_items([str(dump)], streams_per_item=per_item)
    assert len(items) > 2 and all(it.start > 0 for it in items[1:])  # ranges without the header stream
    site = plan_work_items([str(sample_xml["de"])])[0].site
    assert site.namespaces == DE_NAMES and all(it.site == site for it in items)
    assert all(p.site == site for it in reversed(items) for p in read_pages(it))
    # A range made by hand, without the planned site, reads the header stream itself.
    bare = WorkItem(items[-1].path, "xml", items[-1].start, items[-1].end, "de")
    pages = list(read_pages(bare))
    assert pages and all(p.site == site for p in pages)


def test_an_input_without_siteinfo_has_no_site(sample_xml, make_multistream, input_variants, tmp_path):
    plain = _without_siteinfo(sample_xml["de"], tmp_path)
    (item,) = plan_work_items([str(plain)])
    assert item.site is None and item.lang == "de" and {p.site for p in read_pages(item)} == {None}
    dump, _ = make_multistream(plain, tmp_path / "multistream", pages_per_stream=2)
    items = plan_work_items([str(dump)])
    assert len(items) > 1 and {it.site for it in items} == {None}
    assert {p.site for it in items for p in read_pages(it)} == {None}
    rows = plan_work_items([str(input_variants["jsonl"]), str(input_variants["parquet"])])
    assert {p.site for it in rows for p in read_pages(it)} == {None}


def test_only_the_namespaces_the_cleaner_reads_are_kept(tmp_path):
    """File (6), Media (-2) and Category (14), names stripped, for the cleaner; every namespace but
    the main one for title prefixes; a namespace without a name and one with a key that is not a
    number are skipped. (No xml:lang, and a page right after the header:
    reading the header when planning makes no page, which would have no language yet.)"""
    path = tmp_path / "cswiki-20261101-pages-articles.xml"
    path.write_text(
        '<mediawiki><siteinfo><namespaces>'
        '<namespace key="-2" case="first-letter">Média</namespace><namespace key="0" case="first-letter" />'
        '<namespace key="6" case="first-letter"> Soubor </namespace><namespace key="x">Bad</namespace>'
        '<namespace key="10" case="first-letter">Šablona</namespace><namespace key="14" case="first-letter">Kategorie</namespace>'
        '</namespaces></siteinfo><page><title>A</title><ns>0</ns><id>1</id><revision><text>a</text></revision></page>'
        '</mediawiki>', encoding="utf-8")
    (item,) = plan_work_items([str(path)], lang="cs")
    assert item.site == SiteInfo(((-2, "Média"), (6, "Soubor"), (14, "Kategorie")),
                                 ((-2, "Média"), (6, "Soubor"), (10, "Šablona"), (14, "Kategorie")))
    assert [p.site for p in read_pages(item)] == [item.site]
