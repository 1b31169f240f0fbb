"""The real tiny run that tests/jobs/test_any_checkpoint.py and tests/jobs/test_json_stdout.py
both read. Each started a `canine pretrain` of its own (Ray, DeepSpeed, the export: ~2 min apiece on
the shared 2-core machine); one run serves both, as a new user's shell runs it (no DS_ACCELERATOR,
no CANINE_*, MLflow or Ray variables: what test_json_stdout checks stdout under) and tracked on the
session's MLflow server:

    2 workers under DeepSpeed ZeRO-2 (each checkpoint holds two optimizer partitions), 6 steps, a
    checkpoint every 2, the last 2 kept: steps 4 and 6 saved, step 2's deleted (test_any_checkpoint
    checks this).
"""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT_VARIABLES = ("DS_ACCELERATOR", "CANINE", "MLFLOW", "RAY_ADDRESS", "TORCHINDUCTOR")


def _clean_env() -> dict:
    """A new user's environment (test_json_stdout.py's own): none of the variables the project or the suite set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROJECT_VARIABLES)}
    return {**env, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}


def _canine(*args, cwd, timeout=600) -> subprocess.CompletedProcess:
    """`canine ARGS` as a user runs it, from `cwd`, in _clean_env()."""
    return subprocess.run(_argv(args), cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout)


def _argv(args) -> list[str]:
    return [sys.executable, "-m", "jobs.cli", *map(str, args)]


class Watched(subprocess.CompletedProcess):
    """A finished command, and `listening`: {(process name, pid, address, port)} of every socket its
    process tree (the driver, the local Ray cluster it started, the Ray Train workers) listened on,
    read every second while it ran."""

    listening: set


def _canine_watched(*args, cwd, timeout=600) -> Watched:
    """_canine, reading the listening sockets of the command's processes as it runs."""
    import psutil

    proc = subprocess.Popen(_argv(args), cwd=cwd, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    listening, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            try:
                root = psutil.Process(proc.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for p in tree:
                try:
                    listening.update((p.name(), p.pid, c.laddr.ip, c.laddr.port) for c in p.net_connections("inet")
                                     if c.status == psutil.CONN_LISTEN)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
            done.wait(1.0)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
        done.set()
        watcher.join()
    result = Watched(proc.args, proc.returncode, stdout, stderr)
    result.listening = listening
    return result


@pytest.fixture(scope="session")
def tracked_run(contract_shards, mlflow_server, tmp_path_factory):
    """(the run's directory, pretrain's Watched): `canine pretrain` as README shows it."""
    out = tmp_path_factory.mktemp("tracked") / "run"
    done = _canine_watched("pretrain", "--data", contract_shards, "--output", out, "--config", "tiny", "--workers", 2,
                           "--max-steps", 6, "--checkpoint-every", 2, "--keep-checkpoints", 2,
                           "--set", f"log.mlflow={mlflow_server}", cwd=out.parent)
    return out, done
