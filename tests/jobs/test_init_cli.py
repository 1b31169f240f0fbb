"""`canine pretrain --init` as a user runs it: README's command with its relative paths, from a
working directory of its own, and a directory of another architecture refused in one line before
Ray starts (training/train/init.py). The Hugging Face directories are transformers' CanineModel
with random weights (save_pretrained); nothing comes from a hub."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_readme_paths import readme_command  # noqa: E402

INIT = "canine pretrain --data out/shards --output runs/cont"  # README's --init line, found by its first words


def _save_hf(directory: Path, **changes) -> Path:
    import torch
    from transformers import CanineConfig as HFConfig
    from transformers import CanineModel as HFModel

    from training.canine_config import of_size
    from training.hf import hf_config_dict

    torch.manual_seed(3)
    HFModel(HFConfig(**{**hf_config_dict(of_size("tiny")), **changes})).save_pretrained(str(directory))
    return directory


def _canine(args, cwd, timeout=600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=str(ROOT), DS_ACCELERATOR="cpu", RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def workdir(contract_shards, tmp_path) -> Path:
    """A user's working directory: out/shards (the synthetic shards) and models/."""
    shutil.copytree(contract_shards, tmp_path / "out" / "shards")
    (tmp_path / "models").mkdir()
    return tmp_path


def test_a_directory_of_another_architecture_is_refused_in_one_line_before_ray_starts(workdir):
    args = readme_command(INIT)
    init = args[args.index("--init") + 1]
    _save_hf(workdir / init, hidden_size=96, num_attention_heads=4, num_hash_buckets=4096)
    done = _canine([*args, "--config", "tiny"], cwd=workdir, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"canine pretrain: --init {workdir / init}: its architecture differs from --config tiny: ")
    assert "hidden_size 96 (init) vs 64 (config)" in line and "num_hash_buckets 4096 (init) vs 2048 (config)" in line
    assert not (workdir / "runs").exists()  # refused before the run directory (or a Ray cluster) existed


@pytest.mark.slow
def test_readmes_init_command_with_relative_paths_starts_from_the_weights(workdir):
    args = readme_command(INIT)
    assert args[args.index("--config") + 1] == "base" and args[args.index("--data") + 1] == "out/shards"
    init = args[args.index("--init") + 1]
    _save_hf(workdir / init, hidden_act="gelu")
    done = _canine([*args, "--config", "tiny", "--max-steps", "2", "--set", "train.eval_every=0"], cwd=workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("canine pretrain: init")]
    # The first line, said before the weights are read (a user's report: an --init run was silent 52 s before it).
    assert done.stderr.splitlines()[0] == lines[0]
    assert lines[0].startswith("canine pretrain: init: reading the init weights (") and \
        f" MB) from {workdir / init}/model.safetensors and building the model to load them into ..." in lines[0]
    assert lines[1].startswith(f"canine pretrain: init from {workdir / init} (a Hugging Face CanineModel)")
    summary = json.loads(done.stdout)
    assert summary["init"]["path"] == str(workdir / init) and summary["finished"]
    import hashlib

    assert summary["init"]["sha256"] == hashlib.sha256((workdir / init / "model.safetensors").read_bytes()).hexdigest()
    assert (workdir / "runs" / "cont" / "hf" / "config.json").is_file()

    # canine evaluate measures the run against the weights it started from, besides a fresh
    # initialization (a user's report: a continued run was credited with what it inherited).
    done = _canine(["evaluate", "runs/cont", "--json", "--examples", "64", "--train-examples", "256"], cwd=workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout)
    start = r["init"]
    assert r["baseline"] == "init" and (start["path"], start["sha256"]) == (str(workdir / init), summary["init"]["sha256"])
    assert start["masked"]["predictions"] == r["masked"]["initial"]["predictions"] > 0
    assert start["masked"] != r["masked"]["initial"] and set(start["probe"]) == {"mean", "cls"}
    assert set(start["languages"]) == set(r["languages"])
