"""The preprocessing job: Wikipedia dumps (or cleaned JSONL / Parquet) -> contract shards.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2

Steps (each a labelled composite or ParDo, each testable with TestPipeline). Pages and examples
cross the shuffles as files in staging (pipeline/beam/spill.py); through Beam go only counts, keys and
file references, so no process and no runner's data plane holds the dump (docs/scale.md):
  ReadAndClean    work items (files, multistream ranges, split single-stream ranges) -> Reshuffle ->
                  streaming parse + clean; each item's cleaned pages cached in staging/items/
                  (pipeline/beam/itemcache.py: a killed run resumes), a LangTally per language passed on:
                  every page's outcome counted, what cleaning dropped counted per reason
  ValidationCuts  per language, its share of pages (~0.5%; at least one page from 20 pages on),
                  those with the smallest hashes of (lang, page id), to validation: a cut per language
  SizeItems       a light pass over the caches: codepoints per (split, language), validation pages,
                  and the tokenizer sample's candidates (pipeline/beam/tokenizer_sample.py)
  ScatterPages    each item's kept pages to its pack groups (staging/pages/), and its pages of the
                  tokenizer's sample to their chunks (staging/tokenizer/), with their characters
  TrainTokenizer  WordPiece for CANINE-S on the pages with the smallest id hashes, a chunk at a time,
                  the sample read once (or a given tokenizer.json): one unit of work, run by
                  SampleLanguages beside its own (`deal`: one worker trains while the others sample)
  PackExamples    a pack group's pages, sorted by id, packed to seq_len (staging/packed/)
  SampleLanguages share^alpha smoothing: subsample big languages, repeat small ones with fresh masks;
                  shards per split from the expected size; each copy to its shard (staging/sampled/)
  WriteShards     a shard's examples: CANINE-C span mask + CANINE-S subword plan per example,
                  seeded by (seed, page id, copy), rows ordered by another hash of the id
                  (languages mixed), one Parquet file

Everything the job writes goes to a staging folder first, each file whole (atomic_write),
with the lists of the shards and rejects files it wrote (shards.json, rejects.json);
`pipeline.output.output.finalize` publishes exactly those and writes the manifest last, so a failed run
leaves no manifest, and nothing else of staging is ever published.
Nothing depends on worker count, bundle order or runner: every decision is a
stable hash (pipeline/seeds.py, a table of them all) and every group is sorted before use.
"""

import atexit
import functools
import json
import math
import os
import signal
import sys
import threading
from typing import Any, NamedTuple, Tuple

import apache_beam as beam
import fsspec
import numpy as np
import pyarrow as pa
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from contract import schema
from contract.files import save_json, save_text
from pipeline import faults, seeds
from pipeline.beam import itemcache, memory, phases, spill, tally, tokenizer_sample
from pipeline.rows import examples, masks, shards
from pipeline.beam.split import cuts_of, split_of, validation_cut
from pipeline.preprocess_config import PreprocessConfig
from pipeline.beam.elements import (SplitLang, PackGroup, PackedFile, Size, Sizing, ShardKey, ShardFile, MaskHistograms,
                                    Vocabulary)
from pipeline.beam.stats import CollectStats, StatsInputs, merge_histograms
from pipeline.rows.tokenizer import WordPieceTokenizer, alphabet_of, train_wordpiece
from pipeline.sources.plan import stored_bytes

_NS = "canine.preprocess"


# --- the DirectRunner's worker processes ----------------------------------------------------------
# With --workers 2 or more the DirectRunner runs the job in worker processes that share the
# launcher's terminal. While the job runs, the launcher names its process id in LAUNCHER_PID and
# has each worker import this module first, as a Beam plugin, in the worker's main thread before
# its harness starts (pipeline/run.py `_worker_plugins`); set_up_worker_process runs then.
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


class _ExitWithoutFinalizing:
    """A worker's exit once its harness has returned: flush, then os._exit, skipping the
    interpreter's finalization. gRPC's C threads of the harness's channels are still running
    then, and one that releases the GIL while the interpreter finalizes aborts the process
    ("Fatal Python error: PyGILState_Release: thread state ... must be current when releasing",
    then the shell Beam starts the worker with prints "Aborted"): seen once when a Ctrl-C ended a
    2-worker job, the launcher closing the workers' channels as it stopped. atexit handlers run
    after the main thread's last traceback is printed and the other non-daemon threads are
    joined, and before finalization; the exit status stays 1 after an uncaught exception (seen
    by sys.excepthook), else 0 (the harness's main has no other status: sdk_worker_main, Beam 2.77)."""

    def __init__(self):
        self.failed = False
        self._excepthook = sys.excepthook

    def excepthook(self, *exc_info):
        self.failed = True
        self._excepthook(*exc_info)

    def __call__(self):
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):  # closed or gone: nothing to flush
                pass
        os._exit(1 if self.failed else 0)


def set_up_worker_process() -> None:
    """In a worker process of the launcher named by LAUNCHER_PID: ignore SIGINT (a terminal's
    Ctrl-C reaches the whole process group; the launcher alone ends the job on it, and stops
    the workers; pipeline/beam/direct_runner.py has them start with it ignored already), drop the harness's printed copy of a failed bundle's traceback, and exit
    without the interpreter's finalization (_ExitWithoutFinalizing). Anywhere else (the
    launcher, a process importing this module from another thread) it does nothing."""
    launcher = os.environ.get(LAUNCHER_PID)
    if not launcher or launcher == str(os.getpid()) or threading.current_thread() is not threading.main_thread():
        return
    from apache_beam.runners.worker import sdk_worker

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr = _HarnessStderr(sys.stderr, sdk_worker.SdkHarness._execute.__code__)
    exit_ = _ExitWithoutFinalizing()
    sys.excepthook = exit_.excepthook
    atexit.register(exit_)


