"""pipeline/wikitext/endmatter.py: end-matter sections are dropped and counted, on the listed wikis by their
titles and on any other by their titles' words or their bodies; prose and works lists are kept."""

import pytest

from pipeline.wikitext.clean import CleanOptions, Headings, clean_wikitext
from pipeline.wikitext.endmatter import END_MATTER, NONE, STRONG, is_end_matter, normalize, title_form

# References, Notes, Bibliography, Further reading, External links, See also, as each wiki titles them.
TITLES = {
    "en": ["References", "Notes", "Bibliography", "Further reading", "External links", "See also"],
    "de": ["Einzelnachweise", "Anmerkungen", "Literatur", "Weiterführende Literatur", "Weblinks", "Siehe auch"],
    "fr": ["Références", "Notes", "Bibliographie", "Pour approfondir", "Liens externes", "Voir aussi"],
    "es": ["Referencias", "Notas", "Bibliografía", "Lecturas adicionales", "Enlaces externos", "Véase también"],
    "ru": ["Примечания", "Комментарии", "Литература", "Дополнительная литература", "Ссылки", "См. также"],
    "zh": ["参考文献", "注释", "书目", "延伸阅读", "外部链接", "参见"],
    "ja": ["出典", "脚注", "参考文献", "関連文献", "外部リンク", "関連項目"],
    "ko": ["각주", "주석", "참고 문헌", "더 읽을거리", "외부 링크", "같이 보기"],
    "ar": ["المراجع", "ملاحظات", "ببليوغرافيا", "قراءات إضافية", "وصلات خارجية", "انظر أيضًا"],
    "hi": ["सन्दर्भ", "टिप्पणियाँ", "ग्रन्थसूची", "अतिरिक्त पठन", "बाहरी कड़ियाँ", "इन्हें भी देखें"],
}
BODY = {"en": "History", "de": "Geschichte", "fr": "Histoire", "es": "Historia", "ru": "История", "zh": "历史",
        "ja": "歴史", "ko": "역사", "ar": "التاريخ", "hi": "इतिहास"}


def test_every_language_has_a_table():
    assert set(END_MATTER) == set(TITLES)


@pytest.mark.parametrize("lang", TITLES)
def test_titles_are_end_matter_in_their_language(lang):
    for title in TITLES[lang]:
        assert is_end_matter(title, lang), (lang, title)
        assert is_end_matter(f" {title.upper()}: ", lang), (lang, title)  # case, spaces and a colon do not matter
    assert not is_end_matter(BODY[lang], lang)


@pytest.mark.parametrize("lang", TITLES)
def test_end_matter_sections_are_dropped_and_counted(lang):
    heads = "".join(f"== {t} ==\n* [[Item {i}]]\n" for i, t in enumerate(TITLES[lang]))
    wikitext = f"Lead.\n== {BODY[lang]} ==\nBody text.\n{heads}"
    dropped = {}
    assert clean_wikitext(wikitext, lang, CleanOptions(), dropped) == f"Lead.\n{BODY[lang]}\nBody text."
    assert dropped == {"end_matter": 6}
    kept = clean_wikitext(wikitext, lang, CleanOptions(keep_end_matter=True), {})
    assert kept.split("\n")[3:] == [line for t in TITLES[lang] for line in (t, f"Item {TITLES[lang].index(t)}")]


def test_subsections_go_with_their_end_matter_and_the_next_section_comes_back():
    wikitext = ("Lead.\n== Annexes ==\n=== Bibliographie ===\n* Livre\n=== Autre ===\ntexte\n"
                "== Histoire ==\nTexte.\n")
    dropped = {}
    assert clean_wikitext(wikitext, "fr", CleanOptions(), dropped) == "Lead.\nHistoire\nTexte."
    assert dropped == {"end_matter": 3}


def test_a_title_of_another_wiki_is_not_end_matter_here():
    assert is_end_matter("Literatur", "de") and not is_end_matter("Literature", "en")
    assert is_end_matter("Weblinks", "xx")  # a language without a table: every table's titles


