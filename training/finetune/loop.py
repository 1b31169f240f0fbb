"""The Ray Train worker function of a fine-tuning run: the classifier on the (init) encoder,
wrapped by the same DeepSpeed engine as pretraining (train/engine.py), trained on the task's
windows (data.py), evaluated on dev and test, checkpointed for an exact resume.

Selection: best on dev, as BERT-style fine-tuning reports (Devlin et al. 2019 §4; MasakhaNER's
baselines report the test F1 of the best-dev checkpoint): every evaluation scores dev and test
with conlleval's rules (score.py); the weights of the evaluation with the highest dev F1 (the
earlier one on a tie) are kept in OUTPUT/best/ with their predictions, and its test figures are the
run's. No early stopping: the schedule runs to max_steps (a fixed budget compares recipes). Without
dev files the last evaluation is kept. Scoring the test set at each evaluation, rather than once
with the kept weights, costs an evaluation pass and needs no weights reloaded into a ZeRO engine.

Sync points per step, besides DeepSpeed's reductions: one all-reduce of the logged sums; per
evaluation one all_gather_object of the predictions and, when dev improves, the fp32 gather.
"""

import dataclasses
import json
import time

import torch

from contract.files import atomic_write
from training import seeds
from training.finetune import config, data, tasks
from training.train import checkpoint, failures, guard, metrics, rundir, tracking
from training.train.engine import global_grad_norm, wrap
from training.train.loop import save_and_report, status, worker_context


def train_loop_per_worker(loop_config: dict) -> None:
    """loop_config: {"config": the resolved FinetuneConfig, "progress": the driver's ProgressSink
    actor or None}. Errors as pretraining's loop: a FatalError when a restart would meet it again."""
    import ray.train

    at = {"config": loop_config["config"], "step": 0}
    try:
        _train(loop_config, at)
    except Exception as e:
        fatal = failures.fatal_error(e, at["config"], ray.train.get_context().get_world_rank(), at["step"])
        if fatal is None or fatal is e:
            raise
        raise fatal from e


@dataclasses.dataclass(kw_only=True)
class _Worker:
    cfg: object
    rank: int
    world: int
    on_gpu: bool
    engine: object
    device: torch.device
    tk: object  # the task (tasks.py): how its data is read, batched, predicted and scored
    task: object  # its data on this worker
    shapes: dict
    state: dict  # step, world, data_sha256, best: what a checkpoint saves
    stop: int
    accum: int
    multiple: int  # windows are padded to whole molecules
    step_guard: guard.StepGuard
    faults: failures.Faults
    log: metrics.MetricsLog | None
    progress: object
    sent: object = None


def _train(loop_config: dict, at: dict) -> None:
    w = _set_up(loop_config, at)
    w.engine.train()
    while w.state["step"] < w.stop:
        _record(w, _step(w, at))
    _finish(w)


def _set_up(loop_config: dict, at: dict) -> _Worker:
    import ray.train

    cfg, progress = loop_config["config"], loop_config.get("progress")
    config.require_resolved(cfg)
    rank, world, on_gpu = worker_context(cfg)
    restored = ray.train.get_checkpoint()
    status(progress, rank, _setting_up(cfg, world, restored is not None))
    tk = tasks.of(cfg)
    task = tk.read(cfg)
    model_cfg = config.model_config(cfg)
    seeds.seed_all(cfg.train.seed)  # the same heads on every rank
    model = tk.model(model_cfg, cfg)
    if restored is None and cfg.init.path:  # the run's first start: the encoder from the init
        from training.finetune.run import load_init

        load_init(model, cfg)
    shapes = checkpoint.model_shapes(model)
    faults = failures.Faults(cfg.output, rank)  # CANINE_FAULT_STEP / _KIND, as pretraining's (tests)
    faults.install(model)
    universal = (restored is not None and checkpoint.saved_state(restored)["world"] != world
                 and checkpoint.resharded(cfg))
    engine = wrap(model, cfg, world, load_universal=universal)
    seeds.seed_worker(cfg.train.seed, rank)
    state = {"step": 0, "world": world, "data_sha256": task.sha256, "best": None}
    if restored is not None:
        if universal:
            checkpoint.make_universal(restored, rank)
        with checkpoint.rank_files(restored, rank, universal) as directory:
            state = checkpoint.restore(engine, directory, shapes, rank, world, task.sha256)
        state["world"] = world
    tracker = tracking.Tracker.open(cfg, config.to_dict(cfg), state["step"]) if rank == 0 and cfg.log.mlflow else None
    log = metrics.MetricsLog(cfg.output, state["step"], cfg.log.tensorboard, tracker) if rank == 0 else None
    t = cfg.train
    status(progress, rank, "the model and DeepSpeed's engine are ready; training ...")
    return _Worker(cfg=cfg, rank=rank, world=world, on_gpu=on_gpu, engine=engine, device=engine.device, tk=tk, task=task,
                   shapes=shapes, state=state, stop=min(t.max_steps, t.stop_at_step or t.max_steps),
                   accum=cfg.accumulation_steps(world), multiple=model_cfg.downsampling_rate,
                   step_guard=guard.StepGuard(engine, cfg, rank, state["step"]), faults=faults, log=log,
                   progress=progress)


