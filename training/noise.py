"""CharBERT's noisy language modeling (Ma et al., COLING 2020, arXiv:2011.01513): typos in the input, clean targets.

    noisy = add_noise(ids, segments, offsets, keys, protected, predicted, rate=0.02, seq_len=2048, draw=draw)

CharBERT (docs/canine.md "Related ideas") edits about 10% of the words of its input: a character
inserted, deleted, or two adjacent ones swapped; the model recovers the original. The batch builder
(training/batch.py) calls this after its masking decisions, on the input characters only: the
prediction targets stay the clean characters, and positions are remapped through `new_index`.

Rate: per character, not per word. Each eligible character is independently an edit site with
probability `rate`, so a word of L eligible characters gets at least one edit with probability
1 - (1 - rate)^L: CharBERT's 10% of words is rate ~0.02 for 5-character words, and rate 0.1 edits
about 41% of them. The edit is uniform over KINDS:
  insert      a character before the site
  delete      the site
  swap        the site with the next character of its word
  substitute  the site by another character
Inserted and substituting characters are copies of a random word character of the same example's
input (it keeps the script of multilingual text; a random codepoint would be noise no language
has). They are drawn among word characters only, so never a special or a MASK, and never a masked
character (masked ones are MASK in the input). A substitution may draw the character it replaces
(a no-op, about as often as that character's share of the example's word characters).

Eligible: characters inside words (maximal runs of characters that are neither whitespace, as
str.isspace says, nor special: PAD and contract's private-use U+E000..U+E0FF), not `protected`.
A site whose edit is impossible does nothing (counted as `skipped`):
  * delete at a `predicted` position (its input slot must stay), or of a word's last character (of
    deletions that would remove a whole word, the leftmost is skipped);
  * swap at a word's last character or before a protected one;
  * any site right after a swap site: the left site wins. Judged before skipping, so of a run of
    adjacent swap sites only the first swaps.
Insertions that would make a row longer than `seq_len` are dropped from the row's end
(`dropped_insertions`).

Randomness: `draw(keys, index, stream)` is U[0, 1) per (example key, character index in the row,
stream): training/seeds.py's batch_uniform of (seed, crc32(example_id), index, stream), its streams
NOISE_SITE, NOISE_KIND and NOISE_SOURCE, so the same rows and seed give the same noise in any
process, row order and chunking; the seed is new every epoch.
Vectorized over the flat ragged arrays: no Python loop per character or row.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np

from contract import schema
from training.seeds import Stream

KINDS = ("insert", "delete", "swap", "substitute")
INSERT, DELETE, SWAP, SUBSTITUTE = range(len(KINDS))

# Not word characters: whitespace (every str.isspace codepoint is <= U+3000) and specials (PAD,
# U+E000..U+E0FF). The table's last slot stands for every codepoint above the special range.
_SPECIAL_LO, _SPECIAL_HI = schema.ALIASED_RANGE
_NOT_WORD = np.zeros(_SPECIAL_HI + 2, dtype=bool)
_NOT_WORD[[c for c in range(0x3001) if chr(c).isspace()]] = True
_NOT_WORD[schema.PAD] = True
_NOT_WORD[_SPECIAL_LO : _SPECIAL_HI + 1] = True


def is_word_char(ids: np.ndarray) -> np.ndarray:
    """Boolean mask: neither whitespace nor a special codepoint."""
    return ~_NOT_WORD.take(np.minimum(ids, _SPECIAL_HI + 1))


@dataclass
class Noised:
    ids: np.ndarray  # flat noisy input characters
    segments: np.ndarray  # flat segment ids; an inserted character takes the one of the character after it
    offsets: np.ndarray  # (rows + 1,) row offsets into ids
    new_index: np.ndarray  # (N,) flat index in `ids` of each input character; -1 if deleted
    edits: np.ndarray  # (N,) int8 edit applied at each input character: -1 none, else a KINDS index
    counts: dict  # eligible, sites, each of KINDS (applied), skipped, dropped_insertions


def add_noise(ids: np.ndarray, segments: np.ndarray, offsets: np.ndarray, keys: np.ndarray, protected: np.ndarray,
              predicted: np.ndarray, *, rate: float, seq_len: int,
              draw: Callable[[np.ndarray, np.ndarray, int], np.ndarray]) -> Noised:
    """Flat ragged input (ids, segments, offsets; keys: one per row) -> the same with typos.
    `protected` and `predicted` are flat indices: never edited / never deleted."""
    n, lengths = len(ids), np.diff(offsets)
    index = np.arange(n) - np.repeat(offsets[:-1], lengths)  # position in the row
    word = is_word_char(ids)
    eligible = word.copy()
    eligible[protected] = False
    is_protected = word & ~eligible  # protected word characters (the rest are not word characters)
    u = draw(np.repeat(keys, lengths), index, Stream.NOISE_SITE)  # for every character: cheaper than gathering
    sites = np.flatnonzero(eligible & (u < rate))
    srow, sidx = np.searchsorted(offsets, sites, side="right") - 1, index[sites]
    kind = (draw(keys[srow], sidx, Stream.NOISE_KIND) * len(KINDS)).astype(np.int64)

    ok = np.ones(len(sites), dtype=bool)
    is_predicted = np.zeros(n, dtype=bool)
    is_predicted[predicted] = True
    ok[kind == DELETE] = ~is_predicted[sites[kind == DELETE]]
    partner = np.minimum(sites + 1, n - 1)
    swap_ok = (sites + 1 < offsets[srow + 1]) & word[partner] & ~is_protected[partner]
    ok[kind == SWAP] &= swap_ok[kind == SWAP]
    after_swap = (sidx[1:] > 0) & (sites[1:] == sites[:-1] + 1) & (kind[:-1] == SWAP)  # same row, right neighbour
    ok[1:] &= ~after_swap
    word_flat = np.flatnonzero(word)
    _keep_words(ok, sites, kind, word_flat, offsets, srow)
    dropped = _fit_rows(ok, sites, kind, srow, lengths, seq_len)

    applied = {k: sites[ok & (kind == k)] for k in range(len(KINDS))}
    ins, dels, swaps, subs = applied[INSERT], applied[DELETE], applied[SWAP], applied[SUBSTITUTE]
    produced = np.ones(n, dtype=np.int64)  # output characters per input character
    produced[ins] = 2
    produced[dels] = 0
    new_index = np.cumsum(produced)
    new_index -= 1
    row_ends = new_index[offsets[1:] - 1] + 1  # before deletions mark -1
    new_index[dels] = -1
    # Repeating each character by what it produces puts every kept one in place, and a copy of the
    # next character (its segment id is the inserted one's) where an insertion goes.
    new_ids, new_segments = np.repeat(ids, produced), np.repeat(segments, produced)
    source = ids[_sources(np.concatenate([ins, subs]), word_flat, offsets, keys, index, draw)]
    new_ids[new_index[ins] - 1] = source[: len(ins)]
    new_ids[new_index[subs]] = source[len(ins):]
    new_ids[new_index[swaps]], new_ids[new_index[swaps + 1]] = ids[swaps + 1], ids[swaps]  # never deleted
    edits = np.full(n, -1, dtype=np.int8)
    edits[sites[ok]] = kind[ok]
    counts = {"eligible": int(eligible.sum()), "sites": len(sites),
              **{name: len(applied[k]) for k, name in enumerate(KINDS)},
              "skipped": int((~ok).sum()) - dropped, "dropped_insertions": dropped}
    return Noised(new_ids, new_segments, np.concatenate([[0], row_ends]), new_index, edits, counts)


def _keep_words(ok, sites, kind, word_flat, offsets, srow):
    """Skip the leftmost deletion of each word whose every character would be deleted."""
    at = np.flatnonzero(ok & (kind == DELETE))
    if not len(at):
        return
    dels, r = sites[at], srow[at]
    # A word is a run of consecutive flat indices in word_flat, inside one row.
    p = np.searchsorted(word_flat, dels)  # word_flat[p] == dels
    breaks = np.flatnonzero(np.diff(word_flat) != 1) + 1  # run starts in word_flat, beside 0
    run = np.searchsorted(breaks, p, side="right")  # which run of word_flat
    run_lo = np.concatenate([[0], breaks])[run]
    run_hi = np.concatenate([breaks, [len(word_flat)]])[run]
    start = np.maximum(word_flat[run_lo], offsets[r])  # a run may span a row boundary: cut it there
    stop = np.minimum(word_flat[run_hi - 1] + 1, offsets[r + 1])
    count = np.searchsorted(dels, stop) - np.searchsorted(dels, start)
    first = np.searchsorted(dels, start) == np.arange(len(dels))
    ok[at[first & (count == stop - start)]] = False


def _fit_rows(ok, sites, kind, srow, lengths, seq_len) -> int:
    """Drop a row's last insertions while it would exceed seq_len; returns how many were dropped."""
    grow = np.bincount(srow[ok & (kind == INSERT)], minlength=len(lengths)) \
        - np.bincount(srow[ok & (kind == DELETE)], minlength=len(lengths))
    excess = np.maximum(lengths + grow - seq_len, 0)
    if not excess.any():
        return 0
    at = np.flatnonzero(ok & (kind == INSERT))
    per_row = np.bincount(srow[at], minlength=len(lengths))
    from_end = np.cumsum(per_row)[srow[at]] - 1 - np.arange(len(at))  # 0 = the row's last insertion
    drop = at[from_end < excess[srow[at]]]
    ok[drop] = False
    return len(drop)


def _sources(sites, word_flat, offsets, keys, index, draw) -> np.ndarray:
    """A random word character of each site's row (flat index); every site's row has one: the site."""
    first = np.searchsorted(word_flat, offsets[:-1])
    count = np.searchsorted(word_flat, offsets[1:]) - first
    r = np.searchsorted(offsets, sites, side="right") - 1
    return word_flat[first[r] + (draw(keys[r], index[sites], Stream.NOISE_SOURCE) * count[r]).astype(np.int64)]
