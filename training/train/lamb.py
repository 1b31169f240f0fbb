"""LAMB (You et al., "Large Batch Optimization for Deep Learning", ICLR 2020, Algorithm 2).

Adam's moments, then each parameter tensor's step is rescaled by its own trust ratio
||w|| / ||adam_step + weight_decay * w||. The ratio is per tensor, which is why the run refuses
LAMB when DeepSpeed ZeRO flattens tensors into partitions (config.validate; DeepSpeed #490, #1217).
A plain torch optimizer: DeepSpeed's FusedLamb needs CUDA, this runs on CPU and GPU alike.
"""

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.0):
        if lr < 0 or eps <= 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"Lamb: invalid lr {lr}, betas {betas} or eps {eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params)
        return loss

    def _update(self, group: dict, params: list) -> None:
        """One LAMB update of a parameter group with multi-tensor (_foreach) kernels: a few
        launches for the whole group instead of ~12 per tensor (measured on an H200 with the
        CANINE-base recipe, the per-tensor loop cost a quarter of the step)."""
        beta1, beta2 = group["betas"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32)  # on CPU: reading it never syncs a GPU
                state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
            state["step"] += 1
        step = self.state[params[0]]["step"].item()  # the group's tensors are always updated together
        grads = [p.grad.float() for p in params]
        weights = [p.float() for p in params]
        m = [self.state[p]["exp_avg"] for p in params]
        v = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_lerp_(m, grads, 1 - beta1)  # m = beta1 m + (1 - beta1) g
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        # Bias correction as in Adam (the paper's Algorithm 2 keeps it optional; BERT's LAMB uses it).
        denom = torch._foreach_sqrt(torch._foreach_div(v, 1 - beta2**step))
        torch._foreach_add_(denom, group["eps"])
        update = torch._foreach_div(torch._foreach_div(m, 1 - beta1**step), denom)
        if group["weight_decay"]:
            torch._foreach_add_(update, weights, alpha=group["weight_decay"])
        w_norm = torch.stack(torch._foreach_norm(weights))
        u_norm = torch.stack(torch._foreach_norm(update))
        # phi = identity; a zero weight or update norm falls back to ratio 1 (as in the paper's code).
        trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        torch._foreach_mul_(update, list((trust * -group["lr"]).unbind()))
        if all(p.dtype == torch.float32 for p in params):
            torch._foreach_add_(params, update)
        else:
            for p, u in zip(params, update):
                p.add_(u.to(p.dtype))
