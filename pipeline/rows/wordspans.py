"""Subword spans of a WordPiece tokenizer, fast: `pipeline.rows.tokenizer.WordPieceTokenizer.spans_of_codepoints`.

Hugging Face's encode() runs at ~5 MB/s on one core here (measured: 2 KB examples, 32k
vocabulary), a quarter of the 20 MB/s per core budget for the whole stage (benchmarks/preprocess.py). But BERT
pre-tokenization is a per-character decision (whitespace drops, punctuation and CJK
ideographs stand alone, the rest joins a word), and WordPiece works word by word. So:
classify characters once by asking the tokenizer itself (probes), cut words with numpy,
and look each word up in a cache of its pieces; only words never seen go to the tokenizer.
Limited to BertNormalizer / BertPreTokenizer tokenizers, where that reasoning holds;
anything else takes the reference path. The same classes cut the words the vocabulary is
trained on (`spaced_words`).
"""

import json
import threading
from typing import Iterable, Iterator

import numpy as np
from tokenizers import Tokenizer

from contract.splitmix import GOLDEN
from pipeline.rows.examples import codepoints_to_text, is_special, ranges_to_positions, text_to_codepoints

WORD, SPLIT, _ISOLATED = 0, 1, 2
_PROBE_LIMIT = 0x40000  # above: no assigned punctuation, whitespace or CJK ideograph -> WORD
# Probe i is "x" c "x" " " at 4i; the pre-token offsets (relative to 4i) identify the class.
_PROBE_SIGNATURE = {1 << 3: WORD, (1 << 1) | (1 << 11): SPLIT, (1 << 1) | (1 << 6) | (1 << 11): _ISOLATED}
_CLASS_TABLES: dict[str, "_CharClasses"] = {}  # per normalizer + pre-tokenizer JSON, once per process
# A word is known by its length and two polynomial hashes mod 2^64 with odd bases. A wrong
# match needs both 64-bit hashes of two different words of equal length to agree: for
# natural text about (lookups x cached words) / 2^128, ~1e-23 for a whole Wikipedia run.
_BASES = (0xD6E8FEB86659FD93, 0xC2B2AE3D27D4EB4F)
_CACHE_LIMIT = 1 << 20  # cached words (~80 bytes each); past it the cache restarts: same output, bounded memory


