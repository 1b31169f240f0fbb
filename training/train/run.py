"""`pretrain(cfg)`: the driver of a run. Connects to (or starts) a Ray cluster, resolves the config
against the data and the cluster, runs a Ray Train `TorchTrainer` (Train V2) whose workers run
training/train/loop.py, then exports the consolidated weights to Hugging Face format.

    from training.train.config import load_config
    from training.train.run import pretrain
    cfg = load_config("tiny", {"data.path": "out/shards", "output": "runs/tiny"})
    summary = pretrain(cfg)

Running it again with the same output resumes from the newest checkpoint (Train V2 restores a run
re-created with the same RunConfig(storage_path, name)); for a finished run (its consolidated
weights and summary are there) it returns the saved summary at once.

The data and the output may be local or on an object store (s3://, gs://, any fsspec URL): the
checkpoints, metrics.jsonl, TensorBoard events, config.yaml, summary.json and the HF export all go
to the output. The workers reach the store with their own environment's credentials (a local
cluster started here inherits the driver's); the driver forwards none. One driver writes an
output at a time: it holds contract/lock.py's lock, OUTPUT/.canine.lock, while it runs. Before the
trainer starts, the driver checks that the cluster can place the run (resources.py).

Failures: a worker error that a restart cannot fix (an out-of-memory, a bad config or shard, a
run the guard finds not learning) stops the run at its first occurrence with a
failures.FatalError; worker deaths and other errors restart the workers from the last checkpoint,
up to parallel.max_failures times. The driver runs that loop (`_fit`), not Ray Train, whose
policy retries every error alike (failures.py says why and what of Ray's it relies on).
"""

import json
import os
import shlex
import sys

import fsspec

from contract.files import atomic_write, is_local, redact
from training import rundir
from training.train import autobatch, data, failures, metrics, resources
from training.train import config
from training.train.failures import FAULT_ENV, FAULT_KIND_ENV
from training.train.loop import train_loop_per_worker

# Environment the workers need: the DeepSpeed accelerator, the fault-injection switches.
WORKER_ENV = ("DS_ACCELERATOR", FAULT_ENV, FAULT_KIND_ENV, "RAY_USAGE_STATS_ENABLED")


class ClusterUnreachable(RuntimeError):
    """No Ray cluster answers at the address the run names."""


_CHECK_ADDRESS = ("check the address (the head's GCS port, 6379 by default, or ray://HOST:10001 for Ray Client; not "
                  "the dashboard's 8265) and that the cluster is up, or leave --ray-address and RAY_ADDRESS unset to "
                  "start a local cluster")


