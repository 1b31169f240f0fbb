"""Mask plans of CANINE-C and CANINE-S (paper §3.2, §4.1.3), stored with the unmasked example.

A plan is positions and actions, not a masked copy: the training-side batch builder applies
it, so one shard serves both objectives.

Speed (the goal, benchmarks/preprocess.py: 20 MB/s per core for codepoints + packing + masking) comes from planning a
whole batch of examples with array operations; per-example numpy calls cost more than the
work itself at 2,048 characters. Batching must not change a plan, so every random number is
a pure function of (example's `mask_key`, stream, index within the example): the counter
streams of pipeline/seeds.py, whose table lists each decision here. The one-example functions
that take a numpy Generator (`char_mask_plan`, `subword_plan`) run the same code on draws from it.
"""

import dataclasses
import unicodedata
from dataclasses import dataclass

import numpy as np

from contract import schema
from pipeline.rows.examples import PackedExample, example_id, is_delimiter, ranges_to_positions
from pipeline.seeds import GeneratorUniforms, Stream, mask_uniforms


# CANINE-C span rules (docs/canine.md, "Spans in scripts written without spaces"): the paper's
# whitespace runs (§3.2.1), or those runs with their stretches of unspaced scripts (Han, kana,
# Thai, ...) cut to at most CHAR_SPAN_MAX characters. 8 gives pieces of 4..8 characters, ~6 on
# average: ~20 UTF-8 bytes of CJK or Thai, ByT5's mean span.
CHAR_SPAN_RULES = ("bounded", "whitespace")
CHAR_SPAN_MAX = 8


