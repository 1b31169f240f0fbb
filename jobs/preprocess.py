"""`canine preprocess`: run the Beam job (pipeline/job.py) and print its summary.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2
    canine preprocess 'gs://bucket/dumps/*multistream.xml.bz2' --output gs://bucket/shards \\
        --runner DataflowRunner -- --project P --region R --temp_location gs://bucket/tmp
    canine preprocess --dump en:latest --dump ko:latest --output gs://bucket/shards   # -> .../en-ko/<date>
    canine preprocess pipeline/sample/*.xml --output out/shards --set seq_len=512 --set keep_tables=true
    canine preprocess --dump en:latest --output out/trial --max-pages 1000   # a trial slice: 1000 pages of each input

Flags and `--set` keys are PreprocessConfig's fields (pipeline/preprocess_config.py), defaults and help included.
`preprocess()` is the one entry of every run: dump resolution, the output lock, the Beam job.

What it prints: on stderr the progress lines (pipeline/progress.py) and `canine preprocess: ...`
lines (a note, or the one line of a failure: jobs/errors.py); on stdout the manifest as
`canine inspect` prints it, and how the run went. No line of Beam's, Dask's or any other
library's (tests/jobs/test_preprocess_endings.py counts them).
- Ctrl-C: `canine preprocess: interrupted after 12 of 40 work items (kept); the same command
  resumes`, exit 130; the finished work items stay in the output's staging folder.
- No training example (every page rejected, or nothing read): nothing is published, exit 2, and
  the line counts the pages read by outcome with the commonest reasons (pipeline/output.py
  NothingKept); a scheduled run of a wrong input fails instead of publishing an empty output.
- A language with kept pages but no validation page is named in a note, with the
  --validation-fraction that would hold one out.
- A trial slice (--max-pages N) ends with a note that it is one: `canine preprocess: note: trial
  slice: the first N pages of each input file (--max-pages N); not the whole dump; ...`
  (docs/schedule.md, "A trial slice first").
"""

import dataclasses
import logging
import sys

from contract import options, schema
from contract.files import redact
from jobs import flags
from pipeline.preprocess_config import PreprocessConfig, max_pages_problem


# PreprocessConfig fields with a flag of their own (--seq-len for seq_len); help, type, default from the field.
FLAGS = ["seq_len", "seed", "alpha", "validation_fraction", "lang", "sentence_order", "keep_tables", "keep_end_matter",
         "char_spans", "char_span_max",
         "shard_codepoints", "pack_group_codepoints", "tokenizer_pages", "streams_per_item", "max_pages"]


def add_arguments(p):
    p.add_argument("inputs", nargs="*", metavar="INPUT", help=options.help_of(options.field_at(PreprocessConfig, "inputs")[1]))
    p.add_argument("--output", required=True, help="output directory (fsspec URL)")
    p.add_argument("--dump", action="append", default=[], metavar="LANG:DATE",
                   help="a Wikimedia dump (en:20261101, ja:latest); repeatable; the output goes to OUTPUT/<langs>/<date>")
    p.add_argument("--mirror", help="dump mirror root (default: Wikimedia's own server)")
    p.add_argument("--variant", action="append", default=[], metavar="LANG=VARIANT",
                   help="render a wiki's language-variant markup -{...}- as VARIANT shows it, e.g. zh=zh-hans or "
                        "sr=sr-el (repeatable; default: each wiki's own no-conversion view; docs/text.md)")
    p.add_argument("--convert", action="append", default=[], metavar="LANG=VARIANT",
                   help=options.help_of(options.field_at(PreprocessConfig, "convert")[1]) + " (repeatable)")
    flags.add_field_flags(p, PreprocessConfig, FLAGS)
    flags.add_field_flags(p.add_mutually_exclusive_group(), PreprocessConfig, ["vocab_size", "tokenizer"])
    flags.add_set_flag(p, "seq_len=512 or inputs=[a.xml,b.xml]")
    p.add_argument("--workers", type=int, default=1, help="worker processes: the DirectRunner's, or the DaskRunner LocalCluster's")
    p.add_argument("--runner", default="DirectRunner", help="Beam runner: DirectRunner, DaskRunner, DataflowRunner, FlinkRunner (named, so Beam never falls back to Prism)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON instead of a table")


