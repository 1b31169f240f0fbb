"""Errors a restart cannot fix, how a worker names them, and how the driver tells them from the
ones a restart can fix; plus the test-only fault injection of the workers.

A worker error that a restart from the last checkpoint would hit again (a CUDA out-of-memory, a
config the data cannot serve, a corrupt shard, a run that trains nothing or diverged) becomes a
`FatalError` in the worker (`fatal_error`), one line that names what happened, where, the
configuration and what to do. The driver (run.py `fit`) stops the run at its first occurrence
and `canine pretrain` prints that line and exits 2. Everything else (a worker process or node that
died, an unknown error) is restarted from the last checkpoint up to `parallel.max_failures` times.

Why the driver restarts, not Ray Train: Ray Train V2 (2.60) retries every WorkerGroupError alike
up to FailureConfig.max_failures (DefaultFailurePolicy._is_retryable_error,
ray/train/v2/_internal/execution/failure_handling/default.py:82) and takes no other policy
(DataParallelTrainer.fit builds it with create_failure_policy, api/data_parallel_trainer.py:183),
so an OOM was retried for minutes before the run failed. The driver gives Ray max_failures=0 and
runs its own loop around `fit()`, re-creating the trainer with the same RunConfig(storage_path,
name), which resumes from the run's last checkpoint. What it relies on, all public API: fit()
raises a WorkerGroupError (api/exceptions.py:18) whose `worker_failures` maps each failed rank to
the exception its train function raised, the object itself (unwrapped from Ray's
UserExceptionWithTraceback in WorkerGroupPollStatus.errors, _internal/execution/worker_group/
poll.py:84), pickled from the worker to the controller to the driver: so `FatalError` keeps its
class (one message argument, importable everywhere: the project is installed). A SIGKILLed
worker arrives as Ray's WorkerHealthCheckFailedError (worker_group.py:834), a RuntimeError of
gloo / NCCL in its peers: neither is a FatalError, both are restarted. Preemptions stay Ray's
own (FailureConfig.max_preemption_failures, unlimited by default; default.py:115).

Fault injection (tests of the above, through the real trainer), read once per worker:
CANINE_FAULT_STEP=k with CANINE_FAULT_KIND (default kill) =
    kill       rank 1 SIGKILLs itself once, after step k (a marker in OUTPUT keeps it from firing
               again after the restart)
    oom        rank 1 raises torch.OutOfMemoryError in step k, at every start (as a real one would)
    zero_grad  every rank's gradients are exactly zero from step k on (the compiled-model bug
               the guard, guard.py, exists for)
    nan_grad   every rank's gradients are NaN in step k
Each firing appends a line to OUTPUT/.fault_injected (rank 0's for zero_grad / nan_grad), so a
test can count the starts that reached it.
"""

import os
import signal
import sys

import fsspec

FAULT_ENV = "CANINE_FAULT_STEP"
FAULT_KIND_ENV = "CANINE_FAULT_KIND"
FAULT_KINDS = ("kill", "oom", "zero_grad", "nan_grad")
FAULT_MARKER = ".fault_injected"  # in OUTPUT


class FatalError(RuntimeError):
    """A worker error that a restart would meet again; its message is the line the user sees."""


class OutOfMemory(FatalError):
    """The accelerator ran out of memory (torch.OutOfMemoryError)."""


class BadInput(FatalError):
    """A config the data or the model cannot serve, or data that breaks the shard contract."""


class NotLearning(FatalError):
    """The guard (guard.py): zero or non-finite gradients, or an update that moved no weight."""


def describe(cfg) -> str:
    """The configuration in a message: device, precision, ZeRO stage, compile, workers, batch."""
    p, t = cfg.parallel, cfg.train
    micro = "auto" if not t.micro_batch else str(t.micro_batch)
    return (f"{p.device}, {p.precision}, ZeRO-{p.zero_stage}, compile {'on' if p.compile else 'off'}, "
            f"{p.workers} workers, micro batch {micro}, global batch {t.global_batch}")


def _smaller_micro_batches(cfg) -> list[int]:
    """Micro batches below the current one that keep the global batch (divisors of global / workers)."""
    per_worker = cfg.train.global_batch // max(1, cfg.parallel.workers)
    return [m for m in range(cfg.train.micro_batch - 1, 0, -1) if per_worker % m == 0]


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def oom_message(cfg, rank: int, step: int, device=None) -> str:
    """What an out-of-memory tells the user: the micro batch, the GPU's memory, what to set."""
    import torch

    where = f"rank {rank}, step {step}" if step else f"rank {rank}, before the first step"
    memory = ""
    if cfg.parallel.device == "cuda" and torch.cuda.is_available():
        device = torch.cuda.current_device() if device is None else device
        props = torch.cuda.get_device_properties(device)
        memory = (f" on a {props.name} of {_gib(props.total_memory)} (peak allocated "
                  f"{_gib(torch.cuda.max_memory_allocated(device))})")
    smaller = _smaller_micro_batches(cfg)
    hint = f"a smaller --micro-batch ({', '.join(map(str, smaller[:3]))}: the global batch is kept by " \
           "accumulation), " if smaller else ""
    length = (f"data.seq_len {cfg.data.seq_len}" if hasattr(cfg, "data") else
              f"task.max_length {cfg.task.max_length}")  # a fine-tuning run's windows (training/finetune)
    return (f"{where}: out of memory with train.micro_batch {cfg.train.micro_batch} x {length}{memory} "
            f"({describe(cfg)}); a restart would run out the same way. Set "
            f"{hint}--micro-batch auto (the largest that fits), or --set model.gradient_checkpointing=true")


