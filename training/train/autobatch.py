"""`--micro-batch auto` (train.micro_batch 0): the largest micro batch that fits the GPU, found
by every worker before DeepSpeed wraps the model (its config needs the micro batch).

Candidates are the divisors of global_batch / workers, largest first: the global batch is kept,
only the gradient accumulation changes. Each is tried with a forward and backward of a copy of
the plain model in the run's precision on full-length examples (`probe_rows`, built by
training/batch.py, the input pipeline's batch builder, tiled to the size); an out-of-memory
frees the cache and moves on to the next size. The first whose peak, plus the optimizer state
the probe does not hold, stays under MEMORY_FRACTION of the GPU is taken. Like the loop, the
probe keeps the weights fp32 and runs the forward under engine.autocast (bf16), the backward
outside it. The ranks agree on the
smallest choice (an all-reduce MIN: a run's GPUs may differ). The probe runs eager; a compiled
model needs no more activation memory than that.

Rank 0 writes the choice into OUTPUT/config.yaml, and the driver (run.py) fills `auto` from a
saved config, so a worker restart or a resume trains with the same micro batch and probes no
more. The order of the examples does not depend on the micro batch (data.py: each worker takes
its block of every global batch in order); the dropout masks do (training/seeds.py draws them per
micro batch), so a run is reproducible for one micro batch, which is why the choice is saved.

On CPU there is no probe (host memory is not what limits a CPU run): auto takes the largest
divisor of global_batch / workers up to CPU_MICRO_BATCH.
"""

import copy
import dataclasses
import sys
from typing import Callable

import numpy as np
import torch

from contract import schema
from training import seeds
from training.train import failures

CPU_MICRO_BATCH = 32  # training/train/schema.py's built-in train.micro_batch
MEMORY_FRACTION = 0.9  # the rest: allocator fragmentation, NCCL and DeepSpeed bucket buffers
# What the probe does not hold, per parameter, at most: Adam / LAMB moments 8, and under ZeRO >= 1
# DeepSpeed's fp32 partition copy 4 and reduced-gradient partition 4, divided over the workers
# there (the probe holds the fp32 weights and their gradients, as the engine does without ZeRO).
STATE_BYTES_PER_PARAM = 16
PROBE_ROWS = 8  # distinct made-up examples, tiled to each candidate size


def candidates(global_batch: int, workers: int) -> list[int]:
    """Micro batches that keep the global batch: the divisors of global_batch / workers, largest first."""
    if global_batch % workers:
        raise ValueError(f"train.global_batch {global_batch} is not a multiple of the {workers} workers: "
                         "no micro batch keeps it; set --global-batch to a multiple of --workers")
    per_worker = global_batch // workers
    return [m for m in range(per_worker, 0, -1) if per_worker % m == 0]


def cpu_choice(global_batch: int, workers: int) -> int:
    return next(m for m in candidates(global_batch, workers) if m <= CPU_MICRO_BATCH)


def largest_fitting(sizes: list[int], peak_bytes: Callable[[int], int], budget: int) -> int | None:
    """The first of `sizes` (largest first) whose `peak_bytes(size)` stays within `budget`; a size
    whose probe raises torch.OutOfMemoryError does not fit. None if none does."""
    for size in sizes:
        try:
            if peak_bytes(size) <= budget:
                return size
        except torch.OutOfMemoryError:
            pass  # the exception (and the frames holding the probe's tensors) is gone after this block
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return None


def probe_rows(seq_len: int, vocab_size: int, rows: int = PROBE_ROWS) -> dict:
    """`rows` distinct contract rows (a dict of columns) of exactly `seq_len` codepoints, CLS
    random letters SEP, each with as many predictions as the contract allows and the text holds.
    Made from the contract alone, since training/ imports nothing of the pipeline: the batch
    builder pads every row to the same shapes, and the model's memory depends on those shapes
    only, not on the letters or on which positions are chosen."""
    rng = seeds.probe_rng()
    chars = np.arange(1, seq_len - 1, 2)[:schema.MAX_CHAR_PREDICTIONS].tolist()  # every other character
    starts = np.arange(1, seq_len - 2, 3)[:schema.MAX_SUBWORD_PREDICTIONS]  # two-character spans, apart
    actions = np.resize([schema.ACTION_MASK, schema.ACTION_RANDOM, schema.ACTION_KEEP], len(starts))
    spans = len(starts)

    def letters(n):
        return rng.integers(ord("a"), ord("z") + 1, size=n).tolist()

    return {
        "example_id": [f"probe-{i}" for i in range(rows)],
        "codepoints": [[schema.CLS, *letters(seq_len - 2), schema.SEP] for _ in range(rows)],
        "segment_ids": [[0] * seq_len] * rows,
        "sop_label": [schema.SOP_NO_PAIR] * rows,
        "char_mask_positions": [chars] * rows,
        "subword_starts": [starts.tolist()] * rows,
        "subword_lengths": [[2] * spans] * rows,
        "subword_ids": [rng.integers(0, vocab_size, size=spans).tolist() for _ in range(rows)],
        "subword_predict_offsets": [[0] * spans] * rows,
        "subword_actions": [actions.tolist()] * rows,
        "subword_replacements": [letters(2 * int((actions == schema.ACTION_RANDOM).sum())) for _ in range(rows)],
    }


