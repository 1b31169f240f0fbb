"""The real model under DeepSpeed ZeRO 0, 2 and 3 (one process, gloo): the same losses, and the
fp32 weights gathered from the shards equal the unsharded ones."""

import pytest
import torch

from canine_fixtures import CPU
from training.batch import build_batch
from training.heads import CaninePretrainingModel
from training.train import checkpoint, config, data, engine


def _batches(contract_shards, objective, n=3):
    dataset = data.open_dataset(contract_shards)
    shard = dataset.splits["train"][0]
    rows = data.read_unit(shard.url, shard.sha256, 0, 4 * n)
    return [build_batch(rows.slice(4 * i, 4), 256, objective, seed=i, num_hash_buckets=2048) for i in range(n)]


def _train(batches, objective, **overrides):
    """(losses, gathered fp32 weights) of the tiny model wrapped with `overrides`, on `batches`."""
    cfg = config.load_config("tiny", {**CPU, "parallel.workers": 1, "train.objective": objective, "train.global_batch": 4,
                                      "train.micro_batch": 4, "train.max_steps": 10, **overrides})
    torch.manual_seed(0)
    model = CaninePretrainingModel(config.model_config(cfg, num_subword_vocab=300), objective)
    shapes = checkpoint.model_shapes(model)
    wrapped = engine.wrap(model, cfg, world=1)
    torch.manual_seed(1)
    losses = []
    for batch in batches:
        with engine.autocast(cfg):
            out = wrapped(batch)
        wrapped.backward(out.loss)
        wrapped.step()
        losses.append(out.loss.item())
        assert engine.global_grad_norm(wrapped) > 0  # its value: test_train_gradnorm.py
    return losses, checkpoint.gather_fp32(wrapped, shapes, rank=0)


@pytest.mark.parametrize("objective", ["char", "subword"])
def test_zero_stages_train_identically_and_gather_full_weights(one_process_group, contract_shards, objective):
    """The model goes to every stage as it is: ZeRO-3 needs no registration of parameters used
    outside their module and no rewrite of the outputs (engine.py has none)."""
    batches = _batches(contract_shards, objective)
    results = {stage: _train(batches, objective, **{"parallel.zero_stage": stage}) for stage in (0, 2, 3)}
    reference_losses, reference_weights = results[0]
    # Adam moves a weight whose gradient is near 0 by lr * g / (|g| + eps): there it multiplies the
    # last-bit differences of the sharded reductions by lr/eps (2e3 for tiny), and how big those
    # differences are depends on the CPU's vector width (4e-7 on an AVX2 EPYC, over 1.2e-6 on the
    # CI machine). A wrong gather or a skipped update is off by a whole step (~lr) or a weight.
    atol = config.load_config("tiny").optim.lr / 100
    for stage in (2, 3):
        losses, weights = results[stage]
        assert losses == pytest.approx(reference_losses, rel=1e-6), stage
        assert weights.keys() == reference_weights.keys()
        for name, value in weights.items():
            torch.testing.assert_close(value, reference_weights[name], rtol=1e-5, atol=atol,
                                       msg=lambda m, stage=stage, name=name: f"ZeRO-{stage} {name}: {m}")


def test_a_compiled_model_trains_under_zero3_like_the_eager_one(one_process_group, contract_shards):
    """torch.compile inside DeepSpeed (engine.compile) with ZeRO-3's gather hooks: the same losses
    and weights as eager ZeRO-3. Without dropout: compiled code draws its masks from another
    generator (kernels.keep_mask). The aot_eager backend (parallel.compile_backend): Dynamo and
    AOTAutograd capture the graphs through ZeRO-3's hooks as with Inductor, which is what this
    checks; Inductor's own code is checked against eager gradients in tests/training/test_compile.py
    (a cold Inductor compile of the model costs ~60 s on this machine)."""
    torch._dynamo.reset()
    batches = _batches(contract_shards, "char", n=2)
    settings = {"parallel.zero_stage": 3, "model.hidden_dropout_prob": 0.0, "model.attention_probs_dropout_prob": 0.0}
    eager = _train(batches, "char", **settings)
    compiled = _train(batches, "char", **settings, **{"parallel.compile": True, "parallel.compile_backend": "aot_eager"})
    assert compiled[0] == pytest.approx(eager[0], rel=1e-4)
    for name, value in compiled[1].items():
        torch.testing.assert_close(value, eager[1][name], rtol=1e-4, atol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


def test_cpu_runs_skip_deepspeeds_inference_allreduce_op():
    """engine._skip_cpu_inference_allreduce_op relies on the pinned DeepSpeed building its
    shared-memory op in TorchBackend.__init__ through build_shm_op, and on build_shm_op returning
    None (building nothing) once the op is marked incompatible."""
    import importlib
    import inspect

    ds_comm_torch = importlib.import_module("deepspeed.comm.torch")  # `deepspeed.comm.torch` is also torch

    assert "build_shm_op()" in inspect.getsource(ds_comm_torch.TorchBackend.__init__)
    engine._skip_cpu_inference_allreduce_op()
    assert ds_comm_torch.build_shm_op() is None


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_the_engine_forward_autocasts_by_itself(one_process_group, contract_shards, precision):
    """The run's precision is the engine's: its forward autocasts to bf16 without an outer context
    (the loop has none). An outer torch.autocast is not enough on CUDA, where DeepSpeed switches
    it off inside the forward unless its `torch_autocast` section is on (engine.py): GPU runs
    trained in fp32 that way while this CPU suite saw bf16. Gradients stay fp32 (no module is
    marked for bf16 gradient reduction)."""
    cfg = config.load_config("tiny", {**CPU, "parallel.workers": 1, "parallel.precision": precision,
                                      "train.global_batch": 4, "train.micro_batch": 4})
    section = engine.deepspeed_config(cfg, world=1)["torch_autocast"]
    assert section == {"enabled": precision == "bf16", "dtype": "bfloat16", "lower_precision_safe_modules": []}
    torch.manual_seed(0)
    model = CaninePretrainingModel(config.model_config(cfg), "char")
    wrapped = engine.wrap(model, cfg, world=1)
    seen = set()  # (autocast on, output dtype) inside every submodule's forward
    hooks = [m.register_forward_hook(lambda m, i, o: seen.add((torch.is_autocast_enabled("cpu"), o.dtype))
                                     if torch.is_tensor(o) else None) for m in model.modules()]
    out = wrapped(_batches(contract_shards, "char", n=1)[0])
    for hook in hooks:
        hook.remove()
    wrapped.backward(out.loss)
    if precision == "bf16":
        assert (True, torch.bfloat16) in seen and not any(on is False for on, _ in seen)
    else:
        assert seen and all(on is False and dtype != torch.bfloat16 for on, dtype in seen)
    assert all(p.grad.dtype == torch.float32 and not hasattr(p, "comm_dtype") for p in model.parameters()
               if p.grad is not None)
