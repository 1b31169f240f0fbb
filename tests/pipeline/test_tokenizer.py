"""WordPiece training, I/O, character offsets, the fast span path and same-length replacement."""

import functools
import os
import json
import subprocess
import sys

import numpy as np
import pytest
from test_examples import synthetic_pages
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from contract import schema
from pipeline.rows import tokenizer as tk, wordspans
from pipeline.rows.examples import codepoints_to_text, pack_pages, text_to_codepoints
from pipeline.rows.tokenizer import WordPieceTokenizer, train_wordpiece

HARD_TEXT = (
    "École Ünïcode naïve e\u0301te\u0301 (1984), «quotes» — don't re-enter 3.14 x² "
    "日本語のテキスト。東京 한국어 텍스트 👍🏽 😀😀 🇯🇵 Привет мир "
    "[MASK] [CLS]x ## ##ab a\u00a0b c\u3000d \u200bzw\u200dj tab\tnew\nline "
    + "y" * 130 + " end"
)


@functools.lru_cache(maxsize=None)
def corpus(n_pages=150):
    return tuple(t for _, t in synthetic_pages(n_pages, seed=5, median_chars=1500)) + (HARD_TEXT,) * 3


@functools.lru_cache(maxsize=None)
def trained(vocab_size=2000) -> WordPieceTokenizer:
    return train_wordpiece(corpus(), vocab_size=vocab_size)


def piece_text(tok, token_id):
    token = tok.hf.id_to_token(int(token_id))
    return token[len(tok.prefix) :] if token.startswith(tok.prefix) else token


