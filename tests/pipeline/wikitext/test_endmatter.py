"""pipeline/wikitext/endmatter.py: end-matter sections of every language the project names are dropped and counted."""

import pytest

from pipeline.wikitext.clean import clean_wikitext
from pipeline.preprocess_config import PreprocessConfig
from pipeline.wikitext.endmatter import END_MATTER, is_end_matter

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
    assert clean_wikitext(wikitext, lang, PreprocessConfig(), dropped) == f"Lead.\n{BODY[lang]}\nBody text."
    assert dropped == {"end_matter": 6}
    kept = clean_wikitext(wikitext, lang, PreprocessConfig(keep_end_matter=True), {})
    assert kept.split("\n")[3:] == [line for t in TITLES[lang] for line in (t, f"Item {TITLES[lang].index(t)}")]


def test_subsections_go_with_their_end_matter_and_the_next_section_comes_back():
    wikitext = ("Lead.\n== Annexes ==\n=== Bibliographie ===\n* Livre\n=== Autre ===\ntexte\n"
                "== Histoire ==\nTexte.\n")
    dropped = {}
    assert clean_wikitext(wikitext, "fr", PreprocessConfig(), dropped) == "Lead.\nHistoire\nTexte."
    assert dropped == {"end_matter": 3}


def test_a_title_of_another_wiki_is_not_end_matter_here():
    assert is_end_matter("Literatur", "de") and not is_end_matter("Literature", "en")
    assert is_end_matter("Weblinks", "xx")  # a language without a table: every table's titles
