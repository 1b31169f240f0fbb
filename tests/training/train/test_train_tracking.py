"""MLflow tracking (training/train/tracking.py) against a real `mlflow server` on 127.0.0.1 and
the embedded SQLite store: params once, every step's metrics once across a resume, artifacts and
the run's end, no credentials written."""

import json
import os
import socket

import mlflow
import pytest

from training.train import config, tracking
from training.train.metrics import MetricsLog


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# mlflow_server: the session's real server (tests/conftest.py).


def _cfg(output, setting, **overrides):
    return config.load_config("tiny", {"output": str(output), "log.mlflow": setting,
                                       "data.path": "s3://AKIAKEY:hunter2@bucket/shards", **overrides})


def _record(step, **extra):
    return {"step": step, "loss": 10.0 - step, "accuracy": 0.1 * step, "lr": 1e-3, "grad_norm": None,
            "examples_per_s": 4.0, **extra}


def _history(client, run_id, key):
    return [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


@pytest.mark.parametrize("where", ["server", "embedded"])
def test_a_run_logs_params_once_and_each_step_once_across_a_resume(tmp_path, mlflow_server, where):
    setting = mlflow_server if where == "server" else "on"
    output = tmp_path / "run"
    cfg = _cfg(output, setting)
    log = MetricsLog(str(output), 0, False, tracking.Tracker.open(cfg, config.to_dict(cfg), 0))
    for step in range(1, 6):  # steps 1-5 logged; the checkpoint (sync) covers them
        log.log(_record(step, **({"eval_loss": 3.5} if step == 4 else {})))
    log.sync()
    log.close()

    saved = json.loads((output / tracking.RECORD).read_text())
    assert "hunter2" not in (output / tracking.RECORD).read_text()
    client = mlflow.MlflowClient(tracking_uri=tracking.tracking_uri(setting, str(output)))
    run = client.get_run(saved["run_id"])
    assert run.data.params["train.max_steps"] == str(cfg.train.max_steps)
    assert run.data.params["log.mlflow"] == setting and "hunter2" not in json.dumps(run.data.params)
    assert run.data.params["data.path"] == "s3://***@bucket/shards"

    # A resume from the checkpoint at step 3 trains 4-7 again: 4 and 5 are in MLflow already.
    again = _cfg(output, setting, **{"log.console_every": 2})
    log = MetricsLog(str(output), 3, False, tracking.Tracker.open(again, config.to_dict(again), 3))
    for step in range(4, 8):
        log.log(_record(step))
    log.close()
    assert json.loads((output / tracking.RECORD).read_text())["run_id"] == saved["run_id"]
    assert _history(client, saved["run_id"], "loss") == [(s, 10.0 - s) for s in range(1, 8)]
    assert _history(client, saved["run_id"], "eval_loss") == [(4, 3.5)]
    assert "grad_norm" not in client.get_run(saved["run_id"]).data.metrics  # None is not a figure
    assert client.get_run(saved["run_id"]).data.tags["resumed.3.log.console_every"] == "2"

    (output / "summary.json").write_text('{"finished": true}')
    tracking.finish_run(again)
    done = client.get_run(saved["run_id"])
    assert done.info.status == "FINISHED"
    assert [a.path for a in client.list_artifacts(saved["run_id"])] == ["summary.json"]
    if where == "embedded":
        assert (output / tracking.DB).exists() and (output / tracking.ARTIFACTS).is_dir()


def test_mlflow_tracking_uri_alone_is_honoured_as_mlflows_clients_do(tmp_path, mlflow_server, monkeypatch, capsys):
    """MLFLOW_TRACKING_URI set, log.mlflow not: the run was not tracked, without a word. Now it is tracked there; log.mlflow given wins, as a URI given in code does with
    MLflow's clients; log.mlflow=off is off."""
    from jobs import cli

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    assert cli.main(["pretrain", "--dry-run"]) == 0  # the resolved config, as a user checks it
    assert f"  mlflow: {mlflow_server}\n" in capsys.readouterr().out
    cfg = config.load_config("tiny", {"output": str(tmp_path / "run")})
    tracker = tracking.Tracker.open(cfg, config.to_dict(cfg), 0)
    run = mlflow.MlflowClient(tracking_uri=mlflow_server).get_run(tracker.run_id)
    assert run.data.params["log.mlflow"] == mlflow_server
    assert config.load_config("tiny", {"log.mlflow": "on"}).log.mlflow == "on"
    assert config.load_config("tiny", {"log.mlflow": "off"}).log.mlflow == ""
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert config.load_config("tiny").log.mlflow == ""


def test_unusable_settings_are_refused_in_one_line(tmp_path):
    with pytest.raises(tracking.TrackingError, match=r"log.mlflow=on keeps an SQLite store .* not a local directory"):
        tracking.tracking_uri("on", "s3://bucket/run")
    closed = f"http://127.0.0.1:{_free_port()}"
    cfg = _cfg(tmp_path / "run", closed)
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    try:
        with pytest.raises(tracking.TrackingError, match=rf"log.mlflow {closed}: .*check the server") as caught:
            tracking.Tracker.open(cfg, config.to_dict(cfg), 0)
    finally:
        del os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
    assert not (tmp_path / "run" / tracking.RECORD).exists()
    # MLflow's 400-character requests error: cut at a word, its reason kept, the whole of it on file
    assert "Connection refused; check the server" in str(caught.value) and caught.value.whole_error


def test_a_server_slow_to_answer_is_said_while_the_check_waits(tmp_path, monkeypatch):
    """A user's report: a run tracked on a real server was silent 133 s before its first line. A server
    that accepts and never answers holds the check for its whole time-out: said once it has
    waited metrics.SLOW_S (here 0.5 s), nothing said when the answer comes at once."""
    import time

    from training.train import metrics

    monkeypatch.setattr(metrics, "SLOW_S", 0.5)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)  # connections queue, nothing answers
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        said = []
        with pytest.raises(tracking.TrackingError, match=rf"log.mlflow {url}: .*check the server"):
            tracking.check(_cfg(tmp_path / "run", url), timeout_s=2, say=said.append)
    assert said == [f"checking the MLflow server at {url} (one request, 2 s at most) ..."]
    said.clear()
    with pytest.raises(tracking.TrackingError, match="Connection refused"):
        tracking.check(_cfg(tmp_path / "run", f"http://127.0.0.1:{_free_port()}"), timeout_s=2, say=said.append)
    time.sleep(0.6)  # the cancelled timer never says it later
    assert said == []


