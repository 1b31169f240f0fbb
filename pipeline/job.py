"""The preprocessing job: Wikipedia dumps (or cleaned JSONL / Parquet) -> contract shards.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2

Steps (each a labelled composite, each testable with TestPipeline):
  ReadAndClean   work items (files, multistream ranges, split single-stream ranges) -> Reshuffle -> streaming parse + clean
                 (CleanPages): every page gets exactly one outcome, counted per language, and what
                 cleaning drops from kept pages is counted per reason; each finished item is cached
                 in staging so a killed run resumes (pipeline/itemcache.py)
  AssignSplit    per language, its share of pages (~0.5%; at least one page from 20 pages on),
                 those with the smallest hashes of (lang, page id), to validation
  TrainTokenizer WordPiece for CANINE-S on the pages with the smallest id hashes (or a given tokenizer.json)
  PackExamples   pages grouped by hash, sorted by id, packed to seq_len
  SampleLanguages share^alpha smoothing: subsample big languages, repeat small ones with fresh masks;
                 shards per split from the expected size
  WriteShards    examples -> a shard chosen by a hash of example_id; there, CANINE-C span mask +
                 CANINE-S subword plan per example, seeded by (seed, page id, copy), rows ordered
                 by another hash of the id (languages mixed), one Parquet file

Everything the job writes goes to a staging folder first, each file whole (atomic_write),
with the lists of the shards and rejects files it wrote (shards.json, rejects.json);
`pipeline.output.finalize` publishes exactly those and writes the manifest last, so a failed run
leaves no manifest, and nothing else of staging is ever published.
Nothing depends on worker count, bundle order or runner: every decision is a
stable hash (pipeline/seeds.py, a table of them all) and every group is sorted before use.
"""

import json
import math
import os
import signal
import sys
import threading
from typing import Tuple

import apache_beam as beam
import fsspec
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from contract import schema
from contract.files import save_json, save_text
from pipeline import examples, faults, itemcache, masks, seeds, shards
from pipeline.preprocess_config import PreprocessConfig
from pipeline.elements import (
    Page, Outcome, Replaced, Dropped, Reject, SplitPage, TokenizerPage, SplitLang, PackGroup, Packed, Size,
    Sizing, Sampled, ShardKey, ShardFile, Headings, MaskHistograms,
)
from pipeline.stats import CollectStats, StatsInputs
from pipeline.tokenizer import WordPieceTokenizer, train_wordpiece

_NS = "canine.preprocess"


# --- the DirectRunner's worker processes ----------------------------------------------------------
# With --workers 2 or more the DirectRunner runs the job in worker processes that share the
# launcher's terminal. While the job runs, the launcher names its process id in LAUNCHER_PID and
# has each worker import this module first, as a Beam plugin, in the worker's main thread before
# its harness starts (pipeline/output.py); set_up_worker_process runs then.
LAUNCHER_PID = "CANINE_PREPROCESS_LAUNCHER_PID"


class _HarnessStderr:
    """A worker's sys.stderr without the traceback Beam's harness prints for a failed bundle
    (SdkHarness._execute: `print(traceback_string, file=sys.stderr)`, Beam 2.77; tests/jobs/
    test_quiet.py checks the line is still there). The same traceback is the bundle's error,
    which the launcher raises and jobs/errors.py reports: one line for a bad input."""

    def __init__(self, stream, harness_code):
        self._stream, self._harness_code = stream, harness_code

    def write(self, text):
        if sys._getframe(1).f_code is self._harness_code:  # print() adds no frame: write's caller is print's
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def set_up_worker_process() -> None:
    """In a worker process of the launcher named by LAUNCHER_PID: ignore SIGINT (a terminal's
    Ctrl-C reaches the whole process group; the launcher alone ends the job on it, and closes
    the workers), and drop the harness's printed copy of a failed bundle's traceback. Anywhere
    else (the launcher, a process importing this module from another thread) it does nothing."""
    launcher = os.environ.get(LAUNCHER_PID)
    if not launcher or launcher == str(os.getpid()) or threading.current_thread() is not threading.main_thread():
        return
    from apache_beam.runners.worker import sdk_worker

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr = _HarnessStderr(sys.stderr, sdk_worker.SdkHarness._execute.__code__)


