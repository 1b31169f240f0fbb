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

import dataclasses
import tempfile
import time

import torch

from contract.files import atomic_write
from training import seeds
from training.train import autobatch, checkpoint, config, data, failures, guard, init, metrics, rundir, stream, tracking
from training.train.engine import global_grad_norm, wrap


class _Profiler:
    """torch.profiler over `log.profile_steps` steps after 3 warm-up steps (compilation, caches);
    the table of ops by self time goes to OUTPUT/profile.txt."""

    WARMUP = 3

    def __init__(self, cfg, first_step: int, stop: int, on_gpu: bool):
        self.first = first_step + self.WARMUP
        self.last = min(self.first + cfg.log.profile_steps, stop)  # a shorter run: what it has
        self.url, self.on_gpu, self.prof = rundir.join(cfg.output, rundir.PROFILE), on_gpu, None

    def before(self, step: int) -> None:
        if step == self.first:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.on_gpu else [])
            self.prof = profile(activities=activities)
            self.prof.start()

    def after(self, step: int) -> None:
        if self.prof is not None and step == self.last:
            self.prof.stop()
            # On a GPU also by host time: a step the host cannot launch fast enough shows there, not
            # in the device table (a GPU busy for less than the step's wall time).
            keys = (["self_device_time_total"] if self.on_gpu else []) + ["self_cpu_time_total"]
            averages = self.prof.key_averages()
            text = "".join(f"steps {self.first + 1}-{self.last}, ops by {key}\n"
                           f"{averages.table(sort_by=key, row_limit=40)}\n" for key in keys)
            atomic_write(self.url, text.encode())
            self.prof = None


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
    correct, SOP pairs]. The forward runs in the run's precision (the engine autocasts it), the
    backward outside it."""
    sums = torch.zeros(8, dtype=torch.float64, device=device)
    for i in range(accum):
        batch = {k: v.to(device, non_blocking=True) for k, v in train.next().items()}
        seeds.seed_dropout(seed, step, rank * accum + i)  # this worker's block: micro batches rank*accum+i
        out = engine(batch)  # in the run's precision: the engine's forward autocasts (engine.py)
        engine.backward(out.loss)
        engine.step()  # DeepSpeed only updates at the accumulation boundary
        sums += torch.cat([torch.stack([out.loss.detach().double(), out.correct.double(), out.count.double(),
                                        batch["attention_mask"].sum().double(),
                                        torch.tensor(len(batch["input_ids"]), dtype=torch.float64, device=device)]),
                           _sop_sums(out, device)])
    return sums


def _evaluate(engine, batches, device, cfg) -> dict:
    """Objective loss (weighted by predictions) and masked-prediction accuracy over all workers,
    the forward in the run's precision (the engine autocasts it)."""
    import torch.distributed as dist

    sums = torch.zeros(6, dtype=torch.float64, device=device)  # loss * count, correct, count; the same for SOP
    engine.eval()
    with torch.no_grad():
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


def save_and_report(engine, state: dict, shapes: dict, rank: int, log) -> None:
    """This rank's checkpoint of `state` (checkpoint.py), the metrics it covers made durable, and
    Ray Train told of it (a fine-tuning run's loop checkpoints the same way)."""
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
    is, for the driver to restart the workers from the last checkpoint (run.py `fit`)."""
    import ray.train

    at = {"config": loop_config["config"], "step": 0}  # where _train is (the step being trained), for messages
    try:
        _train(loop_config, at)
    except Exception as e:
        fatal = failures.fatal_error(e, at["config"], ray.train.get_context().get_world_rank(), at["step"])
        if fatal is None or fatal is e:
            raise
        raise fatal from e


@dataclasses.dataclass(kw_only=True)
class _Worker:
    """What a worker's set-up builds and its steps use (built by keyword: twenty fields, several of one type)."""

    cfg: object  # the resolved PretrainConfig (micro batch settled)
    rank: int
    world: int
    on_gpu: bool
    engine: object  # DeepSpeed's engine around the model
    device: torch.device
    dataset: object
    model_cfg: object
    shapes: dict
    flops_per_example: float
    faults: failures.Faults
    step_guard: guard.StepGuard
    train: stream.TrainStream
    state: dict  # step, epoch, rows, world, data_sha256: what a checkpoint saves
    stop: int  # the step this start ends at (train.stop_at_step or max_steps)
    accum: int
    peak: float | None  # the accelerator's peak FLOP/s, for MFU
    log: metrics.MetricsLog | None  # rank 0 only
    progress: object  # the driver's ProgressSink actor, or None
    profiler: _Profiler | None
    eval_data: list | None = None  # the validation batches, built at the first evaluation
    sent: object = None  # the last progress call, awaited at the end


def _train(loop_config: dict, at: dict) -> None:
    """Set-up, then each step and its record, then the consolidated weights."""
    w = _set_up(loop_config, at)
    w.engine.train()
    while w.state["step"] < w.stop:
        _record(w, _step(w, at))
    _finish(w)


