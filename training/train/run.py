"""`pretrain(cfg)`: the driver of a run. Connects to (or starts) a Ray cluster, resolves the config
against the data and the cluster, runs a Ray Train `TorchTrainer` (Train V2) whose workers run
training/train/loop.py, then exports the consolidated weights to Hugging Face format.

    from training.train.config import load_config
    from training.train.run import pretrain
    cfg = load_config("tiny", {"data.path": "out/shards", "output": "runs/tiny"})
    summary = pretrain(cfg)

Running it again with the same output resumes from the newest checkpoint (Train V2 restores a run
re-created with the same RunConfig(storage_path, name)) and says from which step; for a finished
run (its consolidated weights and summary are there) it returns the saved summary at once, without
starting Ray. A run that never checkpointed holds nothing to continue: a rerun starts it afresh,
with whatever config it is given (a smaller micro batch after an out-of-memory at step 1).

Local paths are made absolute first (rundir.absolute_paths): the workers run in another working
directory. What the driver can check it checks before Ray starts (the config, the manifest, every
shard's Parquet footer, a finished run, and what the manifest and the config decide together:
`check_data`), so a bad input fails in seconds and leaves no run directory. A Ctrl-C stops the workers through Ray Train's controller (`_Interrupt`) and leaves as
contract's Interrupted, whose line (`interrupted`) says how far the run got and that the same
command resumes.

The data and the output may be local or on an object store (s3://, gs://, any fsspec URL): the
checkpoints, metrics.jsonl, TensorBoard events, config.yaml, summary.json and the HF export all go
to the output. The workers reach the store with their own environment's credentials (a local
cluster started here inherits the driver's); the driver forwards none. One driver writes an
output at a time: it holds contract/lock.py's lock, OUTPUT/.canine.lock, while it runs. Before the
trainer starts, the driver checks that the cluster can place the run (resources.py).

Failures: a worker error that a restart cannot fix (an out-of-memory, a bad config or shard, a
run the guard finds not learning) stops the run at its first occurrence with a
failures.FatalError; worker deaths and other errors restart the workers from the last checkpoint,
up to parallel.max_failures times. The driver runs that loop (`fit`), not Ray Train, whose
policy retries every error alike (failures.py says why and what of Ray's it relies on).
"""

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys

import fsspec

from contract.files import atomic_write, is_local, redact
from contract.interrupted import Interrupted
from training.train import autobatch, data, failures, init, metrics, reaper, resources, rundir, tracking
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


def _say(text: str, command: str = "pretrain") -> None:
    """One line of the driver's own on stderr, at once (a log may buffer it)."""
    sys.stderr.write(f"canine {command}: {text}\n")
    sys.stderr.flush()


# Ray (2.60, ray/_private/services.py resolve_ip_for_localhost) replaces a node address of
# 127.0.0.1 by the host's network address, and its GCS, raylet and workers then listen on every
# interface, unless it runs as a one-machine cluster, as it does on macOS and Windows
# (ray_constants.ENABLE_RAY_CLUSTER, from this variable, read when Ray is imported). A local
# cluster is one machine: set both while it starts, so that it listens on 127.0.0.1 only. The
# processes it starts keep the variable; this one gets its own value back (a later ray.init of
# this process may join a real cluster).
ONE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def init_local(num_cpus: float, **kwargs) -> None:
    """ray.init of a new cluster on this machine, listening on 127.0.0.1 only (see above)."""
    import ray
    from ray._private import ray_constants

    env, enabled = os.environ.get(ONE_MACHINE_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[ONE_MACHINE_ENV], ray_constants.ENABLE_RAY_CLUSTER = "0", False
    try:
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
                 **kwargs)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = enabled
        if env is None:
            os.environ.pop(ONE_MACHINE_ENV, None)
        else:
            os.environ[ONE_MACHINE_ENV] = env


