"""CANINE-C and CANINE-S mask plans (pipeline/rows/masks.py): the properties the validator and trainer rely on."""

import functools
import glob
import re
import unicodedata

from pathlib import Path

import numpy as np
import pytest
from test_examples import synthetic_pages
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from contract import schema
from pipeline.rows import masks
from pipeline.rows.examples import codepoints_to_text, pack_pages, text_to_codepoints
from pipeline.rows.masks import (
    UNSPACED_RANGES,
    MaskPlanConfig,
    _greedy_within_budget,
    bounded_spans,
    is_unspaced_letter,
    char_mask_plan,
    choose_char_spans,
    mask_histograms,
    plan_example,
    plan_examples,
    subword_plan,
    target_count,
    whitespace_spans,
)
from pipeline.seeds import mask_rng
from pipeline.rows.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer, train_wordpiece


@functools.lru_cache(maxsize=None)
def pages():
    return tuple(synthetic_pages(160, seed=9, median_chars=1200))


@functools.lru_cache(maxsize=None)
def tokenizer():
    return train_wordpiece([t for _, t in pages()], vocab_size=3000)


@functools.lru_cache(maxsize=None)
def examples(sentence_order=True):
    return tuple(pack_pages(list(pages()), 512, sentence_order=sentence_order, seed=1))


def segment_ranges(cps):
    """[start, end) of each text segment between specials."""
    special = np.flatnonzero((cps == schema.CLS) | (cps == schema.SEP))
    return list(zip(special[:-1] + 1, special[1:]))


# --- CANINE-C ---------------------------------------------------------------------------------
def test_whitespace_spans_match_a_regex_and_skip_specials():
    for ex in examples()[:30]:
        text = codepoints_to_text(ex.codepoints)
        # \S+ over the text with specials turned into spaces: runs of non-whitespace
        expected = [(m.start(), m.end()) for m in re.finditer(r"\S+", re.sub("[\ue000-\ue0ff]", " ", text))]
        starts, ends = whitespace_spans(ex.codepoints)
        assert starts.dtype == np.int32 and list(zip(starts.tolist(), ends.tolist())) == expected


def test_greedy_budget_matches_the_sequential_rule():
    rng = np.random.default_rng(0)
    groups = [rng.integers(1, 40, size=int(rng.integers(0, 60))) for _ in range(300)]
    k = rng.integers(0, 30, size=len(groups))
    expected = []
    for lengths, kk in zip(groups, k):  # the rule, one item at a time
        used, n_taken = 0, 0
        for n in lengths.tolist():
            take = n_taken < kk and used + n <= 200
            expected.append(take)
            used, n_taken = used + n * take, n_taken + take
    group = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    rank = np.concatenate([np.arange(len(g)) for g in groups])
    got = _greedy_within_budget(np.concatenate(groups), group, rank, k, 200)
    assert got.tolist() == expected and 0 < sum(expected) < len(expected)


def test_target_count_rounds_and_keeps_at_least_one():
    assert [target_count(n, 0.15) for n in (0, 1, 3, 10, 100, 103)] == [0, 1, 1, 2, 15, 15]


def test_char_plan_masks_whole_spans_inside_the_sequence():
    chosen = total = 0
    for ex in examples():
        cps = ex.codepoints
        rng = mask_rng(0, "xx", ex.page_ids[0], ex.part, 0)
        starts, ends, n = choose_char_spans(cps, rng)
        pos = char_mask_plan(cps, mask_rng(0, "xx", ex.page_ids[0], ex.part, 0))
        assert pos.dtype == np.int32 and np.all(np.diff(pos) > 0) and len(pos) <= schema.MAX_CHAR_PREDICTIONS
        assert pos.min() > 0 and pos.max() < len(cps) - 1
        assert not np.isin(cps[pos], [schema.CLS, schema.SEP]).any()
        # whole spans: the positions are exactly the union of some spans (the default rule's)
        all_starts, all_ends = MaskPlanConfig().spans(cps)
        span_of = np.searchsorted(all_ends, pos, side="right")
        assert np.all(all_starts[span_of] <= pos)
        hit = np.unique(span_of)
        assert len(pos) == int((all_ends[hit] - all_starts[hit]).sum()) and len(hit) == len(starts)
        if int((ends - starts).sum()) + 40 < schema.MAX_CHAR_PREDICTIONS:  # budget not binding: exactly 15%
            assert len(starts) == target_count(n, schema.MASK_RATE)
        chosen += len(starts)
        total += n
    assert abs(chosen / total - 0.15) < 0.01, chosen / total