set_up_worker_process()

# Arrow's buffers, in every process that imports the job (the launcher, SDK workers, Dask
# workers, Dataflow's), from jemalloc told to give freed pages back at once (decay 0): with its
# default decay it kept what a step freed, so a worker's resident memory was the sum of its
# steps' peaks (packing then scattering a 15M-codepoint group: 690 MB resident after, 400 MB
# with the C library's allocator); glibc's, in turn, fragments under Arrow's aligned
# allocations (a shard's 8M codepoints planned at +233 MB with it, +188 with this; decoding its
# row groups +120 and +35 MB). A pyarrow built without jemalloc keeps the C library's.
try:
    pa.set_memory_pool(pa.jemalloc_memory_pool())
    pa.jemalloc_set_decay_ms(0)
except NotImplementedError:
    pa.set_memory_pool(pa.system_memory_pool())


# --- ReadAndClean: work items -> cached cleaned pages, counted -------------------------------------
class _ItemFn(beam.DoFn):
    """One work item -> its cleaned pages in its cache file (parsed now, or found from an earlier
    run), and one LangTally per language of the item: counts, never pages."""

    def __init__(self, staging, cfg: PreprocessConfig):
        self.staging, self.cfg = staging, cfg
        self.reused = Metrics.counter(_NS, "items_reused")
        self.parsed = Metrics.counter(_NS, "items_parsed")
        self.outcome_counters = {o: Metrics.counter(_NS, o) for o in schema.PAGE_OUTCOMES}
        self.drop_counters = [Metrics.counter(_NS, f"dropped_{r}") for r in schema.CONSTRUCT_DROPS]

    def setup(self):
        faults.point("start")  # a worker process is starting its first step; others may still be starting

    def process(self, item):
        with phases.timed("read+clean"):
            url = itemcache.cache_url(self.staging, item)
            fs, path = fsspec.core.url_to_fs(url)
            tallies = {}
            if fs.exists(path):
                pages, counter = itemcache.replay(url), self.reused
            else:
                pages, counter = itemcache.parse_and_store(item, url, self.cfg), self.parsed
            for c in pages:
                if c.lang not in tallies:
                    tallies[c.lang] = tally.Tally()
                tallies[c.lang].add(c)
            counter.inc()
            memory.release()  # the item's pages and parser state: each step of a worker gets its memory back
            for lang in sorted(tallies):
                t = tallies[lang].done(url, lang)
                for outcome, n in zip(schema.PAGE_OUTCOMES, t.outcomes):
                    if n:
                        self.outcome_counters[outcome].inc(n)
                for counter_, n in zip(self.drop_counters, t.dropped):
                    if n:
                        counter_.inc(n)
                yield t
            if counter is self.parsed:
                faults.point("item")


class ReadAndClean(beam.PTransform):
    """Work items -> LangTally, one per (item, language). The Reshuffle spreads a single big
    multistream dump over workers; each finished item is cached in staging (itemcache), and
    that file, not Beam, carries its pages to the next steps."""

    def __init__(self, items, staging, cfg: PreprocessConfig, workers: int = 1, input_sizes: dict | None = None):
        super().__init__()
        self.items, self.staging, self.cfg = even_shares(items, input_sizes or {}, workers), staging, cfg

    def expand(self, pbegin):
        return (
            pbegin
            | "WorkItems" >> beam.Create(self.items, reshuffle=False)
            | "Reshuffle" >> beam.Reshuffle()
            | "ParseAndClean" >> beam.ParDo(_ItemFn(self.staging, self.cfg))
        )


def even_shares(items, input_sizes: dict, workers: int) -> list:
    """The work items in an order that gives each of `workers` workers of Beam's local runner an
    even share of the input bytes, its largest items first. That runner splits a stage's input
    into one fixed part per worker, round robin in the order the Reshuffle's keys arrived (Beam
    2.77 fn_runner/execution.py, GroupingBuffer.partition), and a worker runs its part in order.
    In the planner's order (by path) 1 GB of the benchmark's input left one worker reading alone
    for 21 s at the end (one 94 MB item late in its part). So each item, largest first, goes to
    the lightest of the shares that hold the fewest items (equal counts keep the round robin's
    positions), and the shares are dealt out a row at a time, the fuller ones first. Other
    runners hand out work as workers free up; the order does not matter to them, nor to the
    output. `input_sizes`: {path: bytes}, for an item that runs to its file's end."""
    size = functools.partial(stored_bytes, file_sizes=input_sizes)
    shares, load = [[] for _ in range(max(1, workers))], [0] * max(1, workers)
    for item in sorted(items, key=size, reverse=True):  # stable: equal sizes in the planner's order
        fewest = min(map(len, shares))
        i = min((i for i, share in enumerate(shares) if len(share) == fewest), key=load.__getitem__)
        shares[i].append(item)
        load[i] += size(item)
    shares.sort(key=len, reverse=True)
    return [share[row] for row in range(len(shares[0])) for share in shares if row < len(share)]


