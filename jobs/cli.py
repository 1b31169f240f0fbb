"""The `canine` command: one sub-command per module in `jobs/`.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2
    canine inspect out/shards
    canine validate out/shards
    canine pretrain --data out/shards --output runs/tiny --config tiny
    canine submit --address http://127.0.0.1:8265 -- pretrain --data ... --output ...
    canine evaluate runs/tiny
    canine export runs/tiny --to exports/canine-tiny
    canine smoke
    canine --version

Each sub-command module defines `add_arguments(parser)` and `main(args) -> int`; modules are
imported only when their command runs, so `canine --help` stays fast (Beam, Ray and torch
each take seconds to import). Every flag has help text and shows its default (HelpFormatter);
tests/jobs/test_cli.py walks every sub-command's flags to keep it so.

Errors: every command prints one line on stderr, `canine COMMAND: OBJECT: MEANING; WHAT TO DO`
(jobs/errors.py); an unexpected exception prints its type, its first line and the file that holds
its traceback. A misspelt name gets the closest one, on one line: a command (`canine pretrian`), a flag
(`canine pretrain: unrecognized arguments: --confg; did you mean --config? (usage: canine
pretrain --help)`), a `--set` key (`canine pretrain: --set: unknown key(s) ['trian.max_steps'];
did you mean 'train.max_steps'? known: ...`, before any work).
Exit status, for every command:
    0    done
    2    refused or failed: a bad flag, value or combination, missing or bad input, an output that
         exists or is locked, an unexpected exception (argparse's own usage errors are 2 as well)
    1    pretrain: training failed after --max-failures restarts (or trained nothing);
         validate: problems found
    130  interrupted (Ctrl-C)
    submit also: 3 the job was stopped, 4 the cluster could not be reached or refused the token
         or the job, 5 --job-id names a job the cluster already has, 6 the job's python cannot
         import the project or its stack, the job's own exit code when it failed (jobs/submit.py)
"""

import argparse
import difflib
import importlib
import sys

from contract.extras import version
from jobs import logs, quiet
from jobs.commands import COMMANDS


# The commands whose stdout is one JSON document (pretrain's summary always, the others with
# --json) that import torch, DeepSpeed, Ray or MLflow, whose own lines would otherwise come first:
# they print it to quiet.document().
JSON_STDOUT = ("pretrain", "evaluate", "report", "finetune", "export")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's "(default: X)" after each flag's help, unless the help already names its
    default (flags whose default comes from elsewhere: the run config, the environment) or
    there is none to show (a positional argument, an on/off switch)."""

    def _get_help_string(self, action):
        text = action.help or ""
        none = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if "default" in text or none or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


def _module(name):
    return importlib.import_module(COMMANDS[name][0])


def build_parser(command=None):
    parser = argparse.ArgumentParser(prog="canine", description=__doc__.split("\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"canine {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        if name == command:  # only the command that runs pays for its imports
            _module(name).add_arguments(p)
    parser.commands = sub.choices  # name -> its parser, whose usage an unknown flag of it gets
    return parser


def unknown_command(word: str) -> str:
    close = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"the commands are {', '.join(COMMANDS)}"
    return f"canine: unknown command '{word}'; {hint} (canine --help)"


def unknown_flags(words: list[str], parser) -> str | None:
    """argparse's "unrecognized arguments" for the `--` words of a sub-command's command line that
    are none of its flags, with the closest flag of each (`--confg`: did you mean --config?); None
    if all are known. argparse itself completes only an unambiguous prefix, and reports a missing
    required flag (the one misspelt, often) before an unknown one."""
    flags = [s for action in parser._actions for s in action.option_strings]  # argparse has no public list
    typos = [w for w in words if w.startswith("--") and not any(f.startswith(w.split("=", 1)[0]) for f in flags)]
    if not typos:
        return None
    guesses = [g for w in typos for g in difflib.get_close_matches(w.split("=", 1)[0], flags, n=1)]
    hint = f"; did you mean {' or '.join(dict.fromkeys(guesses))}?" if guesses else ""
    return f"unrecognized arguments: {' '.join(typos)}{hint}"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    try:
        parser = build_parser(command)  # imports the command's module: Beam, torch, ... (seconds)
    except KeyboardInterrupt as e:  # a Ctrl-C then is one line too, not the import's traceback
        if command is None:
            raise
        from jobs import errors

        return errors.report(command, e)
    if command is None:
        if argv and not argv[0].startswith("-"):
            print(unknown_command(argv[0]), file=sys.stderr)
            return 2
        if not argv or argv[0] in ("-h", "--help"):
            parser.print_help()
            return 0
        try:
            parser.parse_args(argv)  # --version, or argparse's own error for an unknown flag
        except SystemExit as e:
            return e.code or 0
        parser.print_help()
        return 2
    # Everything after a bare `--` passes through untouched (Beam pipeline options for
    # `preprocess`, the job's own command line for `submit`).
    passthrough = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    # A sub-command's unknown flag or argument: one line, the closest flag on it, where the eye
    # lands (argparse's error would come after the command's usage, dozens of lines of flags
    # that --help shows when wanted).
    sub = parser.commands[command]
    if typos := unknown_flags(argv[1:], sub):
        return _unrecognized(command, typos)
    args, extra = parser.parse_known_args(argv)
    if extra:
        return _unrecognized(command, f"unrecognized arguments: {' '.join(extra)}")
    args.passthrough = passthrough
    logs.redact_logs()
    logs.own_log_lines(command)
    quiet.install()
    from jobs import errors, flags

    try:  # a --set key the command's config lacks: one line before any work (as_json: stdout stays JSON)
        flags.check_settings(args)
    except ValueError as e:
        return errors.report(command, e, as_json=getattr(args, "json", False))
    try:
        # stdout holds the command's JSON alone: what libraries print goes to stderr (quiet.py).
        with quiet.stdout_for_json(command in JSON_STDOUT and (command == "pretrain" or getattr(args, "json", False))):
            return int(_module(command).main(args) or 0)
    except (Exception, KeyboardInterrupt) as e:  # SystemExit passes: argparse's and sys.exit's own status
        # A BrokenPipeError (`canine inspect ... | head`: the reader has all it wanted) ends quietly, 141.
        return errors.report(command, e)


def _unrecognized(command: str, message: str) -> int:
    print(f"canine {command}: {message} (usage: canine {command} --help)", file=sys.stderr)
    return 2  # argparse's status for a usage error


if __name__ == "__main__":
    sys.exit(main())
