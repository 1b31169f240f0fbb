"""The WordPiece vocabulary's sample, in bounded memory: the `tokenizer_pages` training pages
with the smallest tokenizer_rank(lang, page id) (pipeline/seeds.py), fed to the trainer in rank
order a chunk at a time.

How (pipeline/beam/job.py): a light pass over the item caches passes on, per item, the training pages
whose rank is below a bound (`bound`: about k of them in all, never the whole dump),
as (rank, page id, characters). `plan` sorts those, keeps the first k and cuts them into chunks
of at most CHUNK_CHARACTERS; the pass that scatters pages to their pack groups writes each
sample page into its chunk's record batch (spill.py) and passes on the characters of the item's
sample pages (the trainer's alphabet, found where the pages are spread over the workers); the
trainer reads the chunks once, in order.
The texts, their order and so the vocabulary are those of a sort of the k pages by (rank, page
id, text), as when the sample was one list in memory.
"""

import bisect
import math
from typing import NamedTuple

import pyarrow as pa

from pipeline.beam import spill, split

# A chunk's texts are in memory while the trainer reads it.
CHUNK_CHARACTERS = 8_000_000

SCHEMA = pa.schema([("rank", pa.uint64()), ("page_id", pa.int64()), ("text", pa.large_string())])


class Plan(NamedTuple):
    k: int  # pages in the sample (PreprocessConfig.tokenizer_pages)
    uppers: tuple  # per chunk, the (rank, page id) of its last page: chunk i holds keys <= uppers[i]
    pages: int = 0  # pages in the chunks: more than k only where pages share the k-th key
    characters: int = 0  # their characters: the training's work (job.deal weighs it by them)

    def whole(self) -> bool:
        """Whether the trainer reads every page of the chunks (so their alphabet is the sample's)."""
        return self.pages <= self.k

    def chunk_of(self, rank: int, page_id: int):
        """The chunk a training page of this rank belongs to, None if it is not in the sample."""
        i = bisect.bisect_left(self.uppers, (rank, page_id))
        return i if i < len(self.uppers) else None


def bound(kept_and_cuts: dict, fraction: float, k: int) -> int:
    """A rank bound that holds the k training pages of the smallest ranks, so an item passes on
    ~k candidates in all, not all its pages. Ranks are uniform 64-bit hashes: the k-th smallest of
    N is about k/N of the range, with a standard deviation of about sqrt(k)/N; the bound is 12 of
    those above (and 1% and 256 pages more) for N the fewest training pages the split can leave,
    so missing one of the k is not something that happens (`plan` checks it all the same).
    `kept_and_cuts`: {lang: (kept pages, cut)}, pipeline/beam/job.py ValidationCuts."""
    train = split.fewest_training_pages(kept_and_cuts, fraction)
    need = k * 1.01 + 12 * math.sqrt(k) + 256
    return split.HASH_SPACE if need >= train else int(split.HASH_SPACE * need / train)


def plan(candidates, k: int, rank_bound: int) -> Plan:
    """[(rank, page id, characters)] of the training pages below `rank_bound` -> the Plan of the first
    k by (rank, page id). Pages that share the k-th key (a page id given twice) all come along:
    the trainer takes the first k of them by text. Fewer than k candidates under a bound below
    the whole range would mean the bound missed sample pages: refused, never a smaller sample."""
    candidates = sorted(candidates)
    if len(candidates) < k and rank_bound < split.HASH_SPACE:
        raise RuntimeError(f"tokenizer sample: {len(candidates)} of {k} pages below the rank bound {rank_bound}; the bound "
                           "(tokenizer_sample.bound) is too tight for this input: please report it")
    if len(candidates) > k:
        last = candidates[k - 1][:2]
        candidates = [c for c in candidates if c[:2] <= last]
    uppers, size = [], 0
    for i, (rank, page_id, chars) in enumerate(candidates):
        size += chars
        following = candidates[i + 1][:2] if i + 1 < len(candidates) else None
        # a chunk ends at its budget or the sample's end, never between two pages of one key
        if following is None or (size >= CHUNK_CHARACTERS and following != (rank, page_id)):
            uppers.append((rank, page_id))
            size = 0
    return Plan(k, tuple(uppers), len(candidates), sum(chars for _, _, chars in candidates))


def table(rows) -> pa.Table:
    """[(rank, page id, text)] -> a table of SCHEMA (one chunk's rows of one item)."""
    ranks, ids, texts = zip(*rows) if rows else ((), (), ())
    return pa.Table.from_arrays([pa.array(ranks, pa.uint64()), pa.array(ids, pa.int64()),
                                 pa.array(texts, pa.large_string())], schema=SCHEMA)


class Texts:
    """The sample's texts in (rank, page id, text) order, the first k: iterable again and again,
    a chunk in memory at a time. `refs`: [(chunk, spill.Ref)]."""

    def __init__(self, refs, plan_: Plan, on_chunk=None):
        self.plan, self.on_chunk = plan_, on_chunk  # on_chunk(): after each chunk read (the launcher's progress)
        self.by_chunk = {}
        for chunk, ref in refs:
            self.by_chunk.setdefault(chunk, []).append(ref)

    def __iter__(self):
        left = self.plan.k
        for chunk in range(len(self.plan.uppers)):
            rows = []
            for t in spill.read_buckets(self.by_chunk.get(chunk, [])):
                rows += zip(t.column("rank").to_pylist(), t.column("page_id").to_pylist(), t.column("text").to_pylist())
            rows.sort()
            for _, _, text in rows[:left]:
                yield text
            left -= min(left, len(rows))
            if self.on_chunk is not None:
                self.on_chunk()
            if not left:
                return
