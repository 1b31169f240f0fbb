"""Errors no restart can fix end a run at their first occurrence; the rest are restarted.

Without Ray: how a worker names an error (failures.fatal_error), that the name survives the
pickling Ray does on its way to the driver, the driver's restart loop (run.fit) on made-up
WorkerGroupErrors, and the CLI's exit code. On the local Ray cluster (2 CPU workers, the tiny
model): an injected CUDA out-of-memory, a config the data cannot serve and a corrupt shard, each
with --max-failures 2, stop the run in its first start. That a killed worker is still restarted
is test_train_e2e.py's restart chain (CANINE_FAULT_STEP)."""

import os
import pickle
import shutil

import pytest
import torch
from ray.exceptions import RayTaskError
from ray.train import WorkerGroupError

from jobs import cli
from training.train import config, failures, run
from training.train.failures import FAULT_ENV, FAULT_KIND_ENV, FAULT_MARKER


def _cfg(shards, output, **extra):
    """A short tiny run: 8 steps, no evaluation before the end, checkpoints every 4 steps."""
    return config.load_config("tiny", {"data.path": shards, "output": str(output), "train.max_steps": 8,
                                       "train.eval_every": 0, "checkpoint.every": 4, "data.eval_examples": 16,
                                       "log.tensorboard": False, **extra})


def _resolved(**extra):
    return config.load_config("tiny", {"parallel.device": "cpu", "parallel.precision": "fp32", "data.seq_len": 256,
                                       **extra})


def test_a_worker_names_out_of_memory_bad_input_and_leaves_other_errors_to_restarts():
    cfg = _resolved(**{"train.global_batch": 48, "train.micro_batch": 12})
    oom = failures.fatal_error(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), cfg, 1, 3)
    assert isinstance(oom, failures.OutOfMemory)
    text = str(oom)
    assert text.startswith("rank 1, step 3: out of memory with train.micro_batch 12 x data.seq_len 256")
    assert "(cpu, fp32, ZeRO-2, compile off, 2 workers, micro batch 12, global batch 48)" in text
    assert "--micro-batch (8, 6, 4: the global batch is kept by accumulation)" in text  # divisors of 48 / 2
    assert "--micro-batch auto" in text and "--set model.gradient_checkpointing=true" in text and "\n" not in text

    bad = failures.fatal_error(ValueError("gs://b/x.parquet: corrupt shard: ..."), cfg, 0, 0)
    assert isinstance(bad, failures.BadInput)
    assert str(bad).startswith("rank 0, before the first step: gs://b/x.parquet: corrupt shard")
    # From an input-pipeline task: ray.get raises a RayTaskError that is also a ValueError; its cause is told.
    cause = ValueError("the train split cannot give ...")
    wrapped = RayTaskError("_build_chunk", "Traceback ...", cause).as_instanceof_cause()
    assert isinstance(wrapped, ValueError)
    assert str(failures.fatal_error(wrapped, cfg, 1, 2)).startswith("rank 1, step 2: the train split cannot give ...")

    mine = failures.NotLearning("step 1: every gradient is zero")
    assert failures.fatal_error(mine, cfg, 0, 1) is mine
    assert failures.fatal_error(RuntimeError("Connection closed by peer"), cfg, 0, 5) is None  # a peer died: restart


def test_the_fatal_error_keeps_its_class_through_ray_and_the_lowest_rank_speaks():
    """Ray pickles the worker's exception to the controller and the WorkerGroupError to the driver."""
    error = WorkerGroupError("...", {1: failures.OutOfMemory("rank 1, step 2: out of memory"),
                                     0: RuntimeError("gloo: Connection closed by peer")})
    back = pickle.loads(pickle.dumps(error))
    fatal = failures.fatal_of(back)
    assert type(fatal) is failures.OutOfMemory and str(fatal) == "rank 1, step 2: out of memory"
    assert failures.fatal_of(WorkerGroupError("...", {1: RuntimeError("x")})) is None
    assert failures.summary(back) == ("rank 0: RuntimeError: gloo: Connection closed by peer; "
                                      "rank 1: OutOfMemory: rank 1, step 2: out of memory")


class _Trainer:
    """run._trainer's stand-in: fit() raises the next of `errors` (a list shared by all), then succeeds."""

    def __init__(self, errors, calls):
        self.errors, self.calls = errors, calls

    def fit(self):
        self.calls.append(1)
        if self.errors:
            raise self.errors.pop(0)
        return "result"


