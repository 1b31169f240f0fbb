"""The one place where the model meets DeepSpeed: its config, `deepspeed.initialize`, the forward's
precision and the step's gradient norm.

The worker loop builds the plain `CaninePretrainingModel`, then calls `wrap()`; the model files
never import DeepSpeed, and checkpoint.py only uses the engine it is given (and DeepSpeed's
fp32-gather helper). Every ZeRO stage wraps the model as it is: each weight is used in the
forward of the module that owns it and the outputs are tuples (training/model.py), which is what
ZeRO-3's per-module gather hooks need.

Precision: the weights are fp32 at every stage and precision, and they are the master weights
the optimizer updates. parallel.precision=bf16 runs the forward under torch.autocast to bf16,
on CPU and GPU alike: the engine's forward enters it (DeepSpeed's `torch_autocast` section,
deepspeed_config), so training and evaluation get it wherever the engine is called; the backward
runs outside it, as PyTorch recommends. `autocast` (of a config) and `autocast_for` (of a device
and a precision) give the same context for forwards outside the engine (the micro-batch probe, the
compile check). DeepSpeed's own "bf16" mode stays off.
An outer torch.autocast around the engine is not enough: on CUDA DeepSpeed switches it off inside
its forward unless its own section is on, so runs until 2026-11-27 trained in fp32 (TF32) on GPUs
while CPU runs were bf16 (docs/compile.md, "Precision on GPUs"). That mode holds bf16
weights and hands the optimizer fp32 copies: at ZeRO-1 its BF16_Optimizer gives each parameter
group one flat partition (deepspeed 0.19.8 runtime/bf16_optimizer.py:165-225), at ZeRO-0 its
FP16_UnfusedOptimizer per-tensor copies, with the gradients accumulated in bf16
(runtime/engine.py:2321, 2599; fp32 accumulation is refused there, 2323). With autocast, LAMB
(optim.py) steps the model's own tensors, each with its own trust ratio, as Google's LAMB; ZeRO
>= 1 flattens them into partitions whatever the precision, so config.validate refuses LAMB there.

On CPU (DS_ACCELERATOR=cpu) DeepSpeed communicates over the gloo group Ray Train created; the
shared-memory op it would build there with ninja is skipped (`_skip_cpu_inference_allreduce_op`).
"""

import contextlib
import logging

import torch

from training.train import optim
from training.train.schema import PretrainConfig


def _resolved(cfg: PretrainConfig) -> tuple[bool, bool]:
    """(on a GPU, bf16) of a config resolve() has filled in (config.py: the one place "auto" is decided)."""
    p = cfg.parallel
    if p.device not in ("cpu", "cuda") or p.precision not in ("bf16", "fp32"):
        raise ValueError(f"parallel.device {p.device!r} / precision {p.precision!r}: resolve the config first "
                         "(training.train.config.resolve)")
    return p.device == "cuda", p.precision == "bf16"


def deepspeed_config(cfg: PretrainConfig, world: int) -> dict:
    on_gpu, bf16 = _resolved(cfg)
    stage = cfg.parallel.zero_stage
    zero = {"stage": stage}
    if stage in (1, 2):
        # Overlapping the gradient reduce-scatter with backward only pays with NCCL streams.
        zero.update(overlap_comm=on_gpu, contiguous_gradients=True, reduce_scatter=True)
    if stage == 3:
        zero.update(overlap_comm=on_gpu, stage3_gather_16bit_weights_on_model_save=False)
    config = {
        "train_batch_size": cfg.train.global_batch,
        "train_micro_batch_size_per_gpu": cfg.train.micro_batch,
        "gradient_accumulation_steps": cfg.accumulation_steps(world),
        "gradient_clipping": cfg.optim.grad_clip,
        "zero_optimization": zero,
        "bf16": {"enabled": False},  # bf16 is autocast over the fp32 weights (module docstring)
        # ... applied by the engine's own forward: DeepSpeed 0.19.8 runs every forward inside
        # `autocast_if_enabled` (runtime/torch_autocast.py:94), which turns an outer CUDA autocast
        # OFF unless this section enables it. No module's gradients are reduced in bf16 (its
        # lower-precision list is empty): the gradients stay fp32 end to end, as without autocast.
        "torch_autocast": {"enabled": bf16, "dtype": "bfloat16", "lower_precision_safe_modules": []},
        # Our optimizers are torch ones (AdamW, our LAMB): DeepSpeed calls them "untested" under ZeRO.
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2**62,  # our metrics, not DeepSpeed's
        "wall_clock_breakdown": False,
    }
    return config


def autocast(cfg: PretrainConfig):
    """The context of the forward (training and evaluation) for the resolved precision: bf16
    autocast over the fp32 weights, or nothing. Not around the backward: autograd runs each op's
    backward in the dtype of its forward."""
    _resolved(cfg)
    return autocast_for(cfg.parallel.device, cfg.parallel.precision)


