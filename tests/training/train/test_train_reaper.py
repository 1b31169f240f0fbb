"""A local Ray cluster goes with the driver that started it, even one killed with SIGKILL: Ray's
agents used to outlive it by a minute (training/train/reaper.py says why)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[3]
DRIVER = """
import sys, time
import psutil
from training.train import config, run

run._connect(config.load_config("tiny", {"parallel.workers": 1}))
print(" ".join(str(p.pid) for p in psutil.Process().children(recursive=True)), flush=True)
time.sleep(600)
"""


def _alive(pids) -> list[str]:
    left = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {p.name()}")
        except psutil.NoSuchProcess:
            pass
    return left


@pytest.mark.slow  # a local Ray cluster, started in its own process
def test_a_killed_driver_takes_its_local_cluster_within_10_s(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        line = driver.stdout.readline()
        assert line.strip(), "the driver printed no process tree"
        time.sleep(3)  # the raylet starts its agents after ray.init returns
        pids = [int(p) for p in line.split()] + [c.pid for c in psutil.Process(driver.pid).children(recursive=True)]
        names = {psutil.Process(p).name() for p in pids if _alive([p])}
        assert any(n.startswith("ray::") for n in names) or "raylet" in names, names  # the cluster is up
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 10
        while _alive(pids) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _alive(pids), f"alive 10 s after the driver's SIGKILL: {_alive(pids)}"
    finally:
        driver.kill()
