"""The driver's paths and what it says before and around a run (training/train/run.py, training/train/rundir.py):
local paths are made absolute against the caller's working directory before anything reaches Ray
(URLs as they are); a run that will not be evaluated says why before Ray starts; a run that failed
before its first checkpoint leaves only what a rerun with another config accepts; the two things
of Ray Train the driver relies on for Ctrl-C and for "resuming from step N" are pinned here.

The whole chain with relative paths, Ctrl-C and --stop-at-step through `canine` processes is
tests/jobs/test_readme_paths.py; a bad shard refused before Ray starts is in tests/jobs/test_errors.py.
"""

import inspect
import os
import shutil
import socket

import pytest
import yaml

from jobs import cli
from training.train import data, rundir
from training.train import run as run_mod
from training.train import config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("given, absolute", [
    ("runs/tiny", "{cwd}/runs/tiny"), ("./out/../out/shards", "{cwd}/out/shards"), ("/data/shards", "/data/shards"),
    ("", ""), ("s3://b/runs/x", "s3://b/runs/x"), ("gs://b/shards", "gs://b/shards"),
    ("file:///data/shards", "file:///data/shards"), ("memory://b/x", "memory://b/x"),
])
def test_a_local_path_is_made_absolute_and_a_url_kept(given, absolute, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert rundir.absolute(given) == absolute.format(cwd=tmp_path)


def _dry_run(capsys, *args) -> dict:
    assert cli.main(["pretrain", *args, "--dry-run"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_pretrain_takes_relative_paths_from_the_callers_directory(tmp_path, monkeypatch, capsys):
    """The flags, and a config file named relatively that names relative paths itself: all from the
    working directory, as the resolved config (the one the workers get and the run saves) shows."""
    monkeypatch.chdir(tmp_path)
    saved = _dry_run(capsys, "--data", "out/shards", "--output", "runs/tiny", "--config", "tiny")
    assert (saved["data"]["path"], saved["output"]) == (f"{tmp_path}/out/shards", f"{tmp_path}/runs/tiny")

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "mine.yaml").write_text("model: {size: tiny}\noutput: runs/mine\ndata: {path: out/shards}\n")
    saved = _dry_run(capsys, "--config", "configs/mine.yaml")
    assert (saved["data"]["path"], saved["output"]) == (f"{tmp_path}/out/shards", f"{tmp_path}/runs/mine")

    saved = _dry_run(capsys, "--data", "gs://b/shards", "--output", "s3://b/runs/x")
    assert (saved["data"]["path"], saved["output"]) == ("gs://b/shards", "s3://b/runs/x")


@pytest.fixture(scope="module")
def no_validation(tmp_path_factory) -> str:
    from pipeline.synthetic import write_contract_shards

    return write_contract_shards(str(tmp_path_factory.mktemp("shards")), train_rows=(64,), validation_rows=0)


@pytest.mark.parametrize("extra, why", [
    # the fixture's 10-11 kept pages a language: 0.05 is the smallest share that rounds to one page of each
    ([], "holds no validation examples: canine preprocess --validation-fraction 0.05 holds out a page of each "
         "language"),
    (["--set", "data.eval_examples=0"], "data.eval_examples is 0; --set data.eval_examples=1024"),
])
def test_a_run_that_will_not_be_evaluated_says_why_before_ray_starts(extra, why, no_validation, contract_shards,
                                                                      tmp_path, monkeypatch, capsys):
    """Said before Ray starts: here the address names a closed port, so the command ends right after
    (whether or not an earlier test of this process left Ray running, which pretrain would use)."""
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    data = contract_shards if extra else no_validation
    args = ["pretrain", "--data", data, "--output", tmp_path / "run", "--ray-address", f"127.0.0.1:{_free_port()}"]
    assert cli.main([str(a) for a in args + extra]) == 2
    first, second = capsys.readouterr().err.strip().splitlines()
    assert first.startswith("canine pretrain: no validation loss or accuracy in this run: ") and why in first
    assert "no Ray cluster answers at" in second
    assert not (tmp_path / "run").exists()


def test_a_changed_byte_inside_a_shard_fails_a_first_start_before_ray(contract_shards, tmp_path, monkeypatch, capsys):
    """The footer is whole, so only hashing finds it: on a first start, before Ray (here the address
    names a closed port, so a check made after Ray would say that instead) and before the run
    directory is made."""
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    shards = shutil.copytree(contract_shards, tmp_path / "shards")
    shard = data.open_dataset(str(shards)).splits["validation"][0]
    with open(shard.url, "r+b") as f:
        f.seek(os.path.getsize(shard.url) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    args = ["pretrain", "--data", shards, "--output", tmp_path / "run", "--ray-address", f"127.0.0.1:{_free_port()}"]
    assert cli.main([str(a) for a in args]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"canine pretrain: {shard.url}: corrupt shard: its sha256 is "), line
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def small_shards(tmp_path_factory) -> str:
    """The issue's real 33-page zh export in size: 71 train rows in one shard, so tiny's units of 64
    rows are 64 and 7, and its 2 data streams cannot each give a global batch of 16 its 8 rows."""
    from pipeline.synthetic import write_contract_shards

    return write_contract_shards(str(tmp_path_factory.mktemp("small")), train_rows=(71,), validation_rows=8)


def _without_tokenizer(shards, tmp_path) -> str:
    from contract import schema

    copy = shutil.copytree(shards, tmp_path / "shards")
    (copy / schema.TOKENIZER).unlink()
    return str(copy)


@pytest.mark.parametrize("data, extra, line", [
    ("small", [], "{data}: the train split (71 rows in 1 shard, units of 64 rows) cannot give each of 2 data streams "
                  "8 rows for one global batch; lower train.global_batch, data.unit_rows or data.streams"),
    ("contract", ["--set", "model.max_position_embeddings=128"],
     "invalid pretraining config: data.seq_len 256 exceeds the model's max_position_embeddings 128 (size 'tiny')"),
    ("no tokenizer", ["--objective", "subword"],
     "{data}/{tokenizer}: missing; the subword objective needs the pipeline's tokenizer"),
], ids=["too small for a global batch", "longer than the positions", "subword without a vocabulary"])
def test_what_the_manifest_decides_is_refused_before_ray_starts(data, extra, line, small_shards, contract_shards,
                                                                 tmp_path, monkeypatch, capsys):
    """A user's report: `canine pretrain --data zh --output runs/small --config tiny --max-steps 5` on 71
    train rows was refused by rank 0 at step 1, after ~100 s of Ray's start-up, and left
    runs/small (config.yaml, an empty metrics.jsonl, ray_train/, tensorboard/). The manifest and
    the config decide it (run.check_data): one line, exit 2, nothing made. README's command, from
    a working directory; the address names a closed port, so a check made after Ray's start would
    say that instead (whether or not an earlier test of this process left Ray running)."""
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.chdir(tmp_path)
    shards = {"small": small_shards, "contract": contract_shards}.get(data) or _without_tokenizer(contract_shards,
                                                                                                 tmp_path)
    args = ["pretrain", "--data", shards, "--output", "runs/small", "--config", "tiny", "--max-steps", "5",
            "--ray-address", f"127.0.0.1:{_free_port()}", *extra]
    assert cli.main(args) == 2
    from contract import schema

    said = line.format(data=shards, tokenizer=schema.TOKENIZER)
    assert capsys.readouterr().err.strip().splitlines() == [f"canine pretrain: {said}"]
    assert not (tmp_path / "runs").exists()


def test_a_checkpoint_of_other_data_is_refused_by_the_driver(contract_shards, tmp_path):
    """A resumption's checkpoint names the data it was trained on (train_state.json): the driver
    reads it before Ray starts; the workers' restore met it after Ray's start-up."""
    from training.train.checkpoint import STATE_FILE

    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / STATE_FILE).write_text('{"step": 4, "data_sha256": "abc"}')
    cfg = config.load_config("tiny", {"data.path": contract_shards, "output": str(tmp_path / "run")})
    dataset = data.open_dataset(contract_shards)
    with pytest.raises(ValueError, match=rf"^checkpoint {tmp_path}/checkpoint was trained on data with config_sha256 "
                                         rf"abc, --data has {dataset.config_sha256}"):
        run_mod.check_data(cfg, dataset, checkpointed=(4, str(tmp_path / "checkpoint")))
    assert run_mod.check_data(cfg, dataset).data.seq_len == 256  # the same data: resolved from its manifest


@pytest.mark.parametrize("workers, said", [(1, "1 cpu worker,"), (2, "2 cpu workers,")])
def test_the_run_line_counts_its_workers_in_words(workers, said):
    cfg = config.load_config("tiny", {"parallel.workers": workers, "parallel.device": "cpu", "output": "/r"})
    assert run_mod.run_line(cfg).startswith(said) and run_mod.run_line(cfg).endswith("100 steps -> /r")


def test_ray_train_does_what_the_driver_relies_on():
    """run._Interrupt replaces the SIGINT handler that Train V2's fit() installs, by the method fit()
    calls, with the controller whose abort() it then calls; rundir.last_checkpoint reads the snapshot
    of checkpoints that Train V2 restores a run from. A Ray upgrade that moves either fails here."""
    from ray.train.v2._internal import constants
    from ray.train.v2._internal.execution.checkpoint import checkpoint_manager
    from ray.train.v2._internal.execution.controller.controller import TrainController
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    source = inspect.getsource(DataParallelTrainer._initialize_and_run_controller)
    assert "self._register_sigint_handler(controller)" in source
    assert source.index("_register_sigint_handler") < source.index("ray.get(controller.run.remote())")
    assert inspect.iscoroutinefunction(TrainController.abort)
    assert constants.CHECKPOINT_MANAGER_SNAPSHOT_FILENAME == rundir.RAY_SNAPSHOT
    fields = checkpoint_manager._TrainingResultState.model_fields
    assert {"checkpoint_dir_name", "metrics"} <= set(fields)
    assert "latest_checkpoint_result" in checkpoint_manager._CheckpointManagerState.model_fields


def test_no_snapshot_no_checkpoint_and_a_torn_one_is_named(tmp_path):
    assert rundir.last_checkpoint(str(tmp_path)) is None
    (tmp_path / rundir.CHECKPOINTS).mkdir()
    (tmp_path / rundir.CHECKPOINTS / rundir.RAY_SNAPSHOT).write_text('{"latest_checkpoint_result": nu')
    with pytest.raises(ValueError, match=rf"{rundir.RAY_SNAPSHOT}: not JSON .*remove the run's ray_train folder"):
        rundir.last_checkpoint(str(tmp_path))


def _corrupt_inside(shards: str) -> None:
    """Bytes of every train shard overwritten at its start: its footer is whole, so the driver's
    check passes and the workers' sha256 check (data.verify_shard) fails at their first read."""
    for root, _, files in os.walk(os.path.join(shards, "train")):
        for name in files:
            if name.endswith(".parquet"):
                with open(os.path.join(root, name), "r+b") as f:
                    f.write(b"garbage!" * 64)


def test_a_run_that_failed_before_its_first_checkpoint_takes_another_config(contract_shards, ray_local, tmp_path,
                                                                            capsys, monkeypatch):
    """It leaves its config.yaml, and nothing to resume: the rerun, with good data and another seed
    (which a resumption refuses), trains without any cleanup."""
    good = str(tmp_path / "good")
    shutil.copytree(contract_shards, good)
    bad = shutil.copytree(contract_shards, tmp_path / "bad")
    _corrupt_inside(str(bad))
    monkeypatch.setattr(run_mod, "HASH_AT_FIRST_START", False)  # the driver would find it before Ray
    run = tmp_path / "run"
    short = ["--set", "train.max_steps=2", "--set", "checkpoint.every=2", "--set", "train.eval_every=0",
             "--set", "data.eval_examples=16", "--set", "log.tensorboard=false", "--max-failures", "0"]
    assert cli.main(["pretrain", "--data", str(bad), "--output", str(run), *short]) == 2
    err = capsys.readouterr().err
    assert "corrupt shard: its sha256 is" in err and "a restart would fail the same way" in err
    assert (run / rundir.CONFIG).exists() and rundir.last_checkpoint(str(run)) is None

    assert cli.main(["pretrain", "--data", good, "--output", str(run), *short, "--seed", "7"]) == 0
    err = capsys.readouterr().err
    assert "resuming" not in err and "another config" not in err
    saved = config.from_dict(yaml.safe_load((run / rundir.CONFIG).read_text()))
    assert saved.train.seed == 7 and saved.data.path == good
    assert [r["step"] for r in rundir.read_metrics(str(run))] == [1, 2]
    assert rundir.last_checkpoint(str(run)) == (2, f"{run}/{rundir.CHECKPOINTS}/checkpoint_step00000002")
