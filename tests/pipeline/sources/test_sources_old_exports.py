"""pipeline/sources/mediawiki.py on every export schema from 0.3 to 0.11: a page's namespace from its
<ns> or, where the schema has none (0.3-0.5), from its title's prefix and the <siteinfo> names (the
hand list without one); a page-level <redirect/> marks a redirect; the last revision is the text.

The exports are written here in each schema's shape (the element order and attributes of
MediaWiki's docs/export-0.N.xsd): same pages, so that every schema must give the same pages."""

import pytest

from pipeline.sources import plan_work_items, read_pages

# (title, namespace key, redirect target or None, text) of a German wiki's pages: names that only
# its <siteinfo> says (Benutzer, Portal), canonical ones (Talk, Image), an article with a colon
# in its title that names no namespace, a redirect.
PAGES = [
    ("Anarchismus", 0, None, "'''Anarchismus''' ist eine politische Ideenlehre."),
    ("Benutzer:Beispiel", 2, None, "Hallo."),
    ("Benutzer Diskussion:Beispiel", 3, None, "Eine Frage."),
    ("Portal:Philosophie", 100, None, "Willkommen."),
    ("Bild:Karte.png", 6, None, "Eine Karte."),
    ("Kategorie:Politik", 14, None, "Politik."),
    ("Star Wars: Episode IV", 0, None, "Ein Film von George Lucas aus dem Jahr 1977."),
    ("Anarchie", 0, "Anarchismus", "#WEITERLEITUNG [[Anarchismus]]"),
]
NAMESPACES = {-2: "Media", -1: "Spezial", 0: "", 1: "Diskussion", 2: "Benutzer", 3: "Benutzer Diskussion",
              4: "Wikipedia", 6: "Bild", 7: "Bild Diskussion", 10: "Vorlage", 14: "Kategorie", 100: "Portal"}
VERSIONS = ["0.3", "0.4", "0.5", "0.6", "0.8", "0.10", "0.11"]


def _v(version: str) -> tuple:
    return tuple(map(int, version.split(".")))


def export(version: str, pages=PAGES, siteinfo: bool = True, lang: str = "de") -> str:
    """An export in schema `version`'s shape: <ns> from 0.6, a page-level <redirect /> in 0.4 and
    0.5, <redirect title=".."/> from 0.6, a namespace's case attribute from 0.4, sha1 from 0.6."""
    v = _v(version)
    xmlns = f"http://www.mediawiki.org/xml/export-{version}/"
    out = [f'<mediawiki xmlns="{xmlns}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
           f'xsi:schemaLocation="{xmlns} http://www.mediawiki.org/xml/export-{version}.xsd" version="{version}" '
           f'xml:lang="{lang}">']
    if siteinfo:
        case = ' case="first-letter"' if v >= (0, 4) else ""
        names = "".join(f'\n      <namespace key="{k}"{case}>{n}</namespace>' if n else f'\n      <namespace key="{k}"{case} />'
                        for k, n in NAMESPACES.items())
        out.append(f"  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <base>http://de.wikipedia.org/wiki/Hauptseite</base>\n"
                   f"    <generator>MediaWiki 1.{5 + 2 * v[1]}</generator>\n    <case>first-letter</case>\n"
                   f"    <namespaces>{names}\n    </namespaces>\n  </siteinfo>")
    for i, (title, ns, target, text) in enumerate(pages, 1):
        page = [f"  <page>\n    <title>{title}</title>"]
        if v >= (0, 6):
            page.append(f"    <ns>{ns}</ns>")
        page.append(f"    <id>{i}</id>")
        if target and v >= (0, 6):
            page.append(f'    <redirect title="{target}" />')
        elif target and v >= (0, 4):
            page.append("    <redirect />")
        sha1 = "\n      <sha1>0000000000000000000000000000000</sha1>" if v >= (0, 6) else ""
        page.append(f"    <revision>\n      <id>{100 + i}</id>\n      <timestamp>2006-03-01T12:00:00Z</timestamp>\n"
                    f"      <contributor><username>Beispiel</username><id>7</id></contributor>\n"
                    f"      <comment>neu</comment>{sha1}\n      <text xml:space=\"preserve\">{text}</text>\n    </revision>\n  </page>")
        out.append("\n".join(page))
    out.append("</mediawiki>\n")
    return "\n".join(out)


