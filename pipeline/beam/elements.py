"""The elements that flow between the steps of the preprocessing job (pipeline/beam/job.py), each a
NamedTuple read by field name: datatrove passes one Document between its steps, Beam's examples
use named fields. A GroupByKey / CombinePerKey input stays Beam's (key, value) pair, with named
keys and values.

The NamedTuples that are keys (KEYS) have a coder of their own, KeyCoder, registered with Beam:
the step that makes a key declares its output type (`.with_output_types(Tuple[SplitLang, int])`),
so Beam encodes the key with it. Beam's own choices both fall short: its default coder encodes an
unknown type as a key with a pickle-based "fallback deterministic coder" and logs a warning for
each step and worker process that does, and its RowCoder decodes a NamedTuple, in a worker
process, as a class it generates from the fields, not as this one.
"""

import typing
from typing import NamedTuple

import apache_beam as beam

from pipeline.beam import spill










class SplitLang(NamedTuple):  # key of the per-(split, language) sizes
    split: str
    lang: str


class PackGroup(NamedTuple):  # PackExamples' group key: its pages are packed together
    split: str
    lang: str
    group: int



class PackedFile(NamedTuple):  # PackExamples -> SampleLanguages: one pack group's examples in staging
    split: str
    lang: str
    url: str
    examples: int = 0  # how many: the sampling's work on it (job.deal weighs the units by it)


class Vocabulary(NamedTuple):  # TrainTokenizer -> SampleLanguages: the vocabulary's training, one unit of work
    refs: list  # (chunk, spill.Ref) of the tokenizer sample's pages
    plan: typing.Any  # the sample's tokenizer_sample.Plan
    alphabets: list | None  # ScatterPages' alphabets of the items' sample pages (None: the trainer finds it)


class Size(NamedTuple):  # summed per SplitLang in SampleLanguages
    examples: int
    codepoints: int


class Sizing(NamedTuple):  # SampleLanguages' singleton -> WriteShards (side input), CollectStats
    weights: dict  # {lang: expected copies per training example}
    shards: dict  # {split: shard count}
    expected: dict | None = None  # {split: codepoints expected after sampling}: the launcher's ETA weighs shards by it



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


class Stat(NamedTuple):  # one row of stats.json: CollectStats writes it, pipeline/output/output.py reads it
    kind: str  # what `value` counts: "outcome", "replaced", "dropped", "examples", "weight", ... (pipeline/beam/stats.py)
    lang: str
    value: object  # a count, a list of counts, a weight or a summary: JSON data
    outcome: str | None = None  # kind "outcome" only

    # The staged file's row: [kind, lang, value], or [kind, lang, outcome, value] for an outcome.
    # row and from_row are its only writer and reader: the rest reads a Stat's fields by name.
    def row(self) -> list:
        if self.outcome is None:
            return [self.kind, self.lang, self.value]
        return [self.kind, self.lang, self.outcome, self.value]

    @classmethod
    def from_row(cls, row) -> "Stat":
        if len(row) == 4:
            kind, lang, outcome, value = row
            return cls(kind, lang, value, outcome)
        kind, lang, value = row
        return cls(kind, lang, value)


class KeyCoder(beam.coders.Coder):
    """A NamedTuple of str and int fields as a key: encoded as the tuple of its fields (Beam's
    TupleCoder of StrUtf8Coder and VarIntCoder: deterministic, the same bytes in every worker
    process) and decoded as the NamedTuple again."""

    def __init__(self, cls):
        self.cls = cls
        fields = typing.get_type_hints(cls).values()
        if not set(fields) <= {str, int}:
            raise TypeError(f"KeyCoder: {cls.__name__} has a field that is not str or int")
        self._fields = beam.coders.TupleCoder([beam.coders.registry.get_coder(t) for t in fields])

    @classmethod
    def from_type_hint(cls, typehint, unused_registry):
        return cls(typehint)

    def encode(self, value) -> bytes:
        return self._fields.encode(tuple(value))

    def decode(self, encoded: bytes):
        return self.cls(*self._fields.decode(encoded))

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return self.cls

    def __eq__(self, other):
        return type(self) is type(other) and self.cls is other.cls

    def __hash__(self):
        return hash((type(self), self.cls))


# The keys of the job's GroupByKey and CombinePerKey steps (a language alone is a str key).
KEYS = (SplitLang, PackGroup, ShardKey, spill.Ref)
for _key in KEYS:
    beam.coders.registry.register_coder(_key, KeyCoder)