def connect(cfg, say=_say, reading: int = 2) -> bool:
    """Use the current Ray cluster, the one cfg / RAY_ADDRESS names, or start a local one on
    127.0.0.1, saying which first (a local start takes 10-50 s) with `say`. Returns True if this
    call started Ray (and so should stop it: `disconnect`). `reading`: the logical CPUs a local
    cluster keeps for the input pipeline's Ray tasks (`local_cpus`; a fine-tuning run has none)."""
    import ray

    if ray.is_initialized():
        return False
    address = cfg.parallel.ray_address or os.environ.get("RAY_ADDRESS", "")
    if address:
        where = f"--ray-address {address}" if cfg.parallel.ray_address else f"RAY_ADDRESS={address}"
        _check_reachable(address, redact(where))
        say(f"connecting to the Ray cluster at {redact(address)} ...")
        try:
            # As on a local cluster, the workers' own logs stay on their nodes (Ray's session logs,
            # and its dashboard): forwarded, they are Ray Train's start-up lines and library
            # warnings from every worker (a 10-step job's log was mostly theirs), and a worker's
            # failure reaches the driver anyway, as the error fit() raises.
            ray.init(address=address, log_to_driver=False)
        except ConnectionError as e:  # something answers, not a Ray head: "Failed to connect to Ray cluster at ..."
            raise ClusterUnreachable(f"{redact(where)}: {e}; {_CHECK_ADDRESS}") from None
        return True
    cpus, said = local_cpus(cfg.parallel.workers or 2, cfg.parallel.cpus_per_worker, os.cpu_count() or 1, reading)
    say(f"starting a local Ray cluster on 127.0.0.1 ({said}) ...")
    # Worker logs stay in /tmp/ray/session_*/logs: the console gets our progress lines
    # (metrics.ProgressPrinter) and, on failure, the error that fit() raises.
    import psutil

    for attempt in range(1, LOCAL_START_TRIES + 1):
        before = {c.pid for c in psutil.Process().children()}
        try:
            init_local(cpus, log_to_driver=False)
            break
        except BaseException as e:  # a Ctrl-C or a failure while it starts: stop the processes it started
            ray.shutdown()
            # Ray's shutdown stops nothing when the node never came up (its GCS, monitor and
            # dashboard stayed until this process ended).
            reaper.stop_trees([c.pid for c in psutil.Process().children() if c.pid not in before])
            if attempt == LOCAL_START_TRIES or not _start_timed_out(e):
                raise
            say(f"the local Ray cluster did not come up in Ray's {RAYLET_WAIT_S} s (its raylet did not "
                 "register); stopped it, starting it once more ...")
    global _reaper
    # The cluster's processes go with this driver even if it is killed (reaper.py says why).
    _reaper = reaper.start([c.pid for c in psutil.Process().children() if c.pid not in before])
    return True


# Ray gives a new node's raylet a fixed RAYLET_WAIT_S to register with the GCS, then raises
# "The current node timed out during startup" (ray/_private/node.py, Ray 2.60), and leaves the
# processes it started. Once, in the test suite on a loaded 2-core machine, a local start met it
# while another local cluster was starting beside it: the raylet wrote no log at all (the cause
# is not known; starts before and after it on that machine came up). So a start that times out
# is stopped and made once more;
# any other failure, or a second time-out, is the run's.
LOCAL_START_TRIES = 2
RAYLET_WAIT_S = 30


def _start_timed_out(e: BaseException) -> bool:
    return type(e) is Exception and "timed out during startup" in str(e)


def local_cpus(workers: int, cpus_per_worker: float, cores: int, reading: int = 2) -> tuple[int, str]:
    """(logical CPUs a local cluster is started with, the words for them). Training workers
    reserve their CPUs; `reading` more (2; 0 for a fine-tuning run) go to the input pipeline's read tasks, so a small
    machine gets more logical CPUs than it has cores, on purpose: said so, never as its size."""
    training = int(workers * cpus_per_worker)
    cpus = max(cores, training + reading)
    if cpus == cores:
        return cpus, f"{cores} CPUs"
    said = (f"{cpus} logical CPUs on {cores} core{'s' * (cores != 1)}: {training} for the {workers} "
            f"training worker{'s' * (workers != 1)}")
    return cpus, said + (f", {cpus - training} for reading the data" if cpus > training else "")


_reaper = None  # the reaper of the local cluster connect started (reaper.py), until disconnect


def disconnect() -> None:
    """Stop the local cluster connect started, and end its reaper's watch (it stops any process
    of the cluster that is still there)."""
    import ray

    global _reaper
    ray.shutdown()
    if _reaper is not None:
        _reaper.stdin.close()
        try:
            _reaper.wait(timeout=reaper.GRACE_S + 2)  # what Ray's shutdown left: stopped by then
        except subprocess.TimeoutExpired:
            pass
        _reaper = None


