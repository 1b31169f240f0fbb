"""Pages -> packed examples of codepoints: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`.

Pure functions on numpy arrays (no Beam): the job wraps them in DoFns. The one random decision
here, the SOP coin, comes from pipeline/seeds.py (a stable hash of named values, never Python's
salted `hash()`), so the same pages and config give the same examples whatever the worker count
or runner.

Packing is greedy over the concatenation of a group's pages: a window of
`seq_len - specials` codepoints is cut after the last whitespace in its second half, or
hard-cut when that half has no whitespace (a CJK paragraph, a URL). Pages are joined by
`DOC_SEPARATOR`; see its comment for why.
"""

from dataclasses import dataclass

import numpy as np

from contract import schema
from pipeline import seeds

# Pages that share an example are joined by a newline: it is whitespace, so no CANINE-C span
# and no WordPiece word straddles two documents, and it is what a reader sees between two
# articles. SEP is not used because it marks the A/B boundary that SOP is about.
DOC_SEPARATOR = ord("\n")
# A cut at whitespace is searched in the last (1 - MIN_CUT_FILL) of the window: a cut there
# wastes at most a word, and a window with no whitespace in that part (a run of CJK or a URL)
# is hard-cut rather than shrunk below half full.
MIN_CUT_FILL = 0.5
# SOP splits a chunk at the whitespace nearest its middle, if one lies in the middle half;
# otherwise it hard-cuts at the middle (ALBERT's SOP wants two non-trivial segments).
SOP_SPLIT_WINDOW = 0.25
# Whitespace is what Python's str.isspace() says (so "whitespace-delimited" means what
# str.split() sees); every such codepoint is <= U+3000 (tests/pipeline/test_examples.py
# checks all of Unicode). Specials are PAD and U+E000..U+E0FF: the cleaner removed those
# from the text, so any that appear are CLS / SEP / MASK. One uint8 table answers both.
_WHITESPACE_FLAG, _SPECIAL_FLAG = 1, 2
_SPECIAL_LO, _SPECIAL_HI = schema.ALIASED_RANGE
_FLAGS = np.zeros(_SPECIAL_HI + 2, dtype=np.uint8)  # last slot: every codepoint above the range
_FLAGS[[c for c in range(0x3001) if chr(c).isspace()]] = _WHITESPACE_FLAG
_FLAGS[schema.PAD] = _FLAGS[_SPECIAL_LO : _SPECIAL_HI + 1] = _SPECIAL_FLAG


@dataclass
class PackedExample:
    page_ids: list[int]  # pages whose text is in it, in order
    codepoints: np.ndarray  # int32: CLS A SEP [B SEP], no padding, len <= seq_len
    segment_ids: np.ndarray  # int8, same length (0 for CLS+A+SEP, 1 for B+SEP)
    sop_label: int  # schema.SOP_*
    part: int  # index of this example among those whose first page is page_ids[0] (for example_id)


def text_to_codepoints(text: str) -> np.ndarray:
    """`[ord(c) for c in text]` as int32, vectorized (UTF-32 is one 4-byte unit per codepoint)."""
    try:
        data = text.encode("utf-32-le")
    except UnicodeEncodeError as e:  # a lone surrogate: not a Unicode scalar value
        raise ValueError(f"text has a lone surrogate U+{ord(text[e.start]):04X} at character {e.start}") from None
    return np.frombuffer(data, dtype="<u4").astype(np.int32)


def codepoints_to_text(cps: np.ndarray) -> str:
    """Inverse of `text_to_codepoints` (specials decode to their private-use characters)."""
    return np.asarray(cps, dtype="<u4").tobytes().decode("utf-32-le")


# A pack group's stream is flagged this many codepoints at a time: np.minimum of the whole stream
# was an int32 copy of it (64 MB for a 16M-codepoint group) beside the flags.
_FLAG_BLOCK = 1 << 20


def _flags(cps: np.ndarray) -> np.ndarray:
    if not (isinstance(cps, np.ndarray) and cps.ndim == 1 and len(cps) > _FLAG_BLOCK):
        return _FLAGS.take(np.minimum(cps, _SPECIAL_HI + 1))  # take: ~2x faster than fancy indexing here
    out = np.empty(len(cps), np.uint8)
    for i in range(0, len(cps), _FLAG_BLOCK):
        _FLAGS.take(np.minimum(cps[i : i + _FLAG_BLOCK], _SPECIAL_HI + 1), out=out[i : i + _FLAG_BLOCK])
    return out


def is_whitespace(cps: np.ndarray) -> np.ndarray:
    """Boolean mask: which codepoints are whitespace (str.isspace)."""
    return (_flags(cps) & _WHITESPACE_FLAG).view(bool)