def _read(path):
    return [(p.title, p.ns, p.redirect, p.error) for it in plan_work_items([str(path)]) for p in read_pages(it)]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_schema_gives_the_same_namespaces_and_redirects(version, tmp_path):
    path = tmp_path / f"dewiki-export-{version}-pages-articles.xml"
    path.write_text(export(version), encoding="utf-8")
    # Schema 0.3 has no page-level redirect flag: its redirect is found by its text, by the cleaner.
    redirect = {title: bool(target) and _v(version) >= (0, 4) for title, _, target, _ in PAGES}
    assert _read(path) == [(title, ns, redirect[title], None) for title, ns, _, _ in PAGES]


def test_without_siteinfo_the_canonical_names_and_the_hand_list_name_the_namespace(tmp_path):
    """No <siteinfo> (schemas 0.1-0.2, other wikis' exporters): MediaWiki's canonical English names
    and the cleaner's File and Category names in other languages; a name only the dump's own
    <siteinfo> would say (Benutzer, Portal) is then an article's title."""
    pages = [("Talk:Anarchism", 1, None, "a"), ("Image:Map.png", 6, None, "b"), ("Kategorie:Politik", 14, None, "c"),
             ("Bild:Karte.png", 6, None, "d"), ("Benutzer:Beispiel", 0, None, "e"), ("Help talk:Editing", 13, None, "f"),
             ("Anarchism", 0, None, "g")]
    path = tmp_path / "xxwiki-pages-articles.xml"
    path.write_text(export("0.3", pages, siteinfo=False, lang="en"), encoding="utf-8")
    assert _read(path) == [(title, ns, False, None) for title, ns, _, _ in pages]


def test_a_multistream_range_names_the_namespace_from_the_planned_siteinfo(tmp_path, make_multistream):
    """A range past byte 0 has no <siteinfo> of its own: the work item brings it."""
    src = tmp_path / "dewiki-20060301-pages-articles.xml"
    src.write_text(export("0.4"), encoding="utf-8")
    dump, _ = make_multistream(src, tmp_path / "ms", pages_per_stream=1)
    items = plan_work_items([str(dump)])
    assert len(items) == len(PAGES) and items[-1].start > 0
    assert _read(dump) == _read(src)


def test_the_last_revision_is_the_text_and_a_log_items_text_is_not(tmp_path):
    """A full-history export: every revision of a page, oldest first; the last one's text, or
    none if it was deleted. A <logitem>'s <text> (schema 0.4 log exports) is no page text."""
    rev = '<revision><id>{}</id><timestamp>2006-03-01T12:00:00Z</timestamp><contributor><ip>1.2.3.4</ip></contributor>{}</revision>'
    deleted = "<text deleted='deleted' />"
    path = tmp_path / "enwiki-pages-articles.xml"
    path.write_text(
        '<mediawiki version="0.4" xml:lang="en">'
        f'<page><title>A</title><id>1</id>{rev.format(1, "<text>old</text>")}{rev.format(2, "<text>new</text>")}</page>'
        f'<page><title>B</title><id>2</id>{rev.format(3, "<text>kept</text>")}{rev.format(4, deleted)}</page>'
        '<page><title>C</title><id>3</id><logitem><id>5</id><timestamp>2006-03-01T12:00:00Z</timestamp>'
        '<contributor><ip>1.2.3.4</ip></contributor><type>delete</type><action>delete</action><text>log</text></logitem></page>'
        '</mediawiki>', encoding="utf-8")
    pages = [p for it in plan_work_items([str(path)]) for p in read_pages(it)]
    assert [(p.title, p.text, p.error) for p in pages] == [
        ("A", "new", None),
        ("B", "", "missing <text> (no revision, or its text was deleted)"),
        ("C", "", "missing <text> (no revision, or its text was deleted)"),
    ]
