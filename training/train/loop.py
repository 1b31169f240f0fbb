"""The Ray Train worker function: build the model, wrap it with DeepSpeed, train, evaluate,
checkpoint, and at the end gather the fp32 weights.

Runs once per worker (rank) inside a Ray Train worker group that already holds a torch.distributed
process group (gloo on CPU, NCCL on GPU). Sync points per step, besides DeepSpeed's gradient
reductions: two small all-reduces (the logged sums; the memory peaks) and reading them back.
An error a restart cannot fix leaves a worker as a failures.FatalError (failures.py); the guard
(guard.py) checks the first steps of every start; `--micro-batch auto` is settled before
DeepSpeed wraps the model (autobatch.py). CANINE_FAULT_STEP / CANINE_FAULT_KIND inject faults
for tests (failures.Faults: kill rank 1, an out-of-memory, zero or NaN gradients).
"""

import random
import tempfile
import time

import numpy as np
import torch

from pipeline import contract
from training.train import autobatch, checkpoint, config, data, failures, guard, metrics, stream
from training.train.engine import autocast, global_grad_norm, wrap
from training.train.failures import FAULT_ENV, FAULT_MARKER  # noqa: F401 (importable from here as before)

CONSOLIDATED = "final/model_fp32.pt"


def seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


class _Profiler:
    """torch.profiler over `log.profile_steps` steps after 3 warm-up steps (compilation, caches);
    the table of ops by self time goes to OUTPUT/profile.txt."""

    WARMUP = 3

    def __init__(self, cfg, first_step: int, stop: int, on_gpu: bool):
        self.first = first_step + self.WARMUP
        self.last = min(self.first + cfg.log.profile_steps, stop)  # a shorter run: what it has
        self.url, self.on_gpu, self.prof = data.join(cfg.output, "profile.txt"), on_gpu, None

    def before(self, step: int) -> None:
        if step == self.first:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.on_gpu else [])
            self.prof = profile(activities=activities)
            self.prof.start()

    def after(self, step: int) -> None:
        if self.prof is not None and step == self.last:
            self.prof.stop()
            key = "self_device_time_total" if self.on_gpu else "self_cpu_time_total"
            table = self.prof.key_averages().table(sort_by=key, row_limit=40)
            contract.atomic_write(self.url, f"steps {self.first + 1}-{self.last}, ops by {key}\n{table}\n".encode())
            self.prof = None


def dropout_seed(seed: int, step: int, micro: int) -> int:
    """The generator seed of micro batch `micro` (its index in the global batch) of optimizer step
    `step`: dropout depends on which examples a forward sees, not on which worker runs it, so a
    run resumed on another worker count draws the same masks (elastic determinism)."""
    return int(np.random.SeedSequence([seed, step, micro]).generate_state(1, np.uint64)[0] >> 1)


def _sop_sums(out, device) -> torch.Tensor:
    """[SOP loss x pairs, correct, pairs] of one forward; zeros without the SOP head or pairs."""
    if out.sop_loss is None:
        return torch.zeros(3, dtype=torch.float64, device=device)
    return torch.stack([out.sop_loss.double() * out.sop_count, out.sop_correct.double(), out.sop_count.double()])


def _sop_record(loss_x_count: float, correct: float, count: float, prefix: str = "") -> dict:
    """The sentence-order figures (ALBERT SOP) of a step or an evaluation, where it had pairs."""
    if not count:
        return {}
    return {f"{prefix}sop_loss": loss_x_count / count, f"{prefix}sop_accuracy": correct / count}


def _train_step(engine, train, accum: int, device, seed: int, step: int, rank: int, cfg) -> torch.Tensor:
    """Forward/backward over `accum` micro batches (DeepSpeed updates at the last one); returns
    this worker's sums of [loss, correct, count, characters, examples, SOP loss x pairs, SOP
    correct, SOP pairs]. The forward runs in the run's precision (engine.autocast), the backward
    outside it."""
    sums = torch.zeros(8, dtype=torch.float64, device=device)
    for i in range(accum):
        batch = {k: v.to(device, non_blocking=True) for k, v in train.next().items()}
        torch.manual_seed(dropout_seed(seed, step, rank * accum + i))  # this worker's block: micro batches rank*accum+i
        with autocast(cfg):
            out = engine(batch)
        engine.backward(out.loss)
        engine.step()  # DeepSpeed only updates at the accumulation boundary
        sums += torch.cat([torch.stack([out.loss.detach().double(), out.correct.double(), out.count.double(),
                                        batch["attention_mask"].sum().double(),
                                        torch.tensor(len(batch["input_ids"]), dtype=torch.float64, device=device)]),
                           _sop_sums(out, device)])
    return sums


