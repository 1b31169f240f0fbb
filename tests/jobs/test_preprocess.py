"""`canine preprocess` as a scheduled job: --dump on a local mirror, no-op reruns, the output lock."""

import json
import os
import time
import pytest

from pathlib import Path

from contract import schema
from contract.lock import OutputLock
from jobs import cli

SAMPLE = Path(__file__).resolve().parents[2] / "pipeline" / "sample"
FAST = ["--seq-len", "512", "--vocab-size", "600"]


@pytest.mark.slow  # the Beam job end to end
def test_dump_on_a_mirror_is_keyed_by_language_and_date_and_reruns_are_no_ops(tmp_path, make_multistream, capsys):
    mirror = tmp_path / "mirror"
    make_multistream(SAMPLE / "kowiki-20261101-pages-articles.xml", mirror / "kowiki" / "20261101", pages_per_stream=5)
    args = ["preprocess", "--dump", "ko:20261101", "--mirror", str(mirror), "--output", str(tmp_path / "out"), *FAST]
    assert cli.main(args) == 0
    out = tmp_path / "out" / "ko" / "20261101"
    assert (out / schema.MANIFEST).exists() and (out / "train").is_dir()
    err = capsys.readouterr().err.splitlines()  # which dump was read, and where the shards went
    assert f"canine preprocess: --dump ko:20261101: kowiki 20261101 ({mirror}/kowiki/20261101/" in err[0]
    assert err[1] == f"canine preprocess: output {out}"
    t = time.perf_counter()
    assert cli.main(args) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert time.perf_counter() - t < 10  # "a no-op that says so in seconds"


def test_missing_dump_on_the_mirror_fails_clearly(tmp_path, capsys):
    args = ["preprocess", "--dump", "ko:20261101", "--mirror", str(tmp_path), "--output", str(tmp_path / "out")]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "missing on the mirror" in err and "kowiki-20261101-pages-articles-multistream.xml.bz2" in err
    assert not (tmp_path / "out").exists()


def test_second_run_on_a_locked_output_refuses(tmp_path, capsys):
    out = tmp_path / "out"
    with OutputLock(str(out), command="another canine preprocess"):
        code = cli.main(["preprocess", str(SAMPLE / "kowiki-20261101-pages-articles.xml"), "--output", str(out), *FAST])
    assert code == 2
    err = capsys.readouterr().err
    assert "another canine preprocess" in err
    assert not (out / schema.MANIFEST).exists()