def test_a_long_cause_is_cut_at_a_word_and_keeps_its_reason():
    cause = Exception("API request to http://h:9/api/2.0/mlflow/experiments/search failed with exception "
                      "HTTPConnectionPool(host='h', port=9): Max retries exceeded with url: /api/2.0/mlflow/"
                      "experiments/search (Caused by NewConnectionError(\"HTTPConnection(host='h', port=9): Failed "
                      "to establish a new connection: [Errno 111] Connection refused\"))")
    line = str(tracking.unreachable("http://h:9", cause))
    shown = line.split(": ", 2)[2].split(" …")[0]
    assert str(cause).startswith(shown) and not str(cause)[len(shown)].isalnum()  # a whole word last
    assert line.endswith(" … [Errno 111] Connection refused; check the server (mlflow server), its address and "
                         "credentials")
    short = str(tracking.unreachable("http://h:9", Exception("refused")))
    assert short == "log.mlflow http://h:9: Exception: refused; check the server (mlflow server), its address and credentials"


@pytest.mark.slow
def test_pretrain_tracks_a_stopped_and_resumed_run_once_per_step(tmp_path, contract_shards):
    """`canine pretrain --set log.mlflow=on` through the CLI: stopped at step 2, resumed to 4;
    the MLflow run holds steps 1-4 once each, the config once, and ends FINISHED with the
    run's artifacts. An unreachable server is refused before Ray starts, leaving nothing."""
    from jobs import cli

    common = ["pretrain", "--config", "tiny", "--data", contract_shards, "--output", str(tmp_path / "run"),
              "--set", "train.max_steps=4", "--set", "train.eval_every=0", "--set", "checkpoint.every=2",
              "--set", "parallel.workers=1", "--set", "log.mlflow=on"]
    assert cli.main([*common, "--stop-at-step", "2"]) == 0
    client = mlflow.MlflowClient(tracking_uri=tracking.tracking_uri("on", str(tmp_path / "run")))
    run_id = json.loads((tmp_path / "run" / tracking.RECORD).read_text())["run_id"]
    assert client.get_run(run_id).info.status == "KILLED"
    assert cli.main(common) == 0
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["train.max_steps"] == "4"
    assert [s for s, _ in _history(client, run_id, "loss")] == [1, 2, 3, 4]
    assert {"summary.json", "config.yaml", "README.md"} <= {a.path for a in client.list_artifacts(run_id)}

    closed = f"http://127.0.0.1:{_free_port()}"
    code = cli.main(["pretrain", "--config", "tiny", "--data", contract_shards, "--output", str(tmp_path / "other"),
                     "--set", f"log.mlflow={closed}"])
    assert code == 2 and not (tmp_path / "other").exists()
