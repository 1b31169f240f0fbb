"""What a preprocessing run shows while it works: work items done of total, pages and MB per
second, an ETA, then the shards being written; a bar on a terminal, timestamped lines otherwise.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2
    preprocess [##########----------] items 21/40 (52%)  1.3k pages/s  4.1 MB/s  ETA 0:37     (a terminal)
    2026-11-23 09:41:33 preprocess: items 21/40 (52%)  1.3k pages/s  4.1 MB/s  ETA 0:37      (a log, CI=true)

The launcher cannot look inside the runner's workers (DirectRunner subprocesses, Dask workers,
Dataflow VMs), but on every runner each finished work item leaves its cache file in
STAGING/items/ (pipeline/beam/itemcache.py, written whole) and each shard its file in
STAGING/<split>/part-i-of-n.parquet; and a worker reading an item rewrites a tiny file in
STAGING/progress/ every few seconds, the pages and input bytes it has read so far
(pipeline/sources/plan.py `_reported`), so that a run of one big item moves too. A thread of the
launcher lists those: every second on a local disk, every 10 s on an object store (one LIST
request each, plus one footer read per newly finished item for its page count and one small read
per item being read). MB are input bytes (compressed, as the dump is stored); items cached by an
earlier, killed run count as done but not towards the rates. The percentage and the ETA are of
the input bytes (of the pages, for a trial slice read from a file's start, whose extent is not
known: --max-pages pages a file).

After the reading, each later step says how far it is (pipeline/beam/phases.py: STAGING/progress/
<step>.total once its size is known, a file a finished unit): pack groups packed, the tokenizer's
chunk reads, pack groups sampled, shards written, each out of its total, the step at work with
its rate. The ETA is for the whole run, to publish: what is left of the reading at its measured
rate, then each later step from its measured rate once two of its units are done, else from
AFTER_READING (its wall time per second of reading, measured by benchmarks/phases.py on real
pages) and, for the vocabulary, from the sample's share of the input's kept pages (TOKENIZER_PER_READ);
the vocabulary trains beside the sampling (pipeline/beam/job.py `deal`), so those two count as
one stretch (`_beside`). The
shards are few (13 for 1 GB of XML) and finish in bursts, a worker's share at a time, so a rate
of finished shards said 2.8x or 0.4x the time left in a run's tail; instead each shard being
written says how far its rows are (phases.Reporter), and once one of them has moved, the shards
left are scheduled on the workers at the pace of those under way (`_schedule`). No ETA
is shown before READ_TO_ESTIMATE of the input is read: the first seconds' rate is the workers'
start-up, not the run's (an ETA of 10:19:22 at the start of a 28-minute run, a user's report).
"""

import dataclasses
import heapq
import json
import logging
import os
import re
import signal
import sys
import threading
import time

import fsspec
import pyarrow.parquet as pq

from contract import schema
from contract.files import is_local
from pipeline.beam import itemcache, phases
from pipeline.sources.plan import progress_name, stored_bytes

_SHARD = re.compile(r"part-\d{5}-of-(\d{5})\.parquet$")
# A timestamped line at most this often (a log is read, not watched); benchmarks/phases.py asks for more
PLAIN_EVERY_S = float(os.environ.get("CANINE_PREPROCESS_LINE_EVERY_S", 30.0))
BAR_WIDTH = 20
# The steps after reading, as the progress line names them: (step, what it counts, what it does).
STEPS = (("packing", "pack groups", "packed"), ("tokenizer", "tokenizer chunks", "read"),
         ("sampling", "pack groups", "sampled"), ("shards", "shards", "written"))
