"""Codepoints and packing (pipeline/rows/examples.py); also the synthetic corpus the other pipeline tests use."""

import functools

import numpy as np
import pytest

from contract import schema
from pipeline.rows.examples import (
    DOC_SEPARATOR,
    _sop_splits,
    PackedExample,
    codepoints_to_text,
    example_id,
    is_whitespace,
    pack_pages,
    ranges_to_positions,
    text_to_codepoints,
)

# --- synthetic multilingual pages -----------------------------------------------------
# Page lengths follow a log-normal around 2,500 characters with a heavy tail (Wikipedia
# articles: many stubs, a few very long ones); text mixes scripts with and without spaces,
# combining marks and astral emoji, so packing and tokenization see the hard cases.
_SCRIPTS = {  # name: (syllables or characters, space between words)
    "latin": (["ka", "ro", "mé", "ti", "lu", "ña", "st", "en", "der", "ün", "qu", "i", "o", "s", "ch", "al", "e\u0301"],
              True),
    "cyrillic": (["ка", "ро", "ме", "ти", "лу", "на", "ст", "ен", "дер", "ю", "щ"], True),
    "hangul": ([chr(c) for c in range(0xAC00, 0xAC00 + 400, 7)], True),
    "cjk": ([chr(c) for c in range(0x4E00, 0x4E00 + 900, 3)] + ["の", "に", "は"], False),
    "arabic": (["كا", "لم", "ة", "سل", "ا\u064e", "ب\u0650"], True),
}
_WEIGHTS = {"latin": 0.6, "cyrillic": 0.1, "hangul": 0.1, "cjk": 0.12, "arabic": 0.08}
_EXTRAS = ["😀", "👍🏽", "(1984)", "–", "3.14", "\"quote\"", "x²", "🇯🇵", "[MASK]"]


@functools.lru_cache(maxsize=None)
def _lexicon(script: str, size: int = 20000) -> tuple[str, ...]:
    rng = np.random.default_rng(len(script))
    units, _ = _SCRIPTS[script]
    n = rng.integers(1, 5, size=size)
    picks = rng.integers(0, len(units), size=int(n.sum()))
    ends = np.cumsum(n)
    return tuple("".join(units[i] for i in picks[e - k : e]) for e, k in zip(ends, n))