def is_delimiter(cps: np.ndarray) -> np.ndarray:
    """Boolean mask: whitespace or a special codepoint (PAD, CLS, SEP, MASK, ...)."""
    return _flags(cps) != 0


def is_special(cps: np.ndarray) -> np.ndarray:
    """Boolean mask: PAD or a private-use special (the cleaner removed these from the text)."""
    return (_flags(cps) >> 1).view(bool)


def ranges_to_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated [start, start + length) ranges as one int64 array, without a Python loop."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    # position k of range r is k - (ends[r] - lengths[r]) + starts[r]
    return np.arange(total, dtype=np.int64) + np.repeat(np.asarray(starts, np.int64) - (ends - lengths), lengths)


def example_id(lang: str, ex: PackedExample, copy: int) -> str:
    """Unique across the output: `lang` may contain '-', but the last three fields are integers."""
    return f"{lang}-{ex.page_ids[0]}-{ex.part}-{copy}"


def _concatenate_pages(pages):
    """One stream of all page texts joined by DOC_SEPARATOR, its whitespace positions, each page's [start, end)."""
    ids, texts, prev_id = [], [], None
    for page_id, text in pages:
        if not isinstance(page_id, (int, np.integer)) or page_id < 0:
            raise ValueError(f"page id {page_id!r} must be a non-negative integer")
        if prev_id is not None and page_id < prev_id:
            raise ValueError(f"pages must be sorted by id: page {page_id} comes after page {prev_id}")
        prev_id = page_id
        if text:  # an empty page has no character to place in any example
            ids.append(int(page_id))
            texts.append(text)
    lengths = np.array([len(t) for t in texts], np.int64)  # len() counts codepoints
    starts = np.cumsum(lengths + 1) - lengths - 1
    ends = starts + lengths
    # Encoded a page at a time into the one int32 stream: encoding the joined texts held the join,
    # its UTF-32 bytes and their int32 copy at once, 3-4x the stream (a 16M-codepoint group packed
    # at +270 MB, measured; the pages' own strings are held by the caller either way).
    stream = np.empty(int(lengths.sum()) + max(len(texts) - 1, 0), np.int32)
    stream[starts[1:] - 1] = DOC_SEPARATOR
    for page_id, text, start, end in zip(ids, texts, starts.tolist(), ends.tolist()):
        try:
            stream[start:end] = np.frombuffer(text.encode("utf-32-le"), "<u4")  # one 4-byte unit per codepoint
        except UnicodeEncodeError:  # a lone surrogate: name the page
            try:
                text_to_codepoints(text)
            except ValueError as e:
                raise ValueError(f"page {page_id}: {e}") from None
            raise
    flags = _flags(stream)
    if (flags >= _SPECIAL_FLAG).any():  # the cleaner should have replaced these (schema.is_aliased)
        aliased = np.flatnonzero(flags >= _SPECIAL_FLAG)
        k = int(ends.searchsorted(aliased[0], side="right"))
        raise ValueError(
            f"page {ids[k]}: character {aliased[0] - starts[k]} is U+{stream[aliased[0]]:04X}, which aliases a special "
            "codepoint; the cleaner must replace it"
        )
    ws_pos = np.flatnonzero(flags != 0)  # no specials left: every flag is whitespace (bool: 6x faster)
    return stream, ws_pos, np.array(ids, np.int64), starts, ends


def _chunk_bounds(stream: np.ndarray, ws_pos: np.ndarray, is_sep: np.ndarray, capacity: int) -> list[tuple[int, int]]:
    """Greedy [start, end) chunks of at most `capacity`, cut after whitespace where possible.

    The loop runs once per chunk (not per character); separators at a chunk's edges are
    dropped, so every chunk starts and ends with page text.
    """
    n = len(stream)
    bounds, start = [], 0
    while start < n:
        if is_sep[start]:
            start += 1
            continue
        end = start + capacity
        if end >= n:
            end = n
        else:
            # last whitespace w in [start + MIN_CUT_FILL * capacity, end): cut after it
            i = int(ws_pos.searchsorted(end, side="left")) - 1
            if i >= 0 and ws_pos[i] >= start + int(MIN_CUT_FILL * capacity):
                end = int(ws_pos[i]) + 1
        stop = end - 1 if is_sep[end - 1] else end
        bounds.append((start, stop))
        start = end
    return bounds


