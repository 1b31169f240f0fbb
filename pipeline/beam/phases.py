"""Where a run's time goes: each step of the job timed, when asked (benchmarks/phases.py asks).

    CANINE_PREPROCESS_PHASES=/tmp/phases canine preprocess ... --workers 2
    -> /tmp/phases/<pid>.jsonl, a line per unit: {"phase", "pid", "start", "end", "cpu", "process_cpu"}

Every step's DoFn runs its unit (a work item, a pack group, a shard, ...) inside `timed(phase)`:
wall clock start and end, the CPU seconds of the thread that ran it (time.thread_time) and of
its whole process (os.times): the thread's misses the threads of Arrow (zstd, Parquet) and of
the tokenizers library (its trainer and batch encoding run in Rust threads); the process's counts
whatever else the process did meanwhile (the DirectRunner gives a worker one bundle at a time, so
little). The benchmark reads every process's CPU from /proc as well and shows what no step
accounts for. Unset, `timed` costs one
os.environ lookup a unit. The environment reaches every local worker (the DirectRunner's SDK
worker processes and Dask's workers are started by the launcher, with its environment).

PHASES names them in the order a run meets them; the launcher times `publish` (pipeline/run.py).

Progress, always on: the steps after reading tell the launcher (pipeline/progress.py) how far they
are by files in STAGING/progress/: `<step>.total` (how many units the step has, written once
that is known: the pack groups after sizing, the shards after sampling's sizing, the tokenizer's
chunk reads once its sample is planned) and an empty `<step>/<unit>` as each unit ends. A file
a unit, of a few bytes: a few thousand for enwiki. A unit long enough to matter (a shard: ~10 s,
and a run has few of them) also says how far it is while it runs: `<step>-at/<unit>`, {"done",
"of"}, rewritten at most every REPORT_EVERY_S (`Reporter`), so the launcher's ETA follows a
shard's rows, not the bursts in which the shards finish.
"""

import contextlib
import json
import os
import time

from contract.files import save_text
from pipeline.sources.plan import REPORT_EVERY_S

ENV = "CANINE_PREPROCESS_PHASES"

PHASES = (
    "read+clean",  # ReadAndClean: parse and clean a work item, its cache written, its tallies
    "sizing",  # SizeItems: a light pass over an item's cache, the sizes and the tokenizer's candidates
    "scatter",  # ScatterPages: an item's kept pages to its pack groups and the tokenizer's chunks
    "tokenizer",  # TrainTokenizer: WordPiece on the bounded sample (tokenizer_pages)
    "packing",  # PackExamples: a pack group's pages packed to seq_len
    "sampling",  # SampleLanguages: a pack group's examples copied to their shards
    "shards+masks",  # WriteShards: a shard's rows ordered, masks planned, Parquet written
    "rejects",  # WriteRejects: a language's rejects file
    "publish",  # the launcher: shards moved into place, the manifest, staging removed
)


@contextlib.contextmanager
def timed(phase: str):
    """Record one unit of `phase` in $CANINE_PREPROCESS_PHASES/<pid>.jsonl (nothing when unset)."""
    folder = os.environ.get(ENV)
    if not folder:
        yield
        return
    start, cpu, process = time.time(), time.thread_time(), _process_cpu()
    try:
        yield
    finally:
        line = json.dumps({"phase": phase, "pid": os.getpid(), "start": start, "end": time.time(),
                           "cpu": time.thread_time() - cpu, "process_cpu": _process_cpu() - process})
        with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a") as f:  # one process appends to its own file
            f.write(line + "\n")


def _process_cpu() -> float:
    t = os.times()
    return t.user + t.system


def read(folder: str) -> list[dict]:
    """Every unit recorded under `folder`, by start time."""
    units = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".jsonl"):
            with open(os.path.join(folder, name)) as f:
                units += [json.loads(line) for line in f if line.strip()]
    return sorted(units, key=lambda u: u["start"])


# --- progress: what the launcher counts (pipeline/progress.py) ---------------------------------------
PROGRESS_STEPS = ("packing", "tokenizer", "sampling", "shards")  # the steps after reading that say how far they are


def total(staging: str, step: str, n: int, sizes: dict | None = None) -> int:
    """STAGING/progress/<step>.total: the step's units, once known; and where they differ in
    size, <step>.sizes: {unit: its share of the step's work}."""
    if sizes:
        save_text(json.dumps(sizes, sort_keys=True), f"{staging}/progress/{step}.sizes")
    save_text(str(n), f"{staging}/progress/{step}.total")  # after the sizes: the launcher reads them once it sees it
    return n


def done(staging: str, step: str, unit: str) -> None:
    """STAGING/progress/<step>/<unit>: one more unit of the step finished."""
    save_text("", f"{staging}/progress/{step}/{unit}")


def unit_file(unit: str) -> str:
    """A unit's file name under progress/<step>-at/: a shard's "train/part-…" as "train-part-…"."""
    return unit.replace("/", "-")


class Reporter:
    """How far one unit of a step is: STAGING/progress/<step>-at/<unit>, {"done": n, "of": total,
    "s": seconds since the unit began, on the worker's clock}, at most every REPORT_EVERY_S (2 s
    on a local disk, 10 s on an object store: one small PUT), and the first time at once, so the
    launcher sees the unit begin. A failed write costs a report, never the unit."""

    def __init__(self, staging: str, step: str, unit: str, clock=time.monotonic):
        self.url = f"{staging}/progress/{step}-at/{unit_file(unit)}"
        self.every = REPORT_EVERY_S["://" not in staging or staging.startswith("file://")]
        self.clock, self.last, self.began = clock, None, clock()

    def __call__(self, done: int, of: int) -> None:
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            return
        self.last = now
        try:
            save_text(json.dumps({"done": done, "of": of, "s": round(now - self.began, 3)}), self.url)
        except OSError:
            pass