def test_char_plan_budget_skips_long_spans():
    words = ["x" * 150, "ab", "y" * 100, "cd", "z" * 90] * 4
    cps = np.concatenate([[schema.CLS], text_to_codepoints(" ".join(words)), [schema.SEP]]).astype(np.int32)
    for copy in range(20):
        starts, ends, n = choose_char_spans(cps, np.random.default_rng(copy), rate=0.5)
        assert n == 20 and int((ends - starts).sum()) <= 320
        assert len(starts) <= 10 and len(starts) >= 2  # the short spans always still fit


# --- CANINE-C spans in scripts written without spaces -----------------------------------------
ROOT = Path(__file__).resolve().parents[2]


def reference_spans(cps, max_len=8):
    """bounded_spans' rule, one character at a time (its docstring), from unicodedata."""
    def unspaced(c):  # a letter of an unspaced script
        letter = c >= 0x10000 or unicodedata.category(chr(c))[0] == "L" or unicodedata.category(chr(c)) == "Nl"
        return letter and any(a <= c < b for a, b in UNSPACED_RANGES)

    def kind(c):  # 1 unspaced letter, 2 another letter, 0 neutral
        return 1 if unspaced(c) else 2 if c < 0x10000 and unicodedata.category(chr(c))[0] == "L" else 0

    def glued(p):  # inside a cluster: a mark, ZW(N)J, or after a character that joins the next
        c, before = int(cps[p]), int(cps[p - 1])
        mark = c < 0x10000 and unicodedata.category(chr(c))[0] == "M"
        return mark or c in (0x200C, 0x200D) or 0x0E40 <= before <= 0x0E44 or 0x0EC0 <= before <= 0x0EC4 \
            or before in (0x1039, 0x17D2, 0x200D)

    out = []
    for s, e in zip(*(x.tolist() for x in whitespace_spans(cps))):
        run_clusters = sum(p == s or not glued(p) for p in range(s, e))
        if not any(unspaced(int(c)) for c in cps[s:e]) or run_clusters <= max_len:
            out.append((s, e))
            continue
        segments, start, last = [], s, 0
        for p in range(s, e):
            k = kind(int(cps[p]))
            if p > s and k and last and k != last:
                segments.append((start, p))
                start = p
            last = k or last
        segments.append((start, e))
        for a, b in segments:
            clusters = [p for p in range(a, b) if p == a or not glued(p)]
            m = len(clusters)
            if any(unspaced(int(c)) for c in cps[a:b]) and m > max_len:
                k = -(-m // max_len)
                cuts = [clusters[j * m // k] for j in range(k)] + [b]
                out += list(zip(cuts[:-1], cuts[1:]))
            else:
                out.append((a, b))
    return out


def spans_text(text, max_len=8):
    starts, ends = bounded_spans(text_to_codepoints(text), max_len)
    return [text[s:e] for s, e in zip(starts.tolist(), ends.tolist())]


@functools.lru_cache(maxsize=None)
def real_pages(pattern: str) -> tuple:
    """Cleaned articles of the real Wikipedia excerpts in tests/data/wiki (or the sample)."""
    from pipeline import sources
    from pipeline.wikitext.clean import clean_page

    pages = []
    for item in sources.plan_work_items(sorted(glob.glob(str(ROOT / pattern)))):
        pages += [(p.page_id, r.text) for p in sources.read_pages(item) if (r := clean_page(p)).outcome == "kept"]
    return tuple(sorted(pages))


def test_bounded_spans_cut_unspaced_text_at_scripts_and_into_short_pieces():
    assert spans_text("BERTの系列でCharacterレベルでのembedding手法であるCANINEが提案され、") == [
        "BERT", "の系列で", "Character", "レベルでの", "embedding", "手法である", "CANINE", "が提案され、"]
    # neutral characters stay with the letters before them; 11 characters -> 5 + 6
    assert spans_text("中国(China)是一个国家。 2019年3月15日") == ["中国(", "China)", "是一个国家。", "2019年", "3月15日"]
    # 19 Han -> 6 + 6 + 7; a run without an unspaced letter is whole, however long
    assert spans_text("中华人民共和国成立于一九四九年十月一日 https://example.org/a-long-path") == [
        "中华人民共和", "国成立于一九", "四九年十月一日", "https://example.org/a-long-path"]
    # Thai: 8 clusters at most, never cut inside one (before a mark, after a leading vowel)
    assert spans_text("กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย") == [
        "กรุงเทพมห", "านครเป็นเมือ", "งหลวงขอ", "งประเทศไทย"]
    # runs of at most 8 clusters are whole, as in the paper
    assert spans_text("(北京) e\u0301té 한국어 東京 X気がする 차(茶)는 《북부 식물지》와") == [
        "(北京)", "e\u0301té", "한국어", "東京", "X気がする", "차(茶)는", "《북부", "식물지》와"]


def test_bounded_spans_match_the_rule_one_character_at_a_time():
    texts = [t for _, t in real_pages("tests/data/wiki/[jz]hwiki-*.xml.bz2")]
    texts += [t for _, t in real_pages("pipeline/sample/zhwiki-*.xml")]
    texts += [codepoints_to_text(ex.codepoints) for ex in examples()[:40]]  # CJK among other scripts, specials
    texts += ["เป็นเมืองหลวงของประเทศไทย และเป็นศูนย์กลางทางเศรษฐกิจ", "မြန်မာနိုင်ငံသည် အရှေ့တောင်အာရှ",
              "ព្រះរាជាណាចក្រកម្ពុជា", "X\u200d気がするのは《北部植物誌》と", "대한민국(大韓民國)은", "\U00020000\U00020001𠀂𠀃𠀄𠀅𠀆𠀇𠀈"]
    for max_len in (8, 3):
        for text in texts:
            cps = text_to_codepoints(text)
            starts, ends = bounded_spans(cps, max_len)
            assert starts.dtype == np.int32
            assert list(zip(starts.tolist(), ends.tolist())) == reference_spans(cps, max_len)


def test_bounded_spans_are_whitespace_spans_without_unspaced_letters():
    """en, de, ru, ar, hi, ko: the paper's spans, so the same plans byte for byte."""
    for lang in ("en", "de", "ru", "ar", "hi", "ko"):
        pages = list(real_pages(f"pipeline/sample/{lang}wiki-*.xml"))
        group = pack_pages(pages, 2048)
        for ex in group:
            bounded, paper = bounded_spans(ex.codepoints), whitespace_spans(ex.codepoints)
            assert all(np.array_equal(a, b) for a, b in zip(bounded, paper))
        paper = plan_examples(group, lang, 0, 3, None, MaskPlanConfig(char_spans="whitespace"))
        for a, b in zip(plan_examples(group, lang, 0, 3, None), paper, strict=True):
            assert np.array_equal(a["char_mask_positions"], b["char_mask_positions"])


@pytest.mark.parametrize("pattern", ["tests/data/wiki/zhwiki-*.xml.bz2", "pipeline/sample/zhwiki-*.xml",
                                     "tests/data/wiki/jawiki-*.xml.bz2"])
def test_bounded_spans_meet_the_masking_budget_on_unspaced_text(pattern):
    """Whitespace runs of zh or ja are clauses, so few spans, and the 320-character
    budget skips the long ones: masked share p10 far below 15%. Bounded spans: p10 >= 12%."""
    from pipeline.beam.stats import quantile

    group = pack_pages(list(real_pages(pattern)), 2048)
    assert group
    copies = -(-300 // len(group))  # the masks of other copies are other draws: ~300 examples
    shares = {}
    for rule in ("whitespace", "bounded"):
        config = MaskPlanConfig(char_spans=rule)
        share, lengths = {}, {}
        for copy in range(copies):
            rows = plan_examples(group, "xx", copy, 0, None, config)
            s, n = mask_histograms(rows)
            share = {v: share.get(v, 0) + s.get(v, 0) for v in share.keys() | s.keys()}
            lengths = {v: lengths.get(v, 0) + n.get(v, 0) for v in lengths.keys() | n.keys()}
        shares[rule] = quantile(share, 0.1)
    assert shares["whitespace"] < 100 and shares["bounded"] >= 120, shares
    # every chosen span that holds an unspaced letter has at most 8 characters (Han, kana)
    for row in rows:
        pos = row["char_mask_positions"]
        runs = np.split(pos, np.flatnonzero(np.diff(pos) != 1) + 1)
        starts, ends = MaskPlanConfig().spans(row["codepoints"])
        chosen = [(s, e) for s, e in zip(starts, ends) if s in set(pos.tolist())]
        assert sum(e - s for s, e in chosen) == len(pos) and len(runs) == len(chosen)  # chosen spans never touch
        unspaced = [e - s for s, e in chosen if is_unspaced_letter(row["codepoints"][s:e]).any()]
        assert max(unspaced, default=0) <= 8


def test_mask_histograms_count_shares_and_chosen_spans():
    ex = pack_pages([(1, "ab cd 中华人民共和国成立于一九四九年 efg")], 64)[0]  # CLS, 25 characters, SEP
    config = MaskPlanConfig(char_rate=1.0)  # every span it may: ab, cd, efg and ONE of the 7 + 8 Han pieces
    row = plan_example(ex, "xx", 0, 0, None, config)
    han = len(row["char_mask_positions"]) - 7
    assert han in (7, 8)  # the two Han pieces touch: never both chosen (one run = one span)
    share, lengths = mask_histograms([row, row])
    assert lengths == {2: 4, han: 2, 3: 2}
    assert share == {1000 * (7 + han) // 27: 2}
    assert mask_histograms([]) == ({}, {})
    paper = MaskPlanConfig(char_spans="whitespace", char_rate=1.0)
    assert mask_histograms([plan_example(ex, "xx", 0, 0, None, paper)])[1] == {2: 2, 15: 1, 3: 1}


def test_the_span_rule_is_read_from_a_config_or_a_manifest():
    from pipeline.preprocess_config import PreprocessConfig

    assert MaskPlanConfig.of(PreprocessConfig()) == MaskPlanConfig()
    cfg = PreprocessConfig(char_spans="whitespace", char_span_max=5)
    assert MaskPlanConfig.of(cfg) == MaskPlanConfig(char_spans="whitespace", char_span_max=5)
    assert MaskPlanConfig.from_fingerprint({}) == MaskPlanConfig(char_spans="whitespace")  # made before the option
    with pytest.raises(ValueError, match="char_spans 'words' must be one of bounded, whitespace"):
        MaskPlanConfig(char_spans="words")
    with pytest.raises(ValueError, match="char_spans must be one of bounded, whitespace, got 'words'"):
        PreprocessConfig(inputs=("x",), output="y", char_spans="words").validate()


# --- CANINE-S ---------------------------------------------------------------------------------
def test_subword_plan_is_consistent_with_retokenizing_each_segment():
    tok = tokenizer()
    for ex in examples()[:40]:
        row = plan_example(ex, "xx", 0, 5, tok)
        starts, lengths, ids = row["subword_starts"], row["subword_lengths"], row["subword_ids"]
        offsets, actions = row["subword_predict_offsets"], row["subword_actions"]
        assert np.all(np.diff(starts) > 0) and 0 < len(starts) <= schema.MAX_SUBWORD_PREDICTIONS
        assert np.all((offsets >= 0) & (offsets < lengths))
        for seg_start, seg_end in segment_ranges(ex.codepoints):
            inside = (starts >= seg_start) & (starts < seg_end)
            assert np.all(starts[inside] + lengths[inside] <= seg_end)  # inside the sequence, never on specials
            ref = tok.spans(codepoints_to_text(ex.codepoints[seg_start:seg_end]))
            ref_set = set(zip(*(x.tolist() for x in ref)))
            for s, n, i in zip(starts[inside] - seg_start, lengths[inside], ids[inside]):
                assert (int(s), int(n), int(i)) in ref_set
        # replacements: one same-length run per ACTION_RANDOM span, different from the original
        rand = actions == schema.ACTION_RANDOM
        assert len(row["subword_replacements"]) == int(lengths[rand].sum())
        at = 0
        for s, n in zip(starts[rand], lengths[rand]):
            assert not np.array_equal(row["subword_replacements"][at : at + n], ex.codepoints[s : s + n])
            at += n


def test_subword_rate_cap_and_action_proportions():
    tok = tokenizer()
    actions, chosen, total = [], 0, 0
    for ex in examples(False):
        starts, _, _ = tok.spans_of_codepoints(ex.codepoints)
        plan = subword_plan(ex.codepoints, ex.segment_ids, tok, mask_rng(3, "xx", ex.page_ids[0], ex.part, 0))
        k = len(plan["subword_starts"])
        assert k == min(schema.MAX_SUBWORD_PREDICTIONS, target_count(len(starts), schema.MASK_RATE))
        chosen += k
        total += len(starts)
        actions.append(plan["subword_actions"])
    actions = np.concatenate(actions)
    share = np.bincount(actions, minlength=3) / len(actions)
    assert len(actions) > 3000 and abs(chosen / total - 0.15) < 0.01
    assert abs(share[schema.ACTION_MASK] - 0.8) < 0.03 and abs(share[schema.ACTION_RANDOM] - 0.1) < 0.02, share
    assert abs(share[schema.ACTION_KEEP] - 0.1) < 0.02, share


def test_cap_of_80_subwords_on_a_long_example():
    tok = tokenizer()
    ex = pack_pages([(1, " ".join(t for _, t in pages()[:20]))], 4096)[0]
    plan = subword_plan(ex.codepoints, ex.segment_ids, tok, np.random.default_rng(0))
    assert len(plan["subword_starts"]) == schema.MAX_SUBWORD_PREDICTIONS


def test_random_action_without_a_same_length_subword_falls_back_to_mask():
    vocab = {t: i for i, t in enumerate(list(SPECIAL_TOKENS) + ["ab", "cd", "xyz", "##q"])}
    hf = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    hf.add_special_tokens(list(SPECIAL_TOKENS))
    hf.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False, clean_text=False)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok = WordPieceTokenizer(hf)
    ex = pack_pages([(1, "ab xyz cd xyzq ab")], 64)[0]
    config = MaskPlanConfig(subword_rate=1.0, p_mask=0.0, p_random=1.0)  # every subword, every one random
    row = plan_example(ex, "xx", 0, 0, tok, config)
    text = codepoints_to_text(ex.codepoints)
    chosen = [text[s : s + n] for s, n in zip(row["subword_starts"], row["subword_lengths"])]
    assert chosen == ["ab", "xyz", "cd", "xyz", "q", "ab"]
    expected = [schema.ACTION_RANDOM if n == 2 else schema.ACTION_MASK for n in map(len, chosen)]
    assert row["subword_actions"].tolist() == expected
    swapped = codepoints_to_text(row["subword_replacements"])
    assert swapped == "".join({"ab": "cd", "cd": "ab"}[c] for c in chosen if len(c) == 2)


# --- rows -------------------------------------------------------------------------------------
def test_rows_have_contract_columns_and_dtypes():
    row = plan_example(examples()[0], "xx", 0, 0, tokenizer())
    assert set(row) == set(schema.COLUMNS)
    for field in schema.SCHEMA:
        if hasattr(field.type, "value_type") and isinstance(row[field.name], np.ndarray):
            assert row[field.name].dtype == field.type.value_type.to_pandas_dtype(), field.name
    assert row["example_id"] == f"xx-{row['page_ids'][0]}-0-0"


def test_plans_are_deterministic_batch_independent_and_vary_by_copy():
    tok = tokenizer()
    batch = plan_examples(list(examples()[:25]), "xx", 0, 7, tok)
    for ex, row in zip(examples()[:25], batch):
        alone = plan_example(ex, "xx", 0, 7, tok)
        assert all(np.array_equal(np.asarray(row[c]), np.asarray(alone[c])) for c in schema.COLUMNS)
    other_copy = plan_examples(list(examples()[:25]), "xx", 1, 7, tok)
    differ = [not np.array_equal(a["char_mask_positions"], b["char_mask_positions"]) for a, b in zip(batch, other_copy)]
    assert sum(differ) >= 23
    assert all(a["example_id"] != b["example_id"] for a, b in zip(batch, other_copy))
    no_tok = plan_examples(list(examples()[:5]), "xx", 0, 7, None)  # CANINE-C plan does not depend on the tokenizer
    assert all(np.array_equal(a["char_mask_positions"], b["char_mask_positions"]) for a, b in zip(batch, no_tok))
    assert all(len(b["subword_starts"]) == 0 for b in no_tok)


def test_batches_over_the_size_cap_are_split_without_changing_rows(monkeypatch):
    group = list(examples()[:12])
    whole = plan_examples(group, "xx", 0, 4, tokenizer())
    monkeypatch.setattr(masks, "_BATCH_CODEPOINTS", 1500)  # about three examples of 512
    split = plan_examples(group, "xx", 0, 4, tokenizer())
    for a, b in zip(whole, split, strict=True):
        assert all(np.array_equal(np.asarray(a[c]), np.asarray(b[c])) for c in schema.COLUMNS)


def test_plans_do_not_depend_on_the_word_cache():
    """A worker that has seen other text (warm cache) and a fresh one plan the same rows."""
    warm = tokenizer()
    plan_examples(list(examples()), "xx", 0, 9, warm)
    fresh = WordPieceTokenizer.from_str(warm.to_str())
    group = list(examples(False)[:30])
    for a, b in zip(plan_examples(group, "xx", 2, 9, warm), plan_examples(group, "xx", 2, 9, fresh)):
        assert all(np.array_equal(np.asarray(a[c]), np.asarray(b[c])) for c in schema.COLUMNS)


def test_bad_layout_is_rejected():
    with pytest.raises(ValueError, match="example layout: codepoints must be CLS"):
        subword_plan(np.array([65, 66], np.int32), np.zeros(2, np.int8), tokenizer(), np.random.default_rng(0))
