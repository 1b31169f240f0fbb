"""`preprocess(cfg)`: the driver of a preprocessing run, as training/train/run.py's `pretrain(cfg)`
is of a training run. `canine preprocess` (jobs/preprocess.py: the flags, the config, this call,
the lines after it) and `canine smoke` run it; the scheduled script runs the CLI.

    from pipeline.preprocess_config import PreprocessConfig
    from pipeline.run import preprocess
    where, result = preprocess(PreprocessConfig(inputs=("pipeline/sample/*.xml",), output="out/shards"), workers=2)

In order: `--dump` specs resolved on the mirror (sources/dumps.py) and added to the inputs, the
output becoming OUTPUT/<langs>/<date>; a runner other than the DirectRunner checked
(beam/runners.py); the work plan (output.prepare); then, under the output's lock (contract/lock.py), the
Beam job (`run_job`: build it, run it on the runner, its Ctrl-C and its workers, then
output.finalize publishes what it wrote). Every check that needs no writing comes before the lock, which is what
creates the output folder: a run that fails before the job leaves no output folder it created.
Bad input met while reading removes this config's staging too (sources.InputError).

Disk (pipeline/output/disk.py): before the lock, the staging folder's peak is estimated from the inputs'
sizes and said with the free space there; a run that cannot fit is refused (disk.NoSpace: nothing
written). A disk that fills anyway ends the run in disk.NoSpace's one line: nothing published,
the lock released, the finished work items kept for the same command to resume from.

What it says, on stderr: which dump each --dump resolved to and where the output goes (a scheduled
run's log says which dump it read), then the staging's peak and the free space there, then the
job's progress lines (progress.py). After the
manifest, the CLI prints `closing_notes`. A Ctrl-C leaves as `Interrupted`, whose message says
what was kept and that the same command resumes.
"""

import contextlib
import dataclasses
import errno
import glob
import logging
import os
import re
import shlex
import signal
import sys
import threading
import time
from contextlib import nullcontext

from contract.files import redact
from contract.interrupted import Interrupted
from pipeline import sources
from pipeline.output import output
from pipeline.beam import phases, runners
from pipeline.preprocess_config import PreprocessConfig

log = logging.getLogger(__name__)


def _say(text: str) -> None:
    print(f"canine preprocess: {text}", file=sys.stderr)


