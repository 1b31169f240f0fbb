"""The `canine` command itself: --version, a mistyped command or flag or --set key, help on every
flag, credentials masked."""

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "pipeline" / "sample" / "kowiki-20261101-pages-articles.xml"


def _canine(*args, cwd):
    """`canine ARGS` as a user runs it, from the working directory `cwd`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _subparsers(parser):
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"canine {cli.version()}"
    assert cli.version()[0].isdigit()


def test_a_mistyped_command_names_the_closest_one(capsys):
    assert cli.main(["pretrian", "--data", "x"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'pretrian'; did you mean 'pretrain'?" in err
    assert "usage:" not in err  # the one line, not the whole help
    assert cli.main(["xyzzy"]) == 2
    assert "the commands are preprocess, inspect" in capsys.readouterr().err


@pytest.mark.parametrize("command, typo, meant", [("pretrain", "--confg", "--config"),
                                                   ("preprocess", "--outptu=out", "--output")])
def test_a_misspelt_flag_gets_one_line_with_the_closest_flag(command, typo, meant, tmp_path):
    args = ["--output", "out", typo, "x"] if command == "pretrain" else [SAMPLE, typo]
    done = _canine(command, *args, cwd=tmp_path)
    assert done.returncode == 2
    # The hint is the line a user reads, not the end of the command's whole usage text.
    assert done.stderr.splitlines() == [f"canine {command}: unrecognized arguments: {typo}; did you mean {meant}? "
                                        f"(usage: canine {command} --help)"], done.stderr
    assert not list(tmp_path.iterdir())  # nothing started
    # No flag is close; a prefix argparse completes (--stop) passes; a stray word: one line too.
    done = _canine("pretrain", "--dry-run", "--stop", "3", "--xyzzy", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "canine pretrain: unrecognized arguments: --xyzzy (usage: canine pretrain --help)\n"
    done = _canine("pretrain", "--dry-run", "stray", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "canine pretrain: unrecognized arguments: stray (usage: canine pretrain --help)\n"


def test_an_unknown_set_key_of_pretrain_names_the_closest_and_the_keys(tmp_path):
    done = _canine("pretrain", "--config", "tiny", "--set", "trian.max_steps=3", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()  # one line, no usage
    assert line.startswith("canine pretrain: --set: unknown key(s) ['trian.max_steps']; "
                           "did you mean 'train.max_steps'? known: checkpoint.every, "), line
    keys = line.split("known: ")[1].split(", ")
    assert {"train.max_steps", "optim.lr", "model.size", "model.overrides.KEY", "output"} <= set(keys)
    assert not {"train", "model", "model.overrides"} & set(keys)  # sections are not values
    # By the last part alone, and several at once.
    done = _canine("pretrain", "--set", "max_step=3", "--set", "optim.l=1", "--set", "zzz=1", "--dry-run", cwd=tmp_path)
    assert "did you mean 'max_step' -> 'train.max_steps', 'optim.l' -> 'optim.lr'?" in done.stderr
    # A key of another section by its last part (difflib alone said 'train.seed').
    done = _canine("pretrain", "--set", "train.lr=1e-3", "--dry-run", cwd=tmp_path)
    assert "unknown key(s) ['train.lr']; did you mean 'optim.lr'? known: " in done.stderr
    # A value its field cannot take: named by the flag and key, one prefix (was override.train.max_steps).
    done = _canine("pretrain", "--set", "train.max_steps=abc", "--dry-run", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "canine pretrain: --set train.max_steps: expected int, got 'abc'\n")
    # Known keys pass, model.FIELD (a CanineConfig field, which the config loader checks) too.
    done = _canine("pretrain", "--set", "train.max_steps=3", "--set", "model.hidden_dropout_prob=0", "--dry-run",
                   cwd=tmp_path)
    assert done.returncode == 0 and "max_steps: 3\n" in done.stdout and "hidden_dropout_prob: 0.0" in done.stdout


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_an_unknown_set_key_of_preprocess_names_the_closest_before_any_work(where, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
    base = Path(".") if where == "relative" else tmp_path
    done = _canine("preprocess", base / "in" / SAMPLE.name, "--output", base / "out", "--set", "seq_lne=512", "--json",
                   cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("canine preprocess: --set: unknown key(s) ['seq_lne']; did you mean 'seq_len'? "
                           "known: alpha, "), line
    assert json.loads(done.stdout) == {"error": line.removeprefix("canine preprocess: ")}  # --json: stdout stays JSON
    assert not (tmp_path / "out").exists()
    # A value its field cannot take, named as the flag was given (was `preprocess.seq_len: ...`,
    # a key path that read like a second prefix).
    done = _canine("preprocess", base / "in" / SAMPLE.name, "--output", base / "out", "--set", "seq_len=abc", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "canine preprocess: --set seq_len: expected int, got 'abc'\n")
    assert not (tmp_path / "out").exists()


def test_the_keys_listed_for_preprocess_hide_what_the_program_fills_in(tmp_path):
    done = _canine("preprocess", SAMPLE, "--output", tmp_path / "out", "--set", "input_fingerprint=1", cwd=tmp_path)
    keys = done.stderr.split("known: ")[1].strip().split(", ")
    assert "seq_len" in keys and "inputs" in keys
    assert "input_fingerprints" not in keys and "output" not in keys and "did you mean" not in done.stderr


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_flag_has_help_and_shows_its_default(command):
    parser = _subparsers(cli.build_parser(command))[command]
    text = parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help != argparse.SUPPRESS, f"canine {command} {name}: no help text"
        rendered = cli.HelpFormatter("canine")._get_help_string(action)
        switch = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
        if action.option_strings and not action.required and not switch:
            assert "default" in rendered, f"canine {command} {name}: help does not show its default"
    assert "(default: " in text or command in ("inspect", "validate", "report")


def test_every_canine_command_of_the_cluster_walk_parses():
    """docs/cluster.md's laptop-to-KubeRay walk: each `canine ...` line is a valid command line
    (flags and subcommands that exist), so the doc cannot drift from the CLI unnoticed."""
    import re
    import shlex
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "cluster.md").read_text()
    walk = doc.split("## From a laptop to a cluster", 1)[1].split("\n## ", 1)[0]
    lines = re.findall(r"^ {7}canine (.*)$", walk.replace("\\\n", " "), re.M)  # continuation lines joined
    commands = [shlex.split(line, comments=True) for line in lines]
    assert len(commands) >= 8 and {c[0] for c in commands} >= {"preprocess", "validate", "pretrain", "submit"}
    for words in commands:
        try:
            cli.build_parser(words[0]).parse_args(words)
        except SystemExit as e:
            raise AssertionError(f"docs/cluster.md: `canine {' '.join(words)}` does not parse") from e


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in text
    assert cli.main(["no-such-command"]) == 2


def test_credentials_in_an_input_url_reach_no_message_log_or_manifest(tmp_path, capsys, caplog):
    from pipeline.preprocess_config import PreprocessConfig

    url = "https://bob:hunter2@127.0.0.1:9/dumps/enwiki-20261101-pages-articles.xml?X-Amz-Signature=deadbeef"
    fingerprint = json.dumps(PreprocessConfig(inputs=(url,), input_fingerprints=((url, 1, "etag:x"),)).fingerprint())
    assert "hunter2" not in fingerprint and "deadbeef" not in fingerprint and "bob" not in fingerprint
    code = cli.main(["preprocess", url, "--output", str(tmp_path / "out"), "--json"])
    out = capsys.readouterr()
    assert code == 2
    for text in (out.out, out.err, caplog.text):
        assert "hunter2" not in text and "deadbeef" not in text
    assert "https://***@127.0.0.1:9/dumps/" in out.err
    logging.getLogger("pipeline.output.output").warning("reading %s", url)  # every logger, through the record factory
    assert "hunter2" not in caplog.text and "deadbeef" not in caplog.text
