"""Compiled training against eager training, parameter by parameter: the check that
torch.compile trains what eager trains. Used by tests/training/test_compile.py on CPU and by
benchmarks/gpu_check.py on a GPU (where the CPU tests cannot look: docs/compile.md).

Why it exists: on an H100 (torch 2.11), `model.compile()` of the whole CaninePretrainingModel gave
the right loss and every gradient exactly zero, so the compiled base recipe trained nothing while
its throughput looked fine. A loss comparison cannot see that; comparing every gradient can.
The forward runs in the trainer's precision context (engine.py `autocast_for`).
"""

import copy

import torch

from training.train.engine import autocast_for

# Relative error ||g_compiled - g_eager|| / ||g_eager|| allowed per parameter.
# fp32: Inductor fuses and reorders reductions, so sums round differently (observed <= 2.5e-6 on
# the tiny model on CPU); 1e-4 leaves room for larger sums on a GPU.
# bf16 autocast: eager rounds every op's output to bf16 (8-bit mantissa, 2**-8 = 3.9e-3 per
# rounding) where Inductor keeps fused elementwise chains in fp32, and the differences compound
# through the backward of every layer: observed 2.0e-2 (tiny, CPU) and 4.9e-2 (base, H100, the
# encoder compiled). 0.1 keeps a 2x margin over the worst seen.
# A zeroed, missing or halved gradient is off by 1.0, 1.0 or 0.5: caught at either tolerance.
RTOL = {"fp32": 1e-4, "bf16": 0.1}


def one_backward(model, batch: dict, precision: str = "fp32"):
    """(loss, {name: gradient or None}) of one forward/backward from zeroed gradients."""
    model.zero_grad(set_to_none=True)
    device = next(model.parameters()).device.type
    with autocast_for(device, precision):
        out = model(batch)
    out.loss.backward()
    return out.loss.item(), {n: None if p.grad is None else p.grad.detach().clone()
                             for n, p in model.named_parameters()}


def gradient_problems(eager: dict, compiled: dict, rtol: float) -> list[str]:
    """What differs between two {name: gradient} maps, one line per parameter; [] if none."""
    problems = []
    for name, e in eager.items():
        c = compiled.get(name)
        if e is None or c is None:
            if (e is None) != (c is None):
                problems.append(f"{name}: gradient {'missing' if c is None else 'unexpected'} when compiled")
            continue
        if not torch.isfinite(c).all():
            problems.append(f"{name}: non-finite gradient when compiled")
            continue
        e_norm = e.float().norm().item()
        if e_norm == 0:
            if c.any():
                problems.append(f"{name}: eager gradient is zero, compiled is not")
            continue
        if not c.any():
            problems.append(f"{name}: compiled gradient is exactly zero (eager norm {e_norm:.3g})")
            continue
        err = (c.float() - e.float()).norm().item() / e_norm
        if err > rtol:
            problems.append(f"{name}: relative difference {err:.3g} > {rtol}")
    return problems


def worst_difference(eager: dict, compiled: dict) -> float:
    """The largest relative gradient difference over parameters with a non-zero eager gradient."""
    worst = 0.0
    for name, e in eager.items():
        c = compiled.get(name)
        if e is not None and c is not None and e.float().norm() > 0:
            worst = max(worst, ((c.float() - e.float()).norm() / e.float().norm()).item())
    return worst


def train_steps(model, batches: list[dict], precision: str = "fp32", lr: float = 0.05):
    """Losses of SGD (momentum 0.9) steps over `batches`, and each parameter's total change.
    SGD, so a change is proportional to the gradients (Adam would turn rounding noise in a
    near-zero gradient into a full-size step); what it checks is that the compiled model keeps
    reading its updated weights step after step."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    device = next(model.parameters()).device.type
    losses = []
    for batch in batches:
        optimizer.zero_grad(set_to_none=True)
        with autocast_for(device, precision):
            out = model(batch)
        out.loss.backward()
        optimizer.step()
        losses.append(out.loss.item())
    return losses, {n: p.detach() - before[n] for n, p in model.named_parameters()}


def compiled_copy(model, backend: str = "inductor"):
    """A deep copy of `model`, compiled in place as DeepSpeed's engine.compile() does (the whole
    module, nn.Module.compile: same parameter names)."""
    twin = copy.deepcopy(model)
    twin.compile(backend=backend)
    return twin