def run_cli(args, capsys):
    code = cli.main(["preprocess", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bad_flags_and_outputs_fail_clearly_and_leave_nothing(tmp_path, capsys):
    xml = str(SAMPLE / "kowiki-20261101-pages-articles.xml")
    out = tmp_path / "new" / "out"
    code, stdout, err = run_cli([xml, "--output", str(out), "--seq-len", "0", "--json"], capsys)
    assert code == 2 and "--seq-len 0 is too short" in err
    assert json.loads(stdout) == {"error": err.removeprefix("canine preprocess: ").strip()}
    assert not (tmp_path / "new").exists()
    afile = tmp_path / "a-file"
    afile.write_text("not a folder")
    code, _, err = run_cli([xml, "--output", str(afile)], capsys)
    assert code == 2 and f"--output {afile} is a file" in err
    assert afile.read_text() == "not a folder"


@pytest.mark.slow  # the Beam job end to end
def test_touched_input_is_unchanged_and_a_changed_one_is_named(tmp_path, capsys):
    xml = tmp_path / "kowiki-20261101-pages-articles.xml"
    xml.write_bytes((SAMPLE / "kowiki-20261101-pages-articles.xml").read_bytes())
    args = [str(xml), "--output", str(tmp_path / "out"), *FAST, "--json"]
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    first = json.loads(stdout)
    os.utime(xml, (time.time() + 3600, time.time() + 3600))  # a copy or touch: new mtime, same bytes
    code, stdout, err = run_cli(args, capsys)
    assert code == 0 and "nothing to do" in err
    assert json.loads(stdout)["config_sha256"] == first["config_sha256"]  # stdout is one JSON document
    xml.write_bytes(xml.read_bytes().replace(b"</mediawiki>", b"\n</mediawiki>"))
    code, stdout, err = run_cli(args, capsys)
    assert code == 2
    assert f"input {xml} changed size" in err and "different config" in err
    assert "error" in json.loads(stdout)


@pytest.mark.slow  # the Beam job end to end
def test_staging_left_by_another_config_is_removed_when_the_run_publishes(tmp_path, capsys, caplog):
    out = tmp_path / "out"
    old = out / f"{schema.STAGING_PREFIX}0123456789abcdef" / "items"
    old.mkdir(parents=True)
    (old / "0a1b.parquet").write_bytes(b"cleaned pages of a killed run of another config")
    code, _, err = run_cli([str(SAMPLE / "kowiki-20261101-pages-articles.xml"), "--output", str(out), *FAST], capsys)
    assert code == 0, err
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # no staging, no lock
    assert "staging of another config's unfinished run" in caplog.text


def test_set_takes_any_config_field_typed_by_it(tmp_path, capsys):
    """`--set` on preprocess: PreprocessConfig's fields, lists included, typed by the field, wins over flags."""
    from jobs import preprocess

    parser = cli.build_parser("preprocess")
    args = parser.parse_args(["preprocess", "a.xml", "--output", "o", "--seq-len", "1024", "--set", "seq_len=512",
                              "--set", "inputs=[x.xml, y.jsonl]", "--set", "keep_tables=true", "--set", "lang=ko"])
    cfg = preprocess.config_from_args(args)
    assert (cfg.seq_len, cfg.inputs, cfg.keep_tables, cfg.lang, cfg.tokenizer) == (512, ("x.xml", "y.jsonl"), True, "ko", None)
    out = tmp_path / "out"
    code, _, err = run_cli([str(SAMPLE / "kowiki-20261101-pages-articles.xml"), "--output", str(out), "--set", "no_such=1"], capsys)
    assert code == 2 and "canine preprocess: --set: unknown key(s) ['no_such']" in err
    code, _, err = run_cli([str(SAMPLE / "kowiki-20261101-pages-articles.xml"), "--output", str(out), "--set", "alpha=x"], capsys)
    assert code == 2 and "canine preprocess: --set alpha: expected float, got 'x'" in err
    assert not out.exists()


def test_smoke_refuses_a_bad_set_before_any_work(tmp_path, capsys):
    assert cli.main(["smoke", "--output", str(tmp_path / "s"), "--set", "optim.lr=fast"]) == 2
    assert "canine smoke: --set optim.lr: expected float, got 'fast'" in capsys.readouterr().err
    assert cli.main(["smoke", "--output", str(tmp_path / "s"), "--set", "preprocess.seq_len=x"]) == 2
    assert "preprocess.seq_len: expected int, got 'x'" in capsys.readouterr().err
    # Keys neither config has: one line, each with the closest key of either config.
    assert cli.main(["smoke", "--output", str(tmp_path / "s"), "--set", "preprocess.keep_table=true",
                     "--set", "trian.max_steps=3", "--set", "train.seed=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("canine smoke: --set: unknown key(s) ['preprocess.keep_table', 'trian.max_steps']; "
                          "did you mean 'preprocess.keep_table' -> 'preprocess.keep_tables', "
                          "'trian.max_steps' -> 'train.max_steps'? known: "), err
    assert len(err.strip().splitlines()) == 1 and "'train.seed'" not in err
    assert not (tmp_path / "s").exists()


def test_the_variant_flag_is_repeatable_and_set_wins():
    from jobs import cli, preprocess

    parser = cli.build_parser("preprocess")
    args = parser.parse_args(["preprocess", "a.xml", "--output", "o", "--variant", "zh=zh-hant", "--variant", "sr=sr-el"])
    assert preprocess.config_from_args(args).variants == ("zh=zh-hant", "sr=sr-el")
    args = parser.parse_args(["preprocess", "a.xml", "--output", "o", "--variant", "zh=zh-hant", "--set", "variants=[zh=zh-tw]"])
    assert preprocess.config_from_args(args).variants == ("zh=zh-tw",)