def _evaluate(engine, batches, device, cfg) -> dict:
    """Objective loss (weighted by predictions) and masked-prediction accuracy over all workers,
    the forward in the run's precision (engine.autocast)."""
    import torch.distributed as dist

    sums = torch.zeros(6, dtype=torch.float64, device=device)  # loss * count, correct, count; the same for SOP
    engine.eval()
    with torch.no_grad(), autocast(cfg):
        for batch in batches:
            out = engine({k: v.to(device, non_blocking=True) for k, v in batch.items()})
            sums += torch.cat([torch.stack([out.objective_loss.double() * out.count, out.correct.double(),
                                            out.count.double()]), _sop_sums(out, device)])
    engine.train()
    dist.all_reduce(sums)
    loss_x_count, correct, count, *sop = sums.tolist()
    if count == 0:  # a validation split too small to give every worker an example
        return {}
    return {"eval_loss": loss_x_count / max(count, 1.0), "eval_accuracy": correct / max(count, 1.0),
            "eval_predictions": int(count), **_sop_record(*sop, prefix="eval_")}


def _save_and_report(engine, state: dict, shapes: dict, rank: int, log) -> None:
    import ray.train

    with tempfile.TemporaryDirectory(prefix="canine-ckpt-") as directory:
        checkpoint.save(engine, directory, state, shapes, rank)
        if log is not None:
            log.sync()
        ray.train.report({"step": state["step"]}, checkpoint=ray.train.Checkpoint.from_directory(directory),
                         checkpoint_dir_name=f"checkpoint_{checkpoint.tag(state['step'])}")


def train_loop_per_worker(loop_config: dict) -> None:
    """loop_config: {"config": the resolved PretrainConfig (config.resolve), "progress": the
    driver's metrics.ProgressSink actor (or None)}. An error that a restart would meet again
    leaves as a failures.FatalError naming the rank, the step and what to do; any other as it
    is, for the driver to restart the workers from the last checkpoint (run.py `_fit`)."""
    import ray.train

    at = {"config": loop_config["config"], "step": 0}  # where _train is (the step being trained), for messages
    try:
        _train(loop_config, at)
    except Exception as e:
        fatal = failures.fatal_error(e, at["config"], ray.train.get_context().get_world_rank(), at["step"])
        if fatal is None or fatal is e:
            raise
        raise fatal from e