def _setting_up(cfg, world: int, restoring: bool) -> str:
    parts = ["reading the task's files", "building the model"]
    if cfg.init.path and not restoring:
        parts.append("loading the init's encoder")
    parts.append(f"initialising DeepSpeed (ZeRO-{cfg.parallel.zero_stage})")
    if restoring:
        parts.append("restoring the checkpoint")
    if cfg.log.mlflow:
        parts.append("opening the MLflow run")
    return f"{world} worker{'s' * (world != 1)} up; {', '.join(parts)} ..."


def _to(batch: dict, device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _step(w: _Worker, at: dict) -> dict:
    """One optimizer step (and its evaluation when due) -> the step's metrics record."""
    import torch.distributed as dist

    t, state = w.cfg.train, w.state
    windows = w.tk.train_count(w.task)
    start = time.perf_counter()
    lr = float(w.engine.get_lr()[0])
    at["step"] = state["step"] + 1
    w.faults.before_step(at["step"])
    w.step_guard.before(at["step"])
    batch = data.step_windows(t.seed, state["step"], t.global_batch, windows)
    # data.py: the loss is the mean over the step's labelled units (NER's characters, TyDi's windows)
    scale = w.world * w.accum / max(1, w.tk.denominator(w.task, batch))
    sums = torch.zeros(5, dtype=torch.float64, device=w.device)  # loss sum, correct, count, characters, windows
    for i, micro in enumerate(data.rank_micro_batches(batch, w.rank, w.world, t.micro_batch)):
        inputs = _to(w.tk.train_batch(w.task, micro, w.multiple), w.device)
        seeds.seed_dropout(t.seed, state["step"], w.rank * w.accum + i)  # per micro batch, not per worker
        out = w.engine(inputs)
        w.engine.backward(out.loss_sum * scale)
        w.engine.step()
        loss_sum, correct, count = w.tk.sums(out, inputs)
        sums += torch.stack([loss_sum.double(), correct.double(), count.double(),
                             inputs["attention_mask"].sum().double(),
                             torch.tensor(float(len(micro)), dtype=torch.float64, device=w.device)])
    state["step"] += 1
    w.faults.after_step(state["step"])
    dist.all_reduce(sums)  # sync point: the logged figures are the step's over all workers
    seconds = time.perf_counter() - start
    loss, correct, count, chars, examples = sums.tolist()
    grad_norm = global_grad_norm(w.engine)
    record = {"step": state["step"], "epoch": data.epoch_of(state["step"], t.global_batch, windows),
              "loss": loss / max(count, 1.0), "accuracy": correct / max(count, 1.0), "lr": lr,
              "grad_norm": None if grad_norm is None else float(grad_norm), "examples_per_s": examples / seconds,
              "chars_per_s": chars / seconds, "data_wait_fraction": 0.0, "step_s": seconds,
              "peak_rss_mb": metrics.peak_rss_mb()}
    if state["step"] % t.eval_every == 0 or state["step"] == t.max_steps:
        record.update(_evaluate(w))
    return record


def _predict(w: _Worker, role: str) -> tuple[dict, object]:
    """Every window's result (the task's collect: NER's label ids, TyDi's best span), this
    worker's share of the fixed batches, then gathered; and the split's [loss sum, correct, count]."""
    import torch.distributed as dist

    mine, sums = {}, torch.zeros(3, dtype=torch.float64, device=w.device)
    w.engine.eval()
    with torch.no_grad():
        for indices, make in w.tk.eval_batches(w.task, role, w.cfg.train.micro_batch, w.rank, w.world):
            batch = make(w.multiple)
            meta = batch.pop("_meta", None)  # what the task keeps beside the tensors (TyDi's offsets)
            inputs = _to(batch, w.device)
            out = w.engine(inputs)
            sums += torch.stack([x.double() for x in w.tk.sums(out, inputs)])
            mine.update(w.tk.collect(w.task, role, indices, inputs, out, meta))
    w.engine.train()
    gathered = [None] * w.world
    dist.all_gather_object(gathered, mine)  # sync point
    dist.all_reduce(sums)
    return {k: v for part in gathered for k, v in part.items()}, sums.cpu().numpy()


def _scores(w: _Worker, role: str) -> tuple[dict, object, object]:
    """(the task's figures, with "overall": {"f1", ...}; its predictions on rank 0, else None; the
    split's sums). Rank 0 scores and sends the figures to the others, so that every rank takes
    the same keep-or-not decision (the fp32 gather below is a collective)."""
    import torch.distributed as dist

    results, sums = _predict(w, role)
    scores, predicted = w.tk.score(w.cfg, w.task, role, results) if w.rank == 0 else (None, None)
    box = [scores]
    dist.broadcast_object_list(box, src=0)  # sync point
    return box[0], predicted, sums


def _evaluate(w: _Worker) -> dict:
    """Score dev and test; keep the weights, scores and predictions when dev F1 improves."""
    results = {role: _scores(w, role) for role in w.tk.eval_roles(w.task)}
    record = {}
    for role, (scores, _, sums) in results.items():
        prefix = "eval_" if role == "dev" else "test_"
        record[f"{prefix}f1"] = scores["overall"]["f1"]
        if role == "dev" or "dev" not in results:  # the console's "eval loss / acc": dev's
            record["eval_loss"], record["eval_accuracy"] = sums[0] / max(sums[2], 1.0), sums[1] / max(sums[2], 1.0)
    best = w.state.get("best")
    if "dev" in results and best is not None and results["dev"][0]["overall"]["f1"] <= best["dev"]["overall"]["f1"]:
        return record
    w.state["best"] = {"step": w.state["step"], **{role: r[0] for role, r in results.items()}}
    weights = checkpoint.gather_fp32(w.engine, w.shapes, w.rank)  # a collective: every rank
    if w.rank == 0:
        checkpoint.save_consolidated(weights, rundir.join(w.cfg.output, rundir.BEST))
        for role, (_, predicted, _) in results.items():
            w.tk.write_predictions(w.cfg, w.task, role, predicted)
        atomic_write(rundir.join(w.cfg.output, rundir.SCORES), json.dumps(
            {**w.state["best"], "selection": _selection(w), "finished": False}, indent=1).encode())
    return record


def _selection(w: _Worker) -> str:
    if "dev" not in w.tk.eval_roles(w.task):
        return "last evaluation (no --dev)"
    return "best dev F1" if w.tk.kind == "ner" else "best dev macro F1 (mean of passage and minimal)"


def _record(w: _Worker, record: dict) -> None:
    if w.log is not None:
        w.log.log(record)
        if w.progress is not None and metrics.on_console(record, w.cfg.log.console_every, w.cfg.train.max_steps):
            w.sent = w.progress.put.remote(record)
    w.step_guard.after(record["step"], record["grad_norm"], record["lr"], record["loss"])
    if record["step"] % w.cfg.checkpoint.every == 0 or record["step"] == w.stop:
        save_and_report(w.engine, w.state, w.shapes, w.rank, w.log)


def _finish(w: _Worker) -> None:
    import ray

    if w.sent is not None:
        try:
            ray.get(w.sent)
        except ray.exceptions.RayActorError:
            pass
    if w.rank == 0 and w.state["step"] >= w.cfg.train.max_steps:
        atomic_write(rundir.join(w.cfg.output, rundir.SCORES), json.dumps(
            {**w.state["best"], "selection": _selection(w), "finished": True}, indent=1).encode())
    if w.log is not None:
        w.log.close()