def _check_reachable(address: str, where: str, timeout_s: float = 10.0) -> None:
    """Refuse an address where nothing listens, at once: ray.init keeps retrying it (Ray 2.60, a
    closed port on this machine: still retrying after 5 minutes, a GCS warning every ~40 s). Only
    `host:port` and `ray://host:port` are checked; `auto`, `local` and other forms are Ray's to resolve."""
    import socket
    import urllib.parse

    if address in ("auto", "local") or ("://" in address and not address.startswith("ray://")):
        return
    parts = urllib.parse.urlsplit(address if "://" in address else f"ray://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        host, port = None, None
    if not host or not port:
        return
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as e:
        reason = e.strerror or type(e).__name__  # "Connection refused", "Name or service not known", a timeout
        raise ClusterUnreachable(f"{where}: no Ray cluster answers at {host}:{port} ({reason}); "
                                 f"{_CHECK_ADDRESS}") from None


def _connect(cfg) -> bool:
    """Use the current Ray cluster, the one cfg / RAY_ADDRESS names, or start a local one on
    127.0.0.1. Returns True if this call started Ray (and so should stop it)."""
    import ray

    if ray.is_initialized():
        return False
    address = cfg.parallel.ray_address or os.environ.get("RAY_ADDRESS", "")
    if address:
        where = f"--ray-address {address}" if cfg.parallel.ray_address else f"RAY_ADDRESS={address}"
        _check_reachable(address, redact(where))
        try:
            ray.init(address=address, log_to_driver=True)
        except ConnectionError as e:  # something answers, not a Ray head: "Failed to connect to Ray cluster at ..."
            raise ClusterUnreachable(f"{redact(where)}: {e}; {_CHECK_ADDRESS}") from None
        return True
    workers = cfg.parallel.workers or 2
    # Training workers reserve their CPUs; leave at least 2 logical CPUs to the input pipeline's read tasks.
    cpus = max(os.cpu_count() or 1, int(workers * cfg.parallel.cpus_per_worker) + 2)
    # Worker logs stay in /tmp/ray/session_*/logs: the console gets our progress lines
    # (metrics.ProgressPrinter) and, on failure, the error that fit() raises.
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    return True


def resolve(cfg, manifest: data.Dataset, cluster_gpus: float, saved: dict | None = None):
    """config.resolve with what the data says: the shards' length, the CANINE-S vocabulary and the
    train split's units (the default data.streams)."""
    vocab = data.vocab_size(manifest.tokenizer_url) if cfg.train.objective == "subword" else 0
    units = len(data.make_units(manifest.splits["train"], cfg.data.unit_rows))
    cfg = config.resolve(cfg, manifest_seq_len=manifest.seq_len, num_subword_vocab=vocab,
                             cluster_gpus=cluster_gpus, saved=saved, where=manifest.url, train_units=units)
    return _saved_micro_batch(cfg, saved)


def _saved_micro_batch(cfg, saved: dict | None):
    """`--micro-batch auto` (0) as the run chose it, if it did: the workers' choice is saved in
    its config.yaml (autobatch.py), so a restart or resume does not search again."""
    chosen = ((saved or {}).get("train") or {}).get("micro_batch")
    if cfg.train.micro_batch or not chosen:
        return cfg
    cfg = autobatch.with_micro_batch(cfg, int(chosen))
    config.validate(cfg)  # another worker count on resume must still divide the global batch
    return cfg


def _save_or_check_config(cfg) -> None:
    """Save the resolved config with the run; a resumption must not change the trajectory."""
    url = rundir.join(cfg.output, rundir.CONFIG)
    current = config.to_dict(cfg)
    saved = rundir.read_saved_config(cfg.output)
    if saved is not None:
        conflicts = config.resume_conflicts(config.saved_run_config(saved, url), current)
        if conflicts:
            raise ValueError(f"{url}: this output holds a run with another config; resuming it with these changes "
                             f"would not continue the same run: {'; '.join(conflicts)} (use a new --output)")
    atomic_write(url, config.to_yaml(cfg).encode("utf-8"))


def _storage(output: str) -> dict:
    """RunConfig storage arguments for a local directory or any fsspec URL."""
    fs, path = fsspec.core.url_to_fs(output)
    if is_local(fs):
        return {"storage_path": os.path.abspath(path)}
    import pyarrow.fs as pafs

    return {"storage_path": path, "storage_filesystem": pafs.PyFileSystem(pafs.FSSpecHandler(fs))}


def summarize(cfg, records: list[dict]) -> dict:
    """summary.json: the run's figures (rundir.summarize, what every reader prints) and how it ran."""
    return {"output": cfg.output, "max_steps": cfg.train.max_steps,
            "finished": bool(records) and records[-1]["step"] >= cfg.train.max_steps, "steps": 0,
            **rundir.summarize(records),
            "workers": cfg.parallel.workers, "zero_stage": cfg.parallel.zero_stage,
            "precision": cfg.parallel.precision, "micro_batch": cfg.train.micro_batch}


def export(cfg, consolidated_url: str) -> str | None:
    """Write the run's Hugging Face CanineModel directory, OUTPUT/hf (training/export.py: the
    weights, the tokenizer config, a model card; published whole), and say on stderr where it
    went, or why there is none (the [hf] extra missing, a model HF cannot hold): then None,
    and `canine export OUTPUT` can write it later."""
    from training.export import ExportError, export_run

    target = rundir.join(cfg.output, rundir.HF)
    try:
        export_run(cfg.output, to=target, cfg=cfg, consolidated=consolidated_url)
    except ExportError as e:
        sys.stderr.write(f"canine pretrain: no Hugging Face export: {redact(str(e))}; "
                         f"then: canine export {redact(cfg.output)}\n")
        return None
    sys.stderr.write(f"canine pretrain: Hugging Face CanineModel exported to {redact(target)}\n")
    return target


def _trainer(cfg, progress=None):
    """The Ray Train V2 TorchTrainer of a resolved config: one worker per GPU (or per requested CPU
    worker), gloo on CPU and NCCL on GPU, checkpoints kept in OUTPUT/ray_train; rank 0 sends its
    console lines to `progress` (a metrics.ProgressSink actor). Ray restarts no worker failure
    (`_fit` does); it still recovers from preemptions (max_preemption_failures: unlimited)."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    gpu = cfg.parallel.device == "cuda"
    env = {k: os.environ[k] for k in WORKER_ENV if k in os.environ}
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"config": cfg, "progress": progress},  # the frozen dataclass, pickled
        torch_config=TorchConfig(backend="nccl" if gpu else "gloo"),
        scaling_config=ScalingConfig(num_workers=cfg.parallel.workers, use_gpu=gpu,
                                     placement_strategy=cfg.parallel.placement,
                                     resources_per_worker={"CPU": cfg.parallel.cpus_per_worker,
                                                           **({"GPU": 1} if gpu else {})}),
        run_config=RunConfig(
            name=rundir.CHECKPOINTS, **_storage(cfg.output),
            failure_config=FailureConfig(max_failures=0),
            checkpoint_config=CheckpointConfig(num_to_keep=cfg.checkpoint.keep),
            worker_runtime_env={"env_vars": env}),
    )


def _fit(cfg, progress, before_restart=lambda: None):
    """Ray Train's fit(), restarted after a worker failure from the last checkpoint (a new trainer
    of the same RunConfig resumes it) up to parallel.max_failures times (-1: always); a
    failures.FatalError of any worker ends the run at once. `before_restart`: the lock's check."""
    from ray.train import TrainingFailedError

    limit, restarts = cfg.parallel.max_failures, 0
    while True:
        try:
            return _trainer(cfg, progress).fit()
        except TrainingFailedError as e:
            fatal = failures.fatal_of(e)
            if fatal is not None:
                raise fatal from None  # the workers' one line; their tracebacks are in the Ray logs
            if limit != -1 and restarts >= limit:
                raise
            restarts += 1
            before_restart()
            sys.stderr.write(f"canine pretrain: the workers failed ({failures.summary(e)}); restart {restarts} of "
                             f"{'unlimited' if limit == -1 else limit} (--max-failures) from the last checkpoint\n")
            cfg = _saved_micro_batch(cfg, rundir.read_saved_config(cfg.output))