# On a real zhwiki export the hand list alone kept these, and pages of ISBN lists became text.
ZH_KEPT_BEFORE = ["参考书目", "研究書目", "扩展阅读", "參考著作", "参考网址", "註記"]
BOOKS = ("* Dupont, Jean. ''Histoire''. Paris : Gallimard, 1990. ISBN 2-07-011111-1\n"
         "* Kowalski, J. ''Dzieje''. PWN, 2001.\n")


@pytest.mark.parametrize("title", ZH_KEPT_BEFORE)
def test_zh_bibliography_titles_nobody_listed_are_dropped(title):
    wikitext = f"导言。\n== 历史 ==\n正文。\n== {title} ==\n{BOOKS}"
    dropped, headings = {}, Headings()
    assert clean_wikitext(wikitext, "zh", CleanOptions(), dropped, headings) == "导言。\n历史\n正文。"
    assert dropped == {"end_matter": 1} and headings.dropped == [title]


# A wiki without a line in _TITLES: its end matter is found by the title's words, in any script.
BY_FORM = ["Bibliografía", "Kaynakça", "Linki zewnętrzne", "Ver também", "Примітки", "Джерела", "Παραπομπές",
           "Εξωτερικοί σύνδεσμοι", "קישורים חיצוניים", "المراجع", "پیوند به بیرون", "Aiheesta muualla",
           "Lecturas adicionales", "Referințe", "Tham khảo", "参考書目", "外部リンク", "참고 문헌", "ಹೊರಗಿನ ಸಂಪರ್ಕಗಳು",
           "बाह्य दुवे", "อ้างอิง", "Notes and references", "Sources"]
# Prose titles that share a word with end matter, or name the subject's works: never end matter by title.
NOT_BY_FORM = ["History", "Cultural references", "Sources of the Nile", "Referendum", "Reading", "Works",
               "Selected works", "Publications", "作品", "著作", "生涯", "名称来源", "Literature", "Literatur",
               "منابع طبیعی", "Linkage", "Primary sources"]


@pytest.mark.parametrize("title", BY_FORM)
def test_a_title_of_end_matter_words_is_end_matter_on_any_wiki(title):
    assert title_form(normalize(title)) == STRONG, title
    assert is_end_matter(title, "xx") and is_end_matter(title, "en") and is_end_matter(title, "zh")


@pytest.mark.parametrize("title", NOT_BY_FORM)
def test_prose_titles_are_not_end_matter_by_their_title(title):
    assert title_form(normalize(title)) != STRONG, title
    assert not is_end_matter(title, "xx" if title != "Literatur" else "en")


def test_every_listed_title_is_also_found_by_its_form():
    """The form rule knows the ten listed wikis' titles without their lines: it is what a wiki
    nobody listed gets; frwiki's "Annexes" only by its line (a treaty's annexes are content)."""
    for lang, titles in END_MATTER.items():
        for title in titles - {"annexes"}:
            assert title_form(title) != NONE, (lang, title)
    assert title_form("annex i") == NONE


PROSE = "Die Stadt hat eine lange Geschichte, die im Mittelalter beginnt und bis heute reicht. " * 3


@pytest.mark.parametrize("body, end", [
    (BOOKS, True),  # an ISBN list under a title nobody knows
    ("Einige Bücher:\n" + BOOKS, True),  # an intro line is not prose enough
    ("* [http://example.org Offizielle Seite]\n* [https://example.net Archiv]\n{{Normdaten|TYP=g}}\n", True),
    ("* {{cite book |last=Smith |title=Things |year=1990}}\n* {{Cytuj książkę |autor=Nowak |tytuł=Rzeczy}}\n", True),
    (PROSE + "\n" + BOOKS, False),  # a paragraph and a list: prose
    (PROSE + " Siehe http://example.org.\n", False),  # a paragraph with a URL is prose
    ("Short text.{{citation needed|date=May 2015}}\n\nMore short text.{{citation needed|date=May 2015}}\n", False),
    ("* ''Der Weg'' (1990)\n* ''Die Zeit'' (2001)\n", False),  # titles with years: a works list
    ("* [[Ort A]]\n* [[Ort B]]\n", False),  # a list of links, before any end matter
])
def test_a_body_of_citations_is_end_matter_whatever_its_title(body, end):
    assert is_end_matter("Lorem ipsum", "xx", body) is end