# Wall seconds of each step after reading per wall second of reading, both spread over the same
# workers, once staging's files were Arrow IPC (benchmarks/phases.py on real pages; docs/scale.md):
# --mb 1000 --workers 2: reading 72-82 s; sizing, scatter and packing 0.18x, sampling 0.08x,
# shards 0.46-0.53x; --mb 300 --workers 1: 0.19x, 0.11x, 0.73x (one worker's reading keeps one
# core busy, two workers' 1.8 of 2). Between the two, so that neither is off by 30%.
# RECALIBRATE when a step's cost changes.
AFTER_READING = {"packing": 0.18, "sampling": 0.09, "shards": 0.6}
# The vocabulary trains in one process on a bounded sample (tokenizer_pages pages): its wall
# seconds per second one worker would take to read the XML that holds the sample, on free cores
# (the tokenizers library trains on all of them): 0.18 with 1 worker at 300 MB, 0.175 with 2, and
# 0.13 with 2 at 1 GB (benchmarks/phases.py at 121054b, once words of one character were left out
# of the counting and the alphabet came from the scatter; 0.33 and 0.23 at a0743c6, 0.36 and 0.41
# before the words were cut outside the trainer); a loaded machine slows it more than the reading
# (0.66 at 1 GB, load 3-4, before the cut). Once the trainer has read two of its chunks (once
# each, as it counts), their pace is its ETA.
TOKENIZER_PER_READ = 0.16
READ_TO_ESTIMATE = 0.02  # the share of the input read before an ETA is shown


def timestamp(wall: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() if wall is None else wall))


def duration(seconds: float) -> str:
    """0:37, 12:05, 3:02:10: short enough for a progress line, unambiguous."""
    s = int(round(max(0.0, seconds)))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def is_terminal(stream) -> bool:
    """A bar only for a person at a terminal: not in a log, a pipe or CI (CI=true)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


def _rate(n: float, unit: str) -> str:
    return f"{n / 1e3:.1f}k {unit}" if n >= 1e3 else f"{n:.1f} {unit}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _mb_rate(bytes_per_s: float) -> str:
    mb = bytes_per_s / 1e6
    return f"{mb:.1f} MB/s" if mb >= 1 else f"{mb:.2f} MB/s"


class _ClearLine:
    """A logging filter that clears the bar's line before a log record is written under it."""

    def __init__(self, stream):
        self.stream = stream

    def filter(self, record) -> bool:
        self.stream.write("\r\033[K")
        return True


