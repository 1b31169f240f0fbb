"""Experiment tracking with MLflow: `--set log.mlflow=URI` (or `on`), or MLflow's own
MLFLOW_TRACKING_URI.

    canine pretrain ... --set log.mlflow=http://127.0.0.1:5000      # a tracking server
    canine pretrain ... --set log.mlflow=on                          # OUTPUT/mlflow.db, an embedded store
    MLFLOW_TRACKING_URI=http://127.0.0.1:5000 canine pretrain ...    # as MLflow's clients read it
    canine pretrain ... --set log.mlflow=off                         # not tracked, whatever the environment says

log.mlflow left unset takes MLFLOW_TRACKING_URI where it is set, as MLflow's own clients do (a
URI given in code, here log.mlflow, wins over it): `setting`, which the config's loader applies
in the driver (training/train/config.py `load_config`), so the workers and config.yaml see the URI.

One MLflow run per run directory. It is created at the first start and its id kept in
OUTPUT/mlflow.json, so a resumed run (any worker count, any restart) logs into the same MLflow
run. What goes there:
- params: the resolved config, flattened (`train.max_steps`, ...), once, at creation; a resumed
  run that changes a resumable option records the new value as a tag `resumed.STEP.KEY`
  (MLflow refuses to change a param);
- metrics: every numeric field of every metrics.jsonl record (training and evaluation), at its
  step, in batches at each checkpoint and at the end; a resumed run logs only the steps after the
  last one the MLflow run holds: resume is exact, so those it skips hold the same values;
- artifacts, when the run ends: summary.json, config.yaml, the loss curves and the model card.
Credentials are never written: URLs in params and in mlflow.json are masked (contract/files.py
`redact`); a server's user and password come from MLflow's own environment variables
(MLFLOW_TRACKING_USERNAME / _PASSWORD / _TOKEN), which nothing here reads or stores.

`on` uses SQLite inside the run directory (OUTPUT/mlflow.db, artifacts in OUTPUT/mlartifacts):
MLflow 3 refuses its old file store ("./mlruns") unless told otherwise and recommends SQLite for
a local store; `mlflow ui --backend-store-uri sqlite:///OUTPUT/mlflow.db` shows it. An object-store
OUTPUT cannot hold a SQLite file: give a tracking URI there.

Needs the `tracking` extra (mlflow), imported only when log.mlflow is set. W&B users: docs/tracking.md.
"""

import json
import os
import re
import time

from contract.extras import install_hint
from contract.files import redact
from training.train import rundir

RECORD = "mlflow.json"  # OUTPUT/mlflow.json: {"run_id", "experiment_id", "tracking_uri" (masked)}
EMBEDDED = "on"
OFF = "off"  # log.mlflow=off: no tracking, MLFLOW_TRACKING_URI or not
ENV = "MLFLOW_TRACKING_URI"  # MLflow's own variable (mlflow.environment_variables), read by its clients
DB = "mlflow.db"
ARTIFACTS = "mlartifacts"
EXPERIMENT = "canine"
_BATCH = 1000  # MLflow's log_batch limit on metrics per call
_MAX_PARAM = 6000  # MLflow 3's limit on a param value's length


class TrackingError(ValueError):
    """log.mlflow cannot be used as set: the message says why and what to do. `whole_error`: the
    message holds MLflow's error shortened (`unreachable`), whose whole text, with its traceback,
    the CLI writes to a file and names (jobs/errors.py)."""

    whole_error = False


def unreachable(uri: str, e: Exception, limit: int = 160) -> TrackingError:
    """The error for a store that could not be used: MLflow's message on one line, cut at a word
    (its requests errors run to 400 characters, the reason last), then the reason itself (an errno
    line such as `[Errno 111] Connection refused`) where the cut left it out."""
    text = " ".join(redact(str(e)).split())
    if len(text) > limit:
        reason = re.findall(r"\[Errno -?\d+\] [^'\"()]+", text)
        shown = text[:limit].rsplit(" ", 1)[0].rstrip(" ,:;(") + " …"
        text = shown + (f" {reason[-1].strip()}" if reason and reason[-1] not in shown else "")
    error = TrackingError(f"log.mlflow {redact(uri)}: {type(e).__name__}: {text}; "
                          "check the server (mlflow server), its address and credentials")
    error.whole_error = True
    return error


