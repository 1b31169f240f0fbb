"""stdout stays one JSON document: each command that prints JSON is run as the
README shows it, in a clean environment (no DS_ACCELERATOR, no CANINE_* or MLflow variables: a new
user's shell), and its stdout is json-loaded. DeepSpeed's logger writes to stdout
("Setting accelerator to CPU" came before evaluate's JSON) and MLflow prints "View run ... at:"
to stdout when a run ends (before pretrain's summary): jobs/quiet.py keeps stdout for the JSON.

One real tiny run (a local Ray cluster on 127.0.0.1, 6 steps, tracked on a real `mlflow server`
on 127.0.0.1; tests/jobs/conftest.py, shared with test_any_checkpoint.py) serves pretrain,
evaluate --step, report and export --step.
"""

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT_VARIABLES = ("DS_ACCELERATOR", "CANINE", "MLFLOW", "RAY_ADDRESS", "TORCHINDUCTOR")


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROJECT_VARIABLES)}
    return {**env, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}


def _canine(*args, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=_clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def _json(result):
    assert result.returncode == 0, result.stderr[-3000:]
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"stdout is not JSON: {result.stdout[:500]!r}") from None


# tracked_run (tests/jobs/conftest.py): (the run, pretrain's CompletedProcess) of `canine pretrain`
# as README shows it, in this clean environment, tracked on the session's mlflow server: 6 steps,
# checkpoints at 4 and 6.
STEPS, EARLIER = 6, 4


# What the run says it waits for, in this order (a user's report: the minute between the workers' line
# and step 1 was silent); "checking the MLflow server at ..." besides, where the check is slow.
WAITS = ("starting a local Ray cluster on 127.0.0.1 ", "2 cpu workers, ", "starting 2 Ray Train workers ...",
         "2 workers up; building the model, initialising DeepSpeed (ZeRO-2), opening the MLflow run ...",
         "the model and DeepSpeed's engine are ready; reading the first batches ", "exporting the final weights to ",
         "Hugging Face CanineModel exported to ")


@pytest.mark.slow
def test_pretrain_with_mlflow_prints_only_its_summary(tracked_run):
    run, result = tracked_run
    summary = _json(result)
    assert summary["steps"] == STEPS
    assert "View run" not in result.stdout + result.stderr and "View experiment" not in result.stderr
    assert (run / "mlflow.json").is_file()
    ours = [line.removeprefix("canine pretrain: ") for line in result.stderr.splitlines()
            if line.startswith("canine pretrain: ") and not line.startswith("canine pretrain: checking the MLflow")]
    assert len(ours) == len(WAITS) and all(line.startswith(w) for line, w in zip(ours, WAITS)), result.stderr
    first_step = next(i for i, line in enumerate(result.stderr.splitlines()) if "  step 1/6  " in line)
    assert result.stderr.splitlines()[first_step - 1].startswith("canine pretrain: the model and DeepSpeed's")


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback  # ::ffff:127.0.0.1 too


@pytest.mark.slow
def test_the_local_cluster_and_its_workers_listen_on_loopback_only(tracked_run):
    """`canine pretrain` says it starts its Ray cluster on 127.0.0.1: every socket of the run's
    processes (the driver, the GCS, the raylet, Ray's agents and workers, the Ray Train workers)
    listens there, none on the machine's network address (before: about 20 on every interface).
    One exception, not Ray's: the rendezvous store of the training workers' process group, a
    torch.distributed TCPStore that Ray Train starts on rank 0, binds every interface whatever
    host it is given (torch 2.13 has no bind address for it)."""
    _, result = tracked_run
    assert result.returncode == 0, result.stderr[-3000:]
    names = {name for name, _, _, _ in result.listening}
    assert {"gcs_server", "raylet"} <= names and any(n.startswith("ray::RayTrainWo") for n in names), names
    # Ray retitles a worker per task (ray::RayTrainWorker, ray::execute._setup_torch_process_group,
    # ray::RayTrainWorker.run_train_fn): the sampler may see the store under any of them, so the
    # store is known by its process, one that was a Ray Train worker at some sample, and by one port.
    train_workers = {pid for name, pid, _, _ in result.listening if name.startswith("ray::RayTrainWo")}
    outside = sorted(s for s in result.listening if not _loopback(s[2]))
    store = [s for s in outside if s[1] in train_workers and s[2] in ("::", "0.0.0.0")]
    assert outside == store and len({port for _, _, _, port in store}) <= 1, outside


@pytest.mark.slow
def test_evaluate_at_a_step_prints_json(tracked_run):
    run, _ = tracked_run
    result = _canine("evaluate", run, "--step", EARLIER, "--json", cwd=run.parent)
    assert _json(result)["step"] == EARLIER
    assert "Setting accelerator" not in result.stderr  # silenced, not moved: DeepSpeed's CPU fallback is intended


@pytest.mark.slow
def test_report_prints_json(tracked_run):
    run, _ = tracked_run
    assert _json(_canine("report", run, "--json", cwd=run.parent))["steps"] == STEPS


@pytest.mark.slow
def test_export_at_a_step_prints_only_its_own_line(tracked_run):
    run, _ = tracked_run
    to = run.parent / f"hf{EARLIER}"
    result = _canine("export", run, "--step", EARLIER, "--to", to, cwd=run.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = result.stdout.splitlines()  # DeepSpeed's "Setting accelerator to CPU" came first
    assert line.startswith(f"canine export: Hugging Face CanineModel of {run} at step {EARLIER} of {STEPS} "
                           "(checkpoint ")
    assert line.endswith(f" written to {to}")


@pytest.mark.slow
def test_export_prints_json(tracked_run):
    """`canine export --json` was answered `did you mean --to?`."""
    run, _ = tracked_run
    to = run.parent / "hf-json"
    written = _json(_canine("export", run, "--to", to, "--json", cwd=run.parent))
    assert written == {"run": str(run), "export": str(to), "step": STEPS, "max_steps": STEPS, "checkpoint": None,
                       "files": sorted(p.name for p in to.iterdir())}
    assert {"config.json", "model.safetensors", "README.md"} <= set(written["files"])


@pytest.mark.parametrize("command", ["evaluate", "report", "export"])
def test_an_error_under_json_is_json_on_stdout(command, tmp_path):
    result = _canine(command, tmp_path / "no-run", "--json", cwd=tmp_path)
    assert result.returncode == 2
    line = result.stderr.strip()
    assert json.loads(result.stdout) == {"error": line.removeprefix(f"canine {command}: ")}