@dataclasses.dataclass
class Snapshot:
    items_done: int
    items_total: int
    pages: int  # pages of the items read by this run (not the reused ones)
    read_bytes: int  # input bytes of the items read by this run
    left_bytes: int  # input bytes of the items not done yet, less what their workers said they read
    elapsed_s: float
    shards_done: int = 0
    shards_total: int = 0  # 0 until the first shard shows its name (part-i-of-N)
    total_bytes: int = 0  # input bytes of all items (0: none known, a trial slice of whole files)
    left_pages: int | None = None  # a trial slice of whole files: pages still to read (--max-pages a file)
    # step -> (units done, total or None, units/s or None, seconds since it began)
    steps: dict = dataclasses.field(default_factory=dict)
    read_s: float | None = None  # the reading's wall seconds, once it is over
    workers: int = 1
    tokenizer_pages: int = 0  # the vocabulary's sample (0: a given vocabulary)
    read_from_s: float = 0.0  # the last poll before an item was seen begun: the rate is from then, not from start-up
    # the shards being written: (its weight, share of its rows done, shares a second or None); and the
    # weights of those not begun (a weight: its share of the shards' codepoints, 1 each where unknown)
    under_way: tuple = ()
    waiting: tuple = ()
    feed_rate: float | None = None  # the tokenizer's chunks a second (read as the trainer counts: its pace)
    shard_speed: float | None = None  # weight a second of a worker writing a shard: the mean over the shards seen
    kept_share: float | None = None  # kept pages per page read, in the finished items (None: not known)

    def fraction(self) -> float:
        """How much of the reading is done: by input bytes where they are known, else by pages
        (a trial slice), else by items."""
        if self.total_bytes:
            return 1 - self.left_bytes / self.total_bytes
        if self.left_pages is not None and self.pages + self.left_pages:
            return self.pages / (self.pages + self.left_pages)
        return self.items_done / max(1, self.items_total)

    def _reading(self) -> tuple[float, float, float] | None:
        """(read, left, seconds a unit of input took) of the reading, in input bytes (pages for a
        trial slice of unknown size); None until READ_TO_ESTIMATE of it is read."""
        done = self.items_done == self.items_total
        if self.total_bytes:
            read, left = self.total_bytes - (0 if done else self.left_bytes), 0 if done else self.left_bytes
        elif self.left_pages is not None or done:
            read, left = self.pages, 0 if done else self.left_pages or 0
        else:
            return None
        took = (self.read_s if done and self.read_s is not None else self.elapsed_s) - self.read_from_s
        fresh = self.read_bytes if self.total_bytes else self.pages  # what this run read (not an earlier run's items)
        if took <= 0 or not fresh or fresh < READ_TO_ESTIMATE * (read + left):
            return None
        return read, left, took / fresh

    def eta_s(self) -> float | None:
        """Seconds to publish: the reading left, then each later step (module docstring); None
        before it can be estimated."""
        reading = self._reading()
        if reading is None:
            return None
        read, left, per_unit = reading
        whole = (read + left) * per_unit  # the reading's wall time over the whole input
        lefts, measured = {}, set()  # step -> its seconds left; the steps whose left is at their measured pace
        for step, _, _ in STEPS:
            done, total, rate, in_step = self.steps.get(step, (0, None, None, 0.0))
            if total and done >= total:
                continue
            if step == "tokenizer":
                if not self.tokenizer_pages:
                    continue
                # the sample is of kept training pages: at 1 GB of the benchmark's input 50k of 88k
                # pages read, but all of its 50k kept ones (the share by pages said half the time)
                pages = self.pages * (read + left) / read if read else 0
                pages *= self.kept_share if self.kept_share is not None else 1.0
                share = min(1.0, self.tokenizer_pages / pages) if pages else 1.0
                model = whole * self.workers * share * TOKENIZER_PER_READ
            else:
                model = whole * AFTER_READING[step]
            # The model's time less the time the step has run; where units are done at a measured
            # rate, whichever says less, and the rate alone once the model is spent. Units finish in
            # bursts (a fixed share per worker), so a rate from a few of them says too much; the
            # tokenizer's chunks are read once, as the trainer counts: their rate is its pace.
            left_by_model = max(0.0, model - in_step)
            if step == "shards" and total and (
                    scheduled := _schedule(self.under_way, self.waiting, self.workers, self.shard_speed)) is not None:
                lefts[step] = scheduled
            elif step == "tokenizer" and total and self.feed_rate:
                lefts[step], measured = (total - done) / self.feed_rate, measured | {step}
            elif rate and total and step != "tokenizer":
                by_rate = (total - done) / rate
                lefts[step], measured = min(left_by_model, by_rate) if left_by_model else by_rate, measured | {step}
            else:
                lefts[step] = left_by_model
        training, sampling = lefts.pop("tokenizer", 0.0), lefts.pop("sampling", 0.0)
        return left * per_unit + sum(lefts.values()) + _beside(training, sampling, self.workers, "sampling" in measured)

    def describe(self) -> str:
        eta = self.eta_s()
        tail = [f"ETA {duration(eta)}"] if eta is not None else []
        if self.items_done < self.items_total:
            parts = [f"items {self.items_done}/{self.items_total} ({self.fraction():.0%})"]
            if (self.read_bytes or self.pages) and self.elapsed_s > 0:
                parts += [_rate(self.pages / self.elapsed_s, "pages/s"), _mb_rate(self.read_bytes / self.elapsed_s)]
            return "  ".join(parts + tail)
        parts = [f"items {self.items_total}/{self.items_total} read"]
        for step, noun, verb in STEPS:
            done, total, rate, _ = self.steps.get(step, (0, None, None, 0.0))
            if total is None and not done:
                continue
            said = f"{noun} {done}/{total if total is not None else '?'} {verb}"
            if step == "shards" and self.under_way:
                shares = sorted(f for _, f, _ in self.under_way)
                at = ", ".join(f"{f:.0%}" for f in shares) if len(shares) <= 4 else f"{sum(shares) / len(shares):.0%} on average"
                said += f", {len(shares)} under way ({at})"
            elif rate and total and done < total:
                said += f" ({rate:.2f}/s)" if rate < 10 else f" ({rate:.0f}/s)"
            parts.append(said)
        return "; ".join(parts) + ("  " + tail[0] if tail else "")

    def bar(self) -> str:
        if self.items_done == self.items_total:
            eta = self.eta_s()
            fraction = self.elapsed_s / (self.elapsed_s + eta) if eta is not None and self.elapsed_s + eta > 0 \
                else self.shards_done / self.shards_total if self.shards_total else 1.0
        else:
            fraction = self.fraction()
        filled = int(BAR_WIDTH * min(max(fraction, 0.0), 1.0))
        return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}]"