def _lock_command(cfg) -> str:
    """The command a lock record names (credentials in URLs masked)."""
    return redact(shlex.join(["canine", "pretrain", "--data", cfg.data.path, "--output", cfg.output]))


def pretrain(cfg) -> dict:
    """Run (or resume) the pretraining `cfg` describes; returns the summary also written to
    OUTPUT/summary.json."""
    import ray

    from contract.lock import OutputLock

    if not cfg.output or not cfg.data.path:
        raise ValueError("pretraining needs output (--output) and data.path (--data)")
    config.validate(cfg)
    manifest = data.open_dataset(cfg.data.path)
    started = _connect(cfg)
    try:
        cfg = resolve(cfg, manifest, ray.cluster_resources().get("GPU", 0), rundir.read_saved_config(cfg.output))
        consolidated, summary_url = rundir.join(cfg.output, rundir.CONSOLIDATED), rundir.join(cfg.output, rundir.SUMMARY)
        # Before the lock creates the output: a run the cluster cannot place leaves nothing behind.
        if not (rundir.exists(consolidated) and rundir.exists(summary_url)):
            resources.await_resources(resources.needs(cfg), cfg.parallel.resource_wait_s)
        with OutputLock(cfg.output, command=_lock_command(cfg)) as lock:
            _save_or_check_config(cfg)
            if rundir.exists(consolidated) and rundir.exists(summary_url):  # written only after the last step
                sys.stderr.write(f"canine pretrain: {cfg.output} holds this run, finished; nothing to do\n")
                return json.loads(rundir.read(summary_url))
            p = cfg.parallel
            sys.stderr.write(f"canine pretrain: {p.workers} {p.device} workers, ZeRO-{p.zero_stage}, {p.precision}, "
                             f"{cfg.train.objective} objective, {cfg.train.max_steps} steps -> {cfg.output}\n")
            with metrics.ProgressPrinter(cfg.train.max_steps) as progress:
                result = _fit(cfg, progress.sink, before_restart=lock.check)
            lock.check()  # another driver took the output over: write no summary or export over its run
            if not cfg.train.micro_batch:
                cfg = _saved_micro_batch(cfg, rundir.read_saved_config(cfg.output))
                sys.stderr.write(f"canine pretrain: --micro-batch auto chose {cfg.train.micro_batch} per worker "
                                 f"(saved in {rundir.CONFIG})\n")
            summary = summarize(cfg, rundir.read_metrics(cfg.output))
            # The URL, not Ray's path on the storage filesystem (which drops the s3:// of a store).
            summary["checkpoint"] = (rundir.join(cfg.output, rundir.CHECKPOINTS, os.path.basename(result.checkpoint.path))
                                     if result.checkpoint else None)
            if summary["finished"] and rundir.exists(consolidated):
                summary["consolidated"] = consolidated
                summary["hf_export"] = export(cfg, consolidated)
            atomic_write(summary_url, json.dumps(summary, indent=1).encode("utf-8"))
            return summary
    finally:
        if started:
            ray.shutdown()
