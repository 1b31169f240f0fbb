"""`finetune(cfg)`: the driver of a fine-tuning run, pretraining's (train/run.py) with the task's
data: everything it can check it checks before Ray starts (every file read and windowed, so a
line without a tag fails in seconds as FILE:LINE; the labels; the init's weights), then the same
cluster, output lock, Ray Train restart loop and Ctrl-C handling, then the export of the kept
(best-dev) weights as a Hugging Face token classifier.

    from training.finetune.config import load_config
    from training.finetune.run import finetune
    cfg = load_config({"task.train": ["swa=data/swa/train.txt"], "task.dev": ["swa=data/swa/dev.txt"],
                       "init.path": "runs/tiny", "output": "runs/ner"})
    summary = finetune(cfg)

The same call again resumes from the last checkpoint, or for a finished run returns its summary.
"""

import dataclasses
import json

from contract.files import atomic_write, redact
from contract.interrupted import Interrupted
from training.finetune import config, tasks
from training.train import init, metrics, resources, rundir, run, tracking


def _say(text: str) -> None:
    run._say(text, "finetune")


def absolute_paths(cfg):
    """output, init.path and every task file made absolute (the workers run elsewhere)."""
    cfg = tasks.of(cfg).absolute(cfg)
    return dataclasses.replace(cfg, output=rundir.absolute(cfg.output),
                               init=dataclasses.replace(cfg.init, path=rundir.absolute(cfg.init.path)))


# --- the init's encoder ----------------------------------------------------------------------------


def _init_tensors(source, model_cfg, tk):
    """(the source's tensors under our model's names, why heads are missing, its sha256)."""
    tensors, sha256 = init.source_tensors(source)
    ours, why = init.as_ours(source, tensors, model_cfg, source.objective or "char", None)
    why.update(tk.new_heads)
    return ours, why, sha256


def prepare_init(cfg) -> tuple[object, list[str]]:
    """The driver's read of cfg.init before Ray: (cfg with the init's architecture in
    model.overrides and its sha256, the lines to say)."""
    tk = tasks.of(cfg)
    source = init.open_source(cfg.init.path, cfg.init.step)
    overrides = config.architecture_overrides(source)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, overrides={**cfg.model.overrides,
                                                                                    **overrides}))
    model_cfg = config.model_config(cfg)
    ours, why, sha256 = _init_tensors(source, model_cfg, tk)
    loaded, new = init.merge(tk.model(model_cfg, cfg), ours, why)
    if not any(n.startswith("encoder.") for n in loaded):
        raise init.InitError(f"--init {redact(source.url)}: no encoder tensor of it loads")
    lines = init.describe(source, sha256, loaded, {k: v for k, v in new.items()}, {}, model_cfg)
    lines = [line for line in lines if not line.startswith("init: the optimizer")]
    return dataclasses.replace(cfg, init=dataclasses.replace(cfg.init, sha256=sha256)), lines


def load_init(model, cfg) -> None:
    """A worker's load of the init's encoder into the fresh model (the run's first start)."""
    source = init.open_source(cfg.init.path, cfg.init.step)
    ours, why, sha256 = _init_tensors(source, model.config, tasks.of(cfg))
    if cfg.init.sha256 and sha256 != cfg.init.sha256:
        raise init.InitError(f"--init {redact(source.url)}: its weights changed since the run started (sha256 "
                             f"{sha256}, the run recorded {cfg.init.sha256}); start a new run")
    init.merge(model, ours, why)


# --- the driver ------------------------------------------------------------------------------------


def _check_config(cfg, saved: dict | None) -> None:
    if saved is None:
        return
    conflicts = config.resume_conflicts(config.to_dict(config.from_dict(saved, rundir.CONFIG)), config.to_dict(cfg))
    if conflicts:
        raise ValueError(f"{redact(rundir.join(cfg.output, rundir.CONFIG))}: this output holds a fine-tuning run with "
                         f"another config; resuming it with these changes would not continue the same run: "
                         f"{'; '.join(conflicts)} (use a new --output)")


def _lock_command(cfg) -> str:
    import shlex

    return redact(shlex.join(["canine", "finetune", cfg.kind, "--output", cfg.output]))


def read_scores(output: str) -> dict | None:
    raw = rundir.read(rundir.join(output, rundir.SCORES))
    return None if raw is None else json.loads(raw)


def finished(output: str) -> bool:
    scores = read_scores(output)
    return bool(scores and scores.get("finished")) and rundir.exists(rundir.join(output, rundir.SUMMARY))


def summary_of(cfg, records: list[dict], task=None) -> dict:
    scores = read_scores(cfg.output) or {}
    # pretraining's figures that mean nothing here: no sentence order, no input pipeline to wait for
    figures = {k: v for k, v in rundir.run_figures(records).items()
               if k not in ("eval_sop_accuracy", "data_wait_fraction")}
    return {"output": cfg.output, "task": cfg.kind, "max_steps": cfg.train.max_steps,
            "finished": bool(scores.get("finished")), **figures,
            "best_step": scores.get("step"), "selection": scores.get("selection"),
            "dev": scores.get("dev"), "test": scores.get("test"), "labels": list(cfg.labels),
            "workers": cfg.parallel.workers, "zero_stage": cfg.parallel.zero_stage,
            "precision": cfg.parallel.precision, "micro_batch": cfg.train.micro_batch,
            **({"windows": tasks.of(cfg).windows_summary(task), "max_length": cfg.task.max_length} if task else {}),
            **({"init": dataclasses.asdict(cfg.init)} if cfg.init.path else {"init": None})}