def preprocess(cfg: PreprocessConfig, *, dumps: list[str] = (), mirror: str | None = None, workers: int = 1,
               runner: str = "DirectRunner", beam_args: list[str] = (), progress: bool = True,
               around_job=nullcontext):
    """The one way a preprocessing run starts: `--dump` specs resolved and added to the inputs
    (the output becomes OUTPUT/<langs>/<date>), every check that needs no writing done before the
    output's lock is taken, the Beam job run under that lock (contract/lock.py), inside
    `around_job()` (the CLI holds the runner's own error records there: jobs/quiet.py). Returns
    (the output, output.RunResult: its manifest and how the run went).
    Errors raise; a run that fails before writing leaves no output folder it created."""
    from contract.lock import OutputLock
    from pipeline.output import disk
    from pipeline import progress as shown
    from pipeline.sources import dumps as dump_specs

    if workers < 1:
        raise ValueError(f"--workers {workers}: must be 1 or more (worker processes of the runner)")
    # The runner as named after `--` too (a flags file's --runner=DataflowRunner): one runner for every check.
    runner, said = runners.runner_of(runner, list(beam_args))
    if dumps:
        resolved = dump_specs.resolve_dumps(list(dumps), mirror=mirror, lang=cfg.lang)
        cfg = dataclasses.replace(cfg, inputs=(*cfg.inputs, *(d.dump_url for d in resolved)),
                                  output=dump_specs.output_path(cfg.output, resolved))
        # What `latest` resolved to and where the shards go: a scheduled run's log says which dump it read.
        # resolve_dumps returns them in language order (a stable sort): each said beside its own flag.
        specs = sorted(dumps, key=lambda spec: dump_specs.parse_dump(spec, mirror=mirror, lang=cfg.lang).lang)
        for spec, d in zip(specs, resolved):
            _say(f"--dump {spec}: {d.wiki} {d.date} ({redact(d.dump_url)})")
        _say(f"output {redact(cfg.output)}")
    # A bad flag or input is found here, before the lock creates the output folder.
    if runner != runners.DEFAULT_RUNNER:  # the default is known good; another may be misspelled or miss its options
        # First: Beam's own option check already contacts Cloud Storage, retrying for minutes.
        runners.check_launch(runner, cfg.output, cfg.inputs, list(beam_args), said=said,
                             mirror=mirror if dumps else None)
        runners.check_runner(workers, runner, beam_args, said=said)
    work_plan = output.prepare(cfg, workers)
    peak, disk_line = _fits_on_disk(work_plan)
    created = output.missing_root(cfg.output)
    command = redact(shlex.join(["canine", "preprocess", *map(str, cfg.inputs), "--output", cfg.output]))
    try:
        # The lock comes before anything touches the output, staging included: two runs of one
        # config would otherwise clean up each other's staging (contract/lock.py).
        with OutputLock(cfg.output, command=command) as lock:
            if disk_line and progress:  # the first line of the job; not for a run that finds the output locked
                print(f"{shown.timestamp()} preprocess: {disk_line}", file=sys.stderr)
            try:
                with around_job():
                    result = run_job(cfg, workers=workers, runner=runner, beam_args=list(beam_args),
                                     before_publish=lock.check, work_plan=work_plan, progress=progress)
                return cfg.output, result
            except sources.InputError:
                # Bad input found while reading: the staging of this config (and its cache of
                # items) is useless once the input is fixed, since the fix changes the config.
                output.remove_staging(cfg.output, only=output.staging_url(work_plan.cfg))
                raise
            except Exception as e:
                if peak is None or not disk.no_space_in(e):
                    raise
                # A full disk: the finished work items stay in staging for the same command.
                staging = output.staging_url(work_plan.cfg)
                raise disk.filled(staging, peak, disk.free_bytes(staging),
                                  *output.items_done(work_plan.items, staging)) from None
    except Interrupted:  # run_job's: the finished work items stay in staging
        raise
    except KeyboardInterrupt as e:
        if created:
            output.remove_empty(cfg.output, created)
        raise Interrupted("interrupted before the job started; nothing was written") from e
    except BaseException:
        if created:
            output.remove_empty(cfg.output, created)
        raise


# --- the Beam job: run under the lock, its Ctrl-C and its workers ---------------------------------


def _stopped(work_plan, staging: str) -> Interrupted:
    """Ctrl-C while the job ran or published: the finished work items are kept in staging for
    the same command to reuse."""
    done, total = output.items_done(work_plan.items, staging)
    return Interrupted(f"interrupted after {done} of {total} work items (kept); the same command resumes")


