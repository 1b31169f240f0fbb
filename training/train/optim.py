"""Optimizer and learning-rate schedule of the run (CANINE paper §4.1.3: LAMB, 2.5% warm-up,
linear decay). The optimizers are plain torch ones handed to `deepspeed.initialize`: DeepSpeed's
fused optimizers need CUDA, and this keeps CPU and GPU runs on the same arithmetic."""

import torch

from training.train.schema import OptimConfig
from training.train.lamb import Lamb


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """BERT's grouping: no weight decay on biases and LayerNorm weights (every tensor of rank < 2)."""
    decay, no_decay = [], []
    for _, p in sorted(model.named_parameters()):
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lamb_param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Google's LAMB grouping (lamb.py): biases and LayerNorm parameters get neither weight decay
    nor a trust ratio; the other weights are grouped by how many logical tensors each stacks
    (model.stacked: the fused QKV, the hash tables), each part with its own trust ratio."""
    decay, no_decay = param_groups(model, weight_decay)
    by_parts: dict[int, list] = {}
    for p in decay["params"]:
        by_parts.setdefault(getattr(p, "stacked_parts", 1), []).append(p)
    return [{**decay, "params": params, "parts": parts} for parts, params in sorted(by_parts.items())] + [
        {**no_decay, "adapt": False}]


def build_optimizer(model: torch.nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    betas = (cfg.beta1, cfg.beta2)
    if cfg.name == "lamb":
        return Lamb(lamb_param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=betas, eps=cfg.eps)
    groups = param_groups(model, cfg.weight_decay)
    if cfg.name == "adamw":
        # foreach=False: the single-tensor path, the same on every device (bit-exact resume checks).
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=betas, eps=cfg.eps, foreach=False)
    raise ValueError(f"optim.name must be adamw or lamb, got {cfg.name!r}")


def warmup_steps(cfg: OptimConfig, max_steps: int) -> int:
    return max(1, round(cfg.warmup_fraction * max_steps))


def lr_factor(step: int, warmup: int, max_steps: int) -> float:
    """Multiplier of the peak rate for optimizer update `step` (0-based): (step+1)/warmup during
    warm-up (the first update is not wasted at 0), then linear decay to 0 at max_steps."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (max_steps - step) / max(1, max_steps - warmup))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: OptimConfig, max_steps: int):
    warmup = warmup_steps(cfg, max_steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, warmup, max_steps))
