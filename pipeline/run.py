"""`preprocess(cfg)`: the driver of a preprocessing run, as training/train/run.py's `pretrain(cfg)`
is of a training run. `canine preprocess` (jobs/preprocess.py: the flags, the config, this call,
the lines after it) and `canine smoke` run it; the scheduled script runs the CLI.

    from pipeline.preprocess_config import PreprocessConfig
    from pipeline.run import preprocess
    where, result = preprocess(PreprocessConfig(inputs=("pipeline/sample/*.xml",), output="out/shards"), workers=2)

In order: `--dump` specs resolved on the mirror (sources/dumps.py) and added to the inputs, the
output becoming OUTPUT/<langs>/<date>; a runner other than the DirectRunner checked
(runners.py); the work plan (output.prepare); then, under the output's lock (contract/lock.py), the
Beam job (output.run). Every check that needs no writing comes before the lock, which is what
creates the output folder: a run that fails before the job leaves no output folder it created.
Bad input met while reading removes this config's staging too (sources.InputError).

Disk (pipeline/disk.py): before the lock, the staging folder's peak is estimated from the inputs'
sizes and said with the free space there; a run that cannot fit is refused (disk.NoSpace: nothing
written). A disk that fills anyway ends the run in disk.NoSpace's one line: nothing published,
the lock released, the finished work items kept for the same command to resume from.

What it says, on stderr: which dump each --dump resolved to and where the output goes (a scheduled
run's log says which dump it read), then the staging's peak and the free space there, then the
job's progress lines (progress.py). After the
manifest, the CLI prints `closing_notes`. A Ctrl-C leaves as `Interrupted`, whose message says
what was kept and that the same command resumes.
"""

import dataclasses
import shlex
import sys
from contextlib import nullcontext

from contract.files import redact
from contract.interrupted import Interrupted
from pipeline.preprocess_config import PreprocessConfig


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
    from pipeline import disk, output, runners, sources
    from pipeline import progress as shown
    from pipeline.sources import dumps as dump_specs

    if workers < 1:
        raise ValueError(f"--workers {workers}: must be 1 or more (worker processes of the runner)")
    # The runner as named after `--` too (a flags file's --runner=DataflowRunner): one runner for every check.
    runner = runners.runner_of(runner, list(beam_args))
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
        runners.check_launch(runner, cfg.output, cfg.inputs, list(beam_args))
        runners.check_runner(workers, runner, beam_args)
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
                    result = output.run(cfg, workers=workers, runner=runner, beam_args=list(beam_args),
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
                                  *output._items_done(work_plan.items, staging)) from None
    except Interrupted:  # output.run's: the finished work items stay in staging
        raise
    except KeyboardInterrupt as e:
        if created:
            output.remove_empty(cfg.output, created)
        raise Interrupted("interrupted before the job started; nothing was written") from e
    except BaseException:
        if created:
            output.remove_empty(cfg.output, created)
        raise


# A trial slice reads from each file's start up to its Nth page, how far that is being unknown:
# this much XML a page bounds it (the first pages of a dump are its oldest, longest articles;
# enwiki's pages-articles averages ~4.5 kB a page).
TRIAL_XML_PER_PAGE = 64 << 10


def _fits_on_disk(work_plan) -> tuple[int | None, str | None]:
    """(the staging's estimated peak, the line that says it with the free space there)
    (disk.py); disk.NoSpace before anything is written if it does not fit. (None, None) when
    the output is complete for this config already: nothing will be staged."""
    from pipeline import disk, output
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
