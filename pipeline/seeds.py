"""Every random decision of the pipeline, and the one module that makes them.

The output is byte-identical on any runner and worker count, so no decision may depend on which
worker ran first or on Python's per-process salted `hash()`: each one below is a pure function of
the named values in its row. Two mixes, both unsalted:
  * named hashes: blake2b of a decision's NAME and its inputs (pipeline/hashing.py), one number
    per page or example; `Name` holds every name, so two decisions never share one;
  * counter streams: the many draws of an example's mask plans, SplitMix64 outputs
    (contract/splitmix.py, the mix the training side's batch builder also draws from) of the
    example's `mask_key`, a `Stream` number and the index of the item drawn for; so a plan does
    not depend on how examples were batched, and a new decision takes a new `Stream` without
    moving the others (a different tokenizer never moves the CANINE-C plan).

Inputs: page = a page's id, of an example its first page's; part = the example's index among those
that start on that page; copy = its copy number; id = the example id "lang-page-part-copy".

decision                    inputs                        function           mix                used in
--------------------------  ----------------------------  -----------------  -----------------  ---------------------
page held out (validation)  lang, page (no seed)          split_hash         hash "split"       job.split_of
page in tokenizer's sample  lang, page (no seed)          tokenizer_rank     hash "tok"         job._SizeFn, tokenizer_sample
pack group of a page        lang, page, groups (no seed)  pack_group         hash "group"       job._ScatterPagesFn
SOP: A and B swapped        seed, page, part              sop_swapped        hash "sop"         examples.pack_pages
one more copy (weights)     seed, lang, page, part        copy_draw          hash "copy"        job.copies_of
root of an example's plans  seed, lang, page, part, copy  mask_key           hash "mask"        mask_uniforms
CANINE-C span visit order   mask_key, span index          CounterUniforms    CHAR_ORDER 1       masks._char_plans
CANINE-S subwords chosen    mask_key, subword index       CounterUniforms    SUBWORD_PICK 2     masks._subword_plans
CANINE-S action 80/10/10    mask_key, subword index       CounterUniforms    SUBWORD_ACTION 3   masks._subword_plans
CANINE-S predicted char.    mask_key, subword index       CounterUniforms    SUBWORD_OFFSET 4   masks._subword_plans
CANINE-S replacement        mask_key, subword index       CounterUniforms    SUBWORD_REPLACE 5  masks._subword_plans
shard of an example         id (no seed)                  shard_index        hash "shard"       job._ScatterExamplesFn, downstream
TyDi QA window kept         seed, example id, window      tydi_window_draw   hash "tydi_unknown" downstream/windows
  (a window without its example's answer, kept with probability include_unknowns)
row order in a shard        id (no seed)                  row_order_key      hash "order"       job._PlanAndWriteFn
one example's plans         mask_key                      mask_rng,          numpy, call order  masks.char_mask_plan,
                                                          GeneratorUniforms                     subword_plan (tests)
made-up text, SOP labels    seed                          synthetic_rng      numpy, call order  synthetic.py

A subword index is its rank among its example's subwords; the replacement (pipeline/rows/tokenizer.py
random_same_length) is drawn for those whose action is RANDOM.

Unseeded on purpose: the validation pages, the tokenizer's sample and the pack groups stay the
same when only --seed changes, so a new seed gives new masks, SOP swaps and copies of the same
examples. The shard and the row order hash the example id, which holds the copy: copies of one
example spread over shards.

Not decisions, so not here: pipeline/beam/itemcache.py names a cache file by a hash of its work item
(pipeline/hashing.py), and pipeline/rows/wordspans.py's hash table places words by Fibonacci hashing
(contract/splitmix.py's GOLDEN); pipeline/sample/generate.py made the bundled sample's text
(random.Random per language), offline, once. tests/test_seeds.py checks that no other module of
pipeline/ seeds a generator, calls a mix, or hashes names for a decision.
"""

import enum

import numpy as np

from contract.splitmix import GOLDEN, splitmix64, unit_floats
from pipeline.hashing import stable_int, stable_unit


class Name(enum.StrEnum):
    """The name hashed first with each decision's inputs: one per decision (str() is the value)."""

    SPLIT = "split"
    TOKENIZER = "tok"
    GROUP = "group"
    SOP = "sop"
    COPY = "copy"
    MASK = "mask"
    SHARD = "shard"
    ORDER = "order"
    TYDI_UNKNOWN = "tydi_unknown"