def _mlflow():
    import logging

    # MLflow and alembic announce each store set-up ("Creating initial MLflow database tables...")
    # at INFO on the run's console; their warnings still show.
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        import mlflow  # noqa: F401
        from mlflow import MlflowClient
    except ImportError:
        raise TrackingError("log.mlflow: MLflow is not installed in this environment; install the tracking extra "
                            f"({install_hint('tracking')}) or leave log.mlflow unset") from None
    return MlflowClient


def setting(value: str, environ=None) -> str:
    """log.mlflow as a run uses it: `value` where it names a store; unset (''), MLFLOW_TRACKING_URI
    where the environment sets it, as MLflow's clients take it when no URI is given in code
    (a user's report: it was ignored without a word); `off`: '' (no tracking) either way."""
    value = value.strip()
    if value.lower() == OFF:
        return ""
    return value or (os.environ if environ is None else environ).get(ENV, "").strip()


def tracking_uri(setting: str, output: str) -> str:
    """The tracking URI `log.mlflow` names: `on` = SQLite in the (local) run directory."""
    if setting.strip().lower() != EMBEDDED:
        return setting
    if "://" in output and not output.startswith("file://"):
        raise TrackingError(f"log.mlflow=on keeps an SQLite store in the run directory, and {redact(output)} is "
                            "not a local directory; give a tracking server's URI (log.mlflow=http://HOST:PORT)")
    path = output[len("file://"):] if output.startswith("file://") else output
    return "sqlite:///" + os.path.join(os.path.abspath(path), DB)


def _artifact_location(setting: str, output: str) -> str | None:
    if setting.strip().lower() != EMBEDDED:
        return None  # the server's own default artifact root
    path = output[len("file://"):] if output.startswith("file://") else output
    return os.path.join(os.path.abspath(path), ARTIFACTS)


def flatten(config: dict, prefix: str = "") -> dict[str, str]:
    """{"train.max_steps": "12", ...}: the config as MLflow params (strings, URLs masked)."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            text = redact(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            out[name] = text[:_MAX_PARAM]
    return out


def _read_record(output: str) -> dict | None:
    raw = rundir.read(rundir.join(output, RECORD))
    return None if raw is None else json.loads(raw.decode("utf-8"))


class Tracker:
    """The run directory's MLflow run: `open` creates or reopens it; `log` queues a metrics.jsonl
    record, `flush` sends what is queued; `finish` logs the end-of-run artifacts and closes it."""

    def __init__(self, client, run_id: str, last_step: int):
        self.client, self.run_id, self.last_step = client, run_id, last_step
        self._queue = []

    @classmethod
    def open(cls, cfg, config: dict, resume_step: int = 0) -> "Tracker":
        """The MLflow run of `cfg.output` (created at the first start, params logged then); on a
        resume the changed resumable options are tagged and metrics continue after the run's last
        logged step. `config`: the resolved config as a dict (what config.yaml holds)."""
        from contract.files import atomic_write

        Client = _mlflow()
        uri = tracking_uri(cfg.log.mlflow, cfg.output)
        client = Client(tracking_uri=uri)
        saved = _read_record(cfg.output)
        try:
            if saved is None:
                experiment = client.get_experiment_by_name(cfg.log.mlflow_experiment)
                experiment_id = (experiment.experiment_id if experiment is not None else client.create_experiment(
                    cfg.log.mlflow_experiment, artifact_location=_artifact_location(cfg.log.mlflow, cfg.output)))
                run = client.create_run(experiment_id, run_name=os.path.basename(cfg.output.rstrip("/")) or None,
                                        tags={"canine.output": redact(cfg.output)})
                run_id = run.info.run_id
                from mlflow.entities import Param

                params = [Param(k, v) for k, v in sorted(flatten(config).items())]
                for i in range(0, len(params), 100):  # MLflow's limit on params per call
                    client.log_batch(run_id, params=params[i:i + 100])
                atomic_write(rundir.join(cfg.output, RECORD), json.dumps(
                    {"run_id": run_id, "experiment_id": experiment_id, "tracking_uri": redact(uri)}).encode())
                return cls(client, run_id, 0)
            run_id = saved["run_id"]
            run = client.get_run(run_id)
        except TrackingError:
            raise
        except Exception as e:  # an unreachable server, a refused token, a run deleted on the server
            raise unreachable(uri, e) from e
        old = run.data.params
        changed = {k: v for k, v in flatten(config).items() if k in old and old[k] != v}
        for key, value in changed.items():
            client.set_tag(run_id, f"resumed.{resume_step}.{key}"[:250], value)
        if run.info.status != "RUNNING":
            client.update_run(run_id, status="RUNNING")
        history = client.get_metric_history(run_id, "loss")
        return cls(client, run_id, max((m.step for m in history), default=0))

    def log(self, record: dict) -> None:
        """Queue a metrics.jsonl record's numeric fields at its step (steps MLflow has are skipped)."""
        step = record["step"]
        if step <= self.last_step:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._queue += [Metric(key, float(value), now, step) for key, value in record.items()
                        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)]
        self.last_step = step

    def flush(self) -> None:
        queue, self._queue = self._queue, []
        for i in range(0, len(queue), _BATCH):
            self.client.log_batch(self.run_id, metrics=queue[i:i + _BATCH])

    def finish(self, output: str, status: str = "FINISHED") -> None:
        """Log the run's end artifacts (those that exist) and end the MLflow run with `status`."""
        self.flush()
        import tempfile

        with tempfile.TemporaryDirectory(prefix="canine-mlflow-") as tmp:
            for name in (rundir.SUMMARY, rundir.CONFIG, rundir.CURVES, rundir.SCORES,
                         os.path.join(rundir.HF, "README.md")):
                raw = rundir.read(rundir.join(output, name))
                if raw is None:
                    continue
                path = os.path.join(tmp, os.path.basename(name))
                with open(path, "wb") as f:
                    f.write(raw)
                self.client.log_artifact(self.run_id, path)
        self.client.set_terminated(self.run_id, status=status)


