"""The cleaner and the mask plan on the real pages of every language shipped in tests/data/wiki
(its README says where each file comes from; benchmarks/languages.py prints the same figures)."""

import collections
import re
import unicodedata

import numpy as np
import pytest

from contract import schema
from pipeline.rows.examples import pack_pages
from pipeline.rows.masks import MaskPlanConfig, is_unspaced_letter, plan_examples
from pipeline.wikitext.clean import clean_page

# Kept pages per language, counted by reading the files: every ns-0 page that is not a redirect
# or a disambiguation page is an article (enwiki: 29 of the excerpt's 33, its four disambiguation
# pages apart (test_real_pages.py), and the 5 of the tables file; hiwiki: three articles; jawiki:
# the 2016 article and the five of the 2023 excerpt; README).
KEPT = {
    "ar": 1, "bn": 1, "el": 1, "en": 34, "hi": 3, "hy": 1, "ja": 6, "kn": 1, "ko": 1, "mr": 1, "ru": 1,
    "uk": 1, "vi": 1, "zh": 1,
}
# End-matter sections of these pages as a reader of the language names them, read in the source
# (hiwiki: हिन्दी ends with "see also", references and external links; the two short articles
# with an empty references section; jawiki 2023: each article ends with notes 脚注, most with
# references 参考文献, then see also 関連項目 and external links 外部リンク, all level 2 but
# 古代エジプト's 参考文献, a subsection of its 脚注). The rule must drop each, and none may be the last
# heading kept.
END_MATTER = {
    ("hi", "हम होंगे कामयाब"): {"सन्दर्भ"},
    ("hi", "दैनिक पूजा"): {"सन्दर्भ"},
    ("hi", "हिन्दी"): {"इन्हें भी देखें", "सन्दर्भ", "बाहरी कड़ियाँ"},
    ("ja", "言語"): {"脚注", "関連項目", "外部リンク"},
    ("ja", "地理学"): {"脚注", "参考文献", "関連項目", "外部リンク"},
    ("ja", "コケ植物"): {"脚注", "参考文献", "関連項目", "外部リンク"},
    ("ja", "古代エジプト"): {"脚注", "関連項目", "外部リンク"},
    ("ja", "生物学"): {"脚注", "参考文献", "関連項目", "外部リンク"},
}
# Pages whose source holds language-variant markup `-{...}-` (zhwiki 数学: three conversions
# `-{zh-cn:...;zh-tw:...}-`, one of them in a table the cleaner drops).
VARIANT_PAGES = {("zh", "数学")}
_LINKS_TEMPLATES = re.compile(r"\[\[|\]\]|\{\{|\}\}")
_VARIANTS = re.compile(r"-\{|\}-")


@pytest.fixture(scope="module")
def by_lang(real_pages):
    """{lang: [(RawPage, CleanResult)]} over every file of tests/data/wiki."""
    out = collections.defaultdict(list)
    for pages in real_pages.values():
        for page in pages:
            out[page.lang].append((page, clean_page(page)))
    return dict(out)


def kept(results):
    return [(p, r) for p, r in results if r.outcome == "kept"]


def test_every_language_is_there_with_its_kept_pages(by_lang):
    assert {lang: len(kept(results)) for lang, results in by_lang.items()} == KEPT


@pytest.mark.parametrize("lang", sorted(KEPT))
def test_no_link_or_template_markup_left(by_lang, lang):
    for page, result in kept(by_lang[lang]):
        left = _LINKS_TEMPLATES.findall(result.text)
        assert not left, (page.title, left[:5])


@pytest.mark.parametrize("lang", sorted(KEPT))
def test_no_variant_markup_left(by_lang, lang):
    for page, result in kept(by_lang[lang]):
        assert not _VARIANTS.search(result.text), page.title


def test_variant_constructs_are_counted(by_lang):
    for lang, title in VARIANT_PAGES:
        (result,) = [r for p, r in kept(by_lang[lang]) if p.title == title]
        assert result.variants >= 2, (title, result.variants)  # the two outside the dropped table