class Stream(enum.IntEnum):
    """The counter streams of an example's mask plans: one per decision, mixed with its mask_key."""

    CHAR_ORDER = 1
    SUBWORD_PICK = 2
    SUBWORD_ACTION = 3
    SUBWORD_OFFSET = 4
    SUBWORD_REPLACE = 5


# --- named hashes: one number per page or example ------------------------------------------
def split_hash(lang: str, page_id) -> int:
    """A page's validation rank: the pages of a language with the smallest are held out."""
    return stable_int(Name.SPLIT, lang, page_id)


def tokenizer_rank(lang: str, page_id) -> int:
    """A page's rank for the tokenizer's sample: the pages with the smallest are trained on."""
    return stable_int(Name.TOKENIZER, lang, page_id)


def pack_group(lang: str, page_id, groups: int) -> int:
    """Which of its (split, language)'s `groups` pack groups a page is packed in."""
    return stable_int(Name.GROUP, lang, page_id) % groups


def sop_swapped(seed: int, first_page_id: int, part: int) -> bool:
    """Sentence order: whether the chunk's A and B are swapped, a fair coin."""
    return stable_unit(Name.SOP, seed, first_page_id, part) < 0.5


def copy_draw(seed: int, lang: str, first_page_id: int, part: int) -> float:
    """U[0, 1) of an example: it gets one more copy when this is below its weight's fraction."""
    return stable_unit(Name.COPY, seed, lang, first_page_id, part)


def mask_key(seed: int, lang: str, first_page_id: int, part: int, copy: int) -> int:
    """The 64-bit root of one example's masks: each copy of an example gets its own plans."""
    return stable_int(Name.MASK, seed, lang, first_page_id, part, copy)


def shard_index(example_id: str, total: int) -> int:
    """Which of its split's `total` shards an example goes to."""
    return stable_int(Name.SHARD, example_id) % total


def row_order_key(example_id: str) -> int:
    """A row's place in its shard: rows are sorted by (this, id), so languages mix in a shard."""
    return stable_int(Name.ORDER, example_id)


def tydi_window_draw(seed: int, example_id: int, window: int) -> float:
    """U[0, 1) of a TyDi QA training window that lacks its example's answer: kept when below
    include_unknowns (pipeline/downstream/windows.py; Google's random.random() in preproc.py)."""
    return stable_unit(Name.TYDI_UNKNOWN, seed, example_id, window)


# --- counter streams: the draws of a batch of examples' mask plans ----------------------------
class CounterUniforms:
    """u(example, stream, i) in [0, 1): output i of SplitMix64 seeded by the example's mask_key and
    the stream, so a draw does not depend on the batch it was planned in."""

    def __init__(self, keys):
        self.keys = np.asarray(keys, dtype=np.uint64)

    def __call__(self, stream: Stream, example: np.ndarray, index: np.ndarray) -> np.ndarray:
        seed = splitmix64(self.keys ^ np.uint64((stream * int(GOLDEN)) % 2**64))
        state = seed[example] + (np.asarray(index).astype(np.uint64) + np.uint64(1)) * GOLDEN
        return unit_floats(splitmix64(state))


def mask_uniforms(seed: int, lang: str, copy: int, examples) -> CounterUniforms:
    """The counter streams of a batch of `examples` (PackedExample) of one language and copy."""
    return CounterUniforms([mask_key(seed, lang, ex.page_ids[0], ex.part, copy) for ex in examples])


# --- generators, drawn in call order ------------------------------------------------------------
class GeneratorUniforms:
    """Draws from one numpy Generator in call order, whatever the stream (one example at a time)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def __call__(self, stream: Stream, example: np.ndarray, index: np.ndarray) -> np.ndarray:
        return self.rng.random(len(index))


def mask_rng(seed: int, lang: str, first_page_id: int, part: int, copy: int) -> np.random.Generator:
    """A generator seeded by `mask_key`, for planning one example at a time (masks.char_mask_plan)."""
    return np.random.default_rng(mask_key(seed, lang, first_page_id, part, copy))


def synthetic_rng(seed: int) -> np.random.Generator:
    """The generator of synthetic.py's made-up text, sentence pairs and SOP labels."""
    return np.random.default_rng(seed)