def worker_context(cfg) -> tuple[int, int, bool]:
    """(rank, world size, on a GPU) of this Ray Train worker, its torch threads set and its GPU
    chosen before anything allocates (a fine-tuning run's loop starts the same way)."""
    import ray.train

    ctx = ray.train.get_context()
    on_gpu = cfg.parallel.device == "cuda"
    torch.set_num_threads(cfg.parallel.threads_per_worker or max(1, int(cfg.parallel.cpus_per_worker)))
    if on_gpu:
        import ray.train.torch

        torch.cuda.set_device(ray.train.torch.get_device())  # this worker's GPU, before anything allocates
        torch.backends.cuda.matmul.allow_tf32 = True
    return ctx.get_world_rank(), ctx.get_world_size(), on_gpu


def _set_up(loop_config: dict, at: dict) -> _Worker:
    """The model, DeepSpeed's engine, the restored state, the data stream and the sinks."""
    import ray.train

    from training.heads import CaninePretrainingModel

    cfg, progress = loop_config["config"], loop_config.get("progress")
    config.require_resolved(cfg)
    rank, world, on_gpu = worker_context(cfg)
    restored = ray.train.get_checkpoint()
    status(progress, rank, _setting_up(cfg, world, restored is not None))
    dataset = data.open_dataset(cfg.data.path)
    model_cfg = config.model_config(cfg)

    seeds.seed_all(cfg.train.seed)  # the same initial weights on every rank
    model = CaninePretrainingModel(model_cfg, cfg.train.objective)
    if restored is None and cfg.init.path:  # --init, the run's first start: the heads it lacks stay as drawn above
        from training.hf import subword_vocab_of

        init.load_into(model, cfg, subword_vocab_of(cfg.data.path) if cfg.train.objective == "subword" else None)
    shapes = checkpoint.model_shapes(model)
    flops_per_example = model.num_flops_per_example(cfg.data.seq_len)
    faults = failures.Faults(cfg.output, rank)
    faults.install(model)
    if not cfg.train.micro_batch:  # --micro-batch auto: settled before DeepSpeed's config needs it
        here = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
        cfg = at["config"] = autobatch.choose_micro_batch(cfg, model, model_cfg, world, rank, here)
    # Written by another worker count: an elastic resume, through the universal form if the
    # optimizer state is partitioned (checkpoint.py).
    universal = (restored is not None and checkpoint.saved_state(restored)["world"] != world
                 and checkpoint.resharded(cfg))
    engine = wrap(model, cfg, world, load_universal=universal)
    device = engine.device
    seeds.seed_worker(cfg.train.seed, rank)  # anything else drawing randomness differs per rank

    state = {"step": 0, "epoch": 0, "rows": 0, "world": world, "data_sha256": dataset.config_sha256}
    if restored is not None:
        if universal:
            checkpoint.make_universal(restored, rank)
        with checkpoint.rank_files(restored, rank, universal) as directory:
            state = checkpoint.restore(engine, directory, shapes, rank, world, dataset.config_sha256)
        state["world"] = world  # the next checkpoint is this count's
    step_guard = guard.StepGuard(engine, cfg, rank, state["step"])
    train = stream.TrainStream(dataset, cfg, rank, world, {"epoch": state["epoch"], "rows": state["rows"]},
                               num_hash_buckets=model_cfg.num_hash_buckets, device=str(device))
    tracker = tracking.Tracker.open(cfg, config.to_dict(cfg), state["step"]) if rank == 0 and cfg.log.mlflow else None
    log = metrics.MetricsLog(cfg.output, state["step"], cfg.log.tensorboard, tracker) if rank == 0 else None
    peak = metrics.peak_flops(torch.cuda.get_device_name(device), cfg.log.peak_tflops) if on_gpu else None
    t = cfg.train
    stop = min(t.max_steps, t.stop_at_step or t.max_steps)
    profiler = _Profiler(cfg, state["step"], stop, on_gpu) if rank == 0 and cfg.log.profile_steps else None
    status(progress, rank, "the model and DeepSpeed's engine are ready; reading the first batches (Ray tasks build "
                            "them on the cluster's CPUs) ...")
    return _Worker(cfg=cfg, rank=rank, world=world, on_gpu=on_gpu, engine=engine, device=device, dataset=dataset,
                   model_cfg=model_cfg, shapes=shapes, flops_per_example=flops_per_example, faults=faults,
                   step_guard=step_guard, train=train, state=state, stop=stop, accum=cfg.accumulation_steps(world),
                   peak=peak, log=log, progress=progress, profiler=profiler)


def status(progress, rank: int, text: str) -> None:
    """A status line of rank 0's, through the driver's ProgressSink (fire and forget): measured on
    the tiny run (2 cores), 20-40 s from the driver's start of Ray Train to here, 8-30 s of
    DeepSpeed's set-up and 5-9 s to the first batch (the input pipeline's Ray tasks start their
    processes) were one silent stretch before step 1."""
    if rank == 0 and progress is not None:
        progress.say.remote(text)


