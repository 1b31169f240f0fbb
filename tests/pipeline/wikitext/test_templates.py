"""pipeline/wikitext/templates.py: word-carrying templates render as their words; the rest is dropped and counted."""

import pytest

from contract import schema
from pipeline.wikitext import templates
from pipeline.wikitext.clean import CleanOptions, clean_wikitext, wikitext_to_text

RENDERED = {
    # conversions and numbers
    "{{convert|52419|sqmi|km2}}": "52,419 square miles",
    "{{convert|1|mi|km}}": "1 mile",
    "{{convert|5|mi|km|0|adj=on}}": "5-mile",
    "{{convert|2413|ft|0|abbr=on}}": "2,413 ft",
    "{{convert|5|to|10|km|sp=us}}": "5 to 10 kilometers",
    "{{convert|3|-|4|C|F}}": "3–4 degrees Celsius",
    "{{convert|22|e6acre|km2}}": "22 million acres",
    "{{cvt|100|m}}": "100 m",
    "{{convert|7|furlong}}": "7 furlong",  # a unit not in the table: as written
    "{{val|6.241|e=18|u=C}}": "6.241×10^18 C",
    "{{val|1.00794|(7)}}": "1.00794(7)",
    "{{frac|1|1|2}}": "1 1/2",
    "{{frac|3}}": "1/3",
    "{{chem|H|2|O}}": "H2O",
    "{{formatnum:1234567}}": "1,234,567",
    "{{coord|42|30|N|1|30|E|display=inline}}": "42°30′N 1°30′E",
    "{{coord|42|30|N|1|30|E|display=title}}": "",
    # language, transliteration, pronunciation
    "{{lang|grc|Ἀπόλλων}}": "Ἀπόλλων",
    "{{lang|fr}}": "",  # a code without text is not text
    "{{lang-sq|Shqipëri}}": "Shqipëri",
    "{{transl|ar|ALA|Allāh}}": "Allāh",
    "{{IPAc-en|ə|ˈ|p|ɒ|l|oʊ}}": "/əˈpɒloʊ/",
    "{{IPAc-en|US|ˈ|æ|,|UK|ˈ|ɑː}}": "US: /ˈæ/, UK: /ˈɑː/",
    "{{IPA-de|ˈbɛʁlɪn}}": "[ˈbɛʁlɪn]",
    "{{respell|ə|GLEE|teez}}": "ə-GLEE-teez",
    "{{Nihongo|Aikido|合気道|Aikidō}}": "Aikido (合気道, Aikidō)",
    "{{native name|ca|Principat d'Andorra}}": "Principat d'Andorra",
    # dates
    "{{birth date|1809|2|12}}": "February 12, 1809",
    "{{birth date|df=y|1885|4|3}}": "3 April 1885",
    "{{death date and age|1865|4|15|1809|2|12}}": "April 15, 1865 (aged 56)",
    "{{dts|1777|12}}": "December 1777",
    "{{as of|2014|lc=y}}": "as of 2014",
    "{{circa|1500}}": "c. 1500",
    "{{marriage|Mary Todd|1842|1865}}": "Mary Todd (m. 1842–1865)",
    # wrappers and characters
    "{{nowrap|5 km}}": "5 km",
    "{{small|(1st)}}": "(1st)",
    "{{sort|Smith|John Smith}}": "John Smith",
    "{{flag|Georgia (U.S. state)|name=Georgia}}": "Georgia",
    "{{ill|Foo|de|Fu}}": "Foo",
    "{{ill|Foo|de|Fu|lt=foos}}": "foos",  # enwiki shows lt= in place of the local title
    "{{USS|Enterprise|CV-6}}": "USS Enterprise (CV-6)",
    "{{'s}}": "'s",
    "{{snd}}": " – ",
    # other wikis' own names
    "{{仮リンク|名前|en|Name}}": "名前",
    "{{仮リンク|名前 (曖昧さ回避)|en|Name|label=名前}}": "名前",  # label= is what jawiki shows
    "{{仮リンク|名前|en|Name|redirect=1}}": "名前",
    "{{読み仮名|漢字|かんじ}}": "漢字（かんじ）",  # jawiki's full-width parentheses
    "{{読み仮名|漢字|かんじ|備考}}": "漢字（かんじ、備考）",
    "{{読み仮名_ruby不使用|'''漢字'''|かんじ|{{lang-en-short|kanji}}}}": "漢字（かんじ、kanji）",
    "{{読み仮名 ruby不使用|漢字|かんじ}}": "漢字（かんじ）",
    "{{読み仮名|漢字}}": "漢字",
    "{{読み|漢字|かんじ}}": "漢字",  # the reading is only read aloud
    # interlanguage links: each wiki's display parameter, else the local title
    "{{ill2|動物の言語|en|Animal language}}": "動物の言語",  # jawiki's redirect to 仮リンク
    "{{ill2|エジプトの首相|en|Prime Minister of Egypt|label=首相}}": "首相",
    "{{link-en|中文名|English name}}": "中文名",
    "{{link-en|中文名|English name|顯示文字}}": "顯示文字",  # zhwiki's 3rd parameter is the text shown
    "{{Link-ja|中文名|日本語名|d=顯示文字}}": "顯示文字",
    "{{le|中文名|English name}}": "中文名",
    "{{Internal link helper/de|中文名|Deutscher Name|顯示文字}}": "顯示文字",
    "{{tsl|en|Game map|本地條目|顯示}}": "顯示",
    "{{tsl|en|Game map|本地條目|}}": "本地條目",
    "{{tsl|en|Game map}}": "Game map",
    "{{Lien|fr=Secure FTP (logiciel)|lang=en|trad=Secure FTP (software)|texte=Secure FTP}}": "Secure FTP",
    "{{Lien|fr=Computer Systems Research Group|lang=en}}": "Computer Systems Research Group",
    "{{Lien|Titre français|lang=en}}": "Titre français",
    "{{lien|lang=en|trad=Oracle RAC}}": "Oracle RAC",  # no fr=: the foreign title
    "{{нп5|Тестовый клуб (футбольный клуб)|Тестовый клуб|de|Test FC}}": "Тестовый клуб",
    "{{нп3|Название|||Title}}": "Название",
    "{{iw|Лефевр, Роберт|Лефевр}}": "Лефевр",
    "{{не переведено|есть=:en:Flooding of the Nile|надо=Разлив Нила|текст=День разлива Нила|язык=англ.}}":
        "День разлива Нила",
    "{{не переведено|есть=:en:ofuda|надо=офуда|текст=|язык=en}}": "офуда",
    "{{iw|треба=Магдалена Фрех|мова=fr|є=Magdalena Fręch}}": "Магдалена Фрех",  # ukwiki's names
    "{{وصلة إنترويكي|عر=عنوان|تر=Title|لغ=en|نص=نص معروض}}": "نص معروض",
    "{{وصلة إنترويكي|عنوان|Title|en}}": "عنوان",
    "{{Lautschrift|ˈbɛʁlɪn}}": "[ˈbɛʁlɪn]",
}