def fatal_error(error: BaseException, cfg, rank: int, step: int) -> FatalError | None:
    """The FatalError a worker raises for `error` (met at `step`, 0: before the first), or None
    when a restart may fix it. Ours (the guard's) pass as they are; an out-of-memory anywhere;
    ValueError / FileNotFoundError, the kinds our code raises for a bad config or bad data (also
    from the input pipeline's Ray tasks, which ray.get re-raises as a RayTaskError that is an
    instance of the cause's class)."""
    import torch

    if isinstance(error, FatalError):
        return error
    if isinstance(error, torch.OutOfMemoryError):
        return OutOfMemory(oom_message(cfg, rank, step))
    if isinstance(error, (ValueError, FileNotFoundError)):
        cause = getattr(error, "cause", None) or error  # a RayTaskError's original exception
        where = f"rank {rank}, step {step}" if step else f"rank {rank}, before the first step"
        return BadInput(f"{where}: {_in_words(cause)} ({describe(cfg)}); a restart would fail the same way")
    return None


def _in_words(error: BaseException) -> str:
    """The error's message, or, for a FileNotFoundError that says only a path (gcsfs, s3fs and
    fsspec raise FileNotFoundError(path)), what it means and what to do."""
    text = str(error).strip()
    if not isinstance(error, FileNotFoundError) or (len(text.split()) > 1 and not error.filename):
        return text
    path = error.filename or text or "a file"
    return (f"{path}: no such file or object, read by the workers; check that --data's files are all there and "
            "that the workers' credentials can read them")


def fatal_of(error: BaseException) -> FatalError | None:
    """The driver's side: the FatalError of the lowest rank among a failed fit()'s worker errors."""
    failures = getattr(error, "worker_failures", None) or {}
    for rank in sorted(failures):
        if isinstance(failures[rank], FatalError):
            return failures[rank]
    return None


def summary(error: BaseException) -> str:
    """One line for a restart: each failed rank and the first line of its error."""
    failures = getattr(error, "worker_failures", None)
    if not failures:
        return f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200] if str(error).strip() else ''}"
    parts = []
    for rank in sorted(failures):
        lines = [line.strip() for line in str(failures[rank]).splitlines() if line.strip()]
        parts.append(f"rank {rank}: {type(failures[rank]).__name__}" + (f": {lines[0][:160]}" if lines else ""))
    return "; ".join(parts)


class Faults:
    """The worker's injected faults (module docstring), from the environment."""

    def __init__(self, output: str, rank: int):
        self.step = int(os.environ.get(FAULT_ENV, "0") or 0)
        self.kind = os.environ.get(FAULT_KIND_ENV, "") or "kill"
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"{FAULT_KIND_ENV}={self.kind!r}: not one of {', '.join(FAULT_KINDS)}")
        self.output, self.rank = output, rank
        self.training = 0  # the step being trained (1-based), for the gradient hooks

    def _mark(self, line: str) -> None:
        from training.train.rundir import join

        fs, path = fsspec.core.url_to_fs(join(self.output, FAULT_MARKER))
        old = fs.cat_file(path) if fs.exists(path) else b""  # read and rewrite: object stores cannot append
        fs.pipe_file(path, old + (line + "\n").encode())

    def install(self, model) -> None:
        """Gradient hooks of zero_grad / nan_grad on the plain model, before DeepSpeed wraps it (a
        tensor hook runs before the gradient is accumulated, under every ZeRO stage)."""
        if not self.step or self.kind not in ("zero_grad", "nan_grad"):
            return
        import torch

        def hook(grad):
            if self.kind == "zero_grad" and self.training >= self.step:
                return torch.zeros_like(grad)
            if self.kind == "nan_grad" and self.training == self.step:
                return torch.full_like(grad, float("nan"))
            return grad

        for p in model.parameters():
            if p.requires_grad:
                p.register_hook(hook)
        if self.rank == 0:
            self._mark(f"{self.kind} hooks installed (step {self.step})")

    def before_step(self, step: int) -> None:
        """At the start of (1-based) `step`."""
        self.training = step
        if self.kind == "oom" and step == self.step and self.rank == 1:
            import torch

            self._mark(f"rank 1 ran out of memory at step {step}")
            raise torch.OutOfMemoryError(f"CUDA out of memory (injected by {FAULT_ENV}={step} {FAULT_KIND_ENV}=oom)")

    def after_step(self, step: int) -> None:
        """After (1-based) `step`: the kill, once per output."""
        if self.kind != "kill" or step != self.step or self.rank != 1:
            return
        from training.train.rundir import join

        fs, path = fsspec.core.url_to_fs(join(self.output, FAULT_MARKER))
        if fs.exists(path):
            return
        self._mark(f"rank 1 killed itself at step {step}")
        sys.stderr.write(f"[fault injection] rank 1 kills its process at step {step}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