def config_from_args(args) -> PreprocessConfig:
    """The flags' fields, then --set (which wins), each typed by its PreprocessConfig field."""
    values = {"inputs": tuple(args.inputs), "output": args.output,
              **flags.values_of(args, FLAGS + ["vocab_size", "tokenizer"])}
    if args.variant:
        values["variants"] = tuple(args.variant)
    if args.convert:
        values["convert"] = tuple(args.convert)
    values.update(options.parse_settings(args.set))
    cfg = options.build(PreprocessConfig, values, "preprocess")
    # Refused now, before a --dump is resolved on the network: validate() would see it only then.
    if problem := max_pages_problem(cfg.max_pages):
        raise ValueError(problem)
    return cfg


def preprocess(cfg: PreprocessConfig, *, dumps: list[str] = (), mirror: str | None = None, workers: int = 1,
               runner: str = "DirectRunner", beam_args: list[str] = (), progress: bool = True):
    """The one way a preprocessing run starts (the CLI, `canine smoke`, and through the CLI the
    scheduled script): `--dump` specs resolved and added to the inputs (the output becomes
    OUTPUT/<langs>/<date>), every check that needs no writing done before the output's lock is
    taken, the Beam job run under that lock (contract/lock.py). Returns (the output, output.RunResult:
    its manifest and how the run went).
    Errors raise; a run that fails before writing leaves no output folder it created."""
    import shlex

    from contract.lock import OutputLock
    from jobs import dumps as dump_specs
    from jobs import errors, quiet
    from pipeline import output, runners, sources

    if workers < 1:
        raise ValueError(f"--workers {workers}: must be 1 or more (worker processes of the runner)")
    if dumps:
        resolved = dump_specs.resolve(list(dumps), mirror=mirror, lang=cfg.lang)
        cfg = dataclasses.replace(cfg, inputs=(*cfg.inputs, *(d.dump_url for d in resolved)),
                                  output=dump_specs.output_path(cfg.output, resolved))
        # What `latest` resolved to and where the shards go: a scheduled run's log says which dump it read.
        for spec, d in zip(dumps, resolved):
            print(f"canine preprocess: --dump {spec}: {d.wiki} {d.date} ({redact(d.dump_url)})", file=sys.stderr)
        print(f"canine preprocess: output {redact(cfg.output)}", file=sys.stderr)
    # A bad flag or input is found here, before the lock creates the output folder.
    if runner != "DirectRunner":  # the default is known good; another may be misspelled or miss its options
        # First: Beam's own option check already contacts Cloud Storage, retrying for minutes.
        runners.check_launch(runner, cfg.output, cfg.inputs, list(beam_args))
        _check_runner(workers, runner, beam_args)
    plan = output.prepare(cfg)
    created = output.missing_root(cfg.output)
    command = redact(shlex.join(["canine", "preprocess", *map(str, cfg.inputs), "--output", cfg.output]))
    try:
        # The lock comes before anything touches the output, staging included: two runs of one
        # config would otherwise clean up each other's staging (contract/lock.py).
        with OutputLock(cfg.output, command=command) as lock:
            try:
                with quiet.runner_errors_held():
                    result = output.run(cfg, workers=workers, runner=runner, beam_args=list(beam_args),
                                        before_publish=lock.check, plan=plan, progress=progress)
                return cfg.output, result
            except sources.InputError:
                # Bad input found while reading: the staging of this config (and its cache of
                # items) is useless once the input is fixed, since the fix changes the config.
                output.remove_staging(cfg.output, only=output.staging_url(plan.cfg))
                raise
    except output.RunInterrupted as e:
        raise errors.Interrupted(f"interrupted after {e.done} of {e.total} work items (kept); "
                                 "the same command resumes") from e
    except KeyboardInterrupt as e:
        if created:
            output.remove_empty(cfg.output, created)
        raise errors.Interrupted("interrupted before the job started; nothing was written") from e
    except BaseException:
        if created:
            output.remove_empty(cfg.output, created)
        raise


