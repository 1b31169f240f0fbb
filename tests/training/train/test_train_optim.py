"""Optimizers, the LR schedule, and the DeepSpeed wrapping (one process, gloo) against plain torch."""

import copy

import pytest
import torch

from canine_fixtures import CPU, one_thread  # noqa: F401 (autouse: one torch thread)
from training.train import config, engine, optim
from training.train.lamb import Lamb
from training.train.schema import OptimConfig


def test_lr_schedule_warms_up_then_decays_linearly():
    cfg = OptimConfig(warmup_fraction=0.025)
    warmup = optim.warmup_steps(cfg, 1000)
    assert warmup == 25  # 2.5% (paper §4.1.3)
    factors = [optim.lr_factor(s, warmup, 1000) for s in range(1000)]
    assert factors[0] == pytest.approx(1 / 25) and factors[24] == 1.0  # no wasted update at lr 0
    assert factors[25] == 1.0 and factors[-1] == pytest.approx(1 / 975)
    assert all(a <= b for a, b in zip(factors[:25], factors[1:25])) and all(a >= b for a, b in zip(factors[25:], factors[26:]))


def _lamb_reference(w, g, lr, beta1, beta2, eps, wd, bias_correction):
    """One LAMB step by the formula: Google's (m / (sqrt(v) + eps)) or the paper's Algorithm 2
    (bias-corrected moments); phi = identity."""
    m, v = (1 - beta1) * g, (1 - beta2) * g * g
    if bias_correction:
        m, v = m / (1 - beta1), v / (1 - beta2)
    update = m / (v.sqrt() + eps) + wd * w
    return w - lr * (w.norm() / update.norm()) * update


@pytest.mark.parametrize("bias_correction", [False, True])
def test_lamb_step_matches_the_formula_per_tensor(bias_correction):
    torch.manual_seed(0)
    big, small = torch.nn.Parameter(torch.randn(4, 3) * 10), torch.nn.Parameter(torch.randn(5) * 0.01)
    grads = [torch.randn(4, 3), torch.randn(5)]
    expected = [_lamb_reference(p.detach().clone(), g, 0.1, 0.9, 0.999, 1e-6, 0.01, bias_correction)
                for p, g in zip((big, small), grads)]
    before = [big.detach().clone(), small.detach().clone()]
    opt = Lamb([big, small], lr=0.1, eps=1e-6, weight_decay=0.01, bias_correction=bias_correction)
    big.grad, small.grad = grads
    opt.step()
    torch.testing.assert_close(big.detach(), expected[0])
    torch.testing.assert_close(small.detach(), expected[1])
    # The trust ratio is per tensor: each tensor moves by lr times its own norm, whether its norm
    # is 10 or 0.01 (a ratio over the flattened pair would move the small one far too much).
    for after, w in zip((big, small), before):
        assert ((after.detach() - w).norm() / w.norm()).item() == pytest.approx(0.1, rel=1e-5)


def test_lamb_trust_ratio_per_logical_tensor_and_none_for_biases_by_hand():
    """Values worked out by hand, one step at lr 0.1, beta2 0.99 (so m / sqrt(v) = sign(g) on the
    first step), no weight decay. The fused weight holds two logical tensors, rows [3, 4] and
    [0.6, 0.8] (norms 5 and 1), both updates of norm sqrt(2): each moves by 0.1 * its own norm
    along sign(g). One ratio over the whole tensor (norm sqrt(26) / 2) would move every entry by
    0.255. The bias gets the plain step lr * sign(g), no ratio."""
    fused = torch.nn.Parameter(torch.tensor([[3.0, 4.0], [0.6, 0.8]]))
    bias = torch.nn.Parameter(torch.tensor([0.5]))
    opt = Lamb([{"params": [fused], "parts": 2}, {"params": [bias], "adapt": False}], lr=0.1, betas=(0.9, 0.99),
               eps=1e-12)
    fused.grad, bias.grad = torch.tensor([[1.0, -1.0], [2.0, 2.0]]), torch.tensor([-2.0])
    opt.step()
    a, b = 0.5 / 2**0.5, 0.1 / 2**0.5  # 0.1 * 5 / sqrt(2), 0.1 * 1 / sqrt(2)
    torch.testing.assert_close(fused.detach(), torch.tensor([[3.0 - a, 4.0 + a], [0.6 - b, 0.8 - b]]))
    torch.testing.assert_close(bias.detach(), torch.tensor([0.6]))