set_up_worker_process()


class _RouteFn(beam.DoFn):
    """A cleaned page -> exactly one outcome record, plus the page itself or its reject, and what
    cleaning dropped from a kept page, by reason (datatrove's dropped_<reason> counters)."""

    def __init__(self):
        self.outcome_counters = {o: Metrics.counter(_NS, o) for o in schema.PAGE_OUTCOMES}
        self.drop_counters = [Metrics.counter(_NS, f"dropped_{r}") for r in schema.CONSTRUCT_DROPS]

    def process(self, c: itemcache.Cleaned):
        self.outcome_counters[c.outcome].inc()
        yield pvalue.TaggedOutput("outcomes", Outcome(c.lang, c.outcome))
        if c.replaced:
            yield pvalue.TaggedOutput("replaced", Replaced(c.lang, c.replaced))
        if any(c.dropped):
            for counter, n in zip(self.drop_counters, c.dropped):
                counter.inc(n)
            yield pvalue.TaggedOutput("dropped", Dropped(c.lang, tuple(c.dropped)))
        if c.outcome == "kept":
            if c.variants or c.converted or c.end_matter or c.last_heading:
                yield pvalue.TaggedOutput("headings", Headings(c.lang, c.variants, tuple(c.end_matter), c.last_heading,
                                                               c.converted))
            yield Page(c.lang, c.page_id, c.text)
        elif c.outcome in ("parse_errors", "empty"):
            # Redirects and other namespaces are only counted (enwiki has ~10M redirects);
            # pages that should have been text but were not are kept with their reason.
            yield pvalue.TaggedOutput("rejects", Reject(c.lang, c.page_id, c.title, c.source, c.outcome, c.reason))


def _route(cleaned):
    route = beam.ParDo(_RouteFn()).with_output_types(Page, outcomes=Outcome, replaced=Replaced, dropped=Dropped,
                                                      headings=Headings, rejects=Reject)
    tags = ("outcomes", "replaced", "dropped", "headings", "rejects")
    return cleaned | "Route" >> route.with_outputs(*tags, main="kept")


class CleanPages(beam.PTransform):
    """RawPage -> {kept: Page, outcomes: Outcome, replaced: Replaced, dropped: Dropped, headings: Headings,
    rejects: Reject}."""

    def __init__(self, cfg: PreprocessConfig = PreprocessConfig()):
        super().__init__()
        self.cfg = cfg

    def expand(self, raw_pages):
        return _route(raw_pages | "Clean" >> beam.Map(itemcache.clean_raw, self.cfg))


class _ItemFn(beam.DoFn):
    """One work item -> its cleaned pages, from the cache of an earlier run or parsed now."""

    def __init__(self, staging, cfg: PreprocessConfig):
        self.staging, self.cfg = staging, cfg
        self.reused = Metrics.counter(_NS, "items_reused")
        self.parsed = Metrics.counter(_NS, "items_parsed")

    def process(self, item):
        url = itemcache.cache_url(self.staging, item)
        fs, path = fsspec.core.url_to_fs(url)
        if fs.exists(path):
            self.reused.inc()
            yield from itemcache.replay(url)
            return
        yield from itemcache.parse_and_store(item, url, self.cfg)
        self.parsed.inc()
        faults.point("item")


class ReadAndClean(beam.PTransform):
    """Work items -> the outputs of CleanPages. The Reshuffle spreads a single big multistream
    dump over workers; each finished item is cached in staging, so a killed run resumes."""

    def __init__(self, items, staging, cfg: PreprocessConfig):
        super().__init__()
        self.items, self.staging, self.cfg = list(items), staging, cfg

    def expand(self, pbegin):
        cleaned = (
            pbegin
            | "WorkItems" >> beam.Create(self.items, reshuffle=False)
            | "Reshuffle" >> beam.Reshuffle()
            | "ParseAndClean" >> beam.ParDo(_ItemFn(self.staging, self.cfg))
        )
        return _route(cleaned)


