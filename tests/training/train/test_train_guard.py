"""The guard (guard.py): a run whose gradients vanish stops at step 1 with a message naming the
configuration and what to try; a later NaN gradient norm stops it too and an update that moved no
weight is caught (both one process, gloo); the fp32 weights it watches are the ones DeepSpeed's
optimizer updates under every ZeRO stage (a private layout, pinned here).

The vanishing gradients come from the workers' fault injection (CANINE_FAULT_KIND=zero_grad,
failures.Faults): tensor hooks on every parameter that return zeros, installed before DeepSpeed
wraps the model. Chosen over a config override because no setting of a real model makes every
gradient exactly zero while its loss stays finite (an all-zero init still trains the output bias),
and over a test model because the point is the real trainer: Ray Train, DeepSpeed ZeRO-2, the loop,
the driver. It is what the compiled-model bug looked like: a normal loss, `gnorm 0.00`."""

import math

import pytest
import torch

from canine_fixtures import CPU
from pipeline.synthetic import synthetic_rows
from training.train import rundir
from training.batch import build_batch
from training.heads import CaninePretrainingModel
from training.train import config, engine, failures, guard, run
from training.train.failures import FAULT_ENV, FAULT_KIND_ENV, FAULT_MARKER


def _cfg(shards, output, **extra):
    return config.load_config("tiny", {"data.path": shards, "output": str(output), "train.max_steps": 8,
                                       "train.eval_every": 0, "checkpoint.every": 4, "data.eval_examples": 16,
                                       "log.tensorboard": False, "parallel.max_failures": 1, **extra})