def run_job(cfg: PreprocessConfig, workers: int = 1, runner: str = "DirectRunner", beam_args=(), before_publish=None,
        work_plan=None, progress: bool = False):
    """Run the whole job and return its manifest (the existing one if the output is up to date:
    the caller says so). `work_plan` is `output.prepare(cfg)` if the caller made it already (before taking
    the output's lock). `before_publish()` runs after the pipeline, before anything is moved
    into place: a lock holder's check that it still owns the output. `progress`: report on
    stderr while the job runs (pipeline/progress.py), and name the Dataflow job's page.
    Ctrl-C while the job runs or publishes raises Interrupted."""
    import apache_beam as beam

    from pipeline.beam import job
    from pipeline.progress import ItemProgress

    started = time.time()
    work_plan = work_plan or output.prepare(cfg, workers)
    cfg = work_plan.cfg
    existing = output.existing_output(cfg, work_plan.tokenizer_json)
    if existing is not None:
        output.remove_staging(cfg.output)  # a run killed between its manifest and its clean-up left it
        log.debug("%s is up to date (config %s): nothing to do", cfg.output, existing.config_sha256[:12])
        return output.RunResult(existing, up_to_date=True)
    staging = output.staging_url(cfg)
    fs, staging_path = output._fs(staging)
    for other in output.stagings(cfg.output):
        if other != staging_path:
            log.warning("%s: staging of another config's unfinished run; it is removed when this run publishes", other)
    # A killed run of this same config left staging behind: keep its finished work items
    # (items/), drop everything else, which is recomputed from them.
    for name in fs.ls(staging_path, detail=False) if fs.exists(staging_path) else []:
        if name.rstrip("/").rsplit("/", 1)[-1] != "items":
            fs.rm(name, recursive=True)
    fs.makedirs(staging_path, exist_ok=True)
    options = runners.beam_options(workers, runner, [*beam_args, *_worker_plugins(runner, workers)])
    p = beam.Pipeline(options=options)
    items = work_plan.items
    if progress:  # the workers say how far each item got, in staging (pipeline/progress.py)
        items = [dataclasses.replace(item, progress=f"{staging}/progress") for item in items]
    sizes = {url: size for url, size, _ in cfg.input_fingerprints}
    sizes = {item.path: sizes.get(output.recorded_url(item.path), 0) for item in work_plan.items}
    # Beam's local runner splits each stage into a fixed part per worker; the others hand out work
    job.build(p, cfg, items, staging, work_plan.tokenizer_json, workers, sizes,
              shares=workers if runner == "DirectRunner" else None)
    watch = None
    if progress:
        # A trial slice's item read from a file's start to its Nth page: how far that is is not known,
        # and the whole file's size would show a 20 GB dump read in seconds. Its bytes count as none.
        sizes |= {item.path: 0 for item in work_plan.items if item.max_pages is not None and item.end is None}
        watch = ItemProgress(work_plan.items, sizes, staging, workers=workers,
                             tokenizer_pages=0 if work_plan.tokenizer_json else cfg.tokenizer_pages)
        watch.start(len(cfg.input_fingerprints))
    else:
        log.info("%d work items from %d input files", len(work_plan.items), len(cfg.input_fingerprints))
    finished, result = False, None
    try:
        with _launcher_pid_for_workers(), _workers_stopped_on_ctrl_c(bool(_worker_plugins(runner, workers))):
            result = p.run()  # the DirectRunner runs the job here; remote runners return once it is submitted
            link = runners.job_link(result, options)
            if link and watch is not None:
                watch.note(f"Dataflow job {link}")
            elif link:
                log.info("Dataflow job %s", link)
            result.wait_until_finish()
        finished = True
    except KeyboardInterrupt as e:
        if _worker_plugins(runner, workers):  # the DirectRunner's worker processes (stopped already by a Ctrl-C)
            _stop_sdk_workers()
        _cancel(result)
        _closed(watch)
        raise _stopped(work_plan, staging) from e
    except (RuntimeError, sources.InputError) as e:
        if _interrupted(e):  # in-process DirectRunner: Beam wraps a DoFn's KeyboardInterrupt
            if _worker_plugins(runner, workers):
                _stop_sdk_workers()
            _closed(watch)
            raise _stopped(work_plan, staging) from e
        raise _input_error_in(e) or e
    finally:
        if watch is not None:
            watch.stop(ok=finished)
    counters = _counters(result)
    try:
        if before_publish is not None:
            before_publish()
        with phases.timed("publish"):
            records = output.read_staged_json(fs, staging_path, "stats.json")
            manifest = output.finalize(cfg, staging, records)
    except KeyboardInterrupt as e:
        raise _stopped(work_plan, staging) from e
    stats = output.RunStats(round(time.time() - started, 2), len(work_plan.items), counters.get("items_parsed", 0),
                     counters.get("items_reused", 0))
    return output.RunResult(manifest, run=stats,
                     without_validation=output.without_validation(records, manifest.languages, cfg.validation_fraction))


# Ctrl-C in a terminal reaches every process of the foreground group: the DirectRunner's worker
# processes too, each of which would print its own KeyboardInterrupt traceback while the launcher
# stops the job. They ignore it instead, from their first instruction (pipeline/beam/direct_runner.py),
# and the launcher, whose KeyboardInterrupt ends the job, stops them (_workers_stopped_on_ctrl_c).
# The worker's Beam plugin (pipeline/beam/job.py `set_up_worker_process`) sets up the rest.
def _worker_plugins(runner: str, workers: int) -> list[str]:
    """Beam options that make the DirectRunner's worker processes import pipeline.beam.job first."""
    return ["--beam_plugins=pipeline.beam.job"] if runner == "DirectRunner" and workers > 1 else []