def test_lamb_groups_split_the_fused_weights_and_exclude_biases_and_norms():
    from training.canine_config import CanineConfig
    from training.model import CanineModel

    cfg = CanineConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       num_hash_functions=4, num_hash_buckets=64, ngram_orders=(2,))
    model = CanineModel(cfg)
    groups = optim.lamb_param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    by_parts = {g.get("parts"): sorted(names[id(p)] for p in g["params"]) for g in groups if g.get("adapt", True)}
    assert by_parts[3] == sorted(n for n in names.values() if n.endswith("qkv.weight")) and len(by_parts[3]) == 4
    assert by_parts[4] == ["embeddings.hash_tables.weight", "embeddings.ngram_tables.0.weight"]
    assert all(g["weight_decay"] == 0.01 for g in groups if g.get("adapt", True))
    (fixed,) = [g for g in groups if g.get("adapt", True) is False]
    assert fixed["weight_decay"] == 0.0 and all(p.ndim == 1 for p in fixed["params"])
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_no_weight_decay_on_biases_and_norms():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    decay, no_decay = optim.param_groups(model, 0.01)
    assert [p.ndim for p in decay["params"]] == [2] and decay["weight_decay"] == 0.01
    assert sorted(p.ndim for p in no_decay["params"]) == [1, 1, 1] and no_decay["weight_decay"] == 0.0


@pytest.mark.parametrize("name, stage", [("lamb", 0), ("adamw", 2)])
def test_deepspeed_wrap_matches_plain_torch(one_process_group, name, stage):
    """engine.wrap (accumulation, clipping, schedule, ZeRO) trains exactly like a plain torch loop."""
    cfg = config.load_config("tiny", {**CPU, "optim.name": name, "parallel.zero_stage": stage, "parallel.workers": 1,
                                      "train.global_batch": 8, "train.micro_batch": 4, "train.max_steps": 10,
                                      "optim.lr": 0.05, "optim.warmup_fraction": 0.2, "optim.grad_clip": 0.5})
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference = copy.deepcopy(model)
    ref_opt = optim.build_optimizer(reference, cfg.optim)
    ref_sched = optim.build_scheduler(ref_opt, cfg.optim, cfg.train.max_steps)
    wrapped = engine.wrap(model, cfg, world=1)
    data = torch.randn(3, 2, 4, 6)  # steps, micro batches, examples, features
    for step in data:
        for micro in step:
            loss = wrapped(micro).pow(2).mean()
            wrapped.backward(loss)
            wrapped.step()
            reference(micro).pow(2).mean().div(2).backward()  # DeepSpeed divides by the accumulation steps
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        ref_opt.step()
        ref_sched.step()
        ref_opt.zero_grad()
    for ours, theirs in zip(wrapped.module.parameters(), reference.parameters()):
        torch.testing.assert_close(ours.detach(), theirs.detach(), rtol=1e-5, atol=1e-6)
    assert wrapped.get_lr()[0] == pytest.approx(ref_sched.get_last_lr()[0])