def _train(loop_config: dict, at: dict) -> None:
    import ray
    import ray.train
    import torch.distributed as dist

    from training.heads import CaninePretrainingModel

    cfg, progress = loop_config["config"], loop_config.get("progress")
    config.require_resolved(cfg)
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    on_gpu = cfg.parallel.device == "cuda"
    torch.set_num_threads(cfg.parallel.threads_per_worker or max(1, int(cfg.parallel.cpus_per_worker)))
    if on_gpu:
        import ray.train.torch

        torch.cuda.set_device(ray.train.torch.get_device())  # this worker's GPU, before anything allocates
        torch.backends.cuda.matmul.allow_tf32 = True
    manifest = data.read_manifest(cfg.data.path)
    model_cfg = config.model_config(cfg)
    seq_len = cfg.data.seq_len

    seed_all(cfg.train.seed)  # the same initial weights on every rank
    model = CaninePretrainingModel(model_cfg, cfg.train.objective)
    shapes = checkpoint.model_shapes(model)
    flops_per_example = model.num_flops_per_example(seq_len)
    faults = failures.Faults(cfg.output, rank)
    faults.install(model)
    if not cfg.train.micro_batch:  # --micro-batch auto: settled before DeepSpeed's config needs it
        here = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
        cfg = at["config"] = autobatch.resolve(cfg, model, model_cfg, world, rank, here)
    restored = ray.train.get_checkpoint()
    # Written by another worker count: an elastic resume, through the universal form if the
    # optimizer state is partitioned (checkpoint.py).
    universal = (restored is not None and checkpoint.saved_state(restored)["world"] != world
                 and checkpoint.resharded(cfg))
    engine = wrap(model, cfg, world, load_universal=universal)
    device = engine.device
    seed_all(cfg.train.seed * 1_000_003 + rank + 1)  # anything else drawing randomness differs per rank

    state = {"step": 0, "epoch": 0, "rows": 0, "world": world, "data_sha256": manifest.config_sha256}
    if restored is not None:
        if universal:
            checkpoint.make_universal(restored, rank)
        with checkpoint.rank_files(restored, rank, universal) as directory:
            state = checkpoint.restore(engine, directory, shapes, rank, world, manifest.config_sha256)
        state["world"] = world  # the next checkpoint is this count's
    step_guard = guard.StepGuard(engine, cfg, rank, state["step"])
    train = stream.TrainStream(manifest, cfg, rank, world, {"epoch": state["epoch"], "rows": state["rows"]},
                               num_hash_buckets=model_cfg.num_hash_buckets, seq_len=seq_len, device=str(device))
    eval_data = None
    log, sent = None, None
    if rank == 0:
        log = metrics.MetricsLog(cfg.output, state["step"], cfg.log.tensorboard)
    peak = metrics.peak_flops(torch.cuda.get_device_name(device), cfg.log.peak_tflops) if on_gpu else None
    t, accum = cfg.train, cfg.accumulation_steps(world)
    stop = min(t.max_steps, t.stop_at_step or t.max_steps)

    engine.train()
    profiler = _Profiler(cfg, state["step"], stop, on_gpu) if rank == 0 and cfg.log.profile_steps else None
    while state["step"] < stop:
        if profiler is not None:
            profiler.before(state["step"])
        start, wait_before = time.perf_counter(), train.wait_s
        lr = float(engine.get_lr()[0])  # the rate this update uses (the schedule steps after it)
        at["step"] = state["step"] + 1
        faults.before_step(at["step"])
        step_guard.before(at["step"])
        sums = _train_step(engine, train, accum, device, t.seed, state["step"], rank, cfg)
        state["step"] += 1
        state["epoch"], state["rows"] = train.position["epoch"], train.position["rows"]
        faults.after_step(state["step"])
        gpu_mb = torch.cuda.max_memory_allocated(device) / 2**20 if on_gpu else 0.0
        peaks = torch.tensor([metrics.peak_rss_mb(), gpu_mb], dtype=torch.float64, device=device)
        dist.all_reduce(sums)  # sync point: the logged numbers are global means
        dist.all_reduce(peaks, op=dist.ReduceOp.MAX)  # the worst worker's memory
        seconds = time.perf_counter() - start
        loss, correct, count, chars, examples, *sop = sums.tolist()
        grad_norm = global_grad_norm(engine)
        record = {
            "step": state["step"], "epoch": state["epoch"], "loss": loss / (accum * world),
            "accuracy": correct / max(count, 1.0), "lr": lr,
            "grad_norm": None if grad_norm is None else float(grad_norm),
            "examples_per_s": examples / seconds, "chars_per_s": chars / seconds,
            "data_wait_fraction": (train.wait_s - wait_before) / seconds, "step_s": seconds,
            "peak_rss_mb": peaks[0].item(), **_sop_record(*sop),
        }
        if on_gpu:
            record["gpu_peak_mb"] = peaks[1].item()
        if peak:
            record["mfu"] = flops_per_example * examples / seconds / (peak * world)
        if (t.eval_every and state["step"] % t.eval_every == 0) or state["step"] == t.max_steps:
            if eval_data is None:
                eval_data = stream.eval_batches(manifest, cfg, rank, world, model_cfg.num_hash_buckets, seq_len)
            record.update(_evaluate(engine, eval_data, device, cfg))
        if log is not None:
            log.log(record)
            if progress is not None and metrics.on_console(record, cfg.log.console_every, t.max_steps):
                sent = progress.put.remote(record)  # fire and forget: the step does not wait for it
        step_guard.after(state["step"], record["grad_norm"], lr, record["loss"])  # logged first, then stopped
        if profiler is not None:
            profiler.after(state["step"])
        if state["step"] % cfg.checkpoint.every == 0 or state["step"] == stop:
            _save_and_report(engine, state, shapes, rank, log)

    train.close()
    if sent is not None:
        try:
            ray.get(sent)  # once: the last lines reach the driver before this worker exits
        except ray.exceptions.RayActorError:  # the driver's node is gone: progress lines are not the run
            pass
    if state["step"] >= t.max_steps:
        weights = checkpoint.gather_fp32(engine, shapes, rank)  # collective: every rank takes part
        if rank == 0:
            checkpoint.save_consolidated(weights, data.join(cfg.output, CONSOLIDATED))
    if log is not None:
        log.close()
