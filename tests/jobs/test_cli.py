"""The `canine` command itself: --version, a mistyped command, help on every flag, credentials masked."""

import argparse
import json
import logging

import pytest

from jobs import cli


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
    logging.getLogger("pipeline.output").warning("reading %s", url)  # every logger, through the record factory
    assert "hunter2" not in caplog.text and "deadbeef" not in caplog.text