def test_literature_is_a_reading_list_only_by_its_body():
    """"Literature" is dewiki's reading list but a section about literature on enwiki or in a
    country's Culture section: on a wiki without a line, its body decides, a year counting as a citation."""
    books = "* Jan Novák: ''Dějiny''. Praha 1990.\n* Petr Svoboda: ''Město''. Brno 2004.\n"
    for title in ("Literature", "Literatur", "Literatura", "Литература", "Kirjallisuutta"):
        assert is_end_matter(title, "xx", books) and not is_end_matter(title, "xx", PROSE), title
    assert not is_end_matter("Literature", "en", PROSE) and is_end_matter("Literatur", "de", PROSE)  # de lists it


def test_works_lists_are_content_even_with_isbns():
    assert not is_end_matter("Works", "xx", BOOKS) and not is_end_matter("作品", "xx", BOOKS)
    assert not is_end_matter("Books", "en", BOOKS)  # enwiki's Alain Connes: his own books, with ISBNs


def test_after_end_matter_a_list_without_prose_is_end_matter_too():
    wikitext = ("Lead.\n== Istorija ==\nTekst.\n== Nuorodos ==\n* [[Kita]]\n"  # nobody knows this title
                "== Šaltiniai ==\n" + BOOKS + "== Kitos ==\n* [[Kita]]\n* [[Trečia]]\n== Apie ==\n" + PROSE)
    dropped, headings = {}, Headings()
    text = clean_wikitext(wikitext, "xx", CleanOptions(), dropped, headings)
    assert text == f"Lead.\nIstorija\nTekst.\nNuorodos\nKita\nApie\n{PROSE.strip()}"
    assert headings.dropped == ["Šaltiniai", "Kitos"] and dropped == {"end_matter": 2}


def test_a_made_up_wiki_loses_its_end_matter_in_every_script():
    sections = [("History", PROSE, True), ("作品", "* 《路》（1990年）\n* 《时》（2001年）\n", True),
                ("生涯", "彼は1900年に生まれた。" * 5, True), ("Bibliografía", BOOKS, False),
                ("Dolor sit", BOOKS, False), ("Ссылки", "* [http://example.org Сайт]\n", False),
                ("参考书目", BOOKS, False), ("روابط خارجية", "* [http://example.org موقع]\n", False)]
    wikitext = "Lead.\n" + "".join(f"== {title} ==\n{body}\n" for title, body, _ in sections)
    dropped, headings = {}, Headings()
    text = clean_wikitext(wikitext, "xx", CleanOptions(), dropped, headings)
    assert headings.dropped == [title for title, _, kept in sections if not kept]
    assert [line for line in text.split("\n") if line in {t for t, _, _ in sections}] == ["History", "作品", "生涯"]
    assert headings.last_kept == "生涯" and dropped == {"end_matter": 5}


def test_a_marathi_reading_list_is_end_matter_and_literature_as_prose_is_not():
    # mrwiki's Maharashtra (tests/data/wiki/mrwiki-202305-excerpt.xml.bz2): "books on Maharashtra",
    # titles and authors without an ISBN, between the prose and "see also"
    assert is_end_matter("महाराष्ट्रावरील ग्रंथसाहित्य", "mr", "* महाराष्ट्र - लेखक प्रा. वि.पां. दांडेकर\n")
    assert not is_end_matter("साहित्य", "mr", "मराठी साहित्याची परंपरा मोठी आहे.\n")


# --- zh titles in any mix of simplified and traditional characters ---------------
# zhwiki's editors mix the two in one heading (MediaWiki converts each reader's view); a listed
# spelling finds every mix of it, by the fold of endmatter._HAN_FOLD.
MIXED = ["参見", "參见", "參見", "参见", "註释", "注釋", "註釋", "注释", "延伸閱读", "延伸阅讀", "延伸閱讀", "外部連結",
         "外部鏈接", "外部链結", "參考文献", "参考文獻", "參考資料", "参考資料", "參考资料", "相關条目", "相关條目",
         "參考來源", "参考來源", "參考来源", "腳註", "脚註", "書目"]