# The validation split, per language: a language of 30 pages beside one of millions
# must still get validation pages, or `canine evaluate` cannot say whether it was learned.
# A language with fewer kept pages than this cannot spare one, and its figures would be noise:
# it gets only its proportional share (usually none); from here on it gets at least one page.
MIN_PAGES_FOR_VALIDATION = 20
# Up to this many validation pages a language gets exactly its share, the pages with the smallest
# split hashes (a bottom-k sketch of EXACT_VALIDATION_PAGES hashes per language, bounded memory).
# Beyond it, "hash < fraction of the hash range" is already proportional within noise (a binomial
# count, one standard deviation 14% of it at 50 pages, 0.5% at enwiki's ~33,000 at 0.5%) and needs
# no per-language state; it too takes the smallest hashes, the pages the global rule before
# the per-language split took, so a large language's validation pages did not change.
EXACT_VALIDATION_PAGES = 50
_HASH_SPACE = 1 << 64  # split_hash's range


def split_hash(lang: str, page_id) -> int:
    # Not seeded: the held-out pages stay the same when only the mask seed changes.
    return seeds.split_hash(lang, page_id)


def validation_pages(kept: int, fraction: float) -> int:
    """How many of a language's `kept` pages are held out: round(fraction x kept), at least one
    from MIN_PAGES_FOR_VALIDATION pages on, none when the fraction is 0. Exact up to
    EXACT_VALIDATION_PAGES; above it, the expected count (validation_cut)."""
    if fraction <= 0:
        return 0
    share = math.floor(fraction * kept + 0.5)  # half up: Python's round() makes 2.5 -> 2
    return max(share, 1) if kept >= MIN_PAGES_FOR_VALIDATION else share


def validation_cut(kept: int, smallest: list[int], fraction: float) -> int:
    """A language's pages with split_hash < the cut are validation pages. `smallest`: its
    EXACT_VALIDATION_PAGES smallest split hashes (all of them if fewer), ascending."""
    k = validation_pages(kept, fraction)
    if k > EXACT_VALIDATION_PAGES:
        return int(fraction * _HASH_SPACE)
    return smallest[k - 1] + 1 if k else 0


def split_of(page: Page, cuts: dict) -> str:
    return "validation" if split_hash(page.lang, page.page_id) < cuts.get(page.lang, 0) else "train"


class AssignSplit(beam.PTransform):
    """Page -> SplitPage. Per language, one combine counts the pages and keeps their
    EXACT_VALIDATION_PAGES smallest split hashes (bounded memory: no language is ever grouped on
    one worker); from those a cut per language (validation_cut), a side input of one number a
    language. Count and Top are order-free, so the split does not depend on bundling or workers."""

    def __init__(self, validation_fraction):
        super().__init__()
        self.fraction = validation_fraction

    def expand(self, pages):
        fraction = self.fraction
        count_and_smallest = beam.combiners.SingleInputTupleCombineFn(
            beam.combiners.CountCombineFn(), beam.combiners.TopCombineFn(EXACT_VALIDATION_PAGES, reverse=True))

        def cut(lang, combined):
            kept, smallest = combined  # in the order of count_and_smallest's combiners
            return lang, validation_cut(kept, smallest, fraction)

        cuts = (
            pages
            | "LangHash" >> beam.Map(lambda p: (p.lang, split_hash(p.lang, p.page_id)))
            | "CountAndSmallest" >> beam.CombinePerKey(count_and_smallest)
            | "Cut" >> beam.MapTuple(cut)
            | "CutDict" >> beam.combiners.ToDict()
        )
        return pages | "KeySplit" >> beam.Map(lambda p, cuts: SplitPage(split_of(p, cuts), p), pvalue.AsSingleton(cuts))


def _train_tokenizer(sample, vocab_size):
    faults.point("tokenizer")
    texts = [s.text for s in sorted(sample)]  # sorted: same texts, same order, same vocabulary
    return train_wordpiece(texts, vocab_size=vocab_size).to_str()