def _tiny_lamb(precision: str, stage: int = 0):
    """(config, tiny CANINE) with LAMB at `stage` in `precision`, one micro batch of 2 per step."""
    from training.canine_config import of_size
    from training.heads import CaninePretrainingModel

    cfg = config.load_config("tiny", {**CPU, "optim.name": "lamb", "parallel.zero_stage": stage,
                                      "parallel.precision": precision, "parallel.workers": 1, "train.global_batch": 2,
                                      "train.micro_batch": 2, "train.max_steps": 10, "optim.lr": 0.01,
                                      "optim.grad_clip": 0.5})
    torch.manual_seed(0)
    return cfg, CaninePretrainingModel(of_size("tiny"), "char")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_lamb_in_the_engine_steps_the_models_own_tensors(one_process_group, precision):
    """bf16 is autocast over the fp32 weights, DeepSpeed's bf16 mode (which
    hands the optimizer fp32 copies, flat partitions at ZeRO >= 1) stays off; so at ZeRO-0 each
    LAMB group holds the model's own fp32 parameters, every one of them once, and its per-tensor
    trust ratio is taken over the logical tensors (lamb.py), not a flat buffer."""
    cfg, model = _tiny_lamb(precision)
    wrapped = engine.wrap(model, cfg, world=1)
    assert wrapped.optimizer is wrapped.basic_optimizer and isinstance(wrapped.optimizer, Lamb)
    own = {id(p): p for p in model.parameters()}
    in_groups = [p for group in wrapped.optimizer.param_groups for p in group["params"]]
    assert sorted(map(id, in_groups)) == sorted(own) and len(in_groups) == len(own)
    assert all(p.dtype == torch.float32 and p.ndim >= 1 for p in in_groups)
    assert {g["parts"] for g in wrapped.optimizer.param_groups if g["adapt"]} >= {1, 3}  # QKV stacks 3
    assert all(getattr(p, "stacked_parts", 1) == g["parts"] for g in wrapped.optimizer.param_groups if g["adapt"]
               for p in g["params"])


def test_lamb_under_bf16_autocast_is_the_reference_lamb_on_a_plain_copy(one_process_group, contract_shards):
    """One step of the engine (LAMB, ZeRO-0, precision bf16 = autocast) equals training.train.lamb.Lamb
    stepping a plain copy on gradients computed under the same autocast, clipped the same way:
    exactly, since both run the same ops in the same order on the same fp32 tensors (dropout
    drawn from the same seed)."""
    from training.batch import build_batch
    from training.train import data

    shard = data.open_dataset(contract_shards).splits["train"][0]
    batch = build_batch(data.read_unit(shard.url, shard.sha256, 0, 2), 256, "char", seed=0, num_hash_buckets=2048)
    cfg, model = _tiny_lamb("bf16")
    _, reference = _tiny_lamb("bf16")  # the same seed (a deepcopy would drop the `stacked_parts` marks)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ref_opt = optim.build_optimizer(reference, cfg.optim)
    ref_sched = optim.build_scheduler(ref_opt, cfg.optim, cfg.train.max_steps)
    wrapped = engine.wrap(model, cfg, world=1)

    dtypes = set()  # of the submodules' tensor outputs: bf16 ones show autocast at work
    hooks = [m.register_forward_hook(lambda m, i, o: dtypes.add(o.dtype) if torch.is_tensor(o) else None)
             for m in model.modules()]
    torch.manual_seed(1)
    with engine.autocast(cfg):
        out = wrapped(batch)
    for hook in hooks:
        hook.remove()
    assert torch.bfloat16 in dtypes
    wrapped.backward(out.loss)
    wrapped.step()

    torch.manual_seed(1)
    with engine.autocast(cfg):
        loss = reference(batch).loss
    loss.backward()
    # In the optimizer's order, as engine._clip_and_record_norm: the total norm's float sum is the same.
    torch.nn.utils.clip_grad_norm_([p for g in ref_opt.param_groups for p in g["params"]], cfg.optim.grad_clip)
    ref_opt.step()
    ref_sched.step()

    for (name, ours), theirs in zip(model.named_parameters(), reference.parameters()):
        assert ours.dtype == torch.float32
        torch.testing.assert_close(ours.detach(), theirs.detach(), rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")
    assert sum(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters()) == len(before)