@pytest.mark.parametrize("lang, title", sorted(END_MATTER))
def test_end_matter_is_dropped(by_lang, lang, title):
    (result,) = [r for p, r in kept(by_lang[lang]) if p.title == title]
    assert set(result.headings.dropped) == END_MATTER[lang, title], result.headings.dropped
    assert result.headings.last_kept not in END_MATTER[lang, title]
    lines = set(result.text.split("\n"))
    assert not lines & END_MATTER[lang, title], lines & END_MATTER[lang, title]


@pytest.mark.parametrize(
    "title, words",
    [
        # {{仮リンク|言語中枢|en|Language center}}: the local title
        ("言語", "大脳の言語中枢に蓄えられた"),
        # {{lang-en-short|[[:w:Bryophyte|Bryophyte]]}}, {{lang|grc|βίος}}: the foreign words
        ("コケ植物", "コケ植物（コケしょくぶつ、Bryophyte）とは"),
        ("生物学", "ギリシア語の βίος（bios、生命）"),
        # {{読み仮名_ruby不使用|'''地理学'''|ちりがく|{{Lang-en-short|geography}}、...}}: the lead's
        # subject, its reading and the note, as jawiki shows them (the text began 'は、地球表面の')
        ("地理学", "地理学（ちりがく、geography、géographie、geografia、Geographie (-fie) または Erdkunde）は、地球表面の"),
        # range templates with named parameters keep the words they mark: {{独自研究範囲|[[病理地理学]]または
        # |date=...}}, {{疑問点範囲|最近の...|date=...|title=...}} (which left 'しかし、。')
        ("地理学", "病理地理学または疾病地理学"),
        ("コケ植物", "しかし、最近の形態や分子を用いた系統学的研究等から、コケ植物は単系統群ではなく側系統群であることが判ってきた（系統を参照）。"),
        # {{仮リンク|メーヘーン (ゲーム)|en|Mehen (game)|label=メーヘーン}}: label=, not the link target
        ("古代エジプト", "セネトやメーヘーンなどのボードゲーム"),
    ],
)
def test_jawiki_words_carried_by_templates(by_lang, title, words):
    (result,) = [r for p, r in kept(by_lang["ja"]) if p.title == title]
    assert words in result.text


def _plan(results, lang):
    pages = sorted((p.page_id, r.text) for p, r in kept(results))
    return plan_examples(pack_pages(pages, schema.DEFAULT_SEQ_LEN), lang, copy=0, seed=0, tokenizer=None)


def _unspaced(cps: np.ndarray) -> bool:
    return bool(is_unspaced_letter(cps).any())


def _clusters(cps: np.ndarray) -> int:
    """Characters with their combining marks count once (the bound is in clusters: Thai)."""
    return sum(not unicodedata.category(chr(c)).startswith("M") for c in cps.tolist())


def _chosen_spans(row, config) -> list[int]:
    """Lengths of the CANINE-C spans (the config's rule, `MaskPlanConfig.spans`) that the plan
    chose and that hold a letter of a script written without spaces; every masked position
    must lie in a chosen span."""
    cps = np.asarray(row["codepoints"])
    starts, ends = config.spans(cps)
    masked = np.zeros(len(row["codepoints"]), bool)
    masked[np.asarray(row["char_mask_positions"], np.int64)] = True
    lengths, covered = [], np.zeros_like(masked)
    for s, e in zip(starts.tolist(), ends.tolist()):
        if masked[s:e].all():
            covered[s:e] = True
            if _unspaced(cps[s:e]):
                lengths.append(_clusters(cps[s:e]))
    assert (covered == masked).all(), "a masked position outside the chosen spans"
    return lengths


@pytest.mark.parametrize("lang", sorted(KEPT))
def test_mask_budget_and_bounded_spans(by_lang, lang):
    """CANINE-C: at most 320 predicted characters an example, whole spans of the config's rule,
    none holding zh / ja / th ... letters longer than its bound (else a clause of a script
    written without spaces is one "word"), and about the paper's 15% of each example masked
    (median over the language's examples)."""
    config = MaskPlanConfig()
    rows = _plan(by_lang[lang], lang)
    assert rows
    shares = []
    for row in rows:
        assert len(row["char_mask_positions"]) <= config.max_char_predictions
        lengths = _chosen_spans(row, config)
        assert max(lengths, default=0) <= config.char_span_max, (lang, max(lengths))
        shares.append(len(row["char_mask_positions"]) / len(row["codepoints"]))
    assert np.median(shares) >= 0.10, (lang, shares)
