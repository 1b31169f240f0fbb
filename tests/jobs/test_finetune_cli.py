"""`canine finetune ner` refuses bad input before Ray starts, as a user runs it (a subprocess, relative
paths from a working directory of its own): a missing file, a line without a tag and a tag of an
unknown scheme named as FILE:LINE, entity types of dev/test that training lacks listed, an --init
that is no model; one line on stderr each, exit 2, and no run directory left behind. (The runs
themselves: tests/training/finetune/test_finetune_run.py, on the session's cluster.)"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOOD = "Amina B-PER\nalikwenda O\nDodoma B-LOC\n. O\n\nMvua O\nilinyesha O\n"


def _canine(args, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=str(ROOT), DS_ACCELERATOR="cpu", RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def data(tmp_path) -> Path:
    (tmp_path / "data" / "swa").mkdir(parents=True)
    for role in ("train", "dev", "test"):
        (tmp_path / "data" / "swa" / f"{role}.txt").write_text(GOOD, encoding="utf-8")
    return tmp_path


def _refused(data: Path, *args) -> str:
    done = _canine(["finetune", "ner", *args, "--output", "runs/ner", "--size", "tiny"], cwd=data)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("canine finetune: "), done.stderr
    assert not (data / "runs").exists()  # nothing written before the input was checked
    assert "starting a local Ray cluster" not in done.stderr
    return lines[0]


def test_bad_files_are_named_at_their_line_before_ray(data):
    (data / "data" / "swa" / "bad.txt").write_text("Amina B-PER\nalikwenda\n", encoding="utf-8")
    line = _refused(data, "--train", "data/swa/bad.txt")
    assert "data/swa/bad.txt:2" in line and "without a tag" in line
    (data / "data" / "swa" / "bioes.txt").write_text("Amina S-PER\n", encoding="utf-8")
    line = _refused(data, "--train", "data/swa/bioes.txt")
    assert "data/swa/bioes.txt:1" in line and "S-PER" in line and "BIOES" in line


def test_a_missing_file_and_unseen_types_are_refused(data):
    line = _refused(data, "--train", "data/swa/train.txt", "--dev", "data/swa/nosuch.txt")
    assert "nosuch.txt" in line
    (data / "data" / "swa" / "org.txt").write_text("Bunge B-ORG\nlimekutana O\n", encoding="utf-8")
    line = _refused(data, "--train", "data/swa/train.txt", "--test", "swa=data/swa/org.txt")
    assert "ORG" in line and "org.txt:1" in line and "no --train file has" in line


def test_an_init_that_is_no_model_is_refused_before_ray(data):
    (data / "empty").mkdir()
    line = _refused(data, "--train", "data/swa/train.txt", "--init", "empty")
    assert "--init" in line and "empty" in line


def test_a_bad_setting_is_refused_with_the_key(data):
    line = _refused(data, "--train", "data/swa/train.txt", "--set", "task.max_lenght=64")
    assert "task.max_length" in line  # did you mean


TINY_DEV = ROOT / "tests" / "data" / "tydiqa" / "tiny_dev.jsonl.gz"


def test_tydiqa_refuses_a_broken_line_and_a_missing_file_before_ray(tmp_path):
    """`canine finetune tydiqa`: the windowing job finds a line that is not JSON and names it as
    FILE:LINE; a missing --dev is named; exit 2, its last line the reason, no run directory left."""
    import gzip

    good = gzip.decompress(TINY_DEV.read_bytes()).decode("utf-8").splitlines()
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress(("\n".join(good[:3] + ['{"example_id": 1, broken']) + "\n")
                                                          .encode("utf-8")))
    for args, expected in ((["--train", "bad.jsonl.gz", "--dev", "bad.jsonl.gz"], ("bad.jsonl.gz:4", "not JSON")),
                           (["--train", str(TINY_DEV), "--dev", "nosuch.jsonl.gz"], ("nosuch.jsonl.gz",))):
        done = _canine(["finetune", "tydiqa", *args, "--output", "runs/t", "--size", "tiny", "--max-length", "256",
                        "--stride", "128", "--set", "task.max_question=64"], cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert all(line.startswith("canine finetune: ") for line in lines), done.stderr  # no traceback, no Beam record
        assert all(word in lines[-1] for word in expected), done.stderr
        assert not (tmp_path / "runs").exists() and "Ray" not in done.stderr