def _beside(training: float, sampling: float, workers: int, sampling_measured: bool) -> float:
    """Seconds left of the step that trains the vocabulary beside the sampling (job.deal: one
    worker trains, the sampling goes to the others first): with one worker, one after the other;
    with more, the longer of the two, where the sampling's time is at its measured pace (that of
    the workers sampling); where it is the model's (the sampling spread over every worker), the
    training and the sampling dealt in even shares, the training whole on one."""
    if workers < 2:
        return training + sampling
    if sampling_measured:
        return max(training, sampling)
    return max(training, (training + sampling * workers) / workers)


def _schedule(under_way: tuple, waiting: tuple, workers: int, speed: float | None) -> float | None:
    """Seconds until the shards are written: each under way ((weight, share done, shares a
    second or None) each) ends at its own pace, or at `speed` (weight a second: the mean of
    every shard's seen so far) where its own is not known yet; each waiting (its weight) starts on
    the first worker free, the largest first, at `speed`. None until a pace is known."""
    if not speed:
        return None
    free = [(1 - f) / r if r else (1 - f) * w / speed for w, f, r in under_way]
    free += [0.0] * max(0, workers - len(free))
    heapq.heapify(free)
    for w in sorted(waiting, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + w / speed)
    return max(free)


class ItemProgress:
    """Watches a run's staging folder from a thread and reports on `stream` (stderr)."""

    def __init__(self, items, input_sizes: dict, staging: str, stream=None, clock=time.monotonic, workers: int = 1,
                 tokenizer_pages: int = 0):
        self.workers, self.tokenizer_pages = max(1, workers), tokenizer_pages
        self.stream = stream or sys.stderr
        self.terminal = is_terminal(self.stream)
        self.clock = clock
        self.fs, root = fsspec.core.url_to_fs(staging)
        self.root = root.rstrip("/")
        self.local = is_local(self.fs)
        self.interval_s = 1.0 if self.local else 10.0
        self.sizes = {}  # cache file name -> input bytes of its item
        self.reports = {}  # cache file name -> the name of its progress file (STAGING/progress/)
        self.trial = {}  # cache file name -> --max-pages, for an item of unknown extent (a trial slice)
        for item in items:
            name = itemcache.cache_url("", item).rsplit("/", 1)[-1]
            self.sizes[name] = stored_bytes(item, input_sizes)
            self.reports[name] = progress_name(item)
            if item.max_pages is not None and not self.sizes[name]:
                self.trial[name] = item.max_pages
        self.total_bytes = sum(self.sizes.values())
        self.done, self.reused = set(), set()
        self.pages = self.read_bytes = 0
        self.kept_of = (0, 0)  # (kept pages, pages) of the finished items whose footers say
        self.shards_done = self.shards_total = 0
        self.read_s = None  # the reading's wall seconds, once over
        self.first_unit = {}  # step -> (when its first unit was seen, units then)
        self.shard_weights = None  # {shard: its share of the shards' codepoints}, once the job says (shards.sizes)
        self.shard_speeds = {}  # shard -> its weight over its whole time as last foreseen (finished ones keep theirs)
        self.shard_reports = {}  # shard -> its last two reports, (seconds, share) each
        self.step_since = {}  # step -> when it began (the steps before it finished, or a unit of it seen)
        self.read_from = None  # elapsed seconds at the last poll that found no item begun (the workers' start-up)
        self.started = None
        self._last_line = -float("inf")
        self._stop = threading.Event()
        self.closed = False  # the stream's reader went away (a closed pipe): the job was stopped for it
        self._thread = threading.Thread(target=self._run, name="canine-preprocess-progress", daemon=True)

    # --- reading the staging folder ---

    def _names(self, folder: str) -> list[str]:
        path = f"{self.root}/{folder}"
        # The workers add files from other processes: a cached listing would never show them.
        self.fs.invalidate_cache(path)
        try:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False)]
        except FileNotFoundError:
            return []

    def _pages(self, name: str) -> tuple[int, int | None]:
        """(pages, kept pages or None where the footer does not say: an older cache) of a finished item."""
        try:
            with self.fs.open(f"{self.root}/items/{name}", "rb") as f:
                meta = pq.ParquetFile(f).metadata
        except (OSError, ValueError):  # an object store may list a name a moment before it reads
            return 0, None
        kept = (meta.metadata or {}).get(itemcache.KEPT_KEY.encode())
        return meta.num_rows, int(kept) if kept is not None else None

    def poll(self) -> Snapshot:
        new = [n for n in self._names("items") if n in self.sizes and n not in self.done]
        for name in new:
            self.done.add(name)
            if self.started is None:
                self.reused.add(name)  # there before this run started: an earlier run's work
            else:
                pages, kept = self._pages(name)
                self.pages += pages
                if kept is not None:
                    self.kept_of = (self.kept_of[0] + kept, self.kept_of[1] + pages)
                self.read_bytes += self.sizes[name] or self._slice_bytes(name)
        elapsed = 0.0 if self.started is None else self.clock() - self.started
        steps, under_way, waiting, feed_rate = {}, (), (), None
        if len(self.done) == len(self.sizes):  # reading is over: the later steps, to the shards
            if self.read_s is None and self.started is not None:
                self.read_s = elapsed
            totals, self.shards_done, written = {}, 0, set()
            for split in schema.SPLITS:
                for name in self._names(split):
                    if m := _SHARD.search(name):
                        totals[split] = int(m.group(1))  # the N of part-i-of-N, the same in a split
                        self.shards_done += 1
                        written.add(phases.unit_file(f"{split}/{name}"))
            under_way = named = self._shards_under_way(written)
            said = self._step_totals()
            # The shards' total from the job's sizing (phases.py) as soon as it is known: every
            # split's, not only those with a file written yet (the line said 12/12, then the
            # last line 13 shards written: validation's shard came last).
            self.shards_total = said.get("shards") or sum(totals.values())
            finished = {}  # step -> whether all its units are done
            for step, _, _ in STEPS:
                if step == "tokenizer" and not self.tokenizer_pages:
                    continue  # a vocabulary given: no step to wait for
                done = self.shards_done if step == "shards" else len(self._names(f"progress/{step}"))
                total = self.shards_total or None if step == "shards" else said.get(step)
                # every step before this one is finished (the sampling runs beside the training: job.deal)
                ahead = all(f for before, f in finished.items() if (before, step) != ("tokenizer", "sampling"))
                if ahead or done:
                    self.step_since.setdefault(step, self.clock())
                in_step = self.clock() - self.step_since[step] if step in self.step_since else 0.0
                steps[step] = (done, total, self._rate(step, done), in_step)
                finished[step] = total is not None and done >= total
                if step == "tokenizer" and total and done:  # its chunks are read as the trainer counts: its pace
                    feed_rate = steps[step][2]
            if self.shards_total and self.shard_weights is None and "shards" in said:
                self.shard_weights = self._shard_weights()
            weights = self.shard_weights or {}
            begun = written | {name for name, _, _ in under_way}
            waiting = (tuple(w for name, w in sorted(weights.items()) if name not in begun) if weights
                       else (1.0,) * max(0, self.shards_total - self.shards_done - len(under_way)))
            under_way = tuple((weights.get(name, 1.0), f, r) for name, f, r in under_way)
            for (name, f, r), (w, _, _) in zip(named, under_way):
                if r:  # its whole time: so far, and the rest at its pace now
                    self.shard_speeds[name] = w / (self.shard_reports[name][-1][0] + (1 - f) / r)
        left = self.total_bytes - sum(self.sizes[n] for n in self.done)
        pages, read, left_pages, began = self.pages, self.read_bytes, None, False
        if self.started is not None and len(self.done) < len(self.sizes):
            reading = self._reading()
            began = bool(reading)
            for name, (n, b) in reading.items():
                size = self.sizes[name]
                pages, read, left = pages + n, read + b, left - (min(b, size) if size else 0)
            if self.trial and not self.total_bytes:
                left_pages = sum(max(0, self.trial[n] - reading.get(n, (0, 0))[0]) for n in self.trial
                                 if n not in self.done)
        if self.started is not None and not (read or pages or began):
            # no item begun (each says so as it begins: sources/plan.py _reported): the workers are
            # starting, and the rate counts from the last such poll. From the last poll with nothing
            # read, it counted from up to a report's 2 s after the items began: 2.5 s into a
            # 300 MB run's reading the rate was 2.6x its own (ETA 17 s for 44)
            self.read_from = elapsed
        return Snapshot(len(self.done), len(self.sizes), pages, read, left, elapsed,
                        self.shards_done, self.shards_total, self.total_bytes, left_pages, steps, self.read_s,
                        self.workers, self.tokenizer_pages, self.read_from or 0.0, under_way, waiting, feed_rate,
                        sum(self.shard_speeds.values()) / len(self.shard_speeds) if self.shard_speeds else None,
                        self.kept_of[0] / self.kept_of[1] if self.kept_of[1] else None)

    def _shards_under_way(self, written: set) -> tuple:
        """((shard, share of its rows done, shares a second or None), ...) of the shards whose
        workers report them being written (phases.Reporter: progress/shards-at/<split>-<name>) and
        whose file is not there yet. The pace is that between its last two reports of rows done,
        on the worker's own clock (another machine's, on a cluster), not from the shard's start:
        its first rows wait for its first pass to be read, and a pace from the start said 8 s a
        shard where they took 6 (1.4x the time left)."""
        found = []
        for name in self._names("progress/shards-at"):
            if name in written:
                continue
            try:
                said = json.loads(self.fs.cat_file(f"{self.root}/progress/shards-at/{name}"))
                share, took = min(1.0, int(said["done"]) / max(1, int(said["of"]))), float(said["s"])
            except (OSError, ValueError, KeyError, TypeError):  # a store's hiccup, or the file as it is replaced
                continue
            seen = self.shard_reports.setdefault(name, [(0.0, 0.0)])
            if took > seen[-1][0]:
                seen[:] = [seen[-1], (took, share)]
            (t0, f0), (t1, f1) = seen[0], seen[-1]
            found.append((name, share, (f1 - f0) / (t1 - t0) if f1 > f0 > 0 and t1 > t0 else None))
        return tuple(found)

    def _shard_weights(self) -> dict | None:
        """{shard: its share of the shards' codepoints} (progress/shards.sizes, written before
        shards.total: job.shard_shares); {} where there is none, None to look again."""
        try:
            return {str(k): float(v) for k, v in json.loads(self.fs.cat_file(f"{self.root}/progress/shards.sizes")).items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, AttributeError):  # a store's hiccup
            return None

    def _step_totals(self) -> dict:
        """{step: units} of the steps whose total the job has said (STAGING/progress/<step>.total)."""
        found = {}
        for name in self._names("progress"):
            if name.endswith(".total"):
                try:
                    found[name[: -len(".total")]] = int(self.fs.cat_file(f"{self.root}/progress/{name}"))
                except (OSError, ValueError):  # a store's hiccup: next time
                    continue
        return found

    def _rate(self, step: str, done: int) -> float | None:
        """Units a second of a step, from when its first unit was seen (two units at least)."""
        if not done:
            return None
        now = self.clock()
        first = self.first_unit.setdefault(step, (now, done))
        if done - first[1] < 1 or now <= first[0]:
            return None
        return (done - first[1]) / (now - first[0])

    def _slice_bytes(self, name: str) -> int:
        """The input bytes a finished trial slice's item read: its last report (the worker writes
        one when the slice ends), 0 for any other item of unknown size."""
        if name not in self.trial:
            return 0
        try:
            return int(json.loads(self.fs.cat_file(f"{self.root}/progress/{self.reports[name]}"))["bytes"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def _reading(self) -> dict:
        """{cache file name: (pages, input bytes)} read so far of the items not done yet, as
        their workers last wrote it in STAGING/progress/."""
        files = set(self._names("progress"))
        found = {}
        for name, report in self.reports.items():
            if name in self.done or report not in files:
                continue
            try:
                seen = json.loads(self.fs.cat_file(f"{self.root}/progress/{report}"))
                found[name] = (int(seen["pages"]), int(seen["bytes"]))
            except (OSError, ValueError, KeyError, TypeError):  # gone as the item finished, or a store's hiccup
                continue
        return found

    # --- reporting ---

    def note(self, text: str) -> None:
        """A line of its own (the Dataflow job's link), whatever the mode."""
        if self.terminal:
            self.stream.write("\r\033[K")
        self.stream.write(f"{timestamp()} preprocess: {text}\n")
        self.stream.flush()

    def _show(self, snap: Snapshot) -> None:
        if self.terminal:
            self.stream.write(f"\r\033[Kpreprocess {snap.bar()} {snap.describe()}")
            self.stream.flush()
        elif self.clock() - self._last_line >= PLAIN_EVERY_S:
            self._last_line = self.clock()
            self.stream.write(f"{timestamp()} preprocess: {snap.describe()}\n")
            self.stream.flush()

    def _log_handlers(self) -> list:
        return [h for h in logging.getLogger().handlers if getattr(h, "stream", None) is self.stream]

    def start(self, input_files: int) -> "ItemProgress":
        self.poll()  # what an earlier run left is counted before this one adds anything
        self.started = self.clock()
        reused = f"; {len(self.reused)} already done by an interrupted run" if self.reused else ""
        self.note(f"{_count(len(self.sizes), 'work item')} from {_count(input_files, 'input file')} "
                  f"({self._extent(input_files)}){reused}")
        self._last_line = self.clock()
        if self.terminal:
            self._clear = _ClearLine(self.stream)
            for handler in self._log_handlers():
                handler.addFilter(self._clear)
        self._thread.start()
        return self

    def _extent(self, input_files: int) -> str:
        """What the run reads: the items' bytes, and where a trial slice's are unknown until it is
        read (a whole file's first N pages, not a multistream dump's streams), its pages (the
        sliced single-stream file's line said 0.0 MB: a user's report)."""
        if not self.trial:
            return f"{self.total_bytes / 1e6:.1f} MB"
        pages, files = max(self.trial.values()), len(self.trial)
        if files == input_files:
            return f"a trial slice: the first {pages} pages of {'it' if files == 1 else 'each'}"
        return f"{self.total_bytes / 1e6:.1f} MB, and the first {pages} pages of {_count(files, 'file')}"

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._show(self.poll())
            except BrokenPipeError:
                # Our stderr's reader went away (`canine preprocess ... 2>&1 | head -1`): the job
                # stops as on Ctrl-C, a SIGINT to the main thread (which a blocking wait there
                # notices, as it does a Ctrl-C), and pipeline/run.py `run_job` raises this error
                # instead of Interrupted: the CLI ends quietly, finished work items kept.
                self.closed = True
                if not self._stop.is_set():
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                return
            except OSError as e:  # a store's hiccup costs one report, never the job
                logging.getLogger(__name__).debug("progress: listing %s failed: %s", self.root, e)

    def stop(self, ok: bool = True) -> None:
        """Stop watching; on success one last line with the totals."""
        if self.started is None:
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.terminal:
            for handler in self._log_handlers():
                handler.removeFilter(self._clear)
            self.stream.write("\r\033[K")  # the bar's line, cleared: the error or the totals follow
            self.stream.flush()
        if not ok:
            return
        snap = self.poll()
        rate = _mb_rate(snap.read_bytes / snap.elapsed_s) if snap.elapsed_s else "-"
        self.note(f"done in {duration(snap.elapsed_s)}: {_count(snap.items_done - len(self.reused), 'item')} read "
                  f"({snap.pages} pages, {snap.read_bytes / 1e6:.1f} MB, {rate}), {snap.shards_done} shards written")