def synthetic_text(rng: np.random.Generator, n_chars: int, script: str, lexicon_size: int = 20000) -> str:
    lex = _lexicon(script, lexicon_size)
    _, spaced = _SCRIPTS[script]
    zipf = np.minimum(rng.zipf(1.2, size=max(4, n_chars // 3)) - 1, len(lex) - 1)  # Zipf word frequencies
    words = [lex[i] for i in zipf]
    for i in np.flatnonzero(rng.random(len(words)) < 0.01):
        words[i] = _EXTRAS[int(rng.integers(len(_EXTRAS)))]
    out, pos, sep = [], 0, " " if spaced else ""
    while pos < len(words):
        k = int(rng.integers(5, 20))
        sentence = sep.join(words[pos : pos + k]) + ("." if spaced else "。")
        out.append(sentence + ("\n" if rng.random() < 0.15 else " " if spaced else ""))
        pos += k
    return "".join(out)[:n_chars].strip() or "x"


def synthetic_pages(
    n_pages: int, seed: int = 0, median_chars: int = 2500, first_id: int = 1, weights=None, lexicon_size=20000
) -> list[tuple[int, str]]:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(median_chars), 1.0, size=n_pages), 20, 60 * median_chars).astype(int)
    weights = weights or _WEIGHTS  # script name -> share of pages
    names = list(weights)
    scripts = rng.choice(len(names), size=n_pages, p=list(weights.values()))
    ids = first_id + np.cumsum(rng.integers(1, 5, size=n_pages))
    return [(int(i), synthetic_text(rng, int(n), names[s], lexicon_size)) for i, n, s in zip(ids, lengths, scripts)]


# --- helpers ------------------------------------------------------------------------------
def segments_in_order(ex: PackedExample) -> list[np.ndarray]:
    """The example's text segments, swap undone (A first)."""
    cps, seg = ex.codepoints, ex.segment_ids
    segs = [cps[1 : np.flatnonzero(seg == 0)[-1]]]
    if (seg == 1).any():
        segs.append(cps[np.flatnonzero(seg == 1)[0] : -1])
    return segs[::-1] if ex.sop_label == schema.SOP_SWAPPED else segs


def assert_every_character_once(pages, examples):
    """Example texts, in order, are the pages joined by DOC_SEPARATOR minus separators at cuts;
    each example's page_ids are exactly the pages it overlaps, and parts count up per first page."""
    texts = [(pid, t) for pid, t in pages if t]
    stream = text_to_codepoints(chr(DOC_SEPARATOR).join(t for _, t in texts))
    page_start = np.cumsum([0] + [len(t) + 1 for _, t in texts])[:-1]
    page_end = page_start + np.array([len(t) for _, t in texts])
    separators = set(page_end[:-1].tolist())
    ptr, parts = 0, {}
    for ex in examples:
        if ptr in separators:  # a cut at a page boundary drops the separator
            ptr += 1
        content = np.concatenate(segments_in_order(ex))
        where = f"example {ex.page_ids} part {ex.part} at {ptr}"
        assert np.array_equal(stream[ptr : ptr + len(content)], content), where
        overlap = (page_start < ptr + len(content)) & (page_end > ptr)
        assert ex.page_ids == [texts[i][0] for i in np.flatnonzero(overlap)]
        assert ex.part == parts.get(ex.page_ids[0], 0)
        parts[ex.page_ids[0]] = ex.part + 1
        ptr += len(content)
    assert ptr == len(stream)


def check_layout(ex: PackedExample, seq_len: int, sentence_order: bool):
    cps, seg = ex.codepoints, ex.segment_ids
    assert cps.dtype == np.int32 and seg.dtype == np.int8 and len(cps) == len(seg) <= seq_len
    specials = np.flatnonzero((cps == schema.CLS) | (cps == schema.SEP))
    if ex.sop_label == schema.SOP_NO_PAIR:
        assert not sentence_order or len(cps) == 3  # with SOP only a 1-character chunk is unpaired
        assert specials.tolist() == [0, len(cps) - 1] and (seg == 0).all()
    else:
        assert sentence_order and ex.sop_label in (schema.SOP_IN_ORDER, schema.SOP_SWAPPED)
        sep = specials[1]
        assert specials.tolist() == [0, sep, len(cps) - 1] and 1 < sep < len(cps) - 2
        assert (seg[: sep + 1] == 0).all() and (seg[sep + 1 :] == 1).all()
    assert cps[0] == schema.CLS and cps[-1] == schema.SEP


# --- codepoints ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["", "plain ascii", "日本語 한국어", "😀👍🏽🇯🇵 astral", "e\u0301 a\u0308\u0323 combining", "\U0010fffd\t\n"],
)
def test_text_codepoints_round_trip(text):
    cps = text_to_codepoints(text)
    assert cps.dtype == np.int32 and cps.tolist() == [ord(c) for c in text]
    assert codepoints_to_text(cps) == text


def test_lone_surrogate_is_a_clear_error():
    with pytest.raises(ValueError, match=r"lone surrogate U\+D800 at character 2"):
        text_to_codepoints("ab\ud800c")


def test_whitespace_table_covers_all_of_unicode():
    every = np.arange(0x110000, dtype=np.int32)
    expected = np.array([chr(c).isspace() for c in range(0x110000)])
    assert np.array_equal(is_whitespace(every), expected)


def test_ranges_to_positions():
    got = ranges_to_positions(np.array([5, 0, 9]), np.array([2, 0, 3]))
    assert got.tolist() == [5, 6, 9, 10, 11]


# --- packing ------------------------------------------------------------------------------
@pytest.mark.parametrize("sentence_order", [False, True])
def test_packing_keeps_every_character_once_in_order(sentence_order):
    pages = synthetic_pages(120, seed=1, median_chars=900)
    examples = pack_pages(pages, 512, sentence_order=sentence_order, seed=3)
    for ex in examples:
        check_layout(ex, 512, sentence_order)
    assert_every_character_once(pages, examples)
    seen = {pid for ex in examples for pid in ex.page_ids}
    assert sorted(seen) == [pid for pid, _ in pages]


def test_fill_is_at_least_90_percent_on_realistic_page_lengths():
    pages = synthetic_pages(256, seed=2)  # one pack group (PreprocessConfig.pack_groups = 256)
    examples = pack_pages(pages, schema.DEFAULT_SEQ_LEN)
    fill = sum(len(ex.codepoints) for ex in examples) / (len(examples) * schema.DEFAULT_SEQ_LEN)
    assert fill >= 0.9, fill
    assert_every_character_once(pages, examples)