def probe_batch(model_cfg, objective: str, seq_len: int, size: int) -> dict:
    """`size` full-length examples (PROBE_ROWS distinct ones, tiled) as the input pipeline builds them."""
    from training.batch import build_batch

    rows = probe_rows(seq_len, model_cfg.num_subword_vocab or 1000)
    batch = build_batch(rows, seq_len, objective, num_hash_buckets=model_cfg.num_hash_buckets)
    reps = -(-size // PROBE_ROWS)
    return {k: v.repeat(reps, *[1] * (v.dim() - 1))[:size] for k, v in batch.items()}


def gpu_probe(model, cfg, model_cfg, device) -> Callable[[int], int]:
    """peak_bytes(size) of a forward and backward of a copy of `model` on `device` (on a CPU,
    which has no peak to read, 0: the probe still runs, for tests)."""
    from training.train.engine import autocast

    probe = copy.deepcopy(model).to(device)
    probe.train()

    def peak_bytes(size: int) -> int:
        batch = {k: v.to(device) for k, v in probe_batch(model_cfg, cfg.train.objective, cfg.data.seq_len,
                                                          size).items()}
        on_gpu = torch.device(device).type == "cuda"
        if on_gpu:
            torch.cuda.reset_peak_memory_stats(device)
        try:
            with autocast(cfg):
                loss = probe(batch).loss
            loss.backward()
            return torch.cuda.max_memory_allocated(device) if on_gpu else 0
        finally:
            probe.zero_grad(set_to_none=True)

    return peak_bytes


def state_bytes(model, cfg, world: int) -> int:
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return params * STATE_BYTES_PER_PARAM // (world if cfg.parallel.zero_stage >= 1 else 1)


def with_micro_batch(cfg, micro: int):
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, micro_batch=micro))


def choose_micro_batch(cfg, model, model_cfg, world: int, rank: int, device):
    """`cfg` with train.micro_batch chosen (module docstring); on GPU a collective (every rank
    calls it). Rank 0 records the choice in OUTPUT/config.yaml."""
    import torch.distributed as dist

    sizes = candidates(cfg.train.global_batch, world)
    if cfg.parallel.device != "cuda":
        micro, how = cpu_choice(cfg.train.global_batch, world), f"CPU: the largest divisor up to {CPU_MICRO_BATCH}"
    else:
        total = torch.cuda.get_device_properties(device).total_memory
        budget = int(total * MEMORY_FRACTION) - state_bytes(model, cfg, world)
        found = largest_fitting(sizes, gpu_probe(model, cfg, model_cfg, device), budget) or 0
        torch.cuda.empty_cache()
        agreed = torch.tensor([found], dtype=torch.int64, device=device)
        dist.all_reduce(agreed, op=dist.ReduceOp.MIN)  # sync point: the smallest GPU decides
        micro = int(agreed.item())
        if not micro:
            raise failures.OutOfMemory(
                f"rank {rank}, before the first step: --micro-batch auto found no micro batch that fits: even 1 "
                f"example of data.seq_len {cfg.data.seq_len} (with the optimizer state, within "
                f"{MEMORY_FRACTION:.0%} of {total / 2**30:.1f} GiB) does not on some worker "
                f"({failures.describe(cfg)}). Set --set model.gradient_checkpointing=true, --zero-stage 3, or a "
                "shorter --seq-len")
        how = f"the largest that fits {MEMORY_FRACTION:.0%} of {total / 2**30:.1f} GiB with the optimizer state"
    chosen = with_micro_batch(cfg, micro)
    if rank == 0:
        sys.stderr.write(f"canine pretrain: --micro-batch auto: {micro} per worker x "
                         f"{chosen.accumulation_steps(world)} accumulation steps x {world} workers = global batch "
                         f"{cfg.train.global_batch} ({how})\n")
        record(chosen)
    return chosen


def record(cfg) -> None:
    """Save the chosen micro batch with the run (OUTPUT/config.yaml, which the driver wrote)."""
    from contract.files import atomic_write
    from training.train import config, rundir

    atomic_write(rundir.join(cfg.output, rundir.CONFIG), config.to_yaml(cfg).encode("utf-8"))
