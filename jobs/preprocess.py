"""`canine preprocess`: run the Beam job (pipeline/job.py) and print its summary.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2
    canine preprocess 'gs://bucket/dumps/*multistream.xml.bz2' --output gs://bucket/shards \\
        --runner DataflowRunner -- --project P --region R --temp_location gs://bucket/tmp
"""

import dataclasses
import logging
import sys

from pipeline import contract
from pipeline.config import PreprocessConfig


def add_arguments(p):
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="fsspec URLs or globs: MediaWiki XML (.xml/.bz2/.gz), JSONL, Parquet")
    p.add_argument("--output", required=True, help="output directory (fsspec URL)")
    p.add_argument("--dump", action="append", default=[], metavar="LANG:DATE",
                   help="a Wikimedia dump (en:20261101, ja:latest); repeatable; the output goes to OUTPUT/<langs>/<date>")
    p.add_argument("--mirror", help="dump mirror root (default: Wikimedia's own server)")
    p.add_argument("--seq-len", type=int, default=PreprocessConfig.seq_len, help="codepoints per example, CLS and SEPs included")
    p.add_argument("--seed", type=int, default=PreprocessConfig.seed, help="root of every mask, sentence-order and sampling decision")
    tok = p.add_mutually_exclusive_group()
    tok.add_argument("--vocab-size", type=int, default=PreprocessConfig.vocab_size, help="WordPiece vocabulary to train for CANINE-S")
    tok.add_argument("--tokenizer", help="use this tokenizer.json instead of training one (default: train one)")
    p.add_argument("--alpha", type=float, default=PreprocessConfig.alpha, help="language smoothing exponent (share^alpha)")
    p.add_argument("--validation-fraction", type=float, default=PreprocessConfig.validation_fraction, help="share of pages held out, by a hash of the page id")
    p.add_argument("--lang", help="language of inputs that name none (default: each input's own)")
    p.add_argument("--sentence-order", action="store_true", help="[CLS] A [SEP] B [SEP] pairs with SOP labels")
    p.add_argument("--keep-tables", action="store_true", help="keep table cells' text, a row a line (default: drop tables)")
    p.add_argument("--keep-end-matter", action="store_true",
                   help="keep References, See also, External links, ... sections (default: drop them)")
    p.add_argument("--shard-codepoints", type=int, default=PreprocessConfig.shard_codepoints,
                   help="codepoints per output shard (the shard count follows from it)")
    p.add_argument("--pack-group-codepoints", type=int, default=PreprocessConfig.pack_group_codepoints,
                   help="codepoints of pages packed together in one group")
    p.add_argument("--tokenizer-pages", type=int, default=PreprocessConfig.tokenizer_pages,
                   help="pages the WordPiece vocabulary is trained on")
    p.add_argument("--streams-per-item", type=int, default=PreprocessConfig.streams_per_item,
                   help="bz2 streams of a multistream dump per work item (about 100 pages a stream)")
    p.add_argument("--workers", type=int, default=1, help="worker processes: the DirectRunner's, or the DaskRunner LocalCluster's")
    p.add_argument("--runner", default="DirectRunner", help="Beam runner: DirectRunner, DaskRunner, DataflowRunner, FlinkRunner (named, so Beam never falls back to Prism)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON instead of a table")


def config_from_args(args) -> PreprocessConfig:
    """Every PreprocessConfig field that has a flag of the same name (dashes for underscores)."""
    fields = {f.name for f in dataclasses.fields(PreprocessConfig)} - {"inputs", "input_fingerprints"}
    return PreprocessConfig(inputs=tuple(args.inputs), **{k: getattr(args, k) for k in fields if hasattr(args, k)})


def resolve_dumps(args) -> None:
    """--dump specs -> input URLs and an output keyed by language and date (jobs/dumps.py)."""
    from jobs import dumps
    from pipeline.sources import InputError

    if not args.dump:
        return
    resolved = []
    for spec in args.dump:
        d = dumps.parse_dump(spec, mirror=args.mirror, lang=args.lang)
        if d.date == dumps.LATEST:
            d = dumps.pin_latest(d)  # the output path names the real date, so reruns find it
        missing = dumps.missing_files(d)
        if missing:
            raise InputError(f"--dump {spec}: missing on the mirror: {', '.join(missing)}")
        resolved.append(d)
    args.inputs = [*args.inputs, *(d.dump_url for d in resolved)]
    args.output = dumps.output_path(args.output, resolved)


def main(args) -> int:
    import json
    import shlex

    from jobs.inspect import print_manifest
    from jobs.lock import LockHeld, LockLost, OutputLock
    from pipeline import output, sources

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    created = None
    try:
        resolve_dumps(args)
        cfg = config_from_args(args)
        # Everything that can be checked without writing is checked before the lock creates
        # the output folder: a bad flag or input leaves nothing behind.
        plan = output.prepare(cfg)
        created = output.missing_root(cfg.output)
        # The lock comes before anything touches the output, staging included: two runs of one
        # config would otherwise clean up each other's staging (jobs/lock.py).
        with OutputLock(cfg.output, command=contract.redact(shlex.join(["canine", "preprocess", *map(str, args.inputs)]))) as lock:
            try:
                manifest = output.run(cfg, workers=args.workers, runner=args.runner, beam_args=args.passthrough,
                                      before_publish=lock.check, plan=plan, progress=True)
            except sources.InputError:
                # Bad input found while reading: the staging of this config (and its cache of
                # items) is useless once the input is fixed, since the fix changes the config.
                output.remove_staging(cfg.output, only=output.staging_url(plan.cfg))
                raise
    except (ValueError, sources.InputError, output.OutputExistsError, LockHeld, LockLost) as e:
        if created:
            output.remove_empty(cfg.output, created)
        message = contract.redact(str(e))
        print(f"canine preprocess: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": message}, ensure_ascii=False))
        return 2
    if manifest.get("up_to_date"):
        # stderr under --json: stdout stays one JSON document on every path
        print(f"{cfg.output}: already complete for this config ({manifest['config_sha256'][:12]}); nothing to do",
              file=sys.stderr if args.json else sys.stdout)
    print_manifest(manifest, as_json=args.json)
    return 0
