"""engine.global_grad_norm, the `gnorm` of the console and metrics, is the true global gradient
norm of the last optimizer step: before clipping, over every parameter and the accumulated micro
batches, at every ZeRO stage, in fp32 and bf16 (autocast), with AdamW and LAMB. Checked against
torch.nn.utils.get_total_norm of the gradients of a plain, unwrapped copy of the model, in one
process (gloo, world 1) and, marked slow, over two ranks."""

import copy
import math

import pytest
import torch

from canine_fixtures import CPU, one_thread  # noqa: F401 (autouse: one torch thread)
from training.batch import build_batch
from training.heads import CaninePretrainingModel
from training.train import checkpoint, config, data, engine

# Dropout off: the reference forward must see what the engine's saw.
EXACT = {"model.hidden_dropout_prob": 0.0, "model.attention_probs_dropout_prob": 0.0}
CLIP = 1e-3  # far below the tiny model's gradient norm (~1-10): every step clips


@pytest.fixture(scope="module")
def micro_batches(contract_shards):
    """Four micro batches of 2 examples (two optimizer steps of 2 micro batches each)."""
    shard = data.open_dataset(contract_shards).splits["train"][0]
    rows = data.read_unit(shard.url, shard.sha256, 0, 8)
    return [build_batch(rows.slice(2 * i, 2), 256, "char", seed=i, num_hash_buckets=2048) for i in range(4)]


def _config(stage: int, precision: str, optimizer: str = "adamw", accum: int = 2, clip: float = CLIP):
    return config.load_config("tiny", {**CPU, **EXACT, "parallel.precision": precision, "parallel.zero_stage": stage,
                                      "optim.name": optimizer, "optim.grad_clip": clip, "parallel.workers": 1,
                                      "train.global_batch": 2 * accum, "train.micro_batch": 2,
                                      "train.max_steps": 10})


def _reference_norm(model, cfg, batches) -> float:
    """torch's norm of the gradient of the mean loss over `batches` (DeepSpeed divides each
    micro batch's loss by the accumulation steps), the forward in the run's precision; taken in
    float64, so that only the engine's side has float32 rounding."""
    model.zero_grad(set_to_none=True)
    for batch in batches:
        with engine.autocast(cfg):
            loss = model(batch).loss
        (loss / len(batches)).backward()
    return float(torch.nn.utils.get_total_norm([p.grad.double() for p in model.parameters() if p.grad is not None]))


def _engine_step(wrapped, cfg, batches) -> None:
    for batch in batches:
        with engine.autocast(cfg):
            out = wrapped(batch)
        wrapped.backward(out.loss)
        wrapped.step()