def export(cfg) -> str | None:
    """OUTPUT/hf: the kept weights as a Hugging Face model of the task (training/hf.py)."""
    from training.train import checkpoint
    from training.train.export import missing_extra

    target = rundir.join(cfg.output, rundir.HF)
    why = missing_extra()
    if why:
        _say(f"no Hugging Face export: {why}")
        return None
    _say(f"exporting the kept weights to {redact(target)} ...")
    tk = tasks.of(cfg)
    model = tk.model(config.model_config(cfg), cfg)
    checkpoint.load_consolidated(model, rundir.join(cfg.output, rundir.BEST))
    what = tk.export(model.eval(), cfg, target, read_scores(cfg.output) or {})
    _say(f"Hugging Face {what} exported to {redact(target)}")
    return target


def finetune(cfg) -> dict:
    """Run (or resume) the fine-tuning `cfg` describes; returns the summary (OUTPUT/summary.json).
    A Ctrl-C leaves as contract's Interrupted, whose line says how far the run got."""
    try:
        return _finetune(cfg)
    except Interrupted:
        raise
    except KeyboardInterrupt as e:
        raise Interrupted(run.interrupted(cfg)) from e


def _finetune(cfg) -> dict:
    import ray

    from contract.lock import OutputLock

    if not cfg.output or not cfg.task.train:
        raise ValueError("fine-tuning needs --output and --train")
    cfg = absolute_paths(cfg)
    config.validate(cfg)
    done = finished(cfg.output)
    if not done:
        rundir.check_writable(cfg.output)
    checkpointed = rundir.last_checkpoint(cfg.output)
    saved = rundir.read_saved_config(cfg.output) if checkpointed or done else None
    tk = tasks.of(cfg)
    task = tk.read(cfg, tuple((saved or {}).get("labels") or ()))  # every file, before Ray
    cfg = init.resumed(cfg, saved)
    cfg = dataclasses.replace(cfg, labels=tk.labels(task))
    if saved is not None:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(
            cfg.model, overrides={**((saved.get("model") or {}).get("overrides") or {}), **cfg.model.overrides}))
    train_windows = tk.train_count(task)
    if done:
        cfg = config.resolve(cfg, train_windows=train_windows, cluster_gpus=0, labels=cfg.labels, saved=saved)
        _check_config(cfg, saved)
        _say(f"{redact(cfg.output)} holds this run, finished at step {cfg.train.max_steps}; nothing to do")
        return json.loads(rundir.read(rundir.join(cfg.output, rundir.SUMMARY)))
    if saved is None and cfg.init.path:
        cfg, lines = prepare_init(cfg)
        for line in lines:
            _say(line)
    elif saved is None:
        _say(f"no --init: a fresh {cfg.model.size} encoder (random initialisation, the baseline)")
    model_cfg = config.model_config(cfg)
    if cfg.task.max_length > model_cfg.max_position_embeddings:
        raise ValueError(f"task.max_length {cfg.task.max_length} exceeds the encoder's position table "
                         f"({model_cfg.max_position_embeddings} characters); give --max-length "
                         f"{model_cfg.max_position_embeddings} or less")
    _say(tk.data_line(task, cfg))
    tracking.check(cfg, say=_say)
    started = run.connect(cfg, say=_say, reading=0)  # the workers read the files themselves
    try:
        cfg = config.resolve(cfg, train_windows=train_windows, cluster_gpus=ray.cluster_resources().get("GPU", 0),
                             labels=cfg.labels, saved=saved)
        resources.await_resources(resources.needs(cfg), cfg.parallel.resource_wait_s)
        with OutputLock(cfg.output, command=_lock_command(cfg)) as lock:
            _check_config(cfg, saved)
            atomic_write(rundir.join(cfg.output, rundir.CONFIG), config.to_yaml(cfg).encode("utf-8"))
            if checkpointed:
                _say(f"resuming from step {checkpointed[0]} (the last checkpoint, {redact(checkpointed[1])})")
            p, t = cfg.parallel, cfg.train
            _say(f"{p.workers} {p.device} worker{'s' * (p.workers != 1)}, ZeRO-{p.zero_stage}, {p.precision}, "
                 f"{t.max_steps} steps of {t.global_batch} windows, evaluated every {t.eval_every} -> "
                 f"{redact(cfg.output)}")
            from training.finetune.loop import train_loop_per_worker

            _say(f"starting {p.workers} Ray Train worker{'s' * (p.workers != 1)} ...")
            with metrics.ProgressPrinter(t.max_steps, say=_say) as progress:
                run.fit(cfg, progress.sink, before_restart=lock.check, loop=train_loop_per_worker)
            lock.check()
            summary = summary_of(cfg, rundir.read_metrics(cfg.output), task)
            if summary["finished"]:
                summary["hf_export"] = export(cfg)
            atomic_write(rundir.join(cfg.output, rundir.SUMMARY), json.dumps(summary, indent=1).encode("utf-8"))
            tracking.finish_run(cfg, "FINISHED" if summary["finished"] else "KILLED", say=_say)
            return summary
    except BaseException as e:
        tracking.end_run(cfg, "KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
        raise
    finally:
        if started:
            run.disconnect()