def objects(args, cfg: PreprocessConfig | None = None) -> dict[str, str]:
    """What each path of this run is, for an error that names only a path (jobs/errors.py)."""
    from jobs import dumps

    output = (cfg.output if cfg else args.output).rstrip("/")
    found = {pattern: "an input (INPUT)" for pattern in (cfg.inputs if cfg else args.inputs)}
    if args.dump:
        found[args.mirror or dumps.DEFAULT_MIRROR] = "the dump mirror (--mirror)"
    tokenizer = cfg.tokenizer if cfg else args.tokenizer
    if tokenizer:
        found[tokenizer] = "the tokenizer (--tokenizer)"
    # Below --output at any depth (a --dump run writes OUTPUT/<langs>/<date>).
    found[output] = "the output directory (--output)"
    found[f"{output}/*{schema.STAGING_PREFIX}*"] = "this run's staging folder in the output directory"
    return found


def _check_runner(workers: int, runner: str, beam_args) -> None:
    """Beam checks the runner's name and its options (Dataflow's --project, --region, ...) when a
    Pipeline is made: made here once, so that a mistake is named before anything is written."""
    import apache_beam as beam

    from pipeline import runners

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # its INFO lines ("Runner defaulting to ...") come again with the real one
    try:
        beam.Pipeline(options=runners.beam_options(workers, runner, list(beam_args)))
    except ValueError as e:
        text = " ".join(str(e).split())
        if "validation" in text:  # "Pipeline has validations errors: Missing required option: project. ..."
            text += " Give the runner's options after a bare `--`: canine preprocess ... -- --project P --region R ..."
        raise ValueError(f"--runner {runner}: {text}") from None
    except ImportError as e:  # Beam's own words: "Google Cloud Dataflow runner not available, please install ..."
        raise ValueError(f"--runner {runner}: {e}") from None
    finally:
        root.setLevel(level)


def main(args) -> int:
    from jobs import errors
    from jobs.inspect import print_manifest

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    cfg = None
    try:
        cfg = config_from_args(args)
        where, result = preprocess(cfg, dumps=args.dump, mirror=args.mirror, workers=args.workers,
                                   runner=args.runner, beam_args=args.passthrough)
    except (Exception, KeyboardInterrupt) as e:
        # our errors as they are, a bare path in words, Ctrl-C as 130, anything else with its traceback file
        return errors.report("preprocess", e, objects(args, cfg), as_json=args.json)
    if result.up_to_date:
        # stderr under --json: stdout stays one JSON document on every path
        print(f"{where}: already complete for these settings and inputs (config {result.manifest.config_sha256[:12]}); "
              "nothing to do", file=sys.stderr if args.json else sys.stdout)
    print_manifest(result, as_json=args.json)
    if result.without_validation:
        print(f"canine preprocess: note: {no_validation_note(result.without_validation, cfg.validation_fraction)}",
              file=sys.stderr)
    if result.manifest.trial_slice:  # the last line, where a user looks: these shards are not the whole dump
        print(f"canine preprocess: note: trial slice: {result.manifest.trial_slice}; leave out --max-pages, "
              "with another --output, to preprocess all of it", file=sys.stderr)
    return 0


def no_validation_note(kept: dict[str, int], fraction: float) -> str:
    """The note for languages that got no validation page: {lang: kept pages}."""
    from pipeline import job, output

    langs = ", ".join(f"{lang} ({n} kept page{'s' * (n != 1)})" for lang, n in sorted(kept.items()))
    needed = output.validation_fraction_for(min(kept.values()))
    return (f"no validation page for {langs}: a language of fewer than {job.MIN_PAGES_FOR_VALIDATION} kept pages "
            f"gets only its share ({fraction:g} of its pages, rounded); --validation-fraction {needed:g} holds "
            "out at least one page of each (and that share of every language)")