class TrainTokenizer(beam.PTransform):
    """SplitPage (training only) -> one tokenizer JSON string (a singleton PCollection).

    The sample is the `tokenizer_pages` pages with the smallest hash of (lang, page id): a
    deterministic bottom-k sketch whose memory is bounded whatever the input size.
    """

    def __init__(self, cfg: PreprocessConfig, given_json: str | None):
        super().__init__()
        self.cfg, self.given_json = cfg, given_json

    def expand(self, split_pages):
        if self.given_json is not None:
            return split_pages.pipeline | "GivenTokenizer" >> beam.Create([self.given_json])
        return (
            split_pages
            | "TrainOnly" >> beam.Filter(lambda sp: sp.split == "train")
            | "HashKey" >> beam.Map(lambda sp: TokenizerPage(seeds.tokenizer_rank(sp.page.lang, sp.page.page_id),
                                                             sp.page.page_id, sp.page.text))
            | "BottomK" >> beam.combiners.Top.Smallest(self.cfg.tokenizer_pages)
            | "Train" >> beam.Map(_train_tokenizer, self.cfg.vocab_size)
        )


class PackExamples(beam.PTransform):
    """SplitPage -> Packed. Pages are packed inside hash groups (PackGroup), sorted by id, so the
    packing is the same whatever reached which worker first. The number of groups per
    (split, lang) comes from its size, not from the worker count."""

    def __init__(self, cfg: PreprocessConfig):
        super().__init__()
        self.cfg = cfg

    def expand(self, split_pages):
        cfg = self.cfg
        group_counts = (
            split_pages
            | "PageSize" >> beam.Map(lambda sp: (SplitLang(sp.split, sp.page.lang), len(sp.page.text)))
            .with_output_types(Tuple[SplitLang, int])
            | "LangSplitSize" >> beam.CombinePerKey(sum)
            | "Groups" >> beam.MapTuple(lambda key, size: (key, max(1, math.ceil(size / cfg.pack_group_codepoints))))
            | "GroupDict" >> beam.combiners.ToDict()
        )

        def key(sp, groups):
            page = sp.page
            group = seeds.pack_group(page.lang, page.page_id, groups[SplitLang(sp.split, page.lang)])
            return PackGroup(sp.split, page.lang, group), page

        def pack(kv):
            group, pages = kv
            by_id = sorted((page.page_id, page.text) for page in pages)
            for ex in examples.pack_pages(by_id, cfg.seq_len, cfg.sentence_order, cfg.seed):
                yield Packed(group.split, group.lang, ex)

        return (
            split_pages
            | "KeyGroup" >> beam.Map(key, pvalue.AsSingleton(group_counts)).with_output_types(Tuple[PackGroup, Page])
            | "Group" >> beam.GroupByKey()
            | "Pack" >> beam.FlatMap(pack)
        )


def language_weights(example_counts: dict, alpha: float) -> dict:
    """Expected copies per example for each language: p_lang / share_lang with p ~ share^alpha
    (mBERT's exponential smoothing, docs/canine.md "Recipe"). The total count stays the same.
    Summed in sorted order: the same counts give the same floats whatever order they arrived in."""
    total = sum(example_counts.values())
    if not total:
        return {}
    smoothed = {lang: (n / total) ** alpha for lang, n in sorted(example_counts.items()) if n}
    z = sum(smoothed.values())
    return {lang: (smoothed[lang] / z) / (example_counts[lang] / total) for lang in smoothed}


def copies_of(weight: float, seed: int, lang: str, ex) -> int:
    whole = math.floor(weight)
    return whole + (seeds.copy_draw(seed, lang, ex.page_ids[0], ex.part) < weight - whole)


def shard_counts(codepoints_per_split: dict, shard_codepoints: int) -> dict:
    return {split: max(1, math.ceil(n / shard_codepoints)) for split, n in codepoints_per_split.items()}


def shard_name(split: str, index: int, total: int) -> str:
    return f"{split}/part-{index:05d}-of-{total:05d}.parquet"