def resolve_with_data(cfg, dataset: data.Dataset, cluster_gpus: float, saved: dict | None = None):
    """config.resolve with what the data says: the shards' length, the CANINE-S vocabulary and the
    train split's units (the default data.streams)."""
    vocab = data.vocab_size(dataset.tokenizer_url) if cfg.train.objective == "subword" else 0
    units = len(data.make_units(dataset.splits["train"], cfg.data.unit_rows))
    cfg = config.resolve(cfg, manifest_seq_len=dataset.seq_len, num_subword_vocab=vocab,
                             cluster_gpus=cluster_gpus, saved=saved, where=dataset.url, train_units=units)
    return _saved_micro_batch(cfg, saved)


def check_data(cfg, dataset: data.Dataset, saved: dict | None = None, checkpointed: tuple | None = None):
    """What the manifest and the config decide together, before Ray starts: each of these was met
    by the workers at step 1, after a minute or two of Ray's start-up, and left a run directory.
    Checked: the shards' length against data.seq_len and the model's positions, the CANINE-S
    vocabulary (the pipeline's tokenizer.json), that the train split gives every data stream its
    rows of a global batch (data.epoch_order of the first epoch; the workers still check each
    epoch's), and that a resumed checkpoint (`checkpointed`: (step, URL)) was trained on this data.
    Returns cfg with what the data resolves (config.resolve_data); errors name the data."""
    where = redact(dataset.url)
    vocab = data.vocab_size(dataset.tokenizer_url) if cfg.train.objective == "subword" else 0
    units = len(data.make_units(dataset.splits["train"], cfg.data.unit_rows))
    cfg = config.resolve_data(cfg, manifest_seq_len=dataset.seq_len, num_subword_vocab=vocab, saved=saved,
                              where=where, train_units=units)
    d, t = cfg.data, cfg.train
    try:
        data.epoch_order(dataset.splits["train"], d.unit_rows, t.seed, 0, d.streams, t.global_batch)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    if checkpointed:
        from training.train.checkpoint import STATE_FILE, check_same_data

        raw = rundir.read(rundir.join(checkpointed[1], STATE_FILE))
        if raw is not None:  # a checkpoint without it: the worker's restore says so
            check_same_data(json.loads(raw), dataset.config_sha256, f"checkpoint {redact(checkpointed[1])}")
    return cfg


def _saved_micro_batch(cfg, saved: dict | None):
    """`--micro-batch auto` (0) as the run chose it, if it did: the workers' choice is saved in
    its config.yaml (autobatch.py), so a restart or resume does not search again."""
    chosen = ((saved or {}).get("train") or {}).get("micro_batch")
    if cfg.train.micro_batch or not chosen:
        return cfg
    cfg = autobatch.with_micro_batch(cfg, int(chosen))
    config.validate(cfg)  # another worker count on resume must still divide the global batch
    return cfg


def _check_config(cfg, saved: dict | None) -> None:
    """A resumption must not change the trajectory. `saved`: the run's config.yaml where the run
    holds a trajectory (a checkpoint, or finished), else None (anything goes)."""
    if saved is None:
        return
    url = rundir.join(cfg.output, rundir.CONFIG)
    conflicts = config.resume_conflicts(config.saved_run_config(saved, url), config.to_dict(cfg))
    if conflicts:
        raise ValueError(f"{redact(url)}: this output holds a run with another config; resuming it with these "
                         f"changes would not continue the same run: {'; '.join(conflicts)} (use a new --output)")


def _save_or_check_config(cfg, saved: dict | None) -> None:
    """Save the resolved config with the run, once checked (`_check_config`)."""
    _check_config(cfg, saved)
    atomic_write(rundir.join(cfg.output, rundir.CONFIG), config.to_yaml(cfg).encode("utf-8"))


def _storage(output: str) -> dict:
    """RunConfig storage arguments for a local directory or any fsspec URL."""
    fs, path = fsspec.core.url_to_fs(output)
    if is_local(fs):
        return {"storage_path": os.path.abspath(path)}
    import pyarrow.fs as pafs

    return {"storage_path": path, "storage_filesystem": pafs.PyFileSystem(pafs.FSSpecHandler(fs))}


def run_summary(cfg, records: list[dict]) -> dict:
    """summary.json: the run's figures (rundir.run_figures, what every reader prints) and how it ran."""
    return {"output": cfg.output, "max_steps": cfg.train.max_steps,
            "finished": bool(records) and records[-1]["step"] >= cfg.train.max_steps, "steps": 0,
            **rundir.run_figures(records),
            "workers": cfg.parallel.workers, "zero_stage": cfg.parallel.zero_stage,
            "precision": cfg.parallel.precision, "micro_batch": cfg.train.micro_batch,
            **({"init": dataclasses.asdict(cfg.init)} if cfg.init.path else {})}


