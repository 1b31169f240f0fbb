"""`canine preprocess`: the flags as a PreprocessConfig, one run of the driver (pipeline/run.py:
dump resolution, runner checks, the output lock, the Beam job of pipeline/beam/job.py), its summary.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2
    canine preprocess 'gs://bucket/dumps/*multistream.xml.bz2' --output gs://bucket/shards \\
        --runner DataflowRunner -- --project P --region R --temp_location gs://bucket/tmp
    canine preprocess --dump en:latest --dump ko:latest --output gs://bucket/shards   # -> .../en-ko/<date>
    canine preprocess pipeline/sample/*.xml --output out/shards --set seq_len=512 --set keep_tables=true
    canine preprocess --dump en:latest --output out/trial --max-pages 1000   # a trial slice: 1000 pages of each input

Flags and `--set` keys are PreprocessConfig's fields (pipeline/preprocess_config.py), defaults and help included.
`preprocess()` runs the driver as every command does (this one, `canine smoke`): what is the CLI's is added here.

What it prints: on stderr the progress lines (pipeline/progress.py) and `canine preprocess: ...`
lines (a note, or the one line of a failure: jobs/errors.py); on stdout the manifest as
`canine inspect` prints it, and how the run went. No line of Beam's, Dask's or any other
library's (tests/jobs/test_preprocess_endings.py counts them).
- Ctrl-C: `canine preprocess: interrupted after 12 of 40 work items (kept); the same command
  resumes`, exit 130; the finished work items stay in the output's staging folder.
- No training example (every page rejected, or nothing read): nothing is published, exit 2, and
  the line counts the pages read by outcome with the commonest reasons (pipeline/output/output.py
  NothingKept); a scheduled run of a wrong input fails instead of publishing an empty output.
- A language with kept pages but no validation page is named in a note, with the
  --validation-fraction that would hold one out.
- Disk (pipeline/output/disk.py): the first line says the staging's estimated peak and the free space
  there; a run that cannot fit is refused before it writes, exit 2; a disk that fills mid-run
  ends in one line (the staging path, needed and free, what to do), exit 2, nothing published,
  and the same command resumes from the work items already read once there is room.
- A trial slice (--max-pages N) ends with a note that it is one: `canine preprocess: note: trial
  slice: the first N pages of each input file (--max-pages N); not the whole dump; ...`
  (docs/schedule.md, "A trial slice first").
"""

import logging
import sys

from contract import options, schema
from jobs import flags
from pipeline.preprocess_config import PreprocessConfig, max_pages_problem


# PreprocessConfig fields with a flag of their own (--seq-len for seq_len); help, type, default from the field.
FLAGS = ["seq_len", "seed", "alpha", "validation_fraction", "lang", "sentence_order", "keep_tables", "keep_end_matter",
         "keep_disambiguation", "char_spans", "char_span_max",
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


def preprocess(cfg: PreprocessConfig, **run_options):
    """pipeline/run.py's `preprocess` (its options: dumps, mirror, workers, runner, beam_args,
    progress) as a `canine` command runs it, this one and `canine smoke`: the Beam job's own error
    records held while it runs (jobs/quiet.py). Returns what the driver returns: (the output,
    output.RunResult); a Ctrl-C leaves as the driver's Interrupted."""
    from jobs import errors, quiet
    from pipeline import run

    return run.preprocess(cfg, around_job=lambda: quiet.runner_errors_held(errors.is_known), **run_options)


def objects(args, cfg: PreprocessConfig | None = None) -> dict[str, str]:
    """What each path of this run is, for an error that names only a path (jobs/errors.py)."""
    from pipeline.sources import dumps

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


def main(args) -> int:
    from jobs import errors, logs
    from jobs.inspect import print_manifest
    from pipeline.run import closing_notes

    # Our own records as `canine preprocess: ...` lines, a library's with its level and logger.
    logging.basicConfig(level=logging.INFO, handlers=[logs.log_handler("preprocess")])
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
    for note in closing_notes(cfg, result):  # a trial slice's last, where a user looks
        print(f"canine preprocess: note: {note}", file=sys.stderr)
    return 0