# --- the validation split (the rule: pipeline/beam/split.py) -------------------------------------------
class ValidationCuts(beam.PTransform):
    """LangTally -> one dict {lang: (kept pages, cut)}: per language, the kept pages counted and
    the EXACT_VALIDATION_PAGES smallest split hashes merged (bounded memory: no language is ever
    grouped on one worker). Sums and smallest-k are order-free: the split does not depend on
    bundling or workers."""

    def __init__(self, validation_fraction):
        super().__init__()
        self.fraction = validation_fraction

    def expand(self, tallies):
        fraction = self.fraction

        def cut(lang, combined):
            kept, smallest = combined
            return lang, (kept, validation_cut(kept, smallest, fraction))

        return (
            tallies
            | "KeptAndSmallest" >> beam.Map(lambda t: (t.lang, (t.kept, t.smallest)))
            | "Merge" >> beam.CombinePerKey(tally.merge_smallest)
            | "Cut" >> beam.MapTuple(cut)
            | "CutDict" >> beam.combiners.ToDict()
        )



# --- SizeItems: a second, light pass over each item's cache ----------------------------------------
class _SizeFn(beam.DoFn):
    """One item's cache, with the cuts -> codepoints per (split, language), validation pages per
    language, and the item's candidates for the tokenizer's sample (tagged)."""

    def process(self, url, cuts, tokenizer_bound):
        with phases.timed("sizing"):
            sizes, held = {}, {}
            for lang, page_id, chars in itemcache.kept_sizes(url):
                split = split_of(lang, page_id, cuts)
                key = SplitLang(split, lang)
                sizes[key] = sizes.get(key, 0) + chars
                if split == "validation":
                    held[lang] = held.get(lang, 0) + 1
                elif (rank := seeds.tokenizer_rank(lang, page_id)) < tokenizer_bound:
                    yield pvalue.TaggedOutput("candidates", (rank, page_id, chars))
            for key in sorted(sizes):
                yield key, sizes[key]
            for lang in sorted(held):
                yield pvalue.TaggedOutput("validation", (lang, held[lang]))


class SizeItems(beam.PTransform):
    """Item cache URLs -> {sizes: (SplitLang, codepoints) summed, validation: (lang, pages)
    summed, tokenizer: the sample's plan (tokenizer_sample.Plan, a singleton)}."""

    def __init__(self, cfg: PreprocessConfig, kept_and_cuts, cuts):
        super().__init__()
        self.cfg, self.kept_and_cuts, self.cuts = cfg, kept_and_cuts, cuts

    def expand(self, urls):
        k = self.cfg.tokenizer_pages
        # Any: a bound of the whole range is 2**64, past Beam's VarIntCoder for an inferred int
        bound = self.kept_and_cuts | "Bound" >> beam.Map(tokenizer_sample.bound, self.cfg.validation_fraction, k) \
            .with_output_types(Any)
        out = urls | "Sizes" >> beam.ParDo(_SizeFn(), pvalue.AsSingleton(self.cuts),
                                           pvalue.AsSingleton(bound)) \
            .with_output_types(Tuple[SplitLang, int], candidates=Any, validation=Tuple[str, int]) \
            .with_outputs("candidates", "validation", main="sizes")
        sizes = out.sizes | "SumSizes" >> beam.CombinePerKey(sum)
        validation = out.validation | "SumValidation" >> beam.CombinePerKey(sum)
        plan = (out.candidates
                | "Candidates" >> beam.combiners.ToList()
                | "Plan" >> beam.Map(tokenizer_sample.plan, k, pvalue.AsSingleton(bound)))
        return sizes, validation, plan


# --- ScatterPages: each item's kept pages to its pack groups, through files ------------------------
def groups_of(sizes: dict, pack_group_codepoints: int) -> dict:
    """{SplitLang: codepoints} -> {SplitLang: pack groups}: the count comes from the size, not
    from the worker count."""
    return {key: max(1, math.ceil(size / pack_group_codepoints)) for key, size in sizes.items()}


class _ScatterPagesFn(beam.DoFn):
    """One item's kept pages -> STAGING/pages/<item>.arrow, record batches by PackGroup, and
    its pages of the tokenizer's sample -> STAGING/tokenizer/<item>.arrow, record batches by
    chunk of the sample (spill.py). Emits (PackGroup, Ref), tagged "sample" (chunk, Ref), and
    tagged "alphabet" the codepoints of its sample pages' characters (uint32 bytes, sorted): the
    alphabet the trainer needs before it counts, found here over the workers, not by a pass of
    its own over the whole sample (tokenizer.train_wordpiece)."""

    def __init__(self, staging):
        self.staging = staging

    def process(self, url, cuts, groups, plan):
        with phases.timed("scatter"):
            name = spill.spill_name(url.rsplit("/", 1)[-1])
            by_group, sample = {}, {}
            for lang, page_id, text in itemcache.kept_pages(url):
                split = split_of(lang, page_id, cuts)
                key = SplitLang(split, lang)
                group = PackGroup(split, lang, seeds.pack_group(lang, page_id, groups[key]))
                by_group.setdefault(group, ([], [], []))
                for column, value in zip(by_group[group], (lang, page_id, text)):
                    column.append(value)
                if split == "train" and (chunk := plan.chunk_of(seeds.tokenizer_rank(lang, page_id), page_id)) is not None:
                    sample.setdefault(chunk, []).append((seeds.tokenizer_rank(lang, page_id), page_id, text))
            tables = {g: spill.pages_table(*cols) for g, cols in by_group.items()}
            del by_group
            pages = spill.write_buckets(f"{self.staging}/pages/{name}", tables)
            tables = {c: tokenizer_sample.table(rows) for c, rows in sample.items()}
            chunks = spill.write_buckets(f"{self.staging}/tokenizer/{name}", tables)
            del tables
            if sample:
                alphabet = alphabet_of(text for rows in sample.values() for _, _, text in rows)
            del sample
            memory.release()
            for group, ref in pages:
                yield group, ref
            for chunk, ref in chunks:
                yield pvalue.TaggedOutput("sample", (chunk, ref))
            if chunks:
                yield pvalue.TaggedOutput("alphabet", alphabet.astype("<u4").tobytes())


