"""pipeline/wikitext/disambiguation.py: disambiguation pages are an outcome of their own, told by
the __DISAMBIG__ magic word and each wiki's disambiguation templates; set-index articles, hatnotes
and every other page are untouched; `--keep-disambiguation` keeps them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contract import schema
from pipeline.preprocess_config import PreprocessConfig
from pipeline.sources import RawPage, WorkItem, read_pages
from pipeline.wikitext.clean import CleanOptions, clean_page
from pipeline.wikitext.disambiguation import marker

ROOT = Path(__file__).resolve().parents[3]

# The shape of pywikibot's test export tests/data/xml/pair-0.10.xml: "X may refer to:", a list of
# links and enwiki's {{geodis}}, then a long comment (made-up names here).
DAB = ("'''Kestrel, Mira''' may refer to:\n*[[Kestrel, Upper Mira]]\n*[[Kestrel (Lower Mira), Mira]]\n\n{{geodis}}\n\n"
       "<!-- Long comment to avoid being listed on short pages" + " " * 100 + "-->")


def page(text: str, lang: str = "en", title: str = "Kestrel, Mira") -> RawPage:
    return RawPage(page_id=1, title=title, ns=0, redirect=False, text=text, lang=lang, source="test")


@pytest.mark.parametrize("lang, text", [
    ("en", "{{Disambiguation}}"), ("en", "{{disambiguation|geo|hndis}}"), ("en", "{{Dab}}"), ("en", "{{geodis}}"),
    ("en", "{{Hndis|Smith, John}}"), ("en", "{{Human name disambiguation}}"), ("en", "{{Template:Place_name disambiguation}}"),
    ("en", "{{ Number disambiguation\n}}"), ("xx", "{{Disambig}}"), ("xx", "__DISAMBIG__"), ("de", "{{Begriffsklärung}}"),
    ("de", "__BEGRIFFSKLÄRUNG__"), ("fr", "{{Homonymie}}"), ("ru", "{{неоднозначность}}"), ("uk", "{{Неоднозначність}}"),
    ("zh", "{{消歧义}}"), ("zh", "{{消歧義}}"), ("zh", "__消歧义__"), ("ja", "{{Aimai}}"), ("ja", "{{曖昧さ回避}}"),
    ("ko", "{{동음이의}}"), ("ar", "{{توضيح}}"), ("hi", "{{बहुविकल्पी शब्द}}"), ("vi", "{{Trang định hướng}}"),
])
def test_each_wikis_marks_make_a_disambiguation_page(lang, text):
    wikitext = f"'''X''' may refer to:\n* [[X (a)]]\n* [[X (b)]]\n{text}\n"
    mark = marker(wikitext, lang)
    assert mark and mark.strip("{}_").replace(" ", "").casefold() in text.replace("_", "").replace(" ", "").casefold()
    result = clean_page(page(wikitext, lang))
    assert (result.outcome, result.text, result.reason) == ("disambiguation", None, f"disambiguation page: {mark}")


@pytest.mark.parametrize("lang, text", [
    # set-index articles: lists of people or ships of a name, with prose about the name (enwiki WP:SETINDEX)
    ("en", "{{surname}}"), ("en", "{{given name}}"), ("en", "{{shipindex}}"), ("en", "{{Set index article}}"),
    ("ru", "{{Фамилия}}"), ("en", "{{Dmbox|type=setindex}}"),
    # hatnotes and tags of articles, not marks of a disambiguation page
    ("en", "{{About|the drink|other uses|Tea (disambiguation)}}"), ("en", "{{Other uses}}"),
    ("en", "a link{{Disambiguation needed|date=May 2020}}"), ("de", "{{Begriffsklärungshinweis}}"),
    ("en", "{{Disambig-Class}}"), ("en", "{{dablink|x}}"),
    # another wiki's template: {{Homonymie}} is frwiki's, {{Dab}} enwiki's and jawiki's
    ("en", "{{Homonymie}}"), ("de", "{{Dab}}"),
    # a mark that a reader never sees, and a magic word in another case than MediaWiki reads
    ("en", "<!-- {{disambiguation}} -->"), ("en", "__disambig__"),
])
def test_set_index_articles_hatnotes_and_other_marks_are_not_disambiguation(lang, text):
    assert marker(f"'''X''' is a surname.\n{text}\n", lang) is None
    assert clean_page(page(f"'''X''' is a surname.\n{text}\n", lang)).outcome == "kept"


def test_the_reason_names_the_mark_and_the_flag_keeps_the_page():
    result = clean_page(page(DAB))
    assert (result.outcome, result.reason) == ("disambiguation", "disambiguation page: {{geodis}}")
    kept = clean_page(page(DAB), CleanOptions(keep_disambiguation=True))
    assert kept.outcome == "kept" and kept.text == "Kestrel, Mira may refer to:\nKestrel, Upper Mira\nKestrel (Lower Mira), Mira"
    assert CleanOptions.of(PreprocessConfig(keep_disambiguation=True)).keep_disambiguation
    assert not CleanOptions.of(PreprocessConfig()).keep_disambiguation
    # a redirect stays a redirect, a talk page a non-article, whatever they hold
    assert clean_page(RawPage(2, "Talk:X", 1, False, "{{Disambiguation}}", "en", "test")).outcome == "non_article"
    assert clean_page(page("#REDIRECT [[X]]\n{{R from disambiguation}}\n{{disambiguation}}")).outcome == "redirects"


def _sample_and_real_pages() -> list[RawPage]:
    files = sorted((ROOT / "pipeline" / "sample").glob("*wiki-*-pages-articles.xml"))
    pages = [p for f in files for p in read_pages(WorkItem(str(f), "xml", lang=f.name.split("wiki-")[0]))]
    return pages + [p for f in sorted((ROOT / "tests" / "data" / "wiki").glob("*.xml.bz2"))
                    for p in read_pages(WorkItem(str(f), "xml"))]


def test_only_the_disambiguation_pages_change_on_the_sample_and_the_real_pages():
    """Every page cleans as with --keep-disambiguation but the disambiguation pages: the sample's one
    per language (each with its wiki's template) and the four of the enwiki excerpt."""
    dabs = []
    for p in _sample_and_real_pages():
        default, kept = clean_page(p), clean_page(p, CleanOptions(keep_disambiguation=True))
        if default.outcome == "disambiguation":
            assert kept.outcome == "kept" and kept.text
            dabs.append((p.lang, p.title, default.reason.removeprefix("disambiguation page: ")))
        else:
            assert default == kept, p.title
    assert sorted(dabs) == sorted([
        ("ar", "عطارد (توضيح)", "{{توضيح}}"), ("de", "Merkur", "{{Begriffsklärung}}"),
        ("en", "Mercury", "{{Disambiguation}}"), ("hi", "बुध (बहुविकल्पी)", "{{बहुविकल्पी शब्द}}"),
        ("ko", "수성 (동음이의)", "{{동음이의}}"), ("ru", "Меркурий", "{{неоднозначность}}"),
        ("zh", "水星 (消歧义)", "{{disambig}}"),
        ("en", "Austin (disambiguation)", "{{disambiguation}}"), ("en", "Ada", "{{Disambiguation}}"),
        ("en", "Argument (disambiguation)", "{{disambiguation}}"), ("en", "Aa River", "{{geodis}}")])


# --- through the CLI, as README shows it ------------------------------------------------------------

# pywikibot's tests/data/xml/pair-0.10.xml in shape: an article whose first revision was a redirect and
# whose last is a disambiguation page, and its talk page; pages_meta_history-style, two revisions each.
EXPORT = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <dbname>enwiki</dbname>
    <case>first-letter</case>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Talk</namespace>
    </namespaces>
  </siteinfo>
{pages}</mediawiki>
"""
PAGE = """  <page>
    <title>{title}</title>
    <ns>{ns}</ns>
    <id>{id}</id>
    <revision>
      <id>{id}1</id>
      <model>wikitext</model>
      <format>text/x-wiki</format>
      <text xml:space="preserve">#REDIRECT [[Kestrel, Upper Mira]]</text>
    </revision>
    <revision>
      <id>{id}2</id>
      <parentid>{id}1</parentid>
      <model>wikitext</model>
      <format>text/x-wiki</format>
      <text xml:space="preserve">{text}</text>
    </revision>
  </page>
"""
ARTICLE = ("'''Kestrel''' is a village on the Mira river. It has a church, a school and a harbour where "
           "fishing boats land their catch every morning. ") * 6


def _export(path: Path, with_article: bool) -> Path:
    from xml.sax.saxutils import escape

    pages = [("Kestrel, Mira", 0, 19252820, DAB), ("Talk:Kestrel, Mira", 1, 19252824, "{{DisambigProject}}")]
    pages += [("Kestrel", 0, 19252830, ARTICLE)] if with_article else []
    path.write_text(EXPORT.format(pages="".join(PAGE.format(title=t, ns=ns, id=i, text=escape(x))
                                                for t, ns, i, x in pages)), encoding="utf-8")
    return path


def canine(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


FAST = ["--seq-len", "128", "--vocab-size", "200", "--validation-fraction", "0"]


@pytest.mark.slow  # the Beam job end to end, four times
def test_canine_preprocess_counts_a_disambiguation_page_and_keeps_it_only_when_asked(tmp_path):
    alone = _export(tmp_path / "enwiki-pair.xml", with_article=False)
    # The user's run: the export's one article was a training example. Now nothing is, and the
    # refusal counts the page by its outcome.
    done = canine("preprocess", alone, "--output", "out-alone", *FAST, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "none of the 2 pages read was kept (1 non_article, 1 disambiguation" in done.stderr
    kept = canine("preprocess", alone, "--output", "out-kept", "--keep-disambiguation", *FAST, "--json", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr[-3000:]
    manifest = json.loads(kept.stdout)
    assert manifest["config"]["keep_disambiguation"] is True
    assert {k: manifest["languages"]["en"][k] for k in ("kept", "disambiguation", "non_article")} == {
        "kept": 1, "disambiguation": 0, "non_article": 1}

    both = _export(tmp_path / "enwiki-both.xml", with_article=True)
    done = canine("preprocess", both, "--output", "out", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((tmp_path / "out" / schema.MANIFEST).read_text(encoding="utf-8"))
    en = manifest["languages"]["en"]
    assert manifest["config"]["keep_disambiguation"] is False
    assert {k: en[k] for k in ("pages_read", "kept", "disambiguation", "non_article")} == {
        "pages_read": 3, "kept": 1, "disambiguation": 1, "non_article": 1}
    shown = canine("inspect", "out", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    head, row = [line.split() for line in shown.stdout.splitlines() if line.split()[:1] in (["lang"], ["en"])][:2]
    assert dict(zip(head, row))["disambig"] == "1" and dict(zip(head, row))["kept"] == "1"
    assert canine("validate", "out", cwd=tmp_path).returncode == 0