@dataclass(frozen=True)
class MaskPlanConfig:
    char_spans: str = CHAR_SPAN_RULES[0]  # CANINE-C span rule: "bounded" (ours) or "whitespace" (paper §3.2.1)
    char_span_max: int = CHAR_SPAN_MAX  # "bounded": longest span holding an unspaced-script character
    char_rate: float = schema.MASK_RATE  # CANINE-C: share of spans chosen (paper §3.2.1)
    max_char_predictions: int = schema.MAX_CHAR_PREDICTIONS  # CANINE-C: 320 characters per example
    subword_rate: float = schema.MASK_RATE  # CANINE-S: share of subwords chosen (paper §3.2.2)
    max_subword_predictions: int = schema.MAX_SUBWORD_PREDICTIONS  # CANINE-S: 80 per example
    p_mask: float = schema.SUBWORD_ACTION_SHARES[schema.ACTION_MASK]  # CANINE-S: BERT's 80% MASK ...
    p_random: float = schema.SUBWORD_ACTION_SHARES[schema.ACTION_RANDOM]  # ... 10% random same-length subword; 10% keep

    def __post_init__(self):
        if self.char_spans not in CHAR_SPAN_RULES:
            raise ValueError(f"char_spans {self.char_spans!r} must be one of {', '.join(CHAR_SPAN_RULES)}")
        if self.char_span_max < 1:
            raise ValueError(f"char_span_max {self.char_span_max} must be at least 1")

    @classmethod
    def of(cls, config) -> "MaskPlanConfig":
        """The plans a PreprocessConfig asks for, read from its fingerprint as `canine validate`
        reads them from a manifest (`from_fingerprint`), so the two cannot disagree."""
        return cls.from_fingerprint(config.fingerprint())

    @classmethod
    def from_fingerprint(cls, fingerprint: dict) -> "MaskPlanConfig":
        """The plans of an output whose manifest's `config` is `fingerprint`. Outputs made before
        the span rule was an option (no `char_spans` recorded) have the paper's whitespace spans."""
        return cls(char_spans=fingerprint.get("char_spans", "whitespace"),
                   char_span_max=int(fingerprint.get("char_span_max", CHAR_SPAN_MAX)))

    def spans(self, cps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the CANINE-C spans of `cps` under this rule: every span a planner may
        choose, whole, and what `canine validate` checks the plans against."""
        if self.char_spans == "whitespace":
            return whitespace_spans(cps)
        return bounded_spans(cps, self.char_span_max)


# One vectorized pass plans at most this many codepoints (~500 examples of 2,048): its
# temporaries, and the tokenizer's tables of powers (32 bytes a codepoint), stay ~40 MB.
_BATCH_CODEPOINTS = 1 << 20

# --- grouped-array helpers --------------------------------------------------------------------
def target_counts(n: np.ndarray, rate: float) -> np.ndarray:
    """How many of n spans to choose: rate * n rounded half up, at least 1 when n > 0."""
    n = np.asarray(n, dtype=np.int64)
    return np.where(n > 0, np.maximum(1, np.floor(n * rate + 0.5)), 0).astype(np.int64)


def target_count(n: int, rate: float) -> int:
    return int(target_counts(np.array([n]), rate)[0])


def _rank_in_group(group: np.ndarray) -> np.ndarray:
    """Index of each item within its run of equal group ids (groups contiguous)."""
    first = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]])) if len(group) else np.zeros(0, np.int64)
    return np.arange(len(group)) - np.repeat(first, np.diff(np.append(first, len(group))))


def _split(values: np.ndarray, group: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """`values` (sorted by group) cut into one view per group 0 .. n_groups - 1."""
    cuts = np.searchsorted(group, np.arange(n_groups + 1)).tolist()
    return [values[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _random_order(example: np.ndarray, index: np.ndarray, u: np.ndarray, n_groups: int):
    """Items (examples contiguous, `index` = rank within its example) grouped by example, in
    the random order of `u` within each: (order, example of each, rank in its example's order).

    Each example's items are sorted in their own row of a padded table: 2.6x faster than one
    argsort of the batch (measured 5.4 vs 14 ms for 360k items). A key (42 bits of u, index)
    is unique within a row, so the order never depends on how the sort breaks ties.
    """
    if len(example) == 0:
        return (np.zeros(0, np.int64),) * 3
    width = int(index.max()) + 1  # < 2^21: an example has far fewer spans than that
    empty = np.iinfo(np.int64).max
    table = np.full(n_groups * width, empty, dtype=np.int64)
    table[example * width + index] = ((u * 2.0**42).astype(np.int64) << 21) | index
    table.reshape(n_groups, width).sort(axis=1)  # (examples, width), each row in place; padding sorts last
    at = np.flatnonzero(table != empty)
    row = at // width
    counts = np.bincount(example, minlength=n_groups)
    return (np.cumsum(counts) - counts)[row] + (table[at] & ((1 << 21) - 1)), row, at - row * width


def _greedy_within_budget(
    lengths: np.ndarray, group: np.ndarray, rank: np.ndarray, k: np.ndarray, budget: int
) -> np.ndarray:
    """Per group, in order: take an item if fewer than k[g] are taken and it fits in `budget`.

    Items are in visiting order, groups contiguous, `rank` = position within the group, every
    length >= 1. The rule is sequential, but each round takes, in every group at once, the
    longest prefix that fits, then resumes at the next item that fits what is left; a group
    needs another round only after a misfit, which is rare until its budget is nearly spent.
    """
    taken = np.zeros(len(lengths), dtype=bool)
    used, count = np.zeros(len(k), np.int64), np.zeros(len(k), np.int64)
    idx, step = np.arange(len(lengths)), rank  # items ahead; step 0 = a group's resume point
    while len(idx):
        g, n = group[idx], lengths[idx]
        cum = np.cumsum(n)
        # running total within the group: lengths >= 1 make the heads' offsets non-decreasing
        cum -= np.maximum.accumulate(np.where(step == 0, cum - n, 0))
        fit = (cum + used[g] <= budget) & (step < (k - count)[g])  # a prefix of each group
        taken[idx[fit]] = True
        n_fit = np.bincount(g[fit], minlength=len(k))
        count += n_fit
        used += np.bincount(g[fit], weights=n[fit], minlength=len(k)).astype(np.int64)
        # step == n_fit did not fit: resume at the first later item that fits the room left
        later = np.flatnonzero((step > n_fit[g]) & (n <= (budget - used)[g]) & (count < k)[g])
        if len(later) == 0:
            break
        head = later[np.concatenate([[True], g[later][1:] != g[later][:-1]])]
        resume = np.full(len(k), np.iinfo(np.int64).max)
        resume[g[head]] = step[head]
        keep = step >= resume[g]
        idx, step = idx[keep], (step - resume[g])[keep]
    return taken


# --- CANINE-C ---------------------------------------------------------------------------------
def whitespace_spans(cps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the maximal runs of non-whitespace, non-special codepoints.

    CANINE-C's spans split at whitespace only, not at punctuation (paper §3.2.1).
    """
    inside = np.zeros(len(cps) + 2, dtype=bool)  # padded: a run can start at 0 and end at len(cps)
    inside[1:-1] = ~is_delimiter(cps)
    starts = np.flatnonzero(inside[1:-1] & ~inside[:-2])
    ends = np.flatnonzero(inside[1:-1] & ~inside[2:]) + 1
    return starts.astype(np.int32), ends.astype(np.int32)


# Scripts written without spaces between words, [first, end) codepoint ranges (Unicode blocks);
# only their letters (categories L* and Nl) count, so the CJK brackets 《》 of Korean, which is
# written with spaces, do not. Hangul, Devanagari, Arabic, ... are spaced and are not here.
UNSPACED_RANGES = (
    (0x0E00, 0x0F00),  # Thai, Lao
    (0x0F00, 0x1000),  # Tibetan (a tsheg between syllables, no space between words)
    (0x1000, 0x10A0),  # Myanmar
    (0x1780, 0x1800),  # Khmer
    (0x1950, 0x1AB0),  # Tai Le, New Tai Lue, Khmer Symbols, Buginese, Tai Tham
    (0x1B00, 0x1B80),  # Balinese
    (0x2E80, 0x2FE0),  # CJK Radicals Supplement, Kangxi Radicals
    (0x3000, 0x3100),  # CJK Symbols and Punctuation (its letters: 々 〆 〇 ...), Hiragana, Katakana
    (0x3100, 0x3130),  # Bopomofo
    (0x3190, 0x3200),  # Kanbun, Bopomofo Extended, CJK Strokes, Katakana Phonetic Extensions
    (0x3400, 0x4DC0),  # CJK Unified Ideographs Extension A
    (0x4E00, 0xA4D0),  # CJK Unified Ideographs, Yi
    (0xA980, 0xAA00),  # Javanese, Myanmar Extended-B
    (0xAA60, 0xAAE0),  # Myanmar Extended-A, Tai Viet
    (0xF900, 0xFB00),  # CJK Compatibility Ideographs
    (0xFF00, 0xFFA0),  # fullwidth Latin letters, halfwidth katakana (not halfwidth Hangul)
    (0x17000, 0x18D00),  # Tangut
    (0x1AFF0, 0x1B300),  # Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana Extension
    (0x20000, 0x32400),  # CJK Unified Ideographs Extensions B..H, CJK Compatibility Ideographs Supplement
)
# Character classes in a run cut by `bounded_spans`: a letter of an unspaced script, a letter of
# another script (L*), or neutral (digits, punctuation, symbols, marks: they stay with the letters
# before them). One uint8 table: the BMP by category (astral letters of spaced scripts are rare),
# astral CJK from UNSPACED_RANGES; codepoints past it are neutral.
_NEUTRAL, _UNSPACED, _SPACED = 0, 1, 2
_CATEGORY = [unicodedata.category(chr(c)) for c in range(0x10000)]
_CLASS = np.zeros(UNSPACED_RANGES[-1][1] + 1, np.uint8)  # last slot: every codepoint above
_CLASS[:0x10000] = [_SPACED if cat[0] == "L" else _NEUTRAL for cat in _CATEGORY]
_LETTER = np.ones(len(_CLASS), bool)  # astral codepoints of the ranges: ideographs, kana, Tangut
_LETTER[:0x10000] = [cat[0] == "L" or cat == "Nl" for cat in _CATEGORY]
for _first, _end in UNSPACED_RANGES:
    _CLASS[_first:_end][_LETTER[_first:_end]] = _UNSPACED
_CLASS[-1] = _NEUTRAL
# A piece never starts inside a cluster a reader sees as one character: on a combining mark (M*),
# a zero-width (non-)joiner, or right after a character that joins the next one (Thai and Lao
# vowels written before their consonant, the Myanmar virama and Khmer coeng that stack the next
# consonant, ZWJ). So "เป็น" is cut only as [เป็][น], never after เ or before ็.
_GLUED = np.array([cat[0] == "M" for cat in _CATEGORY])
_GLUED[[0x200C, 0x200D]] = True
_JOINS_NEXT = np.zeros(0x10000, bool)
_JOINS_NEXT[[*range(0x0E40, 0x0E45), *range(0x0EC0, 0x0EC5), 0x1039, 0x17D2, 0x200D]] = True
del _CATEGORY, _LETTER


def _classes(cps: np.ndarray) -> np.ndarray:
    return _CLASS.take(np.minimum(cps, len(_CLASS) - 1))


def is_unspaced_letter(cps: np.ndarray) -> np.ndarray:
    """Boolean mask: which codepoints are letters of a script written without spaces."""
    return _classes(cps) == _UNSPACED


def bounded_spans(cps: np.ndarray, max_len: int = CHAR_SPAN_MAX) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of CANINE-C spans when some scripts have no spaces: the whitespace runs,
    except that a run holding a letter of an unspaced script (UNSPACED_RANGES) and longer than
    `max_len` clusters (a character with its combining marks: _GLUED) is cut

    1. where its letters change between an unspaced script and a spaced one ("...はiPhoneの..."
       -> "...は", "iPhone", "の..."): text in a spaced script is one span, as between spaces;
       neutral characters (digits, punctuation, marks) stay with the letters before them, so
       "2019年3月" is not cut there;
    2. then each piece holding an unspaced letter and longer than `max_len` clusters into
       k = ceil(m / max_len) pieces of near-equal length: piece j of m clusters starts at
       cluster j * m // k.

    So a span holding an unspaced letter has at most `max_len` clusters (in Han and kana a
    cluster is one codepoint), and a run of at most `max_len` is whole, as in the paper. A pure
    function of the codepoints (no random number); text with no unspaced letter gets exactly
    `whitespace_spans`, and the work past that check is on the runs being cut only.
    """
    starts, ends = whitespace_spans(cps)
    cls = _classes(cps)
    unspaced = (cls == _UNSPACED).view(np.uint8)
    letters = np.flatnonzero(unspaced)
    if len(letters) == 0:
        return starts, ends
    # candidates: long runs that hold an unspaced letter
    if len(letters) < len(starts):  # a few (en): the runs they are in
        holds = np.zeros(len(starts), bool)
        holds[np.searchsorted(starts, letters, side="right") - 1] = True
    else:  # a run's sum reaches into the whitespace after it, which has none
        holds = np.add.reduceat(unspaced, starts, dtype=np.int32) > 0
    cut = np.flatnonzero(holds & (ends - starts > max_len))
    pos, first, glued = _run_positions(cps, starts[cut], ends[cut])
    clusters = np.add.reduceat(~glued, np.flatnonzero(first), dtype=np.int32)
    if (clusters <= max_len).any():  # marks: fewer clusters than codepoints
        keep = clusters > max_len
        cut = cut[keep]
        pos, first, glued = _run_positions(cps, starts[cut], ends[cut])
    if len(cut) == 0:
        return starts, ends
    c = cls[pos]
    # 1. the class of the last non-neutral letter at or before each position (neutral before the
    # run's first); a segment starts where a letter's class differs from that of the one before
    new = first.copy()
    if (c == _SPACED).any():  # else no run mixes scripts
        anchor = np.maximum.accumulate(np.where((c != _NEUTRAL) | first, np.arange(len(pos), dtype=np.int32), 0))
        last = c[anchor]
        new[1:] |= (c[1:] != _NEUTRAL) & (last[:-1] != _NEUTRAL) & (c[1:] != last[:-1])
    glued &= ~new  # a segment starts a cluster
    seg_at = np.flatnonzero(new)  # flat index of each segment's first position
    seg_starts = pos[seg_at]
    seg_ends = np.append(seg_starts[1:], 0)
    first_seg = np.searchsorted(seg_at, np.flatnonzero(first))  # each run's first segment
    seg_ends[np.append(first_seg[1:], len(seg_at)) - 1] = ends[cut]  # a run's last segment ends with it
    # 2. near-equal pieces of the long segments that hold an unspaced letter, in clusters
    if glued.any():
        at = np.flatnonzero(~glued)  # flat index of each cluster's first position
        m = np.add.reduceat(~glued, seg_at, dtype=np.int64)  # clusters per segment (>= 1: its first)
    else:  # Han and kana: a cluster is a codepoint
        at, m = None, (seg_ends - seg_starts).astype(np.int64)
    has_unspaced = np.add.reduceat(unspaced[pos], seg_at, dtype=np.int32) > 0
    k = np.where(has_unspaced & (m > max_len), -(-m // max_len), 1)
    j = np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)  # piece index within its segment
    offset = j * np.repeat(m, k) // np.repeat(k, k)  # clusters before the piece, in its segment
    if at is None:
        piece_starts = np.repeat(seg_starts, k) + offset
    else:
        piece_starts = pos[at[np.repeat(np.cumsum(m) - m, k) + offset]]
    piece_ends = np.append(piece_starts[1:], 0)
    piece_ends[np.cumsum(k) - 1] = seg_ends  # a segment's last piece
    # each cut run replaced, in place, by its pieces
    count = np.ones(len(starts), np.int64)
    count[cut] = np.add.reduceat(k, first_seg)  # pieces per run
    is_cut = np.zeros(len(starts), bool)
    is_cut[cut] = True
    replaced = np.repeat(is_cut, count)
    out_starts, out_ends = np.repeat(starts, count), np.repeat(ends, count)
    out_starts[replaced], out_ends[replaced] = piece_starts, piece_ends
    return out_starts, out_ends


def _run_positions(cps, starts, ends):
    """Every position of the runs [starts, ends), flat (int32); which is a run's first; and which
    continue a cluster (never a run's first)."""
    lengths = ends - starts
    pos = ranges_to_positions(starts, lengths).astype(np.int32)
    first = np.zeros(len(pos), bool)
    first[np.cumsum(lengths) - lengths] = True
    cp = np.minimum(cps[pos], 0xFFFF)
    glued = _GLUED.take(cp)
    glued[1:] |= _JOINS_NEXT.take(cp[:-1])
    glued &= ~first
    return pos, first, glued


def _char_plans(cps, bounds, uniforms, config: MaskPlanConfig):
    """Chosen whole spans of every example of a batch: (starts, ends, example), and spans per example."""
    rate, budget = config.char_rate, config.max_char_predictions
    starts, ends = config.spans(cps)  # specials are delimiters: no span crosses examples
    example = np.searchsorted(bounds, starts, side="right") - 1
    n = np.bincount(example, minlength=len(bounds) - 1)
    index = _rank_in_group(example)
    order, group, rank = _random_order(example, index, uniforms(Stream.CHAR_ORDER, example, index), len(n))
    order, group, rank = _apart(order, group, rank, starts, ends)
    taken = np.zeros(len(starts), dtype=bool)
    taken[order[_greedy_within_budget((ends - starts)[order], group, rank, target_counts(n, rate), budget)]] = True
    return starts[taken], ends[taken], example[taken], n


def _apart(order, group, rank, starts, ends):
    """The visiting order without the spans that touch an earlier-visited span (one's end is the
    other's start: pieces of one bounded run), so no two chosen spans are adjacent and a run of
    masked positions is one chosen span, as the training side reads them (training/batch.py: its
    10% identity choice is per span). Whitespace spans never touch: their order is unchanged.
    Each span keeps its chance of a visit ahead of its neighbours, and the budget is still met: a
    long bounded run keeps about a third of its pieces, far above the 15% chosen."""
    touch = ends[:-1] == starts[1:]  # span i touches span i + 1
    if not touch.any():
        return order, group, rank
    visit = np.empty(len(order), np.int64)
    visit[order] = np.arange(len(order))
    after_prev = np.zeros(len(starts), bool)
    after_prev[1:] = touch & (visit[1:] > visit[:-1])
    after_next = np.zeros(len(starts), bool)
    after_next[:-1] = touch & (visit[:-1] > visit[1:])
    keep = ~(after_prev | after_next)[order]
    return order[keep], group[keep], _rank_in_group(group[keep])


def choose_char_spans(cps, rng, rate=schema.MASK_RATE, max_chars=schema.MAX_CHAR_PREDICTIONS,
                      config: MaskPlanConfig = MaskPlanConfig()):
    """CANINE-C: (starts, ends, n_spans) of the chosen whole spans (`config`'s rule), sorted by start.

    target_count(n_spans, rate) spans, visited in a random order from `rng`; a span that
    would push the total past `max_chars` is skipped (paper: at most 320 predictions).
    """
    config = dataclasses.replace(config, char_rate=rate, max_char_predictions=max_chars)
    starts, ends, _, n = _char_plans(cps, np.array([0, len(cps)]), GeneratorUniforms(rng), config)
    return starts, ends, int(n[0])


def char_mask_plan(
    cps: np.ndarray, rng, rate=schema.MASK_RATE, max_chars=schema.MAX_CHAR_PREDICTIONS,
    config: MaskPlanConfig = MaskPlanConfig(),
) -> np.ndarray:
    """CANINE-C: sorted int32 positions of every character of the chosen spans."""
    starts, ends, _ = choose_char_spans(cps, rng, rate, max_chars, config)
    return ranges_to_positions(starts, ends - starts).astype(np.int32)


# --- CANINE-S ---------------------------------------------------------------------------------
def _subword_plans(starts, lengths, ids, example, n_examples, uniforms, tokenizer, config):
    """CANINE-S plans of a batch from its subword spans (sorted by start, examples contiguous).

    Per example: target_count(n, rate) subwords, at most `max_subword_predictions`, uniformly
    without replacement; each gets an action (80/10/10) and a random character offset inside
    it, where the prediction is read (paper §3.2.2). A random action whose length has no other
    vocabulary subword falls back to MASK, the common action, so the span is still predicted.
    """
    index = _rank_in_group(example)
    n = np.bincount(example, minlength=n_examples)
    k = np.minimum(config.max_subword_predictions, target_counts(n, config.subword_rate))
    order, group, rank = _random_order(example, index, uniforms(Stream.SUBWORD_PICK, example, index), n_examples)
    pick = np.sort(order[rank < k[group]])
    starts, lengths, ids, example, index = starts[pick], lengths[pick], ids[pick], example[pick], index[pick]
    u = uniforms(Stream.SUBWORD_ACTION, example, index)
    actions = np.full(len(pick), schema.ACTION_KEEP, np.int8)
    actions[u < config.p_mask + config.p_random] = schema.ACTION_RANDOM
    actions[u < config.p_mask] = schema.ACTION_MASK
    offsets = np.minimum((uniforms(Stream.SUBWORD_OFFSET, example, index) * lengths).astype(np.int64), lengths - 1)
    rand = np.flatnonzero(actions == schema.ACTION_RANDOM)
    u = uniforms(Stream.SUBWORD_REPLACE, example[rand], index[rand])
    replacements, ok = tokenizer.random_same_length(ids[rand], lengths[rand], u)
    actions[rand[~ok]] = schema.ACTION_MASK
    columns = {
        "subword_starts": starts.astype(np.int32),
        "subword_lengths": lengths.astype(np.int32),
        "subword_ids": ids.astype(np.int32),
        "subword_predict_offsets": offsets.astype(np.int32),
        "subword_actions": actions,
    }
    rows = [dict(zip(columns, parts)) for parts in zip(*(_split(v, example, n_examples) for v in columns.values()))]
    replaced_by = np.repeat(example[rand[ok]], lengths[rand[ok]])  # example of each replacement codepoint
    for row, part in zip(rows, _split(replacements.astype(np.int32), replaced_by, n_examples)):
        row["subword_replacements"] = part
    return rows


def _check_layout(cps: np.ndarray, segment_ids: np.ndarray, where: str = "example") -> None:
    if len(cps) != len(segment_ids):
        raise ValueError(f"{where} layout: {len(cps)} codepoints but {len(segment_ids)} segment ids")
    if len(cps) < 2 or cps[0] != schema.CLS or cps[-1] != schema.SEP:
        raise ValueError(f"{where} layout: codepoints must be CLS ... SEP")


def subword_plan(
    cps, segment_ids, tokenizer, rng, rate=schema.MASK_RATE, max_spans=schema.MAX_SUBWORD_PREDICTIONS
) -> dict[str, np.ndarray]:
    """CANINE-S plan of one example (the six subword_* contract columns), draws from `rng`."""
    _check_layout(cps, segment_ids)
    starts, lengths, ids = tokenizer.spans_of_codepoints(cps)
    config = MaskPlanConfig(subword_rate=rate, max_subword_predictions=max_spans)
    one = np.zeros(len(starts), np.int64)  # every span belongs to example 0
    return _subword_plans(starts, lengths, ids, one, 1, GeneratorUniforms(rng), tokenizer, config)[0]


# --- rows -------------------------------------------------------------------------------------
def plan_examples(
    examples: list[PackedExample], lang: str, copy: int, seed: int, tokenizer, config: MaskPlanConfig = MaskPlanConfig()
) -> list[dict]:
    """Contract rows (Python / numpy values) of a batch; each equals `plan_example` of it alone.

    `tokenizer=None` leaves the CANINE-S columns empty (CANINE-C only).
    """
    if not examples:
        return []
    total = sum(len(ex.codepoints) for ex in examples)
    if total > _BATCH_CODEPOINTS and len(examples) > 1:  # bound the temporaries; rows do not depend on it
        half = len(examples) // 2
        return plan_examples(examples[:half], lang, copy, seed, tokenizer, config) + plan_examples(
            examples[half:], lang, copy, seed, tokenizer, config
        )
    for j, ex in enumerate(examples):
        _check_layout(ex.codepoints, ex.segment_ids, f"example {j} (pages {ex.page_ids})")
    bounds = np.cumsum([0] + [len(ex.codepoints) for ex in examples])
    cps = np.concatenate([ex.codepoints for ex in examples])
    uniforms = mask_uniforms(seed, lang, copy, examples)
    starts, ends, owner, _ = _char_plans(cps, bounds, uniforms, config)
    positions = ranges_to_positions(starts, ends - starts)
    position_owner = np.repeat(owner, ends - starts)
    char_parts = _split((positions - bounds[position_owner]).astype(np.int32), position_owner, len(examples))
    if tokenizer is None:
        subword_rows = [_empty_subword_columns() for _ in examples]
    else:
        s_starts, s_lengths, s_ids = tokenizer.spans_of_codepoints(cps)  # one call: its fixed cost is shared
        s_owner = np.searchsorted(bounds, s_starts, side="right") - 1
        s_starts = s_starts - bounds[s_owner]
        subword_rows = _subword_plans(s_starts, s_lengths, s_ids, s_owner, len(examples), uniforms, tokenizer, config)
    rows = []
    for ex, chars, subwords in zip(examples, char_parts, subword_rows):
        row = {
            "example_id": example_id(lang, ex, copy),
            "lang": lang,
            "page_ids": list(ex.page_ids),
            "codepoints": ex.codepoints,
            "segment_ids": ex.segment_ids,
            "sop_label": ex.sop_label,
            "char_mask_positions": chars,
        }
        row.update(subwords)
        rows.append(row)
    return rows


def plan_example(
    ex: PackedExample, lang: str, copy: int, seed: int, tokenizer, config: MaskPlanConfig = MaskPlanConfig()
) -> dict:
    """One contract row (Python / numpy values), example_id included."""
    return plan_examples([ex], lang, copy, seed, tokenizer, config)[0]


def _empty_subword_columns() -> dict[str, np.ndarray]:
    empty = np.zeros(0, np.int32)
    return {
        "subword_starts": empty,
        "subword_lengths": empty,
        "subword_ids": empty,
        "subword_predict_offsets": empty,
        "subword_actions": np.zeros(0, np.int8),
        "subword_replacements": empty,
    }


# --- statistics -------------------------------------------------------------------------------
def mask_histograms(rows: list[dict]) -> tuple[dict, dict]:
    """CANINE-C masks of some rows as two histograms, {value: count} of ints that merge by
    addition (pipeline/beam/stats.py reads quantiles off them exactly):
    - share: examples by masked share in per mille, floor(1000 * masked positions / codepoints);
    - spans: chosen spans by length in characters.
    Chosen spans never touch (`_apart`), so a chosen span is a run of masked positions (what
    `canine validate` checks): the runs are counted, not the spans found again (that cost a tenth
    of writing a shard)."""
    if not rows:
        return {}, {}
    counts = np.array([len(r["codepoints"]) for r in rows], np.int64)
    masked = [np.asarray(r["char_mask_positions"], np.int64) for r in rows]
    n_masked = np.array([len(m) for m in masked], np.int64)
    share = np.bincount(1000 * n_masked // np.maximum(counts, 1))
    offsets = np.cumsum(counts + 1) - counts - 1  # a gap after each row: no run crosses two rows
    flat = np.concatenate(masked + [np.zeros(0, np.int64)]) + np.repeat(offsets, n_masked)
    starts = np.flatnonzero(np.diff(flat, prepend=-2) != 1)  # positions are sorted: a run begins where one does not follow
    lengths = np.bincount(np.diff(starts, append=len(flat))) if len(flat) else np.zeros(0, np.int64)
    return tuple({v: c for v, c in enumerate(h.tolist()) if c} for h in (share, lengths))