# --- TrainTokenizer --------------------------------------------------------------------------------
def _train_tokenizer(refs, plan, vocab_size, staging=None, alphabets=None):
    with phases.timed("tokenizer"):
        faults.point("tokenizer")
        if alphabets is not None and plan.whole():  # the items' alphabets: the sample's
            alphabet = np.unique(np.concatenate([np.frombuffer(a, "<u4") for a in alphabets] or [np.zeros(0, "<u4")]))
        else:  # pages past the k-th (a page id given twice): a pass of its own over what is read
            alphabet = alphabet_of(tokenizer_sample.Texts(refs, plan))
        reads = iter(range(len(plan.uppers)))
        said = None if staging is None else lambda: phases.done(staging, "tokenizer", str(next(reads)))
        texts = tokenizer_sample.Texts(refs, plan, on_chunk=said)  # read chunk by chunk, in rank order
        vocabulary = train_wordpiece(texts, vocab_size=vocab_size, alphabet=alphabet).to_str()
        memory.release()
        return vocabulary


def _vocabulary(refs, plan, alphabets=None) -> Vocabulary:
    return Vocabulary(sorted(refs), plan, alphabets)


def train(unit: Vocabulary, vocab_size: int, staging: str | None = None) -> str:
    """The vocabulary's training, one unit of work: its tokenizer JSON."""
    return _train_tokenizer(unit.refs, unit.plan, vocab_size, staging, unit.alphabets)


class TrainTokenizer(beam.PTransform):
    """(chunk, Ref) of the sample's pages -> one tokenizer JSON string (a singleton PCollection);
    with `as_unit`, the training as one unit of work (a Vocabulary singleton) that SampleLanguages
    runs beside its own (the job does: `deal`), or the given JSON all the same.

    The sample is the `tokenizer_pages` training pages with the smallest hash of (lang, page id):
    a deterministic bottom-k sketch (pipeline/beam/tokenizer_sample.py), read from files a chunk at
    a time, so neither its pages nor the dump's sit in one process. `alphabets`: ScatterPages'
    tagged output of that name (without it, the trainer finds the alphabet by a pass of its own)."""

    def __init__(self, cfg: PreprocessConfig, given_json: str | None, plan, staging: str | None = None,
                 alphabets=None, as_unit: bool = False):
        super().__init__()
        self.cfg, self.given_json, self.plan, self.staging, self.alphabets = cfg, given_json, plan, staging, alphabets
        self.as_unit = as_unit

    def expand(self, sample_refs):
        if self.given_json is not None:
            return sample_refs.pipeline | "GivenTokenizer" >> beam.Create([self.given_json])
        unit = (
            sample_refs
            | "SampleRefs" >> beam.combiners.ToList()
            | "Unit" >> beam.Map(_vocabulary, pvalue.AsSingleton(self.plan),
                                 None if self.alphabets is None else pvalue.AsList(self.alphabets))
        )
        return unit if self.as_unit else unit | "Train" >> beam.Map(train, self.cfg.vocab_size, self.staging)


# --- PackExamples ----------------------------------------------------------------------------------
class _PackFn(beam.DoFn):
    """One pack group's pages (Refs into the items' page files) -> its examples in
    STAGING/packed/<split>-<lang>-<group>.parquet; emits PackedFile and, tagged "sizes",
    (SplitLang, Size)."""

    def __init__(self, cfg: PreprocessConfig, staging):
        self.cfg, self.staging = cfg, staging

    def process(self, kv):
        with phases.timed("packing"):
            group, refs = kv
            by_id = []
            for table in spill.read_buckets(refs, columns=["page_id", "text"]):
                by_id += zip(table.column("page_id").to_pylist(), table.column("text").to_pylist())
            by_id.sort()  # by id (then text): the same packing whatever reached which worker first
            cfg = self.cfg
            exs = examples.pack_pages(by_id, cfg.seq_len, cfg.sentence_order, cfg.seed)
            del by_id
            url = f"{self.staging}/packed/{group.split}-{group.lang}-{group.group:05d}{spill.SUFFIX}"
            spill.write_whole(url, spill.examples_table([(group.lang, 0, ex) for ex in exs]))
            size = Size(len(exs), sum(len(ex.codepoints) for ex in exs))
            del exs
            memory.release()
            faults.point("pack")
            phases.done(self.staging, "packing", url.rsplit("/", 1)[-1])
            yield PackedFile(group.split, group.lang, url, size.examples)
            yield pvalue.TaggedOutput("sizes", (SplitLang(group.split, group.lang), size))