@pytest.mark.parametrize("title", MIXED)
def test_zh_end_matter_is_found_in_every_mix_of_simplified_and_traditional(title):
    assert is_end_matter(title, "zh")
    wikitext = f"导言。\n== 历史 ==\n正文。\n== {title} ==\n* [[某条目]]\n"
    dropped, headings = {}, Headings()
    assert clean_wikitext(wikitext, "zh", CleanOptions(), dropped, headings) == "导言。\n历史\n正文。"
    assert dropped == {"end_matter": 1} and headings.dropped == [title]


def test_the_fold_leaves_prose_titles_and_works_lists_alone():
    for title in ("历史", "歷史", "見解", "相關人物", "著書", "著书", "作品"):
        assert not is_end_matter(title, "zh"), title
    assert normalize("參見") == normalize("参见") == normalize("参見") != normalize("参照")


def test_the_fold_is_mediawikis_zh_hans_mapping_of_every_changed_character_of_the_words():
    """_HAN_FOLD's pairs against zhconv-rs (MediaWiki's ZhConversion tables, the `variants` extra):
    each traditional character becomes its simplified pair, and every Han character of the
    listed words, the rule-2 words and the works words that zh-hans changes has a pair."""
    zhconv = pytest.importorskip("zhconv_rs").zhconv
    from pipeline.wikitext import endmatter

    fold = {chr(k): v for k, v in endmatter._HAN_FOLD.items()}
    assert all(zhconv(t, "zh-hans") == s for t, s in fold.items())
    words = " ".join([*endmatter._TITLES.values(), endmatter._CJK_END, endmatter._CJK_START, endmatter._WORKS_RE.pattern])
    han = {c for c in words if "\u3400" <= c <= "\u9fff"}
    assert {c for c in han if zhconv(c, "zh-hans") != c} <= set(fold)
    assert {c for c in han for v in ("zh-hant", "zh-tw", "zh-hk") if zhconv(c, v) != c} <= set(fold.values())


@pytest.mark.slow  # the Beam job end to end
def test_canine_inspect_lists_a_zh_heading_once_after_convert(tmp_path):
    """README's commands on a zhwiki export whose "see also" is spelt four ways: every one is
    dropped, and with --convert zh=zh-hans `canine inspect` lists 参见 as dropped only (it was
    both dropped, 参见 and 參見, and kept, 参見 and 參见 converted)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    from xml.sax.saxutils import escape

    root = Path(__file__).resolve().parents[3]
    xml = (root / "pipeline" / "sample" / "zhwiki-20261101-pages-articles.xml").read_text(encoding="utf-8")
    body = "数学是研究数量、结构以及空间等概念的一门学科。" * 3
    texts = [f"{body}\n\n== 历史 ==\n{body}\n\n== {see} ==\n* [[某条目]]\n" for see in ("参见", "參見", "参見", "參见")]
    pages = "".join(
        f"  <page>\n    <title>页面{i}</title>\n    <ns>0</ns>\n    <id>{100 + i}</id>\n    <revision>\n"
        f"      <id>{1000 + i}</id>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
        f"      <text xml:space=\"preserve\">{escape(text)}</text>\n    </revision>\n  </page>\n"
        for i, text in enumerate(texts))
    src = tmp_path / "zhwiki-20261101-pages-articles.xml"
    src.write_text(xml[: xml.index("</siteinfo>") + len("</siteinfo>")] + "\n" + pages + "</mediawiki>\n",
                   encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root)}

    def canine(*args):
        done = subprocess.run([sys.executable, "-m", "jobs.cli", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()

    fast = ["--seq-len", "256", "--vocab-size", "300"]
    canine("preprocess", str(src), "--output", "written", *fast)
    canine("preprocess", str(src), "--output", "hans", "--convert", "zh=zh-hans", *fast)
    written, hans = canine("inspect", "written"), canine("inspect", "hans")
    assert "zh: last headings kept: 历史 4" in written and "zh: last headings kept: 历史 4" in hans, written + hans
    (line,) = [line for line in written if line.startswith("zh: end matter dropped: ")]
    assert sorted(line.removeprefix("zh: end matter dropped: ").split(", ")) == sorted(["参见 1", "參見 1", "参見 1", "參见 1"])
    assert "zh: end matter dropped: 参见 4" in hans
