"""The elements that flow between the steps of the preprocessing job (pipeline/job.py), each a
NamedTuple read by field name: datatrove passes one Document between its steps, Beam's examples
use named fields. NamedTuples pickle, and Beam encodes them deterministically as keys. A
GroupByKey / CombinePerKey input stays Beam's (key, value) pair, with named keys and values.
"""

from typing import NamedTuple

from pipeline import examples


class Page(NamedTuple):  # CleanPages "kept" -> AssignSplit
    lang: str
    page_id: int
    text: str


class Outcome(NamedTuple):  # CleanPages "outcomes", one per page read -> CollectStats
    lang: str
    outcome: str  # one of contract.schema.PAGE_OUTCOMES


class Replaced(NamedTuple):  # CleanPages "replaced", one per kept page with any -> CollectStats
    lang: str
    characters: int  # aliased characters replaced by U+FFFD


class Dropped(NamedTuple):  # CleanPages "dropped", one per kept page that lost any -> CollectStats
    lang: str
    counts: tuple  # in the order of contract.schema.CONSTRUCT_DROPS


class Headings(NamedTuple):  # CleanPages "headings", one per kept wikitext page -> CollectStats
    lang: str
    variants: int  # language-variant constructs rendered on the page
    end_matter: tuple  # titles of the sections dropped as end matter
    last_kept: str  # the last top-level heading kept ("" if none)


class Reject(NamedTuple):  # CleanPages "rejects" -> WriteRejects: one line of _rejects/<lang>.jsonl
    lang: str
    page_id: int
    title: str
    source: str
    outcome: str
    reason: str


class SplitPage(NamedTuple):  # AssignSplit -> TrainTokenizer, PackExamples, CollectStats
    split: str  # "train" or "validation"
    page: Page


class TokenizerPage(NamedTuple):  # TrainTokenizer's bottom-k sample; compared as a tuple, rank first
    rank: int  # stable_int("tok", lang, page id)
    page_id: int
    text: str


class SplitLang(NamedTuple):  # key of the per-(split, language) sizes
    split: str
    lang: str


class PackGroup(NamedTuple):  # PackExamples' group key: its pages are packed together
    split: str
    lang: str
    group: int


class Packed(NamedTuple):  # PackExamples -> SampleLanguages
    split: str
    lang: str
    example: examples.PackedExample


class Size(NamedTuple):  # summed per SplitLang in SampleLanguages
    examples: int
    codepoints: int


class Sizing(NamedTuple):  # SampleLanguages' singleton -> WriteShards (side input), CollectStats
    weights: dict  # {lang: expected copies per training example}
    shards: dict  # {split: shard count}


class Sampled(NamedTuple):  # SampleLanguages -> WriteShards: one copy of a packed example
    split: str
    lang: str
    example: examples.PackedExample
    copy: int


class ShardKey(NamedTuple):  # WriteShards' group key: one Parquet file
    split: str
    index: int
    total: int


class ShardFile(NamedTuple):  # WriteShards -> shards.json, one object each
    split: str
    path: str  # relative to the output
    rows: int
    codepoints: int
    sha256: str
    bytes: int


class MaskHistograms(NamedTuple):  # WriteShards "masks", one per (shard, language) -> CollectStats
    lang: str
    share: dict  # {masked share of an example in per-mille: examples}
    spans: dict  # {CANINE-C span length: spans}


class Stat(NamedTuple):  # one row of stats.json, in CollectStats
    kind: str
    lang: str
    value: object
    outcome: str | None = None  # kind "outcome" only

    def row(self) -> list:
        # pipeline/output.py languages_from_stats reads the rows by position
        if self.outcome is None:
            return [self.kind, self.lang, self.value]
        return [self.kind, self.lang, self.outcome, self.value]