class PackExamples(beam.PTransform):
    """(PackGroup, Ref) -> {files: PackedFile, sizes: (SplitLang, Size) summed}. Pages are
    packed inside hash groups (PackGroup), sorted by id, so the packing is the same whatever
    reached which worker first."""

    def __init__(self, cfg: PreprocessConfig, staging: str):
        super().__init__()
        self.cfg, self.staging = cfg, staging

    def expand(self, page_refs):
        out = (
            page_refs
            | "Group" >> beam.GroupByKey()
            | "Pack" >> beam.ParDo(_PackFn(self.cfg, self.staging))
            .with_output_types(Any, sizes=Tuple[SplitLang, Size]).with_outputs("sizes", main="files")
        )
        return out.files, out.sizes | "SumSizes" >> beam.CombinePerKey(_add_sizes)


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


def shard_shares(sizing: Sizing) -> dict:
    """{shard, as the launcher's progress names it (phases.Reporter): its share of all the shards'
    codepoints}: a split's shards share its expected codepoints alike (sizing cuts them so), and
    a validation shard is a small one (the launcher's ETA weighs the shards not begun by these)."""
    whole = sum((sizing.expected or {}).values())
    if not whole:
        return {}
    return {phases.unit_file(shard_name(split, i, n)): sizing.expected.get(split, 0.0) / n / whole
            for split, n in sorted(sizing.shards.items()) for i in range(n)}


def sizing(sizes: dict, alpha: float, shard_codepoints: int) -> Sizing:
    """{SplitLang: Size} of the packed examples -> language weights and shards per split. The
    shard count uses the expected number of copies (weight x codepoints), so it is known before
    replication: examples are keyed to their shard as they are replicated."""
    weights = language_weights({key.lang: size.examples for key, size in sizes.items() if key.split == "train"}, alpha)
    expected = {}
    for key, size in sorted(sizes.items()):  # sorted: the same float sums whatever the arrival order
        weight = weights.get(key.lang, 1.0) if key.split == "train" else 1.0
        expected[key.split] = expected.get(key.split, 0.0) + size.codepoints * weight
    return Sizing(weights, shard_counts(expected, shard_codepoints), expected)


def _add_sizes(sizes):
    n = codepoints = 0
    for size in sizes:
        n, codepoints = n + size.examples, codepoints + size.codepoints
    return Size(n, codepoints)


def replicate(split: str, lang: str, ex, weights: dict, seed: int) -> int:
    """How many copies of a packed example the sampled data holds: one in validation; in
    training its language's weight, the fraction drawn per example (copies_of)."""
    return 1 if split == "validation" else copies_of(weights.get(lang, 1.0), seed, lang, ex)


class _Head(NamedTuple):  # what example_id and copies_of read of an example: its first page id and part
    page_ids: tuple
    part: int


def _sample(packed: PackedFile, shard_sizing: Sizing, seed: int):
    """One pack group's examples, with the sizing -> their copies, each keyed to its shard by a
    hash of its example_id, in STAGING/sampled/<group>.arrow, record batches by shard. The rows are
    taken in Arrow (a copy column set), never made Python objects. Yields (ShardKey, Ref) and,
    tagged "examples", (lang, copies)."""
    with phases.timed("sampling"):
        import pyarrow.compute as pc

        total = shard_sizing.shards[packed.split]
        by_shard = {}
        copies = 0
        for table in spill.read_whole(packed.url):
            taken = {}
            firsts = pc.list_element(table.column("page_ids"), 0).to_pylist()
            langs, parts = table.column("lang").to_pylist(), table.column("part").to_pylist()
            for row, (lang, first, part) in enumerate(zip(langs, firsts, parts)):
                head = _Head((first,), part)
                for copy in range(replicate(packed.split, lang, head, shard_sizing.weights, seed)):
                    key = ShardKey(packed.split, seeds.shard_index(examples.example_id(lang, head, copy), total), total)
                    rows, numbers = taken.setdefault(key, ([], []))
                    rows.append(row)
                    numbers.append(copy)
                    copies += 1
            for key, (rows, numbers) in taken.items():
                part_table = table.take(pa.array(rows, pa.int64()))
                part_table = part_table.set_column(1, "copy", pa.array(numbers, pa.int32()))
                by_shard.setdefault(key, []).append(part_table)
        tables = {key: pa.concat_tables(parts) for key, parts in by_shard.items()}
        del by_shard
        url = packed.url.replace("/packed/", "/sampled/")
        refs = spill.write_buckets(url, tables)
        del tables
        memory.release()
        phases.done(packed.url.rsplit("/packed/", 1)[0], "sampling", url.rsplit("/", 1)[-1])
        for key, ref in refs:
            yield key, ref
        if copies:
            yield pvalue.TaggedOutput("examples", (packed.lang, copies))


# Seconds of a worker per unit of work, to deal the units of SampleLanguages' step (a pack group's
# sampling, the vocabulary's training) into even shares; only their ratio matters, and never to the
# output. benchmarks/phases.py on 2 workers: the training 19-21 s of wall for the 360M characters of
# the sample at 1 GB, alone (its own threads on both cores), 24 s beside the sampling; the sampling
# 3.3 CPU-s for 53k examples at 300 MB (their copies: about as many, language_weights keeps the count).
VOCABULARY_S_PER_CHARACTER = 6e-8
SAMPLING_S_PER_EXAMPLE = 6e-5


def cost(unit) -> float:
    """A unit's seconds of a worker, as `deal` weighs it."""
    if isinstance(unit, Vocabulary):
        return unit.plan.characters * VOCABULARY_S_PER_CHARACTER
    return unit.examples * SAMPLING_S_PER_EXAMPLE


