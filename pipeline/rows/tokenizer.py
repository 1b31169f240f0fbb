"""The WordPiece vocabulary of CANINE-S (paper §3.2, §4.1.3): training, I/O, and subword spans.

A thin wrapper over a Hugging Face `tokenizers.Tokenizer`, which stays the reference: the
validator re-tokenizes segment text with `spans()`. The job uses `spans_of_codepoints()`,
which gives the same spans several times faster (pipeline/rows/wordspans.py; the tests check
equality with `spans()` on many scripts).

Like mBERT's, the vocabulary is WordPiece over BERT pre-tokens (whitespace + punctuation,
every CJK ideograph its own word), but cased and with accents kept: CANINE reads raw NFC
characters, so the subword targets must be spans of exactly those characters.
"""

import itertools
import json
from dataclasses import dataclass
from typing import Iterable

import fsspec
import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from pipeline.rows.examples import codepoints_to_text, is_special, ranges_to_positions, text_to_codepoints
from pipeline.rows.wordspans import SPLIT, WORD, FastSpans, char_classes, spaced_words

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
UNK = "[UNK]"


@dataclass(frozen=True)
class WordPieceConfig:
    vocab_size: int = 32000  # our default (--vocab-size); mBERT's is 119,547 for 104 languages
    min_frequency: int = 2  # a pair seen once is noise, not a subword worth a vocabulary slot
    limit_alphabet: int | None = None  # keep every character seen: a missing one turns its whole word into [UNK]
    max_input_chars_per_word: int = 100  # BERT's: a longer "word" (a URL, a hash) is one [UNK]
    continuing_subword_prefix: str = "##"  # BERT's


def alphabet_of(texts: Iterable[str]) -> np.ndarray:
    """The codepoints of every character of the texts, sorted (int64)."""
    seen = np.zeros(0x110000, dtype=bool)
    it = iter(texts)
    while batch := list(itertools.islice(it, 1024)):  # a few MB at a time: ~3x a Python set's speed
        seen[np.frombuffer("".join(batch).encode("utf-32-le"), "<u4")] = True
    return np.flatnonzero(seen)


def train_wordpiece(
    texts: Iterable[str], vocab_size: int = 32000, config: WordPieceConfig | None = None, *, cut_words: bool = True,
    alphabet: np.ndarray | None = None,
) -> "WordPieceTokenizer":
    """Train a WordPiece vocabulary; the same texts in the same order give identical JSON.

    Hugging Face's trainer alone is not deterministic: it numbers the "##c" symbols in the
    order of a Rust hash map, and ties between equally frequent merges are broken by those
    numbers (measured: four runs, three different vocabularies). So every "##c" is numbered
    beforehand, in codepoint order, by passing them as special tokens, and demoted to plain
    vocabulary entries afterwards. That needs the texts' alphabet first: `alphabet`, the sorted
    codepoints of their characters (`alphabet_of`), where the caller has it (the job finds it
    where the sample's pages are scattered over the workers), else a pass over the texts before
    the trainer's (an iterator is then held in memory; an iterable that can be iterated again is
    not: the job's sample is read from files a chunk at a time, pipeline/beam/tokenizer_sample.py).
    `cut_words=False` keeps the trainer's own pre-tokenization, the reference that the words cut
    here must equal.
    """
    cfg = config or WordPieceConfig(vocab_size=vocab_size)
    if alphabet is None:
        if iter(texts) is texts:
            texts = list(texts)
        alphabet = alphabet_of(texts)
    tok = Tokenizer(
        models.WordPiece(
            unk_token=UNK,
            max_input_chars_per_word=cfg.max_input_chars_per_word,
            continuing_subword_prefix=cfg.continuing_subword_prefix,
        )
    )
    # No lowercasing, no accent stripping, no cleaning: offsets must be exact character spans.
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix=cfg.continuing_subword_prefix)
    seen = np.asarray(alphabet, np.int64)  # every character of the sample, in codepoint order
    table = char_classes(json.loads(tok.to_str()))
    classes = table.of(seen)
    # "##c" can only follow another character of a word: not for whitespace, punctuation or CJK
    inner = [cfg.continuing_subword_prefix + chr(c) for c in seen[classes == WORD].tolist()]
    limit = {} if cfg.limit_alphabet is None else {"limit_alphabet": cfg.limit_alphabet}  # None is not accepted
    cut = cut_words and (classes >= 0).all() and not is_special(seen).any()
    # A word of one character adds no pair to any merge's count, only its character to the
    # alphabet: the trainer's alphabet is every character of its words, in codepoint order, its
    # counts unused unless limit_alphabet cuts it (tokenizers' BpeTrainer::compute_alphabet,
    # 0.23). So those characters are given as the initial alphabet and their words left out of
    # the counting: 39% of the words of a real multilingual sample (punctuation, CJK
    # ideographs, "a"); training on benchmarks/phases.py's 1 GB sample (50,000 pages, 363M
    # characters) went from 33.6 to 23.3 s, the same vocabulary (tests check equality).
    alone = cut and cfg.limit_alphabet is None
    initial = {"initial_alphabet": [chr(c) for c in seen[classes != SPLIT].tolist()]} if alone else {}
    trainer = trainers.WordPieceTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=list(SPECIAL_TOKENS) + inner,
        continuing_subword_prefix=cfg.continuing_subword_prefix,
        show_progress=False,
        **limit,
        **initial,
    )
    spec = json.loads(tok.to_str())
    if cut:
        # The trainer's cost is its BERT pre-tokenization (a NormalizedString with an alignment per
        # byte, per split): cut the same words here, by the character classes the spans use, and
        # give it words between spaces to count. Same word counts -> the same vocabulary, in
        # about 60% of the CPU (benchmarks/phases.py's tokenizer phase; tests check equality).
        counter = Tokenizer(models.WordPiece(unk_token=UNK, continuing_subword_prefix=cfg.continuing_subword_prefix))
        counter.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # char::is_whitespace, as BertPreTokenizer's
        counter.train_from_iterator(spaced_words(texts, table, words_of_one=not alone), trainer)
        trained = json.loads(counter.to_str())
        spec["model"]["vocab"], spec["added_tokens"] = trained["model"]["vocab"], trained["added_tokens"]
    else:  # a character the classes do not describe (or a special): the trainer's own words
        tok.train_from_iterator(texts, trainer)
        spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] in SPECIAL_TOKENS]
    return WordPieceTokenizer(Tokenizer.from_str(json.dumps(spec, ensure_ascii=False)), "<trained>")