@contextlib.contextmanager
def _launcher_pid_for_workers():
    """pipeline.beam.job.LAUNCHER_PID in the environment while the job runs: worker processes
    started meanwhile inherit it, and know they are not the launcher."""
    from pipeline.beam.job import LAUNCHER_PID

    previous = os.environ.get(LAUNCHER_PID)
    os.environ[LAUNCHER_PID] = str(os.getpid())
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(LAUNCHER_PID, None)
        else:
            os.environ[LAUNCHER_PID] = previous


@contextlib.contextmanager
def _workers_stopped_on_ctrl_c(workers: bool):
    """While the DirectRunner runs worker processes (`workers`): a Ctrl-C stops them at once, and
    every 0.1 s after until the run has ended (_stop_sdk_workers), then raises KeyboardInterrupt
    as Python's own handler does. Beam's runner, on the way out, closes each worker and waits for
    its process (FnApiRunner.run_stages' `finally`, worker_handlers.py `close_all`, Beam 2.77); a
    worker that had not yet connected when its connection was closed (`ControlConnection.close`
    marks an unstarted one done without telling it) waits for orders forever, and so did the
    launcher: 3 of 3 tries hung with the SIGINT as the workers started, once they ignored it from
    their start. Stopped here, they end before Beam waits for them; stopped again after, so is
    one whose process Beam's thread had not yet started, or not yet exec'd, at the Ctrl-C (with
    a single stop 1 of 21 tries hung). A launcher that ignores SIGINT (started in the background) or runs in another thread keeps
    its handler."""
    if not workers or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    ended = threading.Event()

    def stop_until_ended():
        while not ended.wait(0.1):
            _stop_sdk_workers()

    stopper = threading.Thread(target=stop_until_ended, name="canine-stop-workers", daemon=True)

    def stop(signum, frame):
        _stop_sdk_workers()
        if stopper.ident is None:  # the first Ctrl-C
            stopper.start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        ended.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _closed(watch) -> None:
    """The KeyboardInterrupt that stopped the job was the progress thread's, whose stream's reader
    went away (pipeline/progress.py `_run`), not a Ctrl-C: raise that instead, which the CLI ends
    quietly on (exit 141). The finished work items stay for the same command to reuse."""
    if watch is not None and watch.closed:
        raise BrokenPipeError(errno.EPIPE, "the reader of the progress lines went away") from None