@pytest.mark.slow
def test_a_run_whose_gradients_vanish_stops_at_step_1(contract_shards, ray_local, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(FAULT_ENV, "1")
    monkeypatch.setenv(FAULT_KIND_ENV, "zero_grad")
    output = tmp_path / "run"
    with pytest.raises(failures.NotLearning) as raised:
        run.pretrain(_cfg(contract_shards, output))
    text = str(raised.value)
    assert text.startswith("step 1: every gradient is zero (global norm 0.0, loss ")
    assert ("on cpu, fp32, ZeRO-2, compile off, 2 workers, micro batch 4, global batch 16: the model trains "
            "nothing. ") in text and "try another --zero-stage or --precision fp32" in text and "\n" not in text
    records = rundir.read_metrics(str(output))
    assert [(r["step"], r["grad_norm"]) for r in records] == [(1, 0.0)]  # logged, then stopped
    assert records[0]["loss"] > 1  # a normal loss, as the compiled model's was
    assert (output / FAULT_MARKER).read_text().count("hooks installed") == 1  # one start: not restarted
    assert "canine pretrain: the workers failed" not in capsys.readouterr().err  # no restart


# --- one process: the weight check under every ZeRO stage --------------------------------------


@pytest.fixture(scope="module")
def batch():
    rows = synthetic_rows(4, 256, min_length=256)
    return build_batch(rows, 256, "char", num_hash_buckets=2048)


def _engine(stage):
    """The tiny model under DeepSpeed, world 1 (its weights are fp32 at every precision, engine.py)."""
    cfg = config.load_config("tiny", {**CPU, "parallel.workers": 1, "train.global_batch": 4, "train.micro_batch": 4,
                                      "train.max_steps": 10, "parallel.zero_stage": stage})
    torch.manual_seed(0)
    return engine.wrap(CaninePretrainingModel(config.model_config(cfg), "char"), cfg, world=1), cfg


def _step(wrapped, batch):
    out = wrapped(batch)
    wrapped.backward(out.loss)
    wrapped.step()
    return out.loss.item(), float(engine.global_grad_norm(wrapped))


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_the_watched_weights_are_what_the_optimizer_updates(one_process_group, batch, stage):
    """guard.master_weights on the pinned DeepSpeed: fp32 tensors holding every weight (world 1),
    each changed by one step."""
    wrapped, _ = _engine(stage)
    watched = guard.master_weights(wrapped)
    assert all(t.dtype == torch.float32 for t in watched)
    assert sum(t.numel() for t in watched) == sum(p.ds_numel if stage == 3 else p.numel()
                                                  for p in wrapped.module.parameters())
    before = [t.detach().clone() for t in watched]
    _step(wrapped, batch)
    assert all(not torch.equal(a, t) for a, t in zip(before, guard.master_weights(wrapped)))


def test_a_later_non_finite_gradient_norm_stops_the_run(one_process_group, batch, tmp_path, monkeypatch):
    """After the guarded steps, NaN gradients (the nan_grad fault hooks, on the plain model before
    DeepSpeed wraps it, as the worker installs them) give DeepSpeed's ZeRO-2 norm inf, and the
    check stops the run naming it. One process: the path from the guard's error to the end of
    the run is the vanishing-gradient test's above."""
    monkeypatch.setenv(FAULT_ENV, "5")
    monkeypatch.setenv(FAULT_KIND_ENV, "nan_grad")
    cfg = config.load_config("tiny", {**CPU, "parallel.workers": 1, "train.global_batch": 4, "train.micro_batch": 4,
                                      "train.max_steps": 10, "parallel.zero_stage": 2})
    torch.manual_seed(0)
    model = CaninePretrainingModel(config.model_config(cfg), "char")
    faults = failures.Faults(str(tmp_path), rank=0)
    faults.install(model)
    wrapped = engine.wrap(model, cfg, world=1)
    checks = guard.StepGuard(wrapped, cfg, rank=0, first_step=0)
    norms = []
    with pytest.raises(failures.NotLearning, match=r"^step 5: the gradient norm is (nan|inf) \(loss [\d.]+\) on cpu, "
                                                   r"fp32, ZeRO-2.*: training diverged.*in a new --output with a lower "
                                                   r"--lr \(now 0\.002\)"):
        for step in range(1, 11):
            faults.before_step(step)
            checks.before(step)
            loss, norm = _step(wrapped, batch)
            norms.append(norm)
            checks.after(step, norm, lr=1e-4, loss=loss)
    assert len(norms) == 5 and all(n > 0 and math.isfinite(n) for n in norms[:4]) and not math.isfinite(norms[4])


@pytest.mark.parametrize("stage", [0, 3])
def test_an_update_that_moves_no_weight_stops_the_run(one_process_group, batch, stage):
    wrapped, cfg = _engine(stage)
    checks = guard.StepGuard(wrapped, cfg, rank=0, first_step=0)
    checks.before(1)
    loss, norm = _step(wrapped, batch)
    checks.after(1, norm, lr=1e-4, loss=loss)  # a real update: passes

    # Step 2 "loses" its update, as a broken compiled step would: the weights are put back after it.
    checks.before(2)
    saved = [t.detach().clone() for t in guard.master_weights(wrapped)]
    loss, norm = _step(wrapped, batch)
    for t, s in zip(guard.master_weights(wrapped), saved):
        t.data.copy_(s)
    with pytest.raises(failures.NotLearning, match=rf"^step 2: the optimizer step left every weight unchanged "
                                                   rf"\(global gradient norm {norm:.4g}, lr 0\.0001\) on cpu, fp32, "
                                                   rf"ZeRO-{stage}"):
        checks.after(2, norm, lr=1e-4, loss=loss)


def test_the_fingerprint_sees_one_ulp_and_the_checks_end_after_the_first_steps():
    w = torch.randn(1000)
    nudged = w.clone()
    nudged[17] = torch.nextafter(nudged[17], torch.tensor(float("inf")))  # one weight, one unit in the last place
    assert guard.fingerprint([w]) != guard.fingerprint([nudged])
    assert guard.fingerprint([w]) == guard.fingerprint([w.clone()])

    class Engine:  # only the attributes the guard reads
        optimizer = torch.optim.SGD([torch.nn.Parameter(w)], lr=0.1)
        device = torch.device("cpu")

    checks = guard.StepGuard(Engine(), config.load_config("tiny"), rank=0, first_step=10)
    checks.before(11 + guard.GUARDED_STEPS)  # a resumed start's 4th step: no longer guarded
    checks.after(11 + guard.GUARDED_STEPS, 0.0, lr=1e-3, loss=2.0)  # a zero norm passes there; only non-finite stops
    with pytest.raises(failures.NotLearning, match="step 14: the gradient norm is inf"):
        checks.after(14, float("inf"), lr=1e-3, loss=2.0)