def check(cfg, timeout_s: float = 15.0, say=None) -> None:
    """Before Ray starts (the driver): log.mlflow names a store this process can reach, or one
    line saying why not. Nothing is created: a run that fails before its first step leaves no
    MLflow run and no OUTPUT/mlflow.json. `say` is told what it waits for when the check (MLflow's
    import, then one request) runs past metrics.SLOW_S: a server that accepts and never answers
    takes the whole `timeout_s` (16 s measured with the import), and a run tracked on a real
    server once waited 133 s here before its first line."""
    if not cfg.log.mlflow:
        return
    from training.train.metrics import said_if_slow

    embedded = cfg.log.mlflow.strip().lower() == EMBEDDED
    with said_if_slow(None if embedded else say, f"checking the MLflow server at {redact(cfg.log.mlflow)} (one "
                                                 f"request, {timeout_s:.0f} s at most) ..."):
        _check(cfg, timeout_s)


def _check(cfg, timeout_s: float) -> None:
    Client = _mlflow()
    uri = tracking_uri(cfg.log.mlflow, cfg.output)
    if uri.startswith("sqlite:"):
        return  # a file this run creates
    # One bounded try: MLflow's HTTP client otherwise retries with backoff for minutes.
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT=str(int(timeout_s)))
    try:
        Client(tracking_uri=uri).search_experiments(max_results=1)
    except Exception as e:
        raise unreachable(uri, e) from e
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def end_run(cfg, status: str) -> None:
    """Mark the run directory's MLflow run ended (FAILED, KILLED) when pretraining stops early; a
    tracking server that fails here does not hide the error that ended the run."""
    if not cfg.log.mlflow or _read_record(cfg.output) is None:
        return
    try:
        Client = _mlflow()
        Client(tracking_uri=tracking_uri(cfg.log.mlflow, cfg.output)).set_terminated(
            _read_record(cfg.output)["run_id"], status=status)
    except Exception:  # noqa: BLE001 (best effort: the run's own error is what the user must see)
        pass


def finish_run(cfg, status: str = "FINISHED", say=None) -> None:
    """At the end of `canine pretrain` (the driver): the artifacts and the end of the MLflow run
    the workers logged into; nothing when log.mlflow is unset or no MLflow run was made. `say`:
    told what it waits for if that runs past metrics.SLOW_S."""
    if not cfg.log.mlflow or _read_record(cfg.output) is None:
        return
    from training.train.metrics import said_if_slow

    embedded = cfg.log.mlflow.strip().lower() == EMBEDDED
    with said_if_slow(None if embedded else say, f"logging the run's artifacts to the MLflow server at "
                                                 f"{redact(cfg.log.mlflow)} ..."):
        tracker = Tracker.open(cfg, {}, 0)
        tracker.finish(cfg.output, status)
