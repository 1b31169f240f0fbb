"""The `canine` command: one sub-command per module in `jobs/`.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2
    canine inspect out/shards
    canine validate out/shards
    canine pretrain --data out/shards --output runs/tiny --config tiny
    canine submit --address http://127.0.0.1:8265 -- pretrain --data ... --output ...
    canine smoke

Each sub-command module defines `add_arguments(parser)` and `main(args) -> int`; modules are
imported only when their command runs, so `canine --help` stays fast (Beam, Ray and torch
each take seconds to import).
"""

import argparse
import importlib
import logging
import sys

# name -> (module, one-line help)
COMMANDS = {
    "preprocess": ("jobs.preprocess", "Beam job: Wikipedia dumps / JSONL / Parquet -> codepoint shards"),
    "inspect": ("jobs.inspect", "print a shard directory's manifest"),
    "validate": ("jobs.validate", "check every shard against the contract and the manifest"),
    "pretrain": ("jobs.pretrain", "Ray Train + DeepSpeed pretraining on shards"),
    "submit": ("jobs.submit", "submit a canine job to a Ray cluster (Ray Jobs API)"),
    "report": ("jobs.report", "plot and summarize a finished run"),
    "smoke": ("jobs.smoke", "preprocess the bundled sample, pretrain, evaluate, export"),
}


def _module(name):
    return importlib.import_module(COMMANDS[name][0])


def build_parser(command=None):
    parser = argparse.ArgumentParser(prog="canine", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:  # only the command that runs pays for its imports
            _module(name).add_arguments(p)
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(command)
    if command is None:
        parser.print_help()
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    # Everything after a bare `--` passes through untouched (Beam pipeline options for
    # `preprocess`, the job's own command line for `submit`).
    passthrough = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    _redact_logs()
    return int(_module(command).main(args) or 0)


def _redact_logs() -> None:
    """Every log record of this process, from any logger, gets the credentials of URLs in its
    message masked (pipeline.contract.redact). At record creation: a filter on the root logger
    would miss records that other loggers propagate to its handlers."""
    from pipeline.contract import redact

    make = logging.getLogRecordFactory()
    if getattr(make, "redacts", False):
        return

    def redacting(*args, **kwargs):
        record = make(*args, **kwargs)
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return record

    redacting.redacts = True
    logging.setLogRecordFactory(redacting)


if __name__ == "__main__":
    sys.exit(main())