def test_long_run_without_whitespace_is_hard_cut():
    text = "".join(chr(0x4E00 + i % 500) for i in range(1000))  # CJK, no spaces
    examples = pack_pages([(7, text)], 102)
    assert [len(ex.codepoints) for ex in examples] == [102] * 10
    assert [ex.part for ex in examples] == list(range(10))
    assert_every_character_once([(7, text)], examples)


def test_cut_falls_after_whitespace_and_documents_are_joined_by_newline():
    examples = pack_pages([(1, "aaaa bbbb cccc"), (2, "dd")], 2 + 12)
    texts = [codepoints_to_text(ex.codepoints[1:-1]) for ex in examples]
    assert texts == ["aaaa bbbb ", "cccc\ndd"]
    assert [ex.page_ids for ex in examples] == [[1], [1, 2]]


def test_sentence_order_is_seeded_and_balanced():
    pages = synthetic_pages(200, seed=4, median_chars=600)
    a = pack_pages(pages, 256, sentence_order=True, seed=11)
    b = pack_pages(pages, 256, sentence_order=True, seed=11)
    c = pack_pages(pages, 256, sentence_order=True, seed=12)
    labels = np.array([ex.sop_label for ex in a])
    assert labels.tolist() == [ex.sop_label for ex in b]
    assert all(np.array_equal(x.codepoints, y.codepoints) for x, y in zip(a, b))
    assert labels.tolist() != [ex.sop_label for ex in c]
    assert abs((labels == schema.SOP_SWAPPED).mean() - 0.5) < 0.1, (labels == 1).mean()
    assert (pack_pages(pages, 256, seed=11)[0].sop_label) == schema.SOP_NO_PAIR


def test_sop_split_prefers_whitespace_near_the_middle():
    ex = pack_pages([(1, "aaaa bbbb cccc dddd")], 40, sentence_order=True, seed=0)[0]
    a, b = (codepoints_to_text(s) for s in segments_in_order(ex))
    assert (a, b) == ("aaaa bbbb ", "cccc dddd")


def test_sop_splits_match_the_rule_on_random_chunks():
    rng = np.random.default_rng(3)
    stream = np.where(rng.random(5000) < 0.1, ord(" "), ord("a")).astype(np.int32)
    ws_pos = np.flatnonzero(stream == ord(" "))
    starts = rng.integers(0, 4000, size=400)
    stops = starts + rng.integers(2, 300, size=400)
    expected = []
    for s, e in zip(starts.tolist(), stops.tolist()):  # the rule, one chunk at a time
        m = e - s
        window = [w for w in range(s + int(m * 0.25), min(s + int(m * 0.75), e - 1)) if stream[w] == ord(" ")]
        target = s + m // 2 - 1
        expected.append(min(window, key=lambda w: (abs(w - target), w)) + 1 - s if window else max(m // 2, 1))
    assert _sop_splits(ws_pos, starts, stops).tolist() == expected


@pytest.mark.parametrize(
    "pages, message",
    [
        ([(2, "a"), (1, "b")], "sorted by id: page 1 comes after page 2"),
        ([(-1, "a")], "page id -1"),
        ([(1, "ok"), (3, "ab\ue001c")], r"page 3: character 2 is U\+E001"),
        ([(4, "a\x00")], r"page 4: character 1 is U\+0000"),
        ([(5, "\udc00")], "page 5: text has a lone surrogate"),
    ],
)
def test_bad_pages_are_named(pages, message):
    with pytest.raises(ValueError, match=message):
        pack_pages(pages, 64)


def test_seq_len_must_leave_room_for_text():
    with pytest.raises(ValueError, match="seq_len 3"):
        pack_pages([(1, "abc")], 3, sentence_order=True)


def test_empty_pages_are_skipped():
    examples = pack_pages([(1, ""), (2, "abc"), (3, "")], 64)
    assert [ex.page_ids for ex in examples] == [[2]]
    assert pack_pages([], 64) == [] and pack_pages([(1, "")], 64, sentence_order=True) == []


# --- ids and seeds --------------------------------------------------------------------------
def test_example_ids_are_unique_even_with_dashes_in_lang():
    ex = PackedExample([12], np.zeros(0, np.int32), np.zeros(0, np.int8), -1, 3)
    ids = {example_id(lang, PackedExample([p], ex.codepoints, ex.segment_ids, -1, part), copy)
           for lang in ("zh", "zh-yue", "zh-yue-1") for p in (1, 12) for part in (0, 3) for copy in (0, 1)}
    assert len(ids) == 3 * 2 * 2 * 2
    assert example_id("zh-yue", ex, 1) == "zh-yue-12-3-1"
