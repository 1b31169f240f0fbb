"""The trainer's guard: a run whose first steps train nothing, or that diverges, stops at once.

Measured: on an H100, torch.compile of the whole pretraining model made every gradient exactly
zero; the run printed `gnorm 0.00` and trained nothing for hours. So after each of the first
`GUARDED_STEPS` optimizer steps of every start (a resume may run on another machine, or with
compile switched on), the worker loop (loop.py) asks:
- is the global gradient norm zero? (every gradient is; nothing can train)
- is it not finite? (the update writes NaN / inf into the weights)
- did the update leave every weight as it was? (the gradients do not reach the weights)
and after every later step only the second (a free check of a number already logged). A
failed check raises failures.NotLearning, which stops the run without a restart: a restart
from the last checkpoint would take the same steps again (data order and dropout are seeded).

Three steps, not one: the first step compiles, the second is the first with optimizer state and
often recompiles (new guards), the third runs the code the rest of the run will. The weight
check costs a pass over the fp32 weights this rank's optimizer holds and one small all-reduce,
only in those steps.

"Moved" is decided exactly, with no tolerance: the first warm-up update is small (lr / warm-up
steps), and AdamW or LAMB with lr > 0 and a nonzero gradient always changes some fp32 weight by
at least one unit in the last place (weights near zero move by ~lr). The weights watched are the
fp32 ones the optimizer steps (`master_weights`), this rank's partition under ZeRO 1-3, so the
verdict is all-reduced: a run moved if any rank's weights did. The fingerprint is the sum
of the weights' bit patterns as integers (one ulp anywhere changes it; a float sum could round a
tiny change away) and the float64 sum of their squares (for changes that cancel in the first).
"""

import math

import torch

from training.train import failures

GUARDED_STEPS = 3


def master_weights(engine) -> list[torch.Tensor]:
    """The fp32 weights this rank's optimizer updates (the weights are fp32 at every precision,
    engine.py): all of them without ZeRO, where the engine's optimizer is ours; this rank's
    partition under ZeRO 1-3, which DeepSpeed 0.19.8 keeps as the wrapped torch optimizer's
    param_groups at ZeRO 1-2 (zero/stage_1_and_2.py:584) and as `fp32_partitioned_groups_flat`
    at ZeRO-3 (in param_groups only during its step, zero/stage3.py:1260). A DeepSpeed wrapper
    of another kind keeps them in its torch optimizer's param_groups too (`.optimizer`).
    tests/training/train/test_train_guard.py checks every stage on the pinned version."""
    opt = engine.optimizer
    if hasattr(opt, "fp32_partitioned_groups_flat"):
        return list(opt.fp32_partitioned_groups_flat)
    basic = opt if isinstance(opt, torch.optim.Optimizer) else opt.optimizer
    return [p for group in basic.param_groups for p in group["params"]]


_INT_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_CHUNK = 1 << 22  # elements: the float64 and int64 temporaries stay at 32 MB, whatever the model


def fingerprint(tensors: list[torch.Tensor]) -> tuple[int, float]:
    """(sum of the bit patterns as integers, float64 sum of squares) of `tensors`. A sync point."""
    device = tensors[0].device if tensors else "cpu"
    bits = torch.zeros((), dtype=torch.int64, device=device)
    squares = torch.zeros((), dtype=torch.float64, device=device)
    for t in tensors:
        for chunk in t.detach().reshape(-1).split(_CHUNK):
            bits += chunk.view(_INT_OF_SIZE[chunk.element_size()]).sum(dtype=torch.int64)
            squares += chunk.double().square().sum()
    return int(bits.item()), float(squares.item())


class StepGuard:
    """The checks of the module docstring for one worker's start; `before` and `after` are
    called by every rank around each optimizer step (the weight check is a collective)."""

    def __init__(self, engine, cfg, rank: int, first_step: int):
        self.engine, self.cfg, self.rank = engine, cfg, rank
        self.last_guarded = first_step + GUARDED_STEPS  # steps are 1-based: first_step + 1 is this start's first
        self._before = None

    def before(self, step: int) -> None:
        """Before (1-based) optimizer step `step`."""
        self._before = fingerprint(master_weights(self.engine)) if step <= self.last_guarded else None

    def after(self, step: int, grad_norm: float | None, lr: float, loss: float) -> None:
        """After step `step`: its global pre-clip gradient norm (None: not known), the rate its
        update used, its mean loss. Raises failures.NotLearning."""
        cfg = self.cfg
        where = f"step {step}: "
        config = f"on {failures.describe(cfg)}"
        if grad_norm is not None and not math.isfinite(grad_norm):
            if self._before is not None:
                raise failures.NotLearning(
                    f"{where}the gradient norm is {grad_norm} (loss {loss:.4g}) {config}, in the first steps of this "
                    "start: the model cannot train. Try --set parallel.compile=false if compile is on, --precision "
                    f"fp32 to rule out bf16, or a lower --lr (now {cfg.optim.lr:g}) in a new --output; a restart "
                    "would repeat the same steps")
            raise failures.NotLearning(
                f"{where}the gradient norm is {grad_norm} (loss {loss:.4g}) {config}: training diverged; going on "
                "would train on NaN. A resume repeats the same steps (seeded data and dropout): start again in a "
                f"new --output with a lower --lr (now {cfg.optim.lr:g}), a longer warm-up (--set "
                f"optim.warmup_fraction, now {cfg.optim.warmup_fraction:g}) or --precision fp32")
        if self._before is None:
            return
        if grad_norm == 0.0:
            raise failures.NotLearning(
                f"{where}every gradient is zero (global norm 0.0, loss {loss:.4g}) {config}: the model trains "
                f"nothing. {self._zero_hint()}")
        after = fingerprint(master_weights(self.engine))
        moved = torch.tensor([float(after != self._before)], dtype=torch.float64, device=self.engine.device)
        torch.distributed.all_reduce(moved, op=torch.distributed.ReduceOp.MAX)  # sync point: any rank's partition
        self._before = None
        if lr > 0 and not moved.item():
            norm = "not known" if grad_norm is None else f"{grad_norm:.4g}"
            raise failures.NotLearning(
                f"{where}the optimizer step left every weight unchanged (global gradient norm {norm}, lr {lr:.3g}) "
                f"{config}: the updates do not reach the weights. {self._zero_hint()}")

    def _zero_hint(self) -> str:
        if self.cfg.parallel.compile:
            return ("Try --set parallel.compile=false (and benchmarks/gpu_check.py on this machine, which compares "
                    "compiled and eager gradients); a restart would do the same")
        return ("Check model overrides that freeze or detach weights, try another --zero-stage or --precision "
                "fp32 to find the part at fault, run benchmarks/gpu_check.py on this machine; a restart would do "
                "the same")
