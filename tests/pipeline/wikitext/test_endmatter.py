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