def sizing(sizes: dict, alpha: float, shard_codepoints: int) -> Sizing:
    """{SplitLang: Size} of the packed examples -> language weights and shards per split. The
    shard count uses the expected number of copies (weight x codepoints), so it is known before
    replication: examples are keyed to their shard as they are replicated, and the planned rows
    (an example plus every mask column) never cross a stage."""
    weights = language_weights({key.lang: size.examples for key, size in sizes.items() if key.split == "train"}, alpha)
    expected = {}
    for key, size in sorted(sizes.items()):  # sorted: the same float sums whatever the arrival order
        weight = weights.get(key.lang, 1.0) if key.split == "train" else 1.0
        expected[key.split] = expected.get(key.split, 0.0) + size.codepoints * weight
    return Sizing(weights, shard_counts(expected, shard_codepoints))


def _add_sizes(sizes):
    n = codepoints = 0
    for size in sizes:
        n, codepoints = n + size.examples, codepoints + size.codepoints
    return Size(n, codepoints)


class SampleLanguages(beam.PTransform):
    """Packed -> (Sampled, Sizing), two PCollections. Validation keeps one copy of each example;
    the Sizing singleton holds the language weights and shards per split."""

    def __init__(self, cfg: PreprocessConfig):
        super().__init__()
        self.cfg = cfg

    def expand(self, packed):
        cfg = self.cfg
        shard_sizing = (
            packed
            | "ExampleSize" >> beam.Map(lambda x: (SplitLang(x.split, x.lang), Size(1, len(x.example.codepoints))))
            .with_output_types(Tuple[SplitLang, Size])
            | "SumSizes" >> beam.CombinePerKey(_add_sizes)
            | "SizeDict" >> beam.combiners.ToDict()
            | "Sizing" >> beam.Map(sizing, cfg.alpha, cfg.shard_codepoints)
        )

        def replicate(x, shard_sizing):
            n = 1 if x.split == "validation" else copies_of(shard_sizing.weights.get(x.lang, 1.0), cfg.seed, x.lang, x.example)
            for copy in range(n):
                yield Sampled(x.split, x.lang, x.example, copy)

        return packed | "Replicate" >> beam.FlatMap(replicate, pvalue.AsSingleton(shard_sizing)), shard_sizing


class _PlanAndWriteFn(beam.DoFn):
    """One shard's examples -> mask plans (pipeline/masks.py) -> one Parquet file. Planning here,
    after the shuffle, keeps rows out of Beam's coders. Rows are sorted by a hash of their id,
    not the id itself: ids start with the language, and readers take contiguous row ranges, so
    id order would give one-language batches. The tokenizer is built once per worker. Beside
    its ShardFile it emits, per language in the shard, the histograms of its masks
    (MaskHistograms, tagged "masks") for the manifest's per-language mask statistics."""

    def __init__(self, cfg: PreprocessConfig, staging):
        self.seed, self.staging = cfg.seed, staging
        self.mask_config = masks.MaskPlanConfig.of(cfg)
        self._json = self._tokenizer = None

    def process(self, kv, tokenizer_json):
        if tokenizer_json is not self._json:
            self._tokenizer, self._json = WordPieceTokenizer.from_str(tokenizer_json), tokenizer_json
        shard, copies = kv
        by_key = {}
        for s in copies:
            by_key.setdefault((s.lang, s.copy), []).append(s.example)
        rows, by_lang = [], {}
        for (lang, copy), exs in by_key.items():  # any batching gives the same rows (plan_examples)
            planned = masks.plan_examples(exs, lang, copy, self.seed, self._tokenizer, self.mask_config)
            rows += planned
            by_lang.setdefault(lang, []).extend(planned)
        rows.sort(key=lambda r: (seeds.row_order_key(r["example_id"]), r["example_id"]))
        name = shard_name(shard.split, shard.index, shard.total)
        record = ShardFile(split=shard.split, path=name,
                           **shards.write_table(shards.rows_to_table(rows), f"{self.staging}/{name}"))
        faults.point("shard")
        yield record
        for lang in sorted(by_lang):
            share, spans = masks.mask_histograms(by_lang[lang], self.mask_config)
            yield pvalue.TaggedOutput("masks", MaskHistograms(lang, share, spans))