def deal(packed_files: list, vocabularies: list, shares: int | None) -> list:
    """SampleLanguages' units (PackedFiles, and the Vocabulary where it is trained) -> [(share,
    (position, unit))]: `shares` even shares, each unit, the largest first, to the share with the
    least work so far (a unit's `cost`); a share runs its units by position. Beam's local runner
    gives each worker a fixed part of a stage's keys (round robin: fn_runner/execution.py
    GroupingBuffer.partition, Beam 2.77), so with a key a share per worker the vocabulary, which
    one process trains, runs beside the sampling of the other workers and not before it, alone
    (at 1 GB, 19-21 s with the other worker idle), and its own worker samples less. `shares`
    None (a runner that hands out keys as its workers free up): a key a unit, the vocabulary first.
    The shares change when units run, never what they write."""
    units = sorted([*vocabularies, *sorted(packed_files, key=lambda f: f.url)],  # urls name the groups
                   key=cost, reverse=True)  # stable: equal costs in the urls' order, the same every run
    if shares is None:
        return [(i, (0, unit)) for i, unit in enumerate(units)]
    load, out = [0.0] * max(1, shares), []
    for position, unit in enumerate(units):
        share = min(range(len(load)), key=load.__getitem__)
        load[share] += cost(unit)
        out.append((share, (position, unit)))
    return out


class _SampleOrTrainFn(beam.DoFn):
    """A share of SampleLanguages' units (`deal`), in its order: pack groups sampled (`_sample`),
    and in one share the vocabulary trained (tagged "tokenizer": its JSON)."""

    def __init__(self, cfg: PreprocessConfig, staging: str | None):
        self.seed, self.vocab_size, self.staging = cfg.seed, cfg.vocab_size, staging

    def process(self, share, shard_sizing):
        _, units = share
        for _, unit in sorted(units, key=lambda u: u[0]):
            if isinstance(unit, Vocabulary):
                yield pvalue.TaggedOutput("tokenizer", train(unit, self.vocab_size, self.staging))
            else:
                yield from _sample(unit, shard_sizing, self.seed)


class SampleLanguages(beam.PTransform):
    """PackedFile -> ((ShardKey, Ref), (lang, copies), Sizing, tokenizer JSON or None). Validation
    keeps one copy of each example; the Sizing singleton holds the language weights and shards per
    split. `vocabulary` (TrainTokenizer's unit, a singleton): trained in this step, beside the
    sampling, in `shares` shares (`deal`); its JSON is the fourth output."""

    def __init__(self, cfg: PreprocessConfig, sizes, staging: str | None = None, vocabulary=None,
                 shares: int | None = None):
        super().__init__()
        self.cfg, self.sizes, self.staging, self.vocabulary, self.shares = cfg, sizes, staging, vocabulary, shares

    def expand(self, packed_files):
        cfg = self.cfg
        shard_sizing = (
            self.sizes
            | "SizeDict" >> beam.combiners.ToDict()
            | "Sizing" >> beam.Map(sizing, cfg.alpha, cfg.shard_codepoints)
        )
        vocabularies = [] if self.vocabulary is None else pvalue.AsList(self.vocabulary)
        out = (
            packed_files
            | "Units" >> beam.combiners.ToList()
            | "Deal" >> beam.FlatMap(deal, vocabularies, self.shares).with_output_types(Tuple[int, Any])
            | "Shares" >> beam.GroupByKey()
            | "Replicate" >> beam.ParDo(_SampleOrTrainFn(cfg, self.staging), pvalue.AsSingleton(shard_sizing))
            .with_output_types(Tuple[ShardKey, spill.Ref], examples=Tuple[str, int], tokenizer=str)
            .with_outputs("examples", "tokenizer", main="refs")
        )
        return out.refs, out.examples, shard_sizing, None if self.vocabulary is None else out.tokenizer


# --- WriteShards -----------------------------------------------------------------------------------
# Codepoints of a shard's examples read per pass (at most, in whole record batches): ~40 MB of
# codepoints and segment ids, and ~4 passes over a full shard's input (32M codepoints), each
# decoding its batches again (zstd level 1: seconds against the planning's half minute).
_PASS_CODEPOINTS = 8_000_000


def _examples_of(sources: list, wanted: list) -> list:
    """[(lang, copy, PackedExample)] of the rows `wanted` names ((_, _, source index, row) each,
    in that order), read from the record batches `sources` names ((url, batch) each): each
    batch is decoded once, only its wanted rows kept."""
    by_source = {}
    for pos, (_, _, j, row) in enumerate(wanted):
        by_source.setdefault(j, ([], []))
        by_source[j][0].append(pos)
        by_source[j][1].append(row)
    out = [None] * len(wanted)
    by_url = {}
    for j in sorted(by_source):
        by_url.setdefault(sources[j][0], []).append(j)
    for url, js in sorted(by_url.items()):
        with spill.opened(url) as (_, batch):
            for j in js:
                positions, rows = by_source[j]
                taken = batch(sources[j][1]).take(pa.array(rows, pa.int64()))
                for pos, example in zip(positions, spill.table_examples(taken)):
                    out[pos] = example
    return out