def test_training_is_deterministic_across_processes(tmp_path):
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(list(corpus(60))))
    code = (
        "import json, sys; from pipeline.rows.tokenizer import train_wordpiece; "
        "print(train_wordpiece(json.load(open(sys.argv[1])), vocab_size=800).to_str())"
    )
    outs = [
        subprocess.run([sys.executable, "-c", code, str(texts)], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
        for seed in (1, 2)
    ]
    assert outs[0] == outs[1]
    spec = json.loads(outs[0])
    assert spec["normalizer"]["lowercase"] is False and spec["normalizer"]["strip_accents"] is False
    assert [t["content"] for t in spec["added_tokens"]] == list(tk.SPECIAL_TOKENS)
    assert len(spec["model"]["vocab"]) == 800


def test_spans_are_character_offsets_of_the_pieces():
    tok = trained()
    starts, lengths, ids = tok.spans(HARD_TEXT)
    assert len(ids) > 40 and np.all(np.diff(starts) > 0)
    for s, n, i in zip(starts, lengths, ids):
        assert HARD_TEXT[s : s + n] == piece_text(tok, i), (s, n, tok.hf.id_to_token(int(i)))
    covered = {HARD_TEXT[s : s + n] for s, n in zip(starts, lengths)}
    assert {"日", "本", "東", "京"} <= covered  # every CJK ideograph is its own word
    assert 0 in starts.tolist() and piece_text(tok, ids[0]).startswith("É")  # case and accents kept
    emoji = HARD_TEXT.index("😀")
    assert emoji in starts.tolist()  # an astral character counts as one
    assert not set(ids.tolist()) & set(tok.excluded_ids.tolist())  # no [UNK] (the 130 y's), no specials


def test_special_tokens_in_text_are_plain_text():
    tok = trained()
    starts, lengths, ids = tok.spans("see [MASK] here")
    assert tok.hf.token_to_id("[MASK]") not in ids.tolist()
    assert "MASK" in "".join(piece_text(tok, i) for i in ids)
    reloaded = WordPieceTokenizer.from_str(tok.to_str())  # the flag is not in the JSON: set on every load
    assert np.array_equal(reloaded.spans("see [MASK] here")[2], ids)


def test_the_words_cut_for_the_trainer_give_the_reference_vocabulary(monkeypatch):
    """train_wordpiece cuts BERT's words itself (the character classes the spans use) and has the
    trainer count them between spaces: the vocabulary must be the trainer's own pre-tokenization's,
    byte for byte, on the real pages of tests/data/wiki (16 excerpts: CJK, Indic, Arabic,
    Cyrillic, Armenian, Greek), the hard text and whitespace other than spaces."""
    from test_masks import real_pages

    texts = [t for _, t in real_pages("tests/data/wiki/*.xml.bz2")] + [HARD_TEXT, "a\u00a0b\u2028c\u0085d 、。x\u3000y"]
    cut, spaced, alone = [], tk.spaced_words, set()

    def counted(*args, **kwargs):
        for piece in spaced(*args, **kwargs):
            cut.append(len(piece))
            alone.update(w for w in piece.split() if len(w) == 1)
            yield piece

    monkeypatch.setattr(tk, "spaced_words", counted)
    fast = train_wordpiece(texts, vocab_size=8000).to_str()  # ~3,700 characters, then merges
    assert len(cut) > 20, "the words were not cut here"  # 810k characters
    # small pieces: the trainer buffers 256 of them ahead, so they bound what it holds of the sample
    assert max(cut) <= 3 * ((1 << 14) + max(map(len, texts)))
    # words of one character are not counted (the trainer gets their characters as its alphabet)
    assert not alone
    assert fast == train_wordpiece(texts, vocab_size=8000, cut_words=False).to_str()
    vocab = json.loads(fast)["model"]["vocab"]
    assert {"、", "。", "日", "😀", ","} <= vocab.keys()  # characters seen only as words of one
    assert sum(len(t.removeprefix("##")) > 2 for t in json.loads(fast)["model"]["vocab"]) > 2000  # merges learnt
    # a character the classes do not describe as the trainer sees it (PAD) -> the trainer's own words
    cut.clear()
    odd = texts[:5] + ["x\x00y"]
    assert train_wordpiece(odd, 500).to_str() == train_wordpiece(odd, 500, cut_words=False).to_str()
    assert not cut


def test_fast_spans_equal_reference_on_many_scripts():
    tok = trained()
    for k, text in enumerate(corpus()[:60]):
        cps = text_to_codepoints(text)
        fast, ref = tok.spans_of_codepoints(cps), tok.spans(text)
        for a, b in zip(fast, ref):
            assert np.array_equal(a, b), f"text {k}"
    # again, now from the cache, on whole packed examples (specials break words)
    examples = pack_pages(list(enumerate(corpus()[:60], start=1)), 512, sentence_order=True)
    cps = np.concatenate([ex.codepoints for ex in examples])
    for a, b in zip(tok.spans_of_codepoints(cps), tok.reference_spans_of_codepoints(cps)):
        assert a.dtype == np.int32 and np.array_equal(a, b)


def test_fast_spans_equal_reference_on_random_unicode():
    """Characters from every plane (controls, combining marks, Thai, symbols, astral, tags)
    mixed into known words: the per-character classes must hold in any context."""
    tok = trained()
    rng = np.random.default_rng(11)
    pool = np.concatenate([
        np.arange(1, 0x3000), np.arange(0x3000, 0xD800, 7), np.arange(0xE100, 0x10000, 5),
        np.arange(0x10000, 0x40000, 97), np.arange(0xE0000, 0xE0200, 3), [0x10FFFD],
    ])
    known = text_to_codepoints(" ".join(corpus()[:5]))
    for _ in range(15):
        cps = np.where(rng.random(3000) < 0.3, rng.choice(pool, 3000), rng.choice(known, 3000)).astype(np.int32)
        fast = tok.spans_of_codepoints(cps)
        assert len(fast[0]) > 300
        for a, b in zip(fast, tok.spans(codepoints_to_text(cps))):
            assert np.array_equal(a, b)


def test_fast_spans_survive_hash_collisions_and_cache_resets(monkeypatch):
    tok = WordPieceTokenizer.from_str(trained().to_str())
    monkeypatch.setattr(wordspans, "_BASES", (1, wordspans._BASES[1]))  # first hash = sum of codepoints: anagrams collide
    monkeypatch.setattr(wordspans, "_CACHE_LIMIT", 300)
    text = " ".join(corpus()[:20])
    cps = text_to_codepoints(text)
    ref = tok.spans(text)
    for _ in range(2):  # second pass: colliding words come from the index or the recent table
        for a, b in zip(tok.spans_of_codepoints(cps), ref):
            assert np.array_equal(a, b)
    assert len(tok._fast.collided) > 0 and tok._fast.entries.n <= 300 + len(set(text.split())) * 3


def test_fast_path_with_a_cleaning_lowercasing_normalizer():
    """A user tokenizer.json (mBERT-uncased-like): words go through encode(), not the model."""
    tok = trained().hf
    spec = json.loads(tok.to_str())
    spec["normalizer"] = {
        "type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True
    }
    other = WordPieceTokenizer.from_str(json.dumps(spec))
    text = HARD_TEXT + " \x07ctrl\ufffd İstanbul ÉCOLE"
    fast = other.spans_of_codepoints(text_to_codepoints(text))
    assert other._fast.classes is not None and not other._fast.direct
    for a, b in zip(fast, other.spans(text)):
        assert np.array_equal(a, b)


def test_unsupported_pre_tokenizer_takes_the_reference_path():
    spec = json.loads(trained().to_str())
    spec["pre_tokenizer"] = {"type": "Whitespace"}  # groups punctuation runs: not per-character
    other = WordPieceTokenizer.from_str(json.dumps(spec))
    text = "a!! b?! (c)"
    fast = other.spans_of_codepoints(text_to_codepoints(text))
    assert other._fast.classes is None
    for a, b in zip(fast, other.spans(text)):
        assert np.array_equal(a, b)


def test_character_classes_from_probes():
    classes = wordspans.char_classes(trained().spec)
    table = classes.of(np.arange(0x40000))  # every block, probed on first sight
    assert classes.done.all()
    assert table[ord("a")] == wordspans.WORD and table[ord("\u0301")] == wordspans.WORD
    assert table[ord(" ")] == wordspans.SPLIT and table[0x3000] == wordspans.SPLIT and table[schema.SEP] == wordspans.SPLIT
    assert table[ord(",")] == wordspans._ISOLATED and table[ord("中")] == wordspans._ISOLATED and table[ord("«")] == wordspans._ISOLATED
    assert (table >= 0).all()


def test_save_and_load_through_fsspec(tmp_path):
    tok = trained()
    for url in (str(tmp_path / "tokenizer.json"), "memory://canine-test/tokenizer.json"):
        tok.save(url)
        back = WordPieceTokenizer.from_file(url)
        assert back.to_str() == tok.to_str() and back.vocab_size == tok.vocab_size


def test_bad_tokenizer_files_are_named(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json: not a tokenizers JSON file"):
        WordPieceTokenizer.from_file(str(bad))
    bpe = Tokenizer(models.BPE())
    with pytest.raises(ValueError, match="bpe.json: model type is 'BPE'"):
        WordPieceTokenizer.from_str(bpe.to_str(), source="bpe.json")


def test_random_same_length_replacements():
    tok = trained()
    starts, lengths, ids = tok.spans(" ".join(corpus()[:10]))
    rng = np.random.default_rng(0)
    cps, ok = tok.random_same_length(ids, lengths, rng.random(len(ids)))
    assert ok.mean() > 0.95
    bounds = np.concatenate([[0], np.cumsum(lengths[ok])])
    vocab_strings = {piece_text(tok, i) for i in range(tok.vocab_size)}
    for k, i in enumerate(ids[ok]):
        replacement = codepoints_to_text(cps[bounds[k] : bounds[k + 1]])
        assert len(replacement) == lengths[ok][k] and replacement != piece_text(tok, i)
        assert replacement in vocab_strings
    # no subword of that length at all: not ok
    cps, ok = tok.random_same_length(np.array([ids[0], ids[0]]), np.array([500, lengths[0]]), rng.random(2))
    assert ok.tolist() == [False, True] and len(cps) == lengths[0]


def test_single_candidate_length_is_not_replaced_by_itself():
    vocab = {t: i for i, t in enumerate(list(tk.SPECIAL_TOKENS) + ["a", "##a", "bc", "xyz", "##xyz"])}
    hf = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    hf.add_special_tokens(list(tk.SPECIAL_TOKENS))
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False, clean_text=False)
    tok = WordPieceTokenizer(hf)
    ids = np.array([vocab["a"], vocab["##a"], vocab["bc"], vocab["xyz"]])
    cps, ok = tok.random_same_length(ids, np.array([1, 1, 2, 3]), np.random.default_rng(1).random(4))
    assert ok.tolist() == [False, False, False, False] and len(cps) == 0  # "a" == "##a": no other string
