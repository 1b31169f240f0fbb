"""What a work item's pages add up to, per language: the counts the manifest carries and the
smallest split hashes the validation split is cut from, never the pages themselves.

The job's first step (pipeline/beam/job.py ReadAndClean) reads an item, caches its cleaned pages in
staging and passes on one LangTally per language of the item; everything after reads the pages
from the cache file. So what travels through Beam per item is a few counts and at most
EXACT_VALIDATION_PAGES hashes per language, whatever the dump's size. Beam-free: the job, the
statistics (pipeline/beam/stats.py) and the tests use it alike.
"""

import heapq
from typing import NamedTuple

from contract import schema
from pipeline import seeds

# Up to this many validation pages a language gets exactly its share, the pages with the
# smallest split hashes (pipeline/beam/job.py validation_cut): a bottom-k sketch of this many hashes
# per language and item, merged.
EXACT_VALIDATION_PAGES = 50
_KEPT = schema.PAGE_OUTCOMES.index("kept")


class LangTally(NamedTuple):  # ReadAndClean -> ValidationCuts, CollectStats, WriteRejects; one per (item, lang)
    item: str  # the item's cache file (itemcache.cache_url)
    lang: str
    outcomes: tuple  # pages per outcome, in the order of schema.PAGE_OUTCOMES
    replaced: int  # aliased characters replaced by U+FFFD (kept pages)
    dropped: tuple  # constructs dropped from kept pages, in the order of schema.CONSTRUCT_DROPS
    headings: tuple  # Headings.values(): what the manifest's `text` summary adds up
    smallest: tuple  # the EXACT_VALIDATION_PAGES smallest split hashes of its kept pages, ascending
    rejects: int  # pages whose reject line goes to _rejects/<lang>.jsonl (parse errors, empty)

    @property
    def kept(self) -> int:
        return self.outcomes[_KEPT]


class Headings:
    """Per language: pages told of (any variant markup, conversion, end matter or last heading),
    pages with variant markup and the constructs rendered, the end-matter headings dropped and the
    last headings kept (counts by title), pages and characters the whole-page conversion changed.
    Adds by `add` (a page) and `merge` (another's values), so any grouping gives the same sums."""

    def __init__(self, values=None):
        self.told, self.variant_pages, self.variants, end, last, self.converted_pages, self.converted = (
            values or (0, 0, 0, {}, {}, 0, 0))
        self.end_matter, self.last_kept = dict(end), dict(last)

    def add(self, variants: int, end_matter, last_kept: str, converted: int) -> None:
        if not (variants or converted or end_matter or last_kept):
            return
        self.told += 1
        self.variant_pages += variants > 0
        self.variants += variants
        for title in end_matter:
            self.end_matter[title] = self.end_matter.get(title, 0) + 1
        if last_kept:
            self.last_kept[last_kept] = self.last_kept.get(last_kept, 0) + 1
        self.converted_pages += converted > 0
        self.converted += converted

    def merge(self, values) -> "Headings":
        other = Headings(values)
        self.told += other.told
        self.variant_pages += other.variant_pages
        self.variants += other.variants
        for mine, theirs in ((self.end_matter, other.end_matter), (self.last_kept, other.last_kept)):
            for title, n in theirs.items():
                mine[title] = mine.get(title, 0) + n
        self.converted_pages += other.converted_pages
        self.converted += other.converted
        return self

    def values(self) -> tuple:
        return (self.told, self.variant_pages, self.variants, self.end_matter, self.last_kept, self.converted_pages,
                self.converted)


class Tally:
    """One language's pages of one item, added up as they are read (itemcache.Cleaned each)."""

    def __init__(self):
        self.outcomes = [0] * len(schema.PAGE_OUTCOMES)
        self.replaced = 0
        self.dropped = [0] * len(schema.CONSTRUCT_DROPS)
        self.headings = Headings()
        self.smallest = []  # a max-heap of negated hashes: the EXACT_VALIDATION_PAGES smallest
        self.rejects = 0

    def add(self, c) -> None:
        self.outcomes[schema.PAGE_OUTCOMES.index(c.outcome)] += 1
        if c.outcome == "kept":
            self.replaced += c.replaced
            for i, n in enumerate(c.dropped):
                self.dropped[i] += n
            self.headings.add(c.variants, c.end_matter, c.last_heading, c.converted)
            h = -seeds.split_hash(c.lang, c.page_id)
            if len(self.smallest) < EXACT_VALIDATION_PAGES:
                heapq.heappush(self.smallest, h)
            elif h > self.smallest[0]:
                heapq.heapreplace(self.smallest, h)
        elif c.outcome in ("parse_errors", "empty"):
            # Redirects and other namespaces are only counted (enwiki has ~10M redirects);
            # pages that should have been text but were not are kept with their reason.
            self.rejects += 1

    def done(self, item: str, lang: str) -> LangTally:
        return LangTally(item, lang, tuple(self.outcomes), self.replaced, tuple(self.dropped), self.headings.values(),
                         tuple(sorted(-h for h in self.smallest)), self.rejects)


def merge_smallest(pairs) -> tuple:
    """[(kept pages, smallest hashes)] -> their sum and the EXACT_VALIDATION_PAGES smallest of
    all, ascending (a Beam combiner: any grouping gives the same result)."""
    kept, smallest = 0, []
    for n, hashes in pairs:
        kept += n
        smallest = heapq.nsmallest(EXACT_VALIDATION_PAGES, [*smallest, *hashes])
    return kept, list(smallest)