class WriteShards(beam.PTransform):
    """Sampled -> {shards: ShardFile, one per shard written; masks: MaskHistograms}. An example goes
    to a shard by a hash of its example_id, so equal inputs give byte-identical files whatever
    the workers."""

    def __init__(self, cfg: PreprocessConfig, staging: str, sizing, tokenizer_json):
        super().__init__()
        self.cfg, self.staging, self.sizing, self.tokenizer_json = cfg, staging, sizing, tokenizer_json

    def expand(self, sampled):
        def key(s, shard_sizing):
            total = shard_sizing.shards[s.split]
            index = seeds.shard_index(examples.example_id(s.lang, s.example, s.copy), total)
            return ShardKey(s.split, index, total), s

        return (
            sampled
            | "KeyShard" >> beam.Map(key, pvalue.AsSingleton(self.sizing)).with_output_types(Tuple[ShardKey, Sampled])
            | "GroupShard" >> beam.GroupByKey()
            | "PlanAndWrite" >> beam.ParDo(_PlanAndWriteFn(self.cfg, self.staging), pvalue.AsSingleton(self.tokenizer_json))
            .with_outputs("masks", main="shards")
        )


class WriteRejects(beam.PTransform):
    """Reject -> staging/_rejects/<lang>.jsonl, sorted by page id (small: one file a
    language); yields each file's path relative to staging."""

    def __init__(self, staging):
        super().__init__()
        self.staging = staging

    def expand(self, rejects):
        staging = self.staging

        def write(kv):
            lang, items = kv
            items = sorted(items, key=lambda r: (r.page_id if isinstance(r.page_id, int) else -1, r.source))
            rel = f"{schema.REJECTS}/{lang}.jsonl"
            lines = (json.dumps(r._asdict(), ensure_ascii=False, sort_keys=True) + "\n" for r in items)
            save_text("".join(lines), f"{staging}/{rel}")
            return rel

        return rejects | "ByLang" >> beam.Map(lambda r: (r.lang, r)) | "Group" >> beam.GroupByKey() | "Write" >> beam.Map(write)


def build(p, cfg: PreprocessConfig, items, staging: str, tokenizer_json: str | None):
    """Add the whole job to pipeline `p`; everything is written below `staging`."""
    cleaned = p | "ReadAndClean" >> ReadAndClean(items, staging, cfg)
    split_pages = cleaned.kept | "AssignSplit" >> AssignSplit(cfg.validation_fraction)
    tokenizer = split_pages | "TrainTokenizer" >> TrainTokenizer(cfg, tokenizer_json)
    _ = tokenizer | "SaveTokenizer" >> beam.Map(save_text, f"{staging}/{schema.TOKENIZER}")
    packed = split_pages | "PackExamples" >> PackExamples(cfg)
    sampled, shard_sizing = packed | "SampleLanguages" >> SampleLanguages(cfg)
    written = sampled | "WriteShards" >> WriteShards(cfg, staging, shard_sizing, tokenizer)
    _ = (
        written.shards
        | "ShardList" >> beam.combiners.ToList()
        | "SortShards" >> beam.Map(lambda files: [f._asdict() for f in sorted(files, key=lambda f: f.path)])
        | "WriteShardList" >> beam.Map(save_json, f"{staging}/shards.json")
    )
    # The lists of shards and rejects files are what `finalize` publishes: it lists no folder.
    _ = (
        cleaned.rejects
        | "WriteRejects" >> WriteRejects(staging)
        | "RejectsList" >> beam.combiners.ToList()
        | "WriteRejectsList" >> beam.Map(lambda rels: save_json(sorted(rels), f"{staging}/rejects.json"))
    )
    stats = StatsInputs(
        outcomes=cleaned.outcomes,
        replaced=cleaned.replaced,
        dropped=cleaned.dropped,
        example_langs=sampled | "ExampleLang" >> beam.Map(lambda s: s.lang),
        weights=shard_sizing | "Weights" >> beam.Map(lambda s: s.weights),
        validation_langs=(split_pages | "ValidationOnly" >> beam.Filter(lambda sp: sp.split == "validation")
                          | "ValidationLang" >> beam.Map(lambda sp: sp.page.lang)),
        headings=cleaned.headings,
        masks=written.masks,
    )
    _ = stats | "CollectStats" >> CollectStats(staging)