@pytest.mark.parametrize("max_failures, errors, calls, raises", [
    (2, [RuntimeError("died")] * 2, 3, None),  # two restarts, then it finishes
    (1, [RuntimeError("died")] * 2, 2, WorkerGroupError),  # out of restarts: Ray's error, as before
    (-1, [RuntimeError("died")] * 5, 6, None),  # unlimited
    (3, [failures.BadInput("rank 0, step 1: corrupt shard")], 1, failures.BadInput),  # at once
    (3, [RuntimeError("died"), failures.OutOfMemory("rank 1, step 2: out of memory")], 2, failures.OutOfMemory),
])
def test_the_driver_restarts_worker_failures_and_stops_at_a_fatal_one(monkeypatch, capsys, tmp_path,
                                                                       max_failures, errors, calls, raises):
    made = []
    errors = [WorkerGroupError("worker errors", {1: e}) for e in errors]
    monkeypatch.setattr(run, "_trainer", lambda cfg, progress, loop: _Trainer(errors, made))
    checks = []
    cfg = _resolved(**{"parallel.max_failures": max_failures, "output": str(tmp_path)})
    if raises is None:
        assert run.fit(cfg, None, before_restart=lambda: checks.append(1)) == "result"
    else:
        with pytest.raises(raises):
            run.fit(cfg, None, before_restart=lambda: checks.append(1))
    assert len(made) == calls and len(checks) == capsys.readouterr().err.count("canine pretrain: the workers failed")
    if raises is not None and issubclass(raises, failures.FatalError):
        assert len(checks) == calls - 1


def test_the_cli_exits_2_with_the_workers_line(monkeypatch, capsys, tmp_path):
    def pretrain(cfg):
        raise failures.OutOfMemory("rank 1, step 2: out of memory with train.micro_batch 4 (...); set ...")

    monkeypatch.setattr(run, "pretrain", pretrain)
    assert cli.main(["pretrain", "--data", str(tmp_path), "--output", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == ("canine pretrain: rank 1, step 2: out of memory with train.micro_batch "
                                               "4 (...); set ...")


def test_an_unknown_fault_kind_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(FAULT_KIND_ENV, "flood")
    with pytest.raises(ValueError, match="CANINE_FAULT_KIND='flood': not one of kill, oom, zero_grad, nan_grad"):
        failures.Faults(str(tmp_path), 0)


# --- on the local Ray cluster -------------------------------------------------------------------


@pytest.fixture
def starts(monkeypatch, tmp_path):
    """A start counter for runs into tmp_path/"run": zero-gradient hooks that never fire (step
    10**6), whose installation rank 0 notes in OUTPUT/.fault_injected at every start."""
    monkeypatch.setenv(FAULT_ENV, str(10**6))
    monkeypatch.setenv(FAULT_KIND_ENV, "zero_grad")
    return lambda: (tmp_path / "run" / FAULT_MARKER).read_text().count("hooks installed")


@pytest.mark.slow
def test_an_out_of_memory_ends_the_run_at_its_first_occurrence(contract_shards, ray_local, tmp_path, monkeypatch,
                                                                capsys):
    monkeypatch.setenv(FAULT_ENV, "2")
    monkeypatch.setenv(FAULT_KIND_ENV, "oom")
    with pytest.raises(failures.OutOfMemory) as raised:
        run.pretrain(_cfg(contract_shards, tmp_path / "run", **{"parallel.max_failures": 2}))
    assert str(raised.value).startswith("rank 1, step 2: out of memory with train.micro_batch 4 x data.seq_len 256 "
                                        "(cpu, fp32, ZeRO-2, compile off, 2 workers, micro batch 4, global batch 16)")
    assert (tmp_path / "run" / FAULT_MARKER).read_text() == "rank 1 ran out of memory at step 2\n"  # once: no restart
    assert "canine pretrain: the workers failed" not in capsys.readouterr().err  # no restart


@pytest.mark.slow
def test_a_corrupt_shard_ends_the_run_at_once(contract_shards, ray_local, tmp_path, starts, capsys, monkeypatch):
    """Every train shard overwritten after the manifest was written: the input pipeline's first
    read of one fails its sha256 check (data.verify_shard) in a Ray task. (A first start's driver
    hashes them before Ray: turned off here, as on a resumption, to reach the workers' check.)"""
    monkeypatch.setattr(run, "HASH_AT_FIRST_START", False)
    shards = tmp_path / "shards"
    shutil.copytree(contract_shards, shards)
    corrupted = 0
    for root, _, files in os.walk(shards / "train"):
        for name in files:
            if name.endswith(".parquet"):
                with open(os.path.join(root, name), "r+b") as f:
                    f.write(b"garbage!" * 64)
                corrupted += 1
    assert corrupted == 3
    with pytest.raises(failures.BadInput, match=r"^rank \d, step 1: .*\.parquet: corrupt shard: its sha256 is .*rerun "
                                                r"`canine preprocess` or restore it\) \(cpu, fp32, ZeRO-2"):
        run.pretrain(_cfg(str(shards), tmp_path / "run", **{"parallel.max_failures": 2}))
    assert starts() == 1
    assert "canine pretrain: the workers failed" not in capsys.readouterr().err  # no restart