def _setting_up(cfg, world: int, restoring: bool) -> str:
    """What a worker's set-up will do, in the order it does it."""
    parts = ["building the model"]
    if cfg.init.path and not restoring:
        parts.append("loading the init weights")
    if not cfg.train.micro_batch:
        parts.append("choosing the micro batch (--micro-batch auto)")
    parts.append(f"initialising DeepSpeed (ZeRO-{cfg.parallel.zero_stage})")
    if restoring:
        parts.append("restoring the checkpoint")
    if cfg.log.mlflow:
        parts.append("opening the MLflow run")
    return f"{world} worker{'s' * (world != 1)} up; {', '.join(parts)} ..."


def _step(w: _Worker, at: dict) -> dict:
    """One optimizer step, and its evaluation when one is due -> the step's metrics record."""
    import torch.distributed as dist

    cfg, t, state = w.cfg, w.cfg.train, w.state
    if w.profiler is not None:
        w.profiler.before(state["step"])
    start, wait_before = time.perf_counter(), w.train.wait_s
    lr = float(w.engine.get_lr()[0])  # the rate this update uses (the schedule steps after it)
    at["step"] = state["step"] + 1
    w.faults.before_step(at["step"])
    w.step_guard.before(at["step"])
    sums = _train_step(w.engine, w.train, w.accum, w.device, t.seed, state["step"], w.rank, cfg)
    state["step"] += 1
    state["epoch"], state["rows"] = w.train.position["epoch"], w.train.position["rows"]
    w.faults.after_step(state["step"])
    gpu_mb = torch.cuda.max_memory_allocated(w.device) / 2**20 if w.on_gpu else 0.0
    peaks = torch.tensor([metrics.peak_rss_mb(), gpu_mb], dtype=torch.float64, device=w.device)
    dist.all_reduce(sums)  # sync point: the logged numbers are global means
    dist.all_reduce(peaks, op=dist.ReduceOp.MAX)  # the worst worker's memory
    seconds = time.perf_counter() - start
    loss, correct, count, chars, examples, *sop = sums.tolist()
    grad_norm = global_grad_norm(w.engine)
    record = {
        "step": state["step"], "epoch": state["epoch"], "loss": loss / (w.accum * w.world),
        "accuracy": correct / max(count, 1.0), "lr": lr,
        "grad_norm": None if grad_norm is None else float(grad_norm),
        "examples_per_s": examples / seconds, "chars_per_s": chars / seconds,
        "data_wait_fraction": (w.train.wait_s - wait_before) / seconds, "step_s": seconds,
        "peak_rss_mb": peaks[0].item(), **_sop_record(*sop),
    }
    if w.on_gpu:
        record["gpu_peak_mb"] = peaks[1].item()
    if w.peak:
        record["mfu"] = w.flops_per_example * examples / seconds / (w.peak * w.world)
    if (t.eval_every and state["step"] % t.eval_every == 0) or state["step"] == t.max_steps:
        if w.eval_data is None:
            w.eval_data = stream.eval_batches(w.dataset, cfg, w.rank, w.world, w.model_cfg.num_hash_buckets)
        record.update(_evaluate(w.engine, w.eval_data, w.device, cfg))
    return record


def _record(w: _Worker, record: dict) -> None:
    """Log the step (metrics.jsonl, TensorBoard, the driver's console), let the guard judge it,
    and checkpoint when one is due."""
    if w.log is not None:
        w.log.log(record)
        if w.progress is not None and metrics.on_console(record, w.cfg.log.console_every, w.cfg.train.max_steps):
            w.sent = w.progress.put.remote(record)  # fire and forget: the step does not wait for it
    w.step_guard.after(record["step"], record["grad_norm"], record["lr"], record["loss"])  # logged first, then stopped
    if w.profiler is not None:
        w.profiler.after(record["step"])
    if record["step"] % w.cfg.checkpoint.every == 0 or record["step"] == w.stop:
        save_and_report(w.engine, w.state, w.shapes, w.rank, w.log)


def _finish(w: _Worker) -> None:
    """After the last step of this start: the last console lines, and after the run's last step
    the consolidated fp32 weights (a collective: every rank takes part)."""
    import ray

    w.train.close()
    if w.sent is not None:
        try:
            ray.get(w.sent)  # once: the last lines reach the driver before this worker exits
        except ray.exceptions.RayActorError:  # the driver's node is gone: progress lines are not the run
            pass
    if w.state["step"] >= w.cfg.train.max_steps:
        weights = checkpoint.gather_fp32(w.engine, w.shapes, w.rank)
        if w.rank == 0:
            checkpoint.save_consolidated(weights, rundir.join(w.cfg.output, rundir.CONSOLIDATED))
    if w.log is not None:
        w.log.close()
