"""README.md's own command lines for the local chain, run as a user runs them: from a working
directory of their own, with the relative paths README writes (preprocess -> pretrain -> evaluate
-> report -> export), each `canine` a process of its own that starts its own Ray cluster.

The chain is shortened by flags README's lines leave open (--seq-len, --set train.max_steps=...),
never by changing a path. On the way, the ways a run is stopped and goes on: a corrupt shard
refused before Ray starts (nothing left behind; the rerun with good data needs no cleanup), a
Ctrl-C (exit 130, one line, the same command resumes), --stop-at-step (it says how to go on), a
rerun of a finished run (nothing to do, no Ray). Every file lands where README says: metrics.jsonl,
tensorboard/, final/, hf/ (config.json, model.safetensors, with the modes the umask allows),
curves.png, and the --to folder of `canine export`.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contract import schema

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# The README commands of the local chain, found by their first words; the rest of each line is README's.
PREPROCESS = "canine preprocess 'dumps/*-pages-articles-multistream.xml.bz2'"
PRETRAIN = "canine pretrain --data out/shards --output runs/tiny"
EXPORT = "canine export runs/tiny "
REPORT, EVALUATE = "canine report runs/smoke/train", "canine evaluate runs/smoke/train"  # README's run: the smoke's
EXPORT_TO = "canine export runs/tiny --to exports/canine-tiny"  # jobs/cli.py's; README's --to is gs:// -> /data
# Shorter, not elsewhere: 256 characters a row, a few steps, a checkpoint every 2, a console line every step.
SHORT_DATA = ["--seq-len", "256"]
STEPS = 20
SHORT_RUN = ["--set", f"train.max_steps={STEPS}", "--set", "checkpoint.every=2", "--set", "train.eval_every=8",
             "--set", "log.console_every=1"]
# An evaluation of 64 held-out and 256 train examples: the defaults (1024, 2048) read the whole sample's
# split and probe ~6600 snippets per model, minutes of a 2-core machine for the same first lines.
SHORT_EVAL = ["--examples", "64", "--train-examples", "256"]


def readme_command(start: str) -> list[str]:
    """The README command that begins with `start`, a line of a code block (its comment dropped) or
    `inline code`, as argv after `canine`."""
    commands = [line.strip().split("  #")[0].split(" # ")[0] for line in README.splitlines()]
    commands += re.findall(r"`(canine [^`]+)`", README)
    for command in commands:
        if command.startswith(start):
            words = shlex.split(command)
            assert words[0] == "canine"
            return words[1:]
    raise AssertionError(f"README.md has no command starting {start!r}")


def canine(args, cwd, timeout=600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *args], cwd=cwd, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=timeout)


def interrupt_at(args, cwd, step: int, timeout=600) -> tuple[int, str]:
    """Start `canine ARGS` in a session of its own and, once it has logged `step`, press Ctrl-C as a
    terminal does (SIGINT to its process group). (exit status, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    err_path = Path(cwd) / f".stderr-{time.monotonic_ns()}"
    with open(err_path, "w") as err:
        p = subprocess.Popen([sys.executable, "-m", "jobs.cli", *args], cwd=cwd, env={**env, "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while p.poll() is None and not re.search(rf" step +{step}/", err_path.read_text()):
                assert time.monotonic() < deadline, err_path.read_text()
                time.sleep(0.2)
            assert p.poll() is None, f"it ended before step {step}: {err_path.read_text()}"
            os.killpg(p.pid, signal.SIGINT)
            code = p.wait(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
    text = err_path.read_text()
    err_path.unlink()
    return code, text


def modes(folder: Path) -> dict[str, int]:
    return {f.name: f.stat().st_mode & 0o777 for f in folder.iterdir() if f.is_file()}


@pytest.mark.slow
def test_readme_chain_with_relative_paths(tmp_path, sample_xml, make_multistream):
    cwd = tmp_path / "work"  # the user's working directory: nothing of the checkout's
    for xml in sample_xml.values():
        make_multistream(xml, cwd / "dumps", pages_per_stream=10)
    umask = os.umask(0o022)
    os.umask(umask)
    readable = 0o666 & ~umask  # what the umask allows a file (0644 under 022)

    # preprocess: README's line, 256 characters a row.
    done = canine(readme_command(PREPROCESS) + SHORT_DATA, cwd)
    assert done.returncode == 0, done.stderr
    shards = cwd / "out" / "shards"
    assert (shards / schema.MANIFEST).is_file()

    pretrain = readme_command(PRETRAIN) + SHORT_RUN
    assert pretrain[:5] == ["pretrain", "--data", "out/shards", "--output", "runs/tiny"]

    # A shard cut short: refused by the driver before Ray starts, one line, no run directory.
    shard = next((shards / "train").glob("*.parquet"))
    good = shard.read_bytes()
    shard.write_bytes(good[: len(good) // 2])
    started = time.monotonic()
    done = canine(pretrain, cwd)
    assert done.returncode == 2 and time.monotonic() - started < 60, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"canine pretrain: {shard}: corrupt shard: not a readable Parquet file") and \
        "rerun `canine preprocess` or restore it" in line, line
    assert not (cwd / "runs").exists()
    shard.write_bytes(good)

    # The same command with the shard restored (no cleanup): trains; Ctrl-C once it has logged step 3.
    code, err = interrupt_at(pretrain, cwd, step=3)
    run = cwd / "runs" / "tiny"
    last = err.strip().splitlines()[-1]
    assert code == 130, err
    found = re.fullmatch(rf"canine pretrain: interrupted at step (\d+); {run} is checkpointed at step (\d+) "
                         rf"\({run}/ray_train/checkpoint_step(\d+)\); the same command resumes from step (\d+)", last)
    assert found, err
    trained, checkpointed = int(found[1]), int(found[2])
    # The workers train on until the abort reaches them: a few steps, never to the end here.
    assert int(found[3]) == checkpointed == int(found[4]) and 2 <= checkpointed <= trained < STEPS - 2
    assert err.startswith("canine pretrain: starting a local Ray cluster on 127.0.0.1")
    assert "Traceback" not in err and "SIGINT" not in err  # neither ours nor Ray's

    # Resumed, stopped 2 steps later: it says from where, and where it stopped and how to go on.
    stop = checkpointed + 2
    done = canine(pretrain + ["--stop-at-step", str(stop)], cwd)
    assert done.returncode == 0, done.stderr
    assert f"canine pretrain: resuming from step {checkpointed} (the last checkpoint, " in done.stderr
    assert (f"canine pretrain: stopped at step {stop} of {STEPS} (--stop-at-step {stop}), checkpointed in "
            f"{run}/ray_train/checkpoint_step{stop:08d}; to go on, the same command without --stop-at-step "
            "(or with a later one)") in done.stderr.splitlines()

    # The same command again: resumes there and finishes; every step once in metrics.jsonl.
    done = canine(pretrain, cwd)
    assert done.returncode == 0, done.stderr
    assert f"canine pretrain: resuming from step {stop} (the last checkpoint, " in done.stderr
    assert f"canine pretrain: Hugging Face CanineModel exported to {run}/hf" in done.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    assert any((run / "tensorboard").iterdir()) and (run / "final" / "model_fp32.pt").is_file()
    assert {"config.json", "model.safetensors"} <= set(modes(run / "hf"))
    assert set(modes(run / "hf").values()) == {readable}, modes(run / "hf")
    assert json.loads(done.stdout)["finished"]

    # Once more: finished, nothing to do, said once, no Ray started.
    done = canine(pretrain, cwd)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"canine pretrain: {run} holds this run, finished at step {STEPS}; "
                                        "nothing to do"]

    # evaluate and report: README's lines, on this run.
    done = canine([w.replace("runs/smoke/train", "runs/tiny") for w in readme_command(EVALUATE)] + SHORT_EVAL, cwd)
    assert done.returncode == 0 and done.stdout.startswith(f"weights        step {STEPS} of {STEPS} (the final weights)\nheld-out "), done.stderr
    done = canine([w.replace("runs/smoke/train", "runs/tiny") for w in readme_command(REPORT)], cwd)
    assert done.returncode == 0, done.stderr
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert re.search(r"^curve +runs/tiny/curves\.png$", done.stdout, re.M), done.stdout

    # export: README's line (again into runs/tiny/hf) and one with a relative --to.
    done = canine(readme_command(EXPORT), cwd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "canine export: Hugging Face CanineModel of runs/tiny written to runs/tiny/hf"
    done = canine(shlex.split(EXPORT_TO)[1:], cwd)
    assert done.returncode == 0, done.stderr
    exported = cwd / "exports" / "canine-tiny"
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "README.md"} <= set(modes(exported))
    assert set(modes(exported).values()) == {readable} == set(modes(run / "hf").values())


def test_the_readme_lines_this_test_runs_are_in_it():
    """The chain above runs what README says: if a line changes there, this test is told."""
    assert readme_command(PREPROCESS) == ["preprocess", "dumps/*-pages-articles-multistream.xml.bz2",
                                          "--output", "out/shards", "--workers", "2"]
    assert readme_command(PRETRAIN) == ["pretrain", "--data", "out/shards", "--output", "runs/tiny", "--config", "tiny"]
    assert readme_command(EXPORT) == ["export", "runs/tiny"]
    assert readme_command(REPORT) == ["report", "runs/smoke/train"]
    assert readme_command(EVALUATE) == ["evaluate", "runs/smoke/train"]
    assert EXPORT_TO in (ROOT / "jobs" / "cli.py").read_text()


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["umask 022", "umask 027"])
def test_an_export_has_the_modes_the_umask_allows(umask, contract_shards, tmp_path, monkeypatch, capsys):
    """Every file, model.safetensors too (safetensors 0.8 creates it 0600): a finished run as
    `canine pretrain` leaves it (config, consolidated weights), exported with README's relative
    paths from the working directory."""
    import torch

    from jobs import cli
    from training.heads import CaninePretrainingModel
    from training.train.rundir import CONSOLIDATED
    from training.train import config
    from training.train.checkpoint import save_consolidated

    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "tiny"
    run.mkdir(parents=True)
    cfg = config.load_config("tiny", {"output": str(run), "data.path": contract_shards, "data.seq_len": 256})
    (run / "config.yaml").write_text(config.to_yaml(cfg))
    torch.manual_seed(0)
    save_consolidated(CaninePretrainingModel(config.model_config(cfg), "char").state_dict(), str(run / CONSOLIDATED))
    previous = os.umask(umask)
    try:
        assert cli.main(shlex.split(EXPORT_TO)[1:]) == 0
        assert cli.main(readme_command(EXPORT)) == 0
    finally:
        os.umask(previous)
    assert capsys.readouterr().out.splitlines() == [
        "canine export: Hugging Face CanineModel of runs/tiny written to exports/canine-tiny",
        "canine export: Hugging Face CanineModel of runs/tiny written to runs/tiny/hf"]
    for folder in (tmp_path / "exports" / "canine-tiny", run / "hf"):
        assert "model.safetensors" in modes(folder)
        assert set(modes(folder).values()) == {0o666 & ~umask}, modes(folder)