@pytest.mark.parametrize("wikitext", RENDERED)
def test_word_carrying_templates_render_as_their_words(wikitext):
    assert wikitext_to_text(f"a {wikitext} b") == " ".join(f"a {RENDERED[wikitext]} b".split())


@pytest.mark.parametrize(
    "lang, wikitext, text",
    [
        # jawiki: the words are parameter 1 (or 1=); date= and title= are the tag's
        ("ja", "しかし、{{疑問点範囲|[[系統]]が判ってきた|date=2021年5月|title=古い}}。", "しかし、系統が判ってきた。"),
        ("ja", "{{独自研究範囲|[[病理地理学]]または|date=2020年10月}}疾病地理学", "病理地理学または疾病地理学"),
        ("ja", "{{要出典範囲|1=a=b である|date=2012年11月}}。", "a=b である。"),
        ("ja", "{{要検証範囲|検証すべき文|date=2020年1月}}。", "検証すべき文。"),
        # enwiki: text= or parameter 1
        ("en", "It {{citation needed span|text=was [[built]] in 1900|date=May 2020}}.", "It was built in 1900."),
        ("en", "It {{Citation needed span|was built|date=May 2020}}.", "It was built."),
        ("en", "It {{clarify span|text=was built|reason=When?|date=May 2020}}.", "It was built."),
    ],
)
def test_range_tags_keep_the_words_they_mark(lang, wikitext, text):
    dropped = {}
    assert clean_wikitext(wikitext, lang, CleanOptions(), dropped) == text
    assert dropped == {}  # nothing of them is counted as a dropped template