class WordPieceTokenizer:
    """A WordPiece `tokenizers.Tokenizer` with subword spans in characters and same-length replacement.

    Special tokens written in the text (an article about BERT that says "[MASK]") are read as
    ordinary text: `encode_special_tokens` is set on every load because tokenizer.json does
    not store it. Anything that re-tokenizes shard text must load through this class.
    """

    def __init__(self, tokenizer: Tokenizer, source: str = "<tokenizer>"):
        spec = json.loads(tokenizer.to_str())
        model = spec.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ValueError(f"{source}: model type is {model.get('type')!r}, expected 'WordPiece'")
        tokenizer.encode_special_tokens = True
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tok = tokenizer
        self._spec = spec
        self.source = source
        self.vocab_size: int = tokenizer.get_vocab_size()
        self.prefix: str = model.get("continuing_subword_prefix") or ""
        # ids never used as a CANINE-S target: [UNK] and every special / added token
        excluded = {int(i) for i in tokenizer.get_added_tokens_decoder()}
        unk_id = tokenizer.token_to_id(model.get("unk_token") or UNK)
        if unk_id is not None:
            excluded.add(unk_id)
        self.excluded_ids = np.array(sorted(excluded), dtype=np.int64)
        self._replacements = None  # built on first use (vocabulary scan)
        self._fast = None  # FastSpans, built on first use

    # --- I/O -------------------------------------------------------------------------
    @classmethod
    def from_str(cls, json_str: str, source: str = "<string>") -> "WordPieceTokenizer":
        try:
            tok = Tokenizer.from_str(json_str)
        except Exception as e:  # the Rust error names the JSON line/column
            raise ValueError(f"{source}: not a tokenizers JSON file: {e}") from None
        return cls(tok, source)

    @classmethod
    def from_file(cls, path_or_url: str) -> "WordPieceTokenizer":
        with fsspec.open(path_or_url, "rt", encoding="utf-8") as f:
            return cls.from_str(f.read(), source=str(path_or_url))

    def to_str(self) -> str:
        return self._tok.to_str()

    def save(self, path_or_url: str) -> None:
        """Write tokenizer.json; whole-file write so a reader never sees half of it."""
        data = self.to_str()
        with fsspec.open(path_or_url, "wt", encoding="utf-8") as f:
            f.write(data)

    @property
    def hf(self) -> Tokenizer:
        """The wrapped `tokenizers.Tokenizer`."""
        return self._tok

    @property
    def spec(self) -> dict:
        """tokenizer.json as a dict (read-only use)."""
        return self._spec

    # --- spans -----------------------------------------------------------------------
    def spans(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(char_starts, char_lengths, ids) of the subwords of `text`, [UNK] and specials left out.

        Offsets are in characters (the Python binding converts Rust's byte offsets), so a CJK
        ideograph, a Hangul syllable or an astral emoji counts 1; a "##" piece's span is its
        characters without the prefix.
        """
        enc = self._tok.encode(text, add_special_tokens=False)
        ids = np.array(enc.ids, dtype=np.int64)
        offsets = np.array(enc.offsets, dtype=np.int64).reshape(-1, 2)  # (n_tokens, 2)
        lengths = offsets[:, 1] - offsets[:, 0]
        keep = ~np.isin(ids, self.excluded_ids) & (lengths > 0)
        return offsets[keep, 0].astype(np.int32), lengths[keep].astype(np.int32), ids[keep].astype(np.int32)

    def spans_of_codepoints(self, cps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`spans()` of a codepoint array, positions into it; specials (PAD, U+E000..U+E0FF) break words.

        So the codepoints of whole examples (CLS A SEP B SEP, concatenated) are tokenized in one
        call, and each segment gets exactly the spans `spans(segment_text)` gives.
        """
        if self._fast is None:
            self._fast = FastSpans(self)
        return self._fast(np.asarray(cps, dtype=np.int32))

    def reference_spans_of_codepoints(self, cps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`spans_of_codepoints` through `spans()` per run between specials (slow; the fallback)."""
        cps = np.asarray(cps, dtype=np.int32)
        edges = np.diff((~is_special(cps)).astype(np.int8), prepend=0, append=0)
        out = [], [], []
        for s, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
            starts, lengths, ids = self.spans(codepoints_to_text(cps[s:e]))
            for acc, x in zip(out, (starts + s, lengths, ids)):
                acc.append(x.astype(np.int32))
        return tuple(np.concatenate(x) if x else np.zeros(0, np.int32) for x in out)

    # --- same-length replacement -------------------------------------------------------
    def random_same_length(self, ids: np.ndarray, lengths: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each span (its subword id, length, a uniform in [0, 1)), a vocabulary subword of that length.

        Returns (codepoints of the replacements that exist, concatenated in span order; ok mask).
        A subword is its characters without "##": "ab" and "##ab" are one candidate, and the
        span's own characters are never drawn, so a replacement always changes the input. When
        no other subword has that length, ok is False and the caller falls back (masks.py).
        """
        if self._replacements is None:
            self._replacements = _ReplacementIndex(self)
        return self._replacements.draw(np.asarray(ids, np.int64), np.asarray(lengths, np.int64), np.asarray(u, float))


class _ReplacementIndex:
    """Vocabulary strings grouped by length in characters: (length, string)-sorted, deduplicated."""

    def __init__(self, tok: WordPieceTokenizer):
        vocab = tok.hf.get_vocab(with_added_tokens=False)
        excluded = set(tok.excluded_ids.tolist())
        by_id = {}
        for token, i in vocab.items():
            if i in excluded:
                continue
            chars = token[len(tok.prefix) :] if tok.prefix and token.startswith(tok.prefix) else token
            if chars:
                by_id[i] = chars
        strings = sorted(set(by_id.values()), key=lambda s: (len(s), s))  # stable order: get_vocab is a hash map
        row = {s: r for r, s in enumerate(strings)}
        lengths = np.array([len(s) for s in strings], dtype=np.int64)
        self.max_len = int(lengths.max()) if len(lengths) else 0
        # rows of length L are [first[L], first[L] + count[L]); one spare slot for longer spans
        self.count = np.bincount(lengths, minlength=self.max_len + 2)
        self.first = np.concatenate([[0], np.cumsum(self.count)[:-1]])
        self.row_start = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.codepoints = text_to_codepoints("".join(strings))
        self.row_of_id = np.full(tok.vocab_size + 1, -1, dtype=np.int64)
        for i, s in by_id.items():
            if i < len(self.row_of_id):
                self.row_of_id[i] = row[s]
        self.row_len = lengths

    def draw(self, ids, lengths, u):
        if len(self.row_len) == 0:  # a vocabulary of special tokens only
            return np.zeros(0, np.int32), np.zeros(len(ids), dtype=bool)
        length = np.minimum(lengths, self.max_len + 1)
        own = self.row_of_id[np.clip(ids, 0, len(self.row_of_id) - 1)]
        # exclude the span's own string when it has that length (a normalizer may make it differ)
        has_own = (own >= 0) & (self.row_len[np.maximum(own, 0)] == lengths)
        available = self.count[length] - has_own
        ok = available >= 1
        row = self.first[length] + (u * available).astype(np.int64)
        row += has_own & (row >= own)  # skip over the own string: uniform over the others
        row, length = row[ok], lengths[ok]
        cps = self.codepoints[ranges_to_positions(self.row_start[row], length)]
        return cps.astype(np.int32), ok