def export(cfg, consolidated_url: str) -> str | None:
    """Write the run's Hugging Face CanineModel directory, OUTPUT/hf (training/train/export.py: the
    weights, the tokenizer config, a model card; published whole), and say on stderr where it
    went, or why there is none (the [hf] extra missing, a model HF cannot hold): then None,
    and `canine export OUTPUT` can write it later."""
    from training.train.export import ExportError, export_run

    target = rundir.join(cfg.output, rundir.HF)
    # Measured: 11.6 s of a 5-step tiny run on a loaded 2-core machine, silent until its line.
    _say(f"exporting the final weights to {redact(target)} ...")
    try:
        export_run(cfg.output, to=target, cfg=cfg, consolidated=consolidated_url)
    except ExportError as e:
        _say(f"no Hugging Face export: {redact(str(e))}; then: canine export {redact(cfg.output)}")
        return None
    _say(f"Hugging Face CanineModel exported to {redact(target)}")
    return target


def _trainer(cfg, progress=None, loop=train_loop_per_worker):
    """The Ray Train V2 TorchTrainer of a resolved config: one worker per GPU (or per requested CPU
    worker), gloo on CPU and NCCL on GPU, checkpoints kept in OUTPUT/ray_train; rank 0 sends its
    console lines to `progress` (a metrics.ProgressSink actor). Ray restarts no worker failure
    (`fit` does); it still recovers from preemptions (max_preemption_failures: unlimited).
    `loop`: the workers' function (a fine-tuning run's is training/finetune/loop.py's)."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    gpu = cfg.parallel.device == "cuda"
    env = {k: os.environ[k] for k in WORKER_ENV if k in os.environ}
    return TorchTrainer(
        loop,
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


class _Interrupt:
    """Ctrl-C while Ray Train runs, in place of its own handler. Train V2's fit() installs one
    (ray/train/v2/api/data_parallel_trainer.py `_register_sigint_handler`, called by
    `_initialize_and_run_controller` in the main thread before it waits on the controller) that
    logs a notice, aborts the controller and then calls sys.exit inside the signal handler: the
    driver exits 1 with that notice alone, and the handler stays installed after fit() returns.
    Ours asks the controller to abort (it stops the workers; a checkpoint is resumed from only once
    Ray Train has registered it, rundir.last_checkpoint), lets the wait end with the controller's
    death, and `fit` turns that into a KeyboardInterrupt; a second Ctrl-C stops waiting at once.
    tests/training/train/test_train_run_paths.py pins the upstream call this relies on."""

    def __init__(self):
        self.count = 0
        self.controller = None

    def install(self, controller) -> None:
        self.controller = controller
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame) -> None:
        self.count += 1
        if self.count > 1:
            raise KeyboardInterrupt
        self.controller.abort.remote()  # not awaited: the controller exits, ending fit()'s wait


def fit(cfg, progress, before_restart=lambda: None, loop=train_loop_per_worker):
    """Ray Train's fit(), restarted after a worker failure from the last checkpoint (a new trainer
    of the same RunConfig resumes it) up to parallel.max_failures times (-1: always); a
    failures.FatalError of any worker ends the run at once. `before_restart`: the lock's check.
    A Ctrl-C during fit() leaves as a KeyboardInterrupt once the workers have stopped (_Interrupt)."""
    from ray.train import TrainingFailedError

    limit, restarts = cfg.parallel.max_failures, 0
    while True:
        interrupt, previous = _Interrupt(), signal.getsignal(signal.SIGINT)
        try:
            trainer = _trainer(cfg, progress, loop)
            trainer._register_sigint_handler = interrupt.install  # see _Interrupt
            return trainer.fit()
        except BaseException as e:
            if interrupt.count:  # the controller's death, or the second Ctrl-C itself
                raise KeyboardInterrupt from None
            if not isinstance(e, TrainingFailedError):
                raise
            fatal = failures.fatal_of(e)
            if fatal is not None:
                raise fatal from None  # the workers' one line; their tracebacks are in the Ray logs
            if limit != -1 and restarts >= limit:
                raise
            failed = e
        finally:
            signal.signal(signal.SIGINT, previous)
        restarts += 1
        before_restart()
        _say(f"the workers failed ({failures.summary(failed)}); restart {restarts} of "
             f"{'unlimited' if limit == -1 else limit} (--max-failures) from the last checkpoint")
        if loop is train_loop_per_worker:
            cfg = _saved_micro_batch(cfg, rundir.read_saved_config(cfg.output))


def run_line(cfg) -> str:
    """How a resolved config runs, in a line: "2 cpu workers, ZeRO-2, fp32, char objective, 100 steps -> OUT"."""
    p, t = cfg.parallel, cfg.train
    return (f"{p.workers} {p.device} worker{'s' * (p.workers != 1)}, ZeRO-{p.zero_stage}, {p.precision}, "
            f"{t.objective} objective, {t.max_steps} steps -> {redact(cfg.output)}")


def _lock_command(cfg) -> str:
    """The command a lock record names (credentials in URLs masked)."""
    return redact(shlex.join(["canine", "pretrain", "--data", cfg.data.path, "--output", cfg.output]))


def interrupted(cfg) -> str:
    """The line for a Ctrl-C: how far the run at cfg.output got, and what the same command does."""
    output = rundir.absolute(cfg.output)
    records = rundir.read_metrics(output)
    trained = f" at step {records[-1]['step']}" if records else ""
    last = rundir.last_checkpoint(output)
    if last is None:
        return (f"interrupted{trained}, before {redact(output)} had a checkpoint (every {cfg.checkpoint.every} "
                "steps, --checkpoint-every); the same command starts the run again")
    step, url = last
    return (f"interrupted{trained}; {redact(output)} is checkpointed at step {step} ({redact(url)}); "
            f"the same command resumes from step {step}")


def _no_evaluation(cfg, dataset: data.Dataset, workers: int = 0) -> str | None:
    """Why this run will not be evaluated, or None. Each worker evaluates an equal share of the
    first data.eval_examples validation rows (stream.eval_batches): fewer rows than workers, none.
    workers 0 (before the cluster says how many): only what does not depend on them."""
    rows = sum(s.rows for s in dataset.splits.get("validation", ()))
    if not cfg.data.eval_examples:
        return "data.eval_examples is 0; --set data.eval_examples=1024 evaluates on the first 1024 validation rows"
    if rows and (not workers or min(cfg.data.eval_examples, rows) >= workers):
        return None
    from contract import holdout

    held = f"holds {rows} validation examples, fewer than the {workers} workers" if rows else "holds no validation examples"
    return f"{redact(dataset.url)} {held}: {holdout.hint(dataset.kept_pages, at_least=max(workers, 1))}"


def _init(cfg, dataset: data.Dataset):
    """cfg with what --init adds (training/train/init.py `prepare`), its lines said."""
    from training.hf import subword_vocab_of

    seq_len = cfg.data.seq_len or dataset.seq_len
    subword = cfg.train.objective == "subword"
    vocab = subword_vocab_of(cfg.data.path) if subword else None
    size = data.vocab_size(dataset.tokenizer_url) if subword else 0
    cfg, lines = init.prepare(cfg, config.model_config(cfg, size), vocab, seq_len, say=_say)
    for line in lines:
        _say(line)
    return cfg


def _finished(cfg, dataset: data.Dataset, saved: dict | None) -> dict:
    """A finished run's saved summary, once its config is checked against this one: no Ray needed
    (resolve_with_data takes the device, workers and precision from the run's config.yaml)."""
    from contract.lock import OutputLock

    cfg = resolve_with_data(cfg, dataset, 0, saved)
    with OutputLock(cfg.output, command=_lock_command(cfg)):
        _save_or_check_config(cfg, saved)
        _say(f"{redact(cfg.output)} holds this run, finished at step {cfg.train.max_steps}; nothing to do")
        return json.loads(rundir.read(rundir.join(cfg.output, rundir.SUMMARY)))


# Off only in tests that reach the workers' own sha256 check (data.verify_shard) on a first start.
HASH_AT_FIRST_START = True


def pretrain(cfg) -> dict:
    """Run (or resume) the pretraining `cfg` describes; returns the summary also written to
    OUTPUT/summary.json. A Ctrl-C leaves as contract's Interrupted, once the workers have stopped
    and the run's lock is released: `interrupted` says how far the run got."""
    try:
        return _pretrain(cfg)
    except Interrupted:
        raise
    except KeyboardInterrupt as e:
        raise Interrupted(interrupted(cfg)) from e


def _pretrain(cfg) -> dict:
    import ray

    from contract.lock import OutputLock

    if not cfg.output or not cfg.data.path:
        raise ValueError("pretraining needs output (--output) and data.path (--data)")
    cfg = rundir.absolute_paths(cfg)
    config.validate(cfg)
    consolidated, summary_url = rundir.join(cfg.output, rundir.CONSOLIDATED), rundir.join(cfg.output, rundir.SUMMARY)
    finished = rundir.exists(consolidated) and rundir.exists(summary_url)  # written only after the last step
    if not finished:  # a read-only --output: one line now, not after Ray's start
        rundir.check_writable(cfg.output)
    dataset = data.open_dataset(cfg.data.path)
    checkpointed = rundir.last_checkpoint(cfg.output)
    # A first start hashes every shard before Ray starts (a changed byte fails here, with no run
    # directory made); a resumption reads the footers only: hashed at its first start, and the
    # workers hash each shard on their first read of it.
    data.check_shards(dataset, whole=HASH_AT_FIRST_START and not (checkpointed or finished), say=_say)
    saved = rundir.read_saved_config(cfg.output) if checkpointed or finished else None
    cfg = init.resumed(cfg, saved)  # an --init run resumes from its checkpoint, never from the init again
    if finished:
        return _finished(cfg, dataset, saved)
    if saved is not None:  # a resumption's device, workers and precision come from its config.yaml, not
        # the cluster (config.resolve): a changed config is refused before Ray starts
        _check_config(resolve_with_data(cfg, dataset, 0, saved), saved)
    check_data(cfg, dataset, saved, checkpointed)  # what the manifest decides: no Ray start to find it out
    if saved is None and cfg.init.path:  # the run's first start: read and check the init before Ray starts
        cfg = _init(cfg, dataset)
    why = _no_evaluation(cfg, dataset)
    if why:
        _say(f"no validation loss or accuracy in this run: {why}")
    tracking.check(cfg, say=_say)  # an MLflow server that cannot be reached: said before Ray starts
    started = connect(cfg)
    try:
        cfg = resolve_with_data(cfg, dataset, ray.cluster_resources().get("GPU", 0), saved)
        # Before the lock creates the output: a run the cluster cannot place leaves nothing behind.
        resources.await_resources(resources.needs(cfg), cfg.parallel.resource_wait_s)
        with OutputLock(cfg.output, command=_lock_command(cfg)) as lock:
            _save_or_check_config(cfg, saved)
            if checkpointed:
                _say(f"resuming from step {checkpointed[0]} (the last checkpoint, {redact(checkpointed[1])})")
            p, t = cfg.parallel, cfg.train
            _say(run_line(cfg))
            late = None if why else _no_evaluation(cfg, dataset, p.workers)  # fewer validation rows than workers
            if late:
                _say(f"no validation loss or accuracy in this run: {late}")
            # Ray Train's controller, then a process per worker that imports torch and DeepSpeed and
            # joins the process group: 20-40 s on a 2-core machine before rank 0 says it is up.
            _say(f"starting {p.workers} Ray Train worker{'s' * (p.workers != 1)} ...")
            with metrics.ProgressPrinter(t.max_steps, say=_say) as progress:
                result = fit(cfg, progress.sink, before_restart=lock.check)
            lock.check()  # another driver took the output over: write no summary or export over its run
            if not t.micro_batch:
                cfg = _saved_micro_batch(cfg, rundir.read_saved_config(cfg.output))
                _say(f"--micro-batch auto chose {cfg.train.micro_batch} per worker (saved in {rundir.CONFIG})")
            summary = run_summary(cfg, rundir.read_metrics(cfg.output))
            # The URL, not Ray's path on the storage filesystem (which drops the s3:// of a store).
            summary["checkpoint"] = (rundir.join(cfg.output, rundir.CHECKPOINTS, os.path.basename(result.checkpoint.path))
                                     if result.checkpoint else None)
            if summary["finished"] and rundir.exists(consolidated):
                summary["consolidated"] = consolidated
                summary["hf_export"] = export(cfg, consolidated)
            atomic_write(summary_url, json.dumps(summary, indent=1).encode("utf-8"))
            tracking.finish_run(cfg, "FINISHED" if summary["finished"] else "KILLED", say=_say)  # artifacts, the end
            if t.stop_at_step and not summary["finished"] and summary["steps"]:
                _say(f"stopped at step {summary['steps']} of {t.max_steps} (--stop-at-step {t.stop_at_step}), "
                     f"checkpointed in {redact(summary['checkpoint'] or cfg.output)}; to go on, the same command "
                     "without --stop-at-step (or with a later one)")
            return summary
    except BaseException as e:  # the MLflow run ends with the run: Ctrl-C is KILLED, anything else FAILED
        tracking.end_run(cfg, "KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
        raise
    finally:
        if started:
            disconnect()