class _CharClasses:
    """Class of each codepoint (< _PROBE_LIMIT; the rest are WORD), found by probing the
    tokenizer block by block, the first time a block's characters are looked up: a
    few scripts' blocks cost ~0.1 s where the whole table cost ~1 s."""

    BLOCK = 1 << 10

    def __init__(self, spec: dict):
        probe_spec = dict(spec, added_tokens=[], post_processor=None, decoder=None, truncation=None, padding=None)
        probe_spec["model"] = {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}  # pre-tokens only
        self.probe = Tokenizer.from_str(json.dumps(probe_spec))
        self.table = np.full(_PROBE_LIMIT + 1, -1, np.int8)
        self.table[-1] = WORD
        self.done = np.zeros(_PROBE_LIMIT // self.BLOCK + 1, dtype=bool)
        self.done[-1] = True
        self.lock = threading.Lock()

    def of(self, cps: np.ndarray) -> np.ndarray:
        """Classes of `cps` (int8; -1 for a character unlike the three classes)."""
        capped = np.minimum(cps, _PROBE_LIMIT)
        blocks = capped // self.BLOCK
        if not self.done.take(blocks).all():
            with self.lock:
                for b in np.unique(blocks[~self.done.take(blocks)]).tolist():
                    if not self.done[b]:
                        self._probe(b * self.BLOCK)
                        self.done[b] = True
        return self.table.take(capped)

    def _probe(self, first: int) -> None:
        c = np.arange(first, first + self.BLOCK, dtype=np.int32)
        surrogate = (c >= 0xD800) & (c <= 0xDFFF)  # never in text: probe "x" instead
        grid = np.tile(np.array([ord("x"), 0, ord("x"), ord(" ")], np.int32), (len(c), 1))  # (probes, 4)
        grid[:, 1] = np.where(surrogate, ord("x"), c)
        offsets = np.array(self.probe.encode(codepoints_to_text(grid.ravel())).offsets, np.int64).reshape(-1, 2)
        which = offsets[:, 0] // 4
        rel = offsets - 4 * which[:, None]
        plain = ((rel >= 0) & (rel <= 3)).all(axis=1)
        signature = np.zeros(len(c), np.int64)
        np.add.at(signature, which, np.left_shift(1, np.where(plain, rel[:, 0] * 4 + rel[:, 1], 20)))
        block = np.full(len(c), -1, np.int8)
        for sig, cls in _PROBE_SIGNATURE.items():
            block[signature == sig] = cls
        block[surrogate] = WORD
        block[is_special(c)] = SPLIT  # specials break words
        self.table[first : first + self.BLOCK] = block


def char_classes(spec: dict) -> _CharClasses:
    """The (lazily probed) character classes of this normalizer + pre-tokenizer, once per process."""
    key = json.dumps([spec.get("normalizer"), spec.get("pre_tokenizer")], sort_keys=True)
    if key not in _CLASS_TABLES:
        _CLASS_TABLES[key] = _CharClasses(spec)
    return _CLASS_TABLES[key]


def spaced_words(texts: Iterable[str], table: _CharClasses, group: int = 1 << 14, *,
                 words_of_one: bool = True) -> Iterator[str]:
    """BERT's words of the texts between spaces, texts joined up to `group` characters a piece:
    whitespace becomes a space and an isolated character (punctuation, CJK ideograph) gets a
    space on each side, so a whitespace split gives the words BertNormalizer + BertPreTokenizer
    give (pipeline/rows/tokenizer.py trains on them). Small pieces: Hugging Face's trainer
    buffers 256 of them ahead (as it would 256 pages); larger ones held much of its sample.
    `words_of_one=False` leaves out the words of one character (every isolated character, and
    a letter or digit alone): each becomes a space."""

    def spaced(batch: list[str]) -> str:
        cps = text_to_codepoints(" ".join(batch))
        cls = table.of(cps)
        if not words_of_one:
            word = cls == WORD
            inside = np.zeros(len(cps) + 2, bool)  # a neighbour of the same word on either side
            inside[1:-1] = word
            alone = word & ~inside[:-2] & ~inside[2:]
            return codepoints_to_text(np.where(word & ~alone, cps, ord(" ")))
        isolated = cls == _ISOLATED
        moved = np.arange(len(cps)) + 2 * np.cumsum(isolated) - isolated  # a space before each isolated one
        out = np.full(len(cps) + 2 * int(isolated.sum()), ord(" "), np.int32)
        kept = cls != SPLIT
        out[moved[kept]] = cps[kept]
        return codepoints_to_text(out)

    batch, size = [], 0
    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= group:
            yield spaced(batch)
            batch, size = [], 0
    if batch:
        yield spaced(batch)


class _Powers:
    """B^i and B^-i mod 2^64 for i < n, grown on demand (prefix hashes of a whole batch)."""

    def __init__(self, base: int):
        self.base, self.inverse = base, pow(base, -1, 1 << 64)
        self.pow = self.inv = np.ones(1, np.uint64)

    def upto(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.pow) < n:
            size = n + n // 8  # batches are capped (masks._BATCH_CODEPOINTS): a little slack is enough
            self.pow = np.concatenate([[np.uint64(1)], np.cumprod(np.full(size - 1, self.base, np.uint64))])
            self.inv = np.concatenate([[np.uint64(1)], np.cumprod(np.full(size - 1, self.inverse, np.uint64))])
        return self.pow[:n], self.inv[:n]


class _KeyTable:
    """uint64 key -> int64 value, open addressing with linear probing, every operation vectorized."""

    def __init__(self, bits: int = 16):
        self.bits, self.n, self.max_probe = bits, 0, 0
        self.keys = np.zeros(1 << bits, np.uint64)
        self.values = np.full(1 << bits, -1, np.int64)  # -1: empty slot

    def _home(self, keys):
        # Fibonacci hashing: the top bits of key * 2^64/phi; a one-character word's hash is
        # just its codepoint + 1, whose own top bits are all zero
        return ((keys * GOLDEN) >> np.uint64(64 - self.bits)).astype(np.int64)

    def get(self, keys: np.ndarray) -> np.ndarray:
        out = np.full(len(keys), -1, np.int64)
        todo, home, mask = np.arange(len(keys)), self._home(keys), (1 << self.bits) - 1
        for d in range(self.max_probe + 1):
            slot = (home[todo] + d) & mask
            value = self.values.take(slot)
            hit = (value >= 0) & (self.keys.take(slot) == keys[todo])
            out[todo[hit]] = value[hit]
            todo = todo[(value >= 0) & ~hit]  # an empty slot ends the probe: absent
            if len(todo) == 0:
                break
        return out

    def put(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Insert keys absent from the table and distinct from each other."""
        if 2 * (self.n + len(keys)) > (1 << self.bits):  # keep the load under 1/2
            used = self.values >= 0
            old_keys, old_values = self.keys[used], self.values[used]
            self.__init__(max(self.bits + 1, int(np.ceil(np.log2(4 * (self.n + len(keys)))))))
            self.put(old_keys, old_values)
        todo, home, mask, d = np.arange(len(keys)), self._home(keys), (1 << self.bits) - 1, 0
        while len(todo):
            slot = (home[todo] + d) & mask
            free = self.values[slot] < 0
            _, first = np.unique(slot[free], return_index=True)  # one claimant per free slot
            winner = todo[free][first]
            self.keys[slot[free][first]], self.values[slot[free][first]] = keys[winner], values[winner]
            if len(winner):
                self.max_probe = max(self.max_probe, d)
            placed = np.zeros(len(keys), dtype=bool)
            placed[winner] = True
            todo, d = todo[~placed[todo]], d + 1
        self.n += len(keys)


class _Growable:
    """An append-only 2-D numpy array with amortized O(1) appends (capacity doubles)."""

    def __init__(self, dtype, width: int):
        self._buf = np.zeros((1024, width), dtype)
        self.n = 0

    def extend(self, rows: np.ndarray) -> int:
        start, need = self.n, self.n + len(rows)
        if need > len(self._buf):
            bigger = np.zeros((max(need, 2 * len(self._buf)), self._buf.shape[1]), self._buf.dtype)
            bigger[:start] = self._buf[:start]
            self._buf = bigger
        self._buf[start:need] = rows
        self.n = need
        return start

    @property
    def data(self) -> np.ndarray:
        return self._buf[: self.n]


class FastSpans:
    """`spans_of_codepoints` by character classes and a cache: word -> its pieces.

    Measured on one core: a cached word costs ~0.1 us, a new one ~4 us (the model's own
    tokenize); probing the character classes ~3 ms per block of 1024 codepoints seen, once per process.
    """

    def __init__(self, tok: "WordPieceTokenizer"):  # noqa: F821 (pipeline/rows/tokenizer.py)
        self.tok = tok
        spec = tok.spec
        norm = spec.get("normalizer") or {"type": None}
        supported = (
            norm["type"] in (None, "BertNormalizer")
            and (spec.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
            and all(t.get("special") for t in spec.get("added_tokens") or [])  # added non-special tokens match raw text
        )
        self.classes = char_classes(spec) if supported else None
        # A normalizer that leaves word characters alone lets the model tokenize words directly.
        changes_words = norm.get("clean_text") or norm.get("lowercase") or norm.get("strip_accents")
        self.direct = norm["type"] is None or not changes_words
        self.excluded = set(tok.excluded_ids.tolist())
        self.powers = [_Powers(b) for b in _BASES]
        self.lock = threading.Lock()
        self._clear()

    def _clear(self):
        self.table = _KeyTable()  # first hash -> entry
        self.collided: dict[str, int] = {}  # words whose first hash another cached word holds
        self.entries = _Growable(np.int64, 4)  # (second hash as int64, length, pieces start, piece count)
        self.pieces = _Growable(np.int32, 3)  # (offset in word, length, id)

    def __call__(self, cps: np.ndarray):
        cls = None if self.classes is None else self.classes.of(cps)
        if cls is None or (cls < 0).any():  # a character unlike the three classes: stay exact
            return self.tok.reference_spans_of_codepoints(cps)
        with self.lock:  # the cache is shared state; Beam may run bundles on several threads
            return self._spans(cps, cls)

    def _spans(self, cps: np.ndarray, cls: np.ndarray):
        if self.entries.n > _CACHE_LIMIT:
            self._clear()
        # words: maximal runs of WORD characters, and each _ISOLATED character alone
        word = np.concatenate([[False], cls == WORD, [False]])
        iso = cls == _ISOLATED
        starts = np.flatnonzero(iso | (word[1:-1] & ~word[:-2]))
        ends = np.flatnonzero(iso | (word[1:-1] & ~word[2:])) + 1
        lens = ends - starts
        values = cps.astype(np.uint64) + np.uint64(1)
        prefix = np.zeros(len(cps) + 1, np.uint64)
        keys = []
        for powers in self.powers:  # hash of word = (H[end] - H[start]) * B^-start, H a prefix sum
            pw, inv = powers.upto(len(cps) + 1)
            np.cumsum(values * pw[:-1], out=prefix[1:])
            keys.append((prefix.take(ends) - prefix.take(starts)) * inv.take(starts))
        entry = self.table.get(keys[0])
        if self.entries.n:
            ent = self.entries.data.take(np.maximum(entry, 0), axis=0)  # (words, 4)
        else:
            ent = np.zeros((len(entry), 4), np.int64)
        # absent, or another word with the same first hash
        missing = np.flatnonzero((entry < 0) | (ent[:, 0] != keys[1].view(np.int64)) | (ent[:, 1] != lens))
        if len(missing):
            entry[missing] = self._resolve(cps, starts[missing], lens[missing], keys[0][missing], keys[1][missing])
            ent[missing] = self.entries.data[entry[missing]]
        rows = ranges_to_positions(ent[:, 2], ent[:, 3])
        p = self.pieces.data.take(rows, axis=0)  # (pieces, 3)
        return (np.repeat(starts, ent[:, 3]) + p[:, 0]).astype(np.int32), p[:, 1].copy(), p[:, 2].copy()

    def _resolve(self, cps, starts, lens, key1, key2) -> np.ndarray:
        """Entries of words not found by hash: collided ones by text, new ones from the tokenizer.

        Occurrences are first reduced to distinct words (a new word recurs within a batch), so
        the per-word Python below runs once per distinct word.
        """
        _, rep, inverse = np.unique(key1, return_index=True, return_inverse=True)
        odd = np.flatnonzero((key2 != key2[rep][inverse]) | (lens != lens[rep][inverse]))  # first hash shared
        todo = np.concatenate([rep, odd])
        words = [codepoints_to_text(cps[s : s + n]) for s, n in zip(starts[todo].tolist(), lens[todo].tolist())]
        new = {}
        for i, w in enumerate(words):
            if w not in self.collided:
                new.setdefault(w, i)
        entry_of = {w: self.collided[w] for w in words if w in self.collided}
        if new:
            at = todo[np.fromiter(new.values(), np.int64, len(new))]
            pieces = self._tokenize(list(new))
            counts = np.array([len(p) for p in pieces], np.int64)
            p0 = self.pieces.extend(np.array([x for p in pieces for x in p], np.int32).reshape(-1, 3))  # (pieces, 3)
            ids = self.entries.n + np.arange(len(new))
            first_piece = p0 + np.cumsum(counts) - counts
            self.entries.extend(np.stack([key2[at].view(np.int64), lens[at], first_piece, counts], axis=1))
            fresh = np.zeros(len(new), dtype=bool)
            fresh[np.unique(key1[at], return_index=True)[1]] = True
            fresh &= self.table.get(key1[at]) < 0  # else another word holds this first hash
            self.table.put(key1[at][fresh], ids[fresh])
            for w, e, f in zip(new, ids.tolist(), fresh.tolist()):
                entry_of[w] = e
                if not f:
                    self.collided[w] = e
        found = np.array([entry_of[w] for w in words], np.int64)
        entry = found[: len(rep)][inverse]
        entry[odd] = found[len(rep) :]
        return entry

    def _tokenize(self, words: list[str]) -> list[list[tuple[int, int, int]]]:
        """(offset in word, length, id) of each word's pieces, [UNK] and specials left out."""
        out = []
        if self.direct:  # the model sees the word as it is
            model, cut = self.tok.hf.model, len(self.tok.prefix)
            for w in words:
                pieces, off = [], 0
                for k, t in enumerate(model.tokenize(w)):
                    n = len(w) if t.id in self.excluded else len(t.value) - (cut if k else 0)
                    if t.id not in self.excluded and n > 0:
                        pieces.append((off, n, t.id))
                    off += n
                out.append(pieces)
        else:
            for enc in self.tok.hf.encode_batch(words, add_special_tokens=False):
                pieces = zip(enc.ids, enc.offsets)
                out.append([(s, e - s, i) for i, (s, e) in pieces if i not in self.excluded and e > s])
        return out