@functools.lru_cache(maxsize=1)
def _tokenizer_of(tokenizer_json: str) -> WordPieceTokenizer:
    """The vocabulary's tokenizer, once per process for equal JSON: each bundle gets its own copy
    of the side input (a new string), so a cache by identity built it again for every shard, and
    lost what it learns as it goes (FastSpans' pieces of each word seen, the replacement index:
    0.2 s a shard, py-spy of a 300 MB run)."""
    return WordPieceTokenizer.from_str(tokenizer_json)


class _PlanAndWriteFn(beam.DoFn):
    """One shard's examples -> mask plans (pipeline/rows/masks.py) -> one Parquet file. Planning here,
    after the shuffle, keeps rows out of Beam's coders and files. Rows are sorted by a hash of
    their id, not the id itself: ids start with the language, and readers take contiguous row
    ranges, so id order would give one-language batches. The tokenizer is built once per worker
    process (_tokenizer_of).
    Beside its ShardFile it emits, per language in the shard, the histograms of its masks
    (MaskHistograms, tagged "masks") for the manifest's per-language mask statistics."""

    def __init__(self, cfg: PreprocessConfig, staging):
        self.seed, self.staging, self.seq_len = cfg.seed, staging, cfg.seq_len
        self.mask_config = masks.MaskPlanConfig.of(cfg)

    def process(self, kv, tokenizer_json):
        with phases.timed("shards+masks"):  # a method of its own: Beam reads process() for a yield beside a return
            yield from self._plan_and_write(kv, tokenizer_json)

    def _plan_and_write(self, kv, tokenizer_json):
        import pyarrow.compute as pc

        tokenizer = _tokenizer_of(tokenizer_json)
        shard, refs = kv
        name = shard_name(shard.split, shard.index, shard.total)
        report = phases.Reporter(self.staging, "shards", name)  # how far its rows are; its clock starts with the shard
        # The rows' order from the narrow columns alone; the examples themselves are read a pass of
        # record batches at a time (_examples_of), so a shard is never whole in memory: held whole, its
        # codepoints and segment ids (5 bytes a codepoint, 160 MB for a full shard) were the
        # largest thing a worker held, and grew with the input until the shards were full.
        sources = sorted((ref.url, ref.row_group) for ref in refs)  # read_buckets' order: the same ties
        order = []
        for j, table in enumerate(spill.read_buckets([spill.Ref(url, rg, 0) for url, rg in sources],
                                                     columns=["lang", "copy", "page_ids", "part"])):
            firsts = pc.list_element(table.column("page_ids"), 0).to_pylist()
            langs, copies, parts = (table.column(c).to_pylist() for c in ("lang", "copy", "part"))
            for row, (lang, copy, first, part) in enumerate(zip(langs, copies, firsts, parts)):
                eid = examples.example_id(lang, _Head((first,), part), copy)
                order.append((seeds.row_order_key(eid), eid, j, row))
        order.sort(key=lambda o: o[:2])
        histograms = {}  # lang -> (share, spans), merged over the row groups
        per_pass = max(shards.ROW_GROUP_ROWS,
                       _PASS_CODEPOINTS // self.seq_len // shards.ROW_GROUP_ROWS * shards.ROW_GROUP_ROWS)

        def plan(part):  # one row group's rows -> its table (copies: nothing of `part` outlives it)
            by_key = {}
            for i, (lang, copy, ex) in enumerate(part):
                by_key.setdefault((lang, copy), []).append((i, ex))
            rows = [None] * len(part)
            for (lang, copy), batch in sorted(by_key.items()):  # any batching gives the same rows (plan_examples)
                planned = masks.plan_examples([ex for _, ex in batch], lang, copy, self.seed, tokenizer,
                                              self.mask_config)
                for (i, _), row in zip(batch, planned):
                    rows[i] = row
                share, spans = masks.mask_histograms(planned)
                old = histograms.get(lang, ({}, {}))
                histograms[lang] = (merge_histograms([old[0], share]), merge_histograms([old[1], spans]))
            return shards.rows_to_table(rows)

        def row_groups():  # a pass of examples read, then planned a row group at a time
            report(0, len(order))
            for first in range(0, len(order), per_pass):
                taken = _examples_of(sources, order[first : first + per_pass])
                for start in range(0, len(taken), shards.ROW_GROUP_ROWS):
                    yield plan(taken[start : start + shards.ROW_GROUP_ROWS])
                    report(first + min(start + shards.ROW_GROUP_ROWS, len(taken)), len(order))
                del taken  # before the next pass is read

        record = ShardFile(split=shard.split, path=name, **shards.write_tables(row_groups(), f"{self.staging}/{name}"))
        memory.release()
        faults.point("shard")
        yield record
        for lang in sorted(histograms):
            yield pvalue.TaggedOutput("masks", MaskHistograms(lang, *histograms[lang]))


class WriteShards(beam.PTransform):
    """(ShardKey, Ref) -> {shards: ShardFile, one per shard written; masks: MaskHistograms}. An
    example went to a shard by a hash of its example_id, so equal inputs give byte-identical
    files whatever the workers."""

    def __init__(self, cfg: PreprocessConfig, staging: str, tokenizer_json):
        super().__init__()
        self.cfg, self.staging, self.tokenizer_json = cfg, staging, tokenizer_json

    def expand(self, shard_refs):
        return (
            shard_refs
            | "GroupShard" >> beam.GroupByKey()
            | "PlanAndWrite" >> beam.ParDo(_PlanAndWriteFn(self.cfg, self.staging), pvalue.AsSingleton(self.tokenizer_json))
            .with_outputs("masks", main="shards")
        )


class WriteRejects(beam.PTransform):
    """LangTally -> staging/_rejects/<lang>.jsonl, sorted by page id, read back from the caches
    of the items that have rejects of that language (small: a line a rejected page); yields each
    file's path relative to staging."""

    def __init__(self, staging):
        super().__init__()
        self.staging = staging

    def expand(self, tallies):
        staging = self.staging

        def write(kv):
            with phases.timed("rejects"):
                lang, urls = kv
                items = sorted(itemcache.rejects(sorted(urls), lang),
                               key=lambda r: (r.page_id if isinstance(r.page_id, int) else -1, r.source, tuple(r)))
                rel = f"{schema.REJECTS}/{lang}.jsonl"
                lines = (json.dumps(r._asdict(), ensure_ascii=False, sort_keys=True) + "\n" for r in items)
                save_text("".join(lines), f"{staging}/{rel}")
                return rel

        return (tallies
                | "WithRejects" >> beam.Filter(lambda t: t.rejects > 0)
                | "ByLang" >> beam.Map(lambda t: (t.lang, t.item))
                | "Group" >> beam.GroupByKey()
                | "Write" >> beam.Map(write))


def build(p, cfg: PreprocessConfig, items, staging: str, tokenizer_json: str | None, workers: int = 1,
          input_sizes: dict | None = None, shares: int | None = None):
    """Add the whole job to pipeline `p`; everything is written below `staging`. Between the
    steps travel only counts, keys and file references (docs/scale.md). `workers` and
    `input_sizes` ({path: bytes}) order the work items for the local runner (`even_shares`);
    `shares`: the fixed parts that runner splits a stage into (its workers), None for a runner
    that hands out work as its workers free up (`deal`)."""
    tallies = p | "ReadAndClean" >> ReadAndClean(items, staging, cfg, workers, input_sizes)
    kept_and_cuts = tallies | "ValidationCuts" >> ValidationCuts(cfg.validation_fraction)
    cuts = kept_and_cuts | "Cuts" >> beam.Map(cuts_of)
    urls = (tallies | "WithKept" >> beam.Filter(lambda t: t.kept > 0) | "ItemUrl" >> beam.Map(lambda t: t.item)
            | "Distinct" >> beam.Distinct())
    sizes, held, plan = urls | "SizeItems" >> SizeItems(cfg, kept_and_cuts, cuts)
    groups = (sizes | "SizeDict" >> beam.combiners.ToDict()
              | "Groups" >> beam.Map(groups_of, cfg.pack_group_codepoints))
    scattered = urls | "ScatterPages" >> beam.ParDo(
        _ScatterPagesFn(staging), pvalue.AsSingleton(cuts), pvalue.AsSingleton(groups), pvalue.AsSingleton(plan)
    ).with_output_types(Tuple[PackGroup, spill.Ref], sample=Tuple[int, spill.Ref], alphabet=bytes) \
        .with_outputs("sample", "alphabet", main="pages")
    # The vocabulary's training, one unit of work that SampleLanguages runs beside its own (`deal`)
    vocabulary = None if tokenizer_json is not None else scattered.sample | "TrainTokenizer" >> TrainTokenizer(
        cfg, None, plan, staging, scattered.alphabet, as_unit=True)
    # How many units the steps after reading have, for the launcher's progress (phases.py)
    _ = groups | "SayPackGroups" >> beam.Map(lambda g: phases.total(staging, "packing", sum(g.values())))
    _ = groups | "SaySampled" >> beam.Map(lambda g: phases.total(staging, "sampling", sum(g.values())))
    if tokenizer_json is None:
        _ = plan | "SayChunks" >> beam.Map(lambda pl: phases.total(staging, "tokenizer", len(pl.uppers)))
    packed, example_sizes = scattered.pages | "PackExamples" >> PackExamples(cfg, staging)
    shard_refs, copies, shard_sizing, tokenizer = packed | "SampleLanguages" >> SampleLanguages(
        cfg, example_sizes, staging, vocabulary, shares)
    if tokenizer is None:
        tokenizer = p | "GivenTokenizer" >> beam.Create([tokenizer_json])
    _ = tokenizer | "SaveTokenizer" >> beam.Map(save_text, f"{staging}/{schema.TOKENIZER}")
    _ = shard_sizing | "SayShards" >> beam.Map(lambda z: phases.total(staging, "shards", sum(z.shards.values()),
                                                                      shard_shares(z)))
    written = shard_refs | "WriteShards" >> WriteShards(cfg, staging, tokenizer)
    _ = (
        written.shards
        | "ShardList" >> beam.combiners.ToList()
        | "SortShards" >> beam.Map(lambda files: [f._asdict() for f in sorted(files, key=lambda f: f.path)])
        | "WriteShardList" >> beam.Map(save_json, f"{staging}/shards.json")
    )
    # The lists of shards and rejects files are what `finalize` publishes: it lists no folder.
    _ = (
        tallies
        | "WriteRejects" >> WriteRejects(staging)
        | "RejectsList" >> beam.combiners.ToList()
        | "WriteRejectsList" >> beam.Map(lambda rels: save_json(sorted(rels), f"{staging}/rejects.json"))
    )
    stats = StatsInputs(
        tallies=tallies,
        examples=copies,
        weights=shard_sizing | "Weights" >> beam.Map(lambda s: s.weights),
        validation=held,
        masks=written.masks,
    )
    _ = stats | "CollectStats" >> CollectStats(staging)