@pytest.mark.parametrize("stage, precision, optimizer, accum", [
    (0, "fp32", "adamw", 2), (0, "bf16", "lamb", 2), (0, "fp32", "lamb", 1),
    (1, "fp32", "adamw", 2), (2, "fp32", "adamw", 2), (2, "bf16", "adamw", 1),
    (3, "fp32", "adamw", 2), (3, "bf16", "adamw", 2),
])
def test_gnorm_is_torchs_norm_of_the_accumulated_gradient_before_clipping(
        one_process_group, micro_batches, stage, precision, optimizer, accum):
    """Two optimizer steps: the first from the same initial weights, the second from the engine's
    updated weights (gathered, loaded into the reference), so a stale norm would show. rel 1e-5:
    the same gradients, the engine's norm taken in float32 over ~6e5 entries (measured off the
    float64 one: up to 3.4e-6 without ZeRO, where it is torch's float32 norm; under 1e-7 under
    ZeRO 1-3). A post-clip norm would read CLIP; a missing micro batch is off by tens of %."""
    cfg = _config(stage, precision, optimizer, accum)
    torch.manual_seed(0)
    model = CaninePretrainingModel(config.model_config(cfg), "char")
    reference = copy.deepcopy(model)  # before ZeRO-3 partitions the model's parameters in place
    shapes = checkpoint.model_shapes(model)
    wrapped = engine.wrap(model, cfg, world=1)
    assert engine.global_grad_norm(wrapped) is None  # no step yet
    for step in range(2):
        batches = micro_batches[step * accum:(step + 1) * accum]
        if step:
            reference.load_state_dict(checkpoint.gather_fp32(wrapped, shapes, rank=0))
        expected = _reference_norm(reference, cfg, batches)
        _engine_step(wrapped, cfg, batches)
        got = engine.global_grad_norm(wrapped)
        assert isinstance(got, float) and expected > 100 * CLIP
        assert got == pytest.approx(expected, rel=1e-5), (step, got, expected)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_a_non_finite_gradient_reads_non_finite(one_process_group, micro_batches, stage):
    """What the guard (guard.py) relies on: a NaN gradient never reads as a finite norm. Without
    ZeRO it reads NaN; ZeRO 1-3 mask NaN and inf into inf (and skip that update)."""
    cfg = _config(stage, "fp32", accum=1, clip=1.0)
    torch.manual_seed(0)
    wrapped = engine.wrap(CaninePretrainingModel(config.model_config(cfg), "char"), cfg, world=1)
    out = wrapped(micro_batches[0])
    wrapped.backward(out.loss * float("nan"))
    wrapped.step()
    norm = engine.global_grad_norm(wrapped)
    assert not math.isfinite(norm)
    assert math.isnan(norm) if stage == 0 else norm == math.inf


def _two_ranks(rank: int, init_file: str, batches: list, out: str) -> None:
    """One of 2 gloo ranks (torch.multiprocessing.spawn): each trains its own block of the
    micro batches, as loop.py deals them, under ZeRO 0, 2 and 3; rank 0 saves the norms."""
    import os

    import torch.distributed as dist

    os.environ.update(DS_ACCELERATOR="cpu", RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    norms = {}
    for stage in (0, 2, 3):
        cfg = config.load_config("tiny", {**CPU, **EXACT, "parallel.zero_stage": stage, "optim.grad_clip": CLIP,
                                          "parallel.workers": 2, "train.global_batch": 8, "train.micro_batch": 2,
                                          "train.max_steps": 10})
        torch.manual_seed(0)
        wrapped = engine.wrap(CaninePretrainingModel(config.model_config(cfg), "char"), cfg, world=2)
        _engine_step(wrapped, cfg, batches[2 * rank:2 * rank + 2])
        norms[stage] = engine.global_grad_norm(wrapped)
    if rank == 0:
        torch.save(norms, out)
    dist.destroy_process_group()


@pytest.mark.slow  # two processes that each import DeepSpeed: ~30 s on 2 cores
def test_gnorm_covers_every_rank(micro_batches, tmp_path):
    """2 ranks, 2 micro batches each: the norm is that of the gradient averaged over all 4 (each
    rank's own gradient has another norm), at ZeRO 0 (the ranks' gradients all-reduced before our
    hook), 2 and 3 (DeepSpeed sums the partitions' squares over the ranks). rel 1e-5 as above."""
    import torch.multiprocessing as mp

    cfg = _config(0, "fp32", accum=4)
    torch.manual_seed(0)
    reference = CaninePretrainingModel(config.model_config(cfg), "char")
    expected = _reference_norm(reference, cfg, micro_batches)
    alone = _reference_norm(reference, cfg, micro_batches[:2])
    mp.spawn(_two_ranks, args=(str(tmp_path / "init"), micro_batches, str(tmp_path / "norms.pt")), nprocs=2)
    norms = torch.load(tmp_path / "norms.pt", weights_only=True)
    assert abs(alone - expected) > 0.05 * expected  # the test can tell a rank's own norm from the global one
    for stage, got in norms.items():
        assert got == pytest.approx(expected, rel=1e-5), (stage, got, expected)