def _interrupted(e: BaseException) -> bool:
    """Whether a runner's failure is a KeyboardInterrupt it wrapped ("KeyboardInterrupt [while
    running 'STEP']", raised while handling it)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _cancel(result) -> None:
    """Stop a remote job (Dataflow) that Ctrl-C stopped waiting for; the local runners stopped
    with the launcher."""
    if result is None:
        return
    try:
        result.cancel()
    except Exception as e:  # a finished or local job has nothing to cancel
        log.debug("cancel after Ctrl-C: %s", e)


SDK_WORKER = b"apache_beam.runners.worker.sdk_worker_main"


def _stop_sdk_workers() -> None:
    """SIGTERM this process's DirectRunner worker processes and what they started. They ignore
    SIGINT (pipeline/beam/direct_runner.py) and stop when the launcher's runner tells them; a Ctrl-C
    while the runner was still starting them left one waiting for its orders, and the launcher
    waiting for it at interpreter exit (a thread of Beam's that is not a daemon joins its
    process): the right line printed, then a hang. Linux's /proc names the children; elsewhere
    nothing is done."""
    def children(pid: int) -> list[int]:
        found = []
        for task in glob.glob(f"/proc/{pid}/task/*/children"):
            try:
                found += [int(c) for c in open(task).read().split()]
            except (OSError, ValueError):
                pass
        return found

    def cmdline(pid: int) -> bytes:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""

    tree, todo = [], [c for c in children(os.getpid()) if SDK_WORKER in cmdline(c)]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children(pid)
    # What Beam's threads in this process log when the workers they talk to go ("Failed to read
    # inputs in the data plane"): the run is over, and its one line says so. (The exceptions
    # those threads raise: jobs/quiet.py runner_errors_held.)
    logging.getLogger("apache_beam").setLevel(logging.CRITICAL)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:  # gone already
            pass


# How an InputError raised in a worker reaches the launcher: in-process (in_memory mode) as
# itself with " [while running 'STEP']" appended; from the DirectRunner's multi_processing mode
# (and remote runners) as a RuntimeError holding the worker's traceback, whose last line is
# "pipeline.sources.InputError: MSG [while running 'STEP']".
_STEP_SUFFIX = r"(?: \[while running '[^']*'\])?$"
_WORKER_INPUT_ERROR = re.compile(r"^pipeline\.sources\.InputError: (.*?)" + _STEP_SUFFIX, re.M)


def _input_error_in(e: BaseException) -> "sources.InputError | None":
    """The InputError behind a runner's failure, with the message it was raised with (file and
    position), not a worker traceback; None if it is another failure."""
    if isinstance(e, sources.InputError):
        return sources.InputError(re.sub(_STEP_SUFFIX, "", str(e)))
    found = _WORKER_INPUT_ERROR.findall(str(e))
    return sources.InputError(found[-1]) if found else None


def _counters(result) -> dict:
    out = {}
    for c in result.metrics().query().get("counters", []):
        value = c.committed if c.committed is not None else c.attempted
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + (value or 0)
    return out


# A trial slice reads from each file's start up to its Nth page, how far that is being unknown:
# this much XML a page bounds it (the first pages of a dump are its oldest, longest articles;
# enwiki's pages-articles averages ~4.5 kB a page).
TRIAL_XML_PER_PAGE = 64 << 10


def _fits_on_disk(work_plan) -> tuple[int | None, str | None]:
    """(the staging's estimated peak, the line that says it with the free space there)
    (output/disk.py); disk.NoSpace before anything is written if it does not fit. (None, None) when
    the output is complete for this config already: nothing will be staged."""
    from pipeline.output import disk
    from pipeline.sources import plan

    cfg = work_plan.cfg
    if output.existing_output(cfg, work_plan.tokenizer_json) is not None:
        return None, None
    kinds = {output.recorded_url(item.path): item.kind for item in work_plan.items}
    inputs = [(url, kinds.get(url, "xml"), size) for url, size, _ in cfg.input_fingerprints]
    if cfg.max_pages is not None:  # a stored size whose text is that many pages' XML at most
        inputs = [(url, kind, min(size, cfg.max_pages * TRIAL_XML_PER_PAGE * size // max(1, plan.text_bytes(url, size))))
                  for url, kind, size in inputs]
    peak = disk.staging_peak_bytes(inputs, 0 if cfg.tokenizer else cfg.tokenizer_pages)
    staging = output.staging_url(cfg)
    free, staged = disk.free_bytes(staging), disk.staged_bytes(staging)
    disk.check_fits(peak, staging, cfg.output, free, staged)
    return peak, disk.first_line(peak, staging, free, staged)


def closing_notes(cfg: PreprocessConfig, result) -> list[str]:
    """The notes after the manifest (`canine preprocess: note: ...` each), in order: the languages
    without a validation page, then a trial slice's, the last line, where a user looks: these
    shards are not the whole dump."""
    notes = []
    if result.without_validation:
        notes.append(no_validation_note(result.without_validation, cfg.validation_fraction))
    if result.manifest.trial_slice:
        notes.append(f"trial slice: {result.manifest.trial_slice}; leave out --max-pages, with another --output, "
                     "to preprocess all of it")
    return notes


def no_validation_note(kept: dict[str, int], fraction: float) -> str:
    """The note for languages that got no validation page: {lang: kept pages}."""
    from contract import holdout

    langs = ", ".join(f"{lang} ({n} kept page{'s' * (n != 1)})" for lang, n in sorted(kept.items()))
    others = " (and that share of every other language)" if holdout.fraction_for(kept) else ""
    return (f"no validation page for {langs}: a language of fewer than {holdout.MIN_PAGES_FOR_VALIDATION} kept "
            f"pages gets only its share ({fraction:g} of its pages, rounded); {holdout.hint(kept)}{others}")