def test_per_wiki_names_win_over_the_common_table():
    assert wikitext_to_text("Il dit {{citation|bonjour}}.", "fr") == "Il dit « bonjour »."
    assert wikitext_to_text("He said {{citation|last=X|title=Y}}.", "en") == "He said."


def test_quotations_are_prose_on_their_own_lines():
    text = wikitext_to_text("Before.\n{{quote|text=A [[quoted]] line.|author=X}}\nAfter.")
    assert text == "Before.\nA quoted line.\nAfter."


@pytest.mark.parametrize(
    "name, lang, reason",
    [
        ("Infobox settlement", "en", "infoboxes"), ("Infobox Ort", "de", "infoboxes"),
        ("Карточка города", "ru", "infoboxes"), ("Персона", "ru", "infoboxes"), ("인물 정보", "ko", "infoboxes"),
        ("معلومات شخص", "ar", "infoboxes"), ("ज्ञानसन्दूक व्यक्ति", "hi", "infoboxes"),
        ("基礎情報 国", "ja", "infoboxes"), ("Ficha de persona", "es", "infoboxes"),
        ("Automatic taxobox", "en", "infoboxes"),
        ("Multiple image", "en", "images"), ("Gallery", "en", "galleries"), ("cite web", "en", "templates"),
        ("sfn", "en", "templates"), ("citation needed", "en", "templates"), ("#if:x", "en", "templates"),
        ("DEFAULTSORT:X", "en", "templates"), ("flagicon", "en", "templates"), ("anchor", "en", "templates"),
    ],
)
def test_dropped_templates_have_a_reason(name, lang, reason):
    assert templates.lookup(name, lang) == reason
    assert reason in schema.CONSTRUCT_DROPS
    dropped = {}
    clean_wikitext("Text {{%s|a=b}} here." % name, lang, CleanOptions(), dropped)
    assert dropped == {reason: 1}


@pytest.mark.parametrize(
    "wikitext, text",
    [
        ("He wrote {{smallcaps2|Lord}} twice.", "He wrote Lord twice."),  # inline, one plain parameter: kept
        ("Intro.\n{{Hatnote2|Other page}}\nText.", "Intro.\nText."),  # alone on its line: a hatnote
        ("A claim.{{Footnote2|Smith 2001}} Next.", "A claim. Next."),  # right after punctuation: a footnote
        ("a {{unknown|x|y}} b", "a b"),  # more than one parameter: meaning unknown
        ("a {{unknown|k=v}} b", "a b"),  # a named parameter: data
        ("a {{unknown|[[marked]] up}} b", "a b"),  # markup in it: not plain text
        ("a {{unknown|" + "x" * 81 + "}} b", "a b"),  # longer than a few words
    ],
)
def test_fallback_keeps_plain_text_only_inside_a_sentence(wikitext, text):
    assert wikitext_to_text(wikitext) == text


def test_fallback_drops_are_counted():
    dropped = {}
    clean_wikitext("a {{unknown|x|y}} b {{kept|z}} c", "en", CleanOptions(), dropped)
    assert dropped == {"templates": 1}


def test_numbered_parameters_count_as_positional():
    assert wikitext_to_text("{{lang|1=de|2=Wort}}") == "Wort"
    assert templates.call(templates.after_code, [("2", "x"), (None, "de")]) == "x"  # {{lang|2=x|de}}