def _sop_splits(ws_pos: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Length of A for each chunk stream[start:stop] (>= 2 characters) split near its middle:
    after the whitespace nearest the middle (the earlier on a tie) if one lies in the middle
    half, else a hard cut at the middle. Vectorized over the chunks."""
    m = stops - starts
    mid = m // 2
    lo = starts + (m * (0.5 - SOP_SPLIT_WINDOW)).astype(np.int64)
    hi = np.minimum(starts + (m * (0.5 + SOP_SPLIT_WINDOW)).astype(np.int64), stops - 1)  # B never empty
    target = starts + mid - 1  # a whitespace here gives A exactly `mid` characters
    padded = np.concatenate([[-(1 << 62)], ws_pos, [1 << 62]])  # sentinels: never inside a window
    i = padded.searchsorted(target, side="right")
    left, right = padded[i - 1], padded[i]  # nearest whitespace on each side of the target
    left_ok, right_ok = (left >= lo) & (left < hi), (right >= lo) & (right < hi)
    take_right = right_ok & (~left_ok | (right - target < target - left))
    best = np.where(take_right, right, left)
    return np.where(left_ok | right_ok, best + 1 - starts, np.maximum(mid, 1))


def pack_pages(
    pages: list[tuple[int, str]], seq_len: int, sentence_order: bool = False, seed: int = 0
) -> list[PackedExample]:
    """Pack a deterministic group of pages (sorted by id) into examples of at most `seq_len`.

    Every character of every page appears exactly once, in order, across the examples (A
    before B once a swap is undone); only DOC_SEPARATORs between pages are added. With
    `sentence_order` each chunk is split into A and B near the middle and swapped with
    probability 0.5 (ALBERT SOP) by a stable hash of (seed, first page id, part); a chunk of
    one character cannot be split and gets SOP_NO_PAIR. The examples' arrays are views of one
    buffer per call (one copy per group instead of one allocation per example).
    """
    n_special = 3 if sentence_order else 2
    if seq_len < n_special + 1:
        raise ValueError(f"seq_len {seq_len} leaves no room for text beside {n_special} special codepoints")
    stream, ws_pos, page_ids, page_starts, page_ends = _concatenate_pages(pages)
    is_sep = np.zeros(len(stream), dtype=bool)
    is_sep[page_starts[1:] - 1] = True
    bounds = np.array(_chunk_bounds(stream, ws_pos, is_sep, seq_len - n_special), np.int64).reshape(-1, 2)  # (chunks, 2)
    if len(bounds) == 0:
        return []
    starts, stops = bounds[:, 0], bounds[:, 1]
    # pages overlapping [start, stop): those ending after start and starting before stop
    first, last = page_ends.searchsorted(starts, side="right"), page_starts.searchsorted(stops, side="left")
    first_id = page_ids[first]
    new_run = np.concatenate([[True], first_id[1:] != first_id[:-1]])  # chunks come in page order
    part = np.arange(len(starts)) - np.maximum.accumulate(np.where(new_run, np.arange(len(starts)), 0))
    lengths = stops - starts
    paired = np.full(len(starts), sentence_order) & (lengths >= 2)
    a_len = np.where(paired, _sop_splits(ws_pos, starts, stops), lengths)
    sop = np.full(len(starts), schema.SOP_NO_PAIR, np.int64)
    for j in np.flatnonzero(paired).tolist():  # a fair coin from a stable hash: no generator per example
        swap = seeds.sop_swapped(seed, int(first_id[j]), int(part[j]))
        sop[j] = schema.SOP_SWAPPED if swap else schema.SOP_IN_ORDER
    swapped = sop == schema.SOP_SWAPPED
    # layout: CLS seg0 SEP [seg1 SEP]; seg0 is A unless swapped
    seg0_start, seg0_len = np.where(swapped, starts + a_len, starts), np.where(swapped, lengths - a_len, a_len)
    seg1_start, seg1_len = np.where(swapped, starts, starts + a_len), lengths - seg0_len
    size = lengths + 2 + paired
    offset = np.cumsum(size) - size
    cps, seg_ids = np.empty(int(size.sum()), np.int32), np.zeros(int(size.sum()), np.int8)
    cps[offset] = schema.CLS
    cps[offset + size - 1] = schema.SEP
    cps[(offset + 1 + seg0_len)[paired]] = schema.SEP
    rows = zip(*(x.tolist() for x in (offset, size, seg0_start, seg0_len, seg1_start, seg1_len)))
    examples = []
    for j, (o, n, s0, n0, s1, n1) in enumerate(rows):
        cps[o + 1 : o + 1 + n0] = stream[s0 : s0 + n0]
        if n1:
            cps[o + 2 + n0 : o + n - 1] = stream[s1 : s1 + n1]
            seg_ids[o + 2 + n0 : o + n] = 1
        ids = page_ids[first[j] : last[j]].tolist()
        examples.append(PackedExample(ids, cps[o : o + n], seg_ids[o : o + n], int(sop[j]), int(part[j])))
    return examples