def autocast_for(device: str, precision: str):
    """The forward's mixed-precision context on `device` ("cpu", "cuda"): bf16 autocast over the
    fp32 weights for "bf16", or nothing for "fp32". `autocast` gives it for a resolved config; the
    compile check (compile_check.py) runs its eager and compiled forwards in it."""
    if precision == "bf16":
        return torch.autocast(device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _clip_and_record_norm(optimizer: torch.optim.Optimizer, max_norm: float) -> None:
    """Without ZeRO, DeepSpeed clips (engine.py:3510, clip_fp32_gradients) but keeps no gradient
    norm: `get_global_grad_norm()` stays None. Clip here instead, just before the update, and
    leave the pre-clip norm where DeepSpeed looks for one (`optimizer._global_grad_norm`, read in
    DeepSpeedEngine._take_model_step, engine.py:3518). The gradients are already averaged over
    the ranks then (at the accumulation boundary, before the step), so this rank's norm is the
    global one; a NaN or inf gradient gives a NaN or inf norm, and the update goes ahead."""

    def hook(opt, args, kwargs):
        params = [p for group in opt.param_groups for p in group["params"] if p.grad is not None]
        if max_norm > 0:
            opt._global_grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        else:
            opt._global_grad_norm = float(torch.nn.utils.get_total_norm([p.grad for p in params]))

    optimizer.register_step_pre_hook(hook)


def global_grad_norm(engine) -> float | None:
    """The L2 norm of the whole gradient of the last optimizer step, before clipping, over all
    parameters and ranks (the accumulated gradient the update used); None before the first step.
    A sync point on a GPU (reads a device scalar).

    Without ZeRO it is `_clip_and_record_norm`'s. Under ZeRO 1-3 it is DeepSpeed 0.19.8's own,
    taken before its clipping over the reduced, accumulated partitions and summed over the ranks
    (zero/stage_1_and_2.py:2943-2960 with the all-reduce at 2693 and the pre-clip record at 3071;
    zero/stage3.py:2886-2897, all-reduce at 2469). There a NaN or inf gradient reads inf, never
    NaN (DeepSpeed masks both; utils.py:891 combine_grad_norm_groups), and DeepSpeed skips that
    update (its `overflow`: engine.skipped_steps counts it, the LR schedule does not advance).
    tests/training/train/test_train_gradnorm.py compares it with torch's norm at every stage."""
    norm = engine.get_global_grad_norm()
    return None if norm is None else float(norm)


def _skip_cpu_inference_allreduce_op() -> None:
    """DeepSpeed 0.19.8's TorchBackend (deepspeed/comm/torch.py, build_shm_op) JIT-builds its
    shared-memory all-reduce op on CPU at every process-group set-up unless the op is marked
    incompatible in `deepspeed.ops.__compatible_ops__` (a dict it probes once per process and
    keeps). The op serves only `inference_all_reduce`; training reduces over the gloo group. The
    build costs ~45 s of both cores on a fresh machine, and again whenever another ninja
    (the system's, the virtual environment's) finds the cached build's log in its own format.
    Relied on: the dict's key "deepspeed_shm_comm" and build_shm_op returning None when it is
    False (tests/training/train/test_train_engine.py checks both on the pinned version)."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def wrap(model: torch.nn.Module, cfg: PretrainConfig, world: int, load_universal: bool = False):
    """`deepspeed.initialize` with our optimizer and schedule, for the resolved config's device
    and precision (the engine's forward autocasts to bf16 when it is bf16); returns the engine. load_universal:
    the engine will load a DeepSpeed universal checkpoint (an elastic resume, checkpoint.py)."""
    import deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)  # one INFO line per rank per call otherwise
    optimizer = optim.build_optimizer(model, cfg.optim)
    scheduler = optim.build_scheduler(optimizer, cfg.optim, cfg.train.max_steps)
    on_gpu, _ = _resolved(cfg)
    config = deepspeed_config(cfg, world)
    if load_universal:
        config["checkpoint"] = {"load_universal": True}
    if cfg.parallel.zero_stage == 0:  # the engine's optimizer is ours (no DeepSpeed wrapper)
        _clip_and_record_norm(optimizer, config["gradient_clipping"])
        config["gradient_clipping"] = 0.0  # done by the hook above
    if not on_gpu:
        _skip_cpu_inference_allreduce_op()
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler,
                                           config=config)  # reuses Ray Train's process group
    if cfg.parallel.compile:
        # nn.Module.compile in place: state-dict names (checkpoints) unchanged
        engine.compile(backend=cfg.parallel.compile_backend)
    return engine
