"""pipeline/wikitext/variants.py: `-{...}-` as MediaWiki's LanguageConverter shows it, and its use in clean.py.

Cases marked "parser test" are adapted from MediaWiki's tests/parser/langParserTests.txt and
parserTests.txt (the zh / sr variant tests): the output there is HTML in one variant; here the
same markup, in the view named."""

import pytest

from pipeline.preprocess_config import PreprocessConfig
from pipeline.sources import RawPage
from pipeline.wikitext.clean import CleanOptions, clean_page, wikitext_to_text
from pipeline.wikitext.variants import CONVERTERS, check_variants, render

# (wikitext, lang, variant ("" = the wiki's own view), expected text, constructs counted)
CASES = {
    # what reached the training text verbatim from a real zhwiki export before variants.py
    "per-variant rules, zh view": ("生物和-{zh-hans:信息; zh-hant:資訊;}-領域", "zh", "", "生物和信息領域", 1),
    "raw text": ("天文學家-{于}-爾班·勒維耶", "zh", "", "天文學家于爾班·勒維耶", 1),
    "region rules fall back zh-hans, zh-hant, zh-cn": ("被探討於群、環、-{zh-cn:域;zh-tw:體}-等", "zh", "", "被探討於群、環、域等", 1),
    "empty markup": ("實驗研究因-{}-數值模式", "zh", "", "實驗研究因數值模式", 1),
    # a chosen variant and its fallbacks (ZhConverter::getVariantsFallbacks)
    "zh-hant picks its own": ("-{zh-hans:信息; zh-hant:資訊;}-", "zh", "zh-hant", "資訊", 1),
    "zh-hk falls back to zh-hant": ("-{zh-hans:信息; zh-hant:資訊;}-", "zh", "zh-hk", "資訊", 1),
    "zh-cn falls back to zh-hans": ("-{zh-hans:a;zh-hant:b;zh-tw:c}-", "zh", "zh-cn", "a", 1),
    "zh-sg: zh-my before zh-hans": ("-{zh-hans:a;zh-my:m}-", "zh", "zh-sg", "m", 1),
    "zh-tw: its own first": ("-{zh-hans:a;zh-hant:b;zh-tw:c}-", "zh", "zh-tw", "c", 1),
    "variant code case-insensitive": ("-{zh-Hans:a;zh-Hant:b}-", "zh", "", "a", 1),
    # flags (ConverterRule::parseFlags / parse)
    "R raw": ("-{R|zh-cn:a;zh-tw:b}-", "zh", "", "zh-cn:a;zh-tw:b", 1),
    "H hidden": ("x-{H|zh-cn:计算机;zh-tw:電腦}-y", "zh", "", "xy", 1),
    "A shows the variant": ("-{A|zh-hans:信息;zh-hant:資訊}-", "zh", "zh-tw", "資訊", 1),
    "A without rules shows its text": ("-{A|文字}-", "zh", "", "文字", 1),
    "T is the title": ("-{T|zh-cn:标题;zh-tw:標題}-Text", "zh", "", "Text", 1),
    "D describes": ("-{D|zh-hans:信息;zh-hant:資訊}-", "zh", "", "简体：信息；繁體：資訊；", 1),
    "H;D describes": ("-{H;D|zh-hans:a;zh-hant:b}-", "zh", "", "简体：a；繁體：b；", 1),
    "- removes": ("-{-|zh-cn:a;zh-tw:b}-", "zh", "", "", 1),
    "N names a variant": ("-{N|zh-tw}-", "zh", "", "臺灣", 1),
    "unknown flags are ignored": ("-{foo|zh-cn:a;zh-tw:b}-", "zh", "", "a", 1),
    "variant flags keep the text": ("-{zh-hans;zh-hant|漢字}-", "zh", "", "漢字", 1),
    # rules (ConverterRule::parseRules, LanguageConverter::getVarSeparatorPattern)
    "entity semicolon is text": ("-{zh-cn:A&amp;B;zh-tw:C}-", "zh", "", "A&amp;B", 1),
    "semicolon before no variant is text": ("-{zh-hans:a;b;zh-hant:c}-", "zh", "", "a;b", 1),
    "unknown variant: raw": ("-{zh-hans:a;xx-yy:b}-", "zh", "", "a;xx-yy:b", 1),
    "no colon: raw": ("-{foo;bar}-", "zh", "", "foo;bar", 1),
    "one-way rule in the main view": ("-{X=>zh-cn:Y}-", "zh", "", "Y", 1),
    "one-way rule for its variant": ("-{X=>zh-tw:Y;X=>zh-cn:Z}-", "zh", "zh-cn", "Z", 1),
    "escaped => too": ("-{X=&gt;zh-cn:Y}-", "zh", "zh-cn", "Y", 1),
    # nesting, links and templates inside
    "nested": ("a-{ -{zh-cn:b;zh-tw:c}- }-d", "zh", "", "a b d", 2),
    "links and templates keep their pipes": ("-{zh-cn:[[甲|乙]];zh-tw:{{lang|zh|丙}}}-", "zh", "", "[[甲|乙]]", 1),
    "link before the flag pipe": ("-{[[a|b]]}-", "zh", "", "[[a|b]]", 1),
    # broken markup takes no text with it
    "unclosed: its -{ dropped": ("a -{b c", "zh", "", "a b c", 0),
    "unclosed ends at a blank line": ("a -{b\n\nc }- d -{R|e}-", "zh", "", "a b\n\nc }- d e", 1),
    "unclosed ends at a heading": ("a -{b\n== H ==\nc }-", "zh", "", "a b\n== H ==\nc }-", 0),
    "stray close is text": ("a }- b", "zh", "", "a }- b", 0),
    "nowiki keeps the markup": ("<nowiki>-{a}-</nowiki> -{b}-", "zh", "", "<nowiki>-{a}-</nowiki> b", 1),
    # other wikis (SrConverter, ShConverter, KuConverter, ...)
    "sr view falls back to sr-ec": ("-{sr-el:Beograd;sr-ec:Београд}-", "sr", "", "Београд", 1),
    "sr-el": ("-{sr-el:Beograd;sr-ec:Београд}-", "sr", "sr-el", "Beograd", 1),
    "sr-latn is sr-el": ("-{sr-latn:Beograd;sr-cyrl:Београд}-", "sr", "sr-el", "Beograd", 1),
    "sh view is sh-latn": ("-{sh-cyrl:Загреб;sh-latn:Zagreb}-", "sh", "", "Zagreb", 1),
    "ku view falls back to ku-latn": ("-{ku-arab:کوردی;ku-latn:Kurdî}-", "ku", "", "Kurdî", 1),
    "kk view falls back to kk-cyrl": ("-{kk-latn:Qazaq;kk-cyrl:Қазақ}-", "kk", "", "Қазақ", 1),
    "tg: no fallback, no rule for tg: nothing": ("a-{tg-latn:b}-c", "tg", "", "ac", 1),
    "a wiki without a converter keeps it": ("-{zh-hans:信息}-", "en", "", "-{zh-hans:信息}-", 0),
}


@pytest.mark.parametrize("wikitext,lang,variant,expected,count", CASES.values(), ids=CASES.keys())
def test_render(wikitext, lang, variant, expected, count):
    assert render(wikitext, lang, variant) == (expected, count)


def test_every_converter_is_consistent():
    for lang, conv in CONVERTERS.items():
        assert conv.view in conv.variants, lang
        for variant, fallbacks in conv.fallbacks.items():
            assert variant in conv.variants and set(fallbacks) <= set(conv.variants), lang


def test_deep_nesting_and_long_pages_are_linear():
    text = "-{" * 50 + "x" + "}-" * 50
    assert "x" in render(text, "zh")[0]
    assert render("a -{" * 10_000, "zh")[0].count("a") == 10_000


def test_clean_page_counts_and_chooses():
    wikitext = "生物和-{zh-hans:信息; zh-hant:資訊;}-領域，-{H|zh-cn:a;zh-tw:b}-[[-{R|甲}-|乙-{丙}-]]。"
    result = clean_page(RawPage(1, "T", 0, False, wikitext, "zh", "test:1", None, "wikitext"))
    assert (result.text, result.variants) == ("生物和信息領域，乙丙。", 4)
    hant = wikitext_to_text(wikitext, "zh", CleanOptions.of(PreprocessConfig(variants=("zh=zh-hant",))))
    assert hant == "生物和資訊領域，乙丙。"


def test_template_parameters_keep_their_rule():
    # mwparserfromhell would split the parameter at the rule's `|`; rendered first, it cannot.
    assert wikitext_to_text("{{lang|zh|-{A|zh-hans:信息;zh-hant:資訊}-}}", "zh") == "信息"


def test_variants_option():
    assert check_variants(("zh=zh-Hans", "sr=sr-latn")) == {"zh": "zh-hans", "sr": "sr-el"}
    with pytest.raises(ValueError, match="zh=zh-xx, fr=fr"):
        check_variants(("zh=zh-xx", "fr=fr"))
    with pytest.raises(ValueError, match="--variant: unknown language variant"):
        PreprocessConfig(inputs=("x",), output="o", variants=("zh=klingon",)).validate()


def test_the_cleaner_takes_its_options_resolved_once_not_the_jobs_config():
    """CleanOptions.of reads the four fields the cleaner needs and parses the lang=variant items
    there, once (they were parsed again for every page); no module of the cleaner imports the
    job's config."""
    import ast
    from pathlib import Path

    options = CleanOptions.of(PreprocessConfig(variants=("zh=zh-hant", "sr=sr-el"), convert=("sr=sr-el",),
                                               keep_tables=True))
    assert options == CleanOptions(keep_tables=True, variants={"zh": "zh-hant", "sr": "sr-el"}, convert={"sr": "sr-el"})
    with pytest.raises(ValueError, match="unknown language variant"):
        CleanOptions.of(PreprocessConfig(variants=("zh=klingon",)))
    folder = Path(__file__).resolve().parents[3] / "pipeline" / "wikitext"
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "pipeline.preprocess_config", path.name
