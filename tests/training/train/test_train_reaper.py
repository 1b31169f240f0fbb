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

run.connect(config.load_config("tiny", {"parallel.workers": 1}))
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


TIMED_OUT = ("The current node timed out during startup. This could happen because some of the raylet failed to "
             "startup or the GCS has become overloaded.")


def _flaky_start(monkeypatch, errors: list):
    """run.init_local replaced by one that starts a child process (as ray.init starts the GCS) and
    then raises the next of `errors` (None: comes up); the children it started."""
    from training.train import run

    started = []

    def init_local(num_cpus, **kwargs):
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
        error = errors.pop(0)
        if error is not None:
            raise error

    monkeypatch.setattr(run, "init_local", init_local)
    return started


def test_a_local_start_that_times_out_is_stopped_and_made_once_more(monkeypatch):
    """run.connect: Ray's fixed wait for a new raylet ran out once in the suite (run.py says
    when); the processes of that start are stopped, one line says so, and the second start is the
    run's, whose processes the reaper stops with the run."""
    from training.train import config, run

    said = []
    started = _flaky_start(monkeypatch, [Exception(TIMED_OUT), None])
    try:
        assert run.connect(config.load_config("tiny", {"parallel.workers": 1}), say=said.append) is True
        assert started[0].wait(timeout=10) is not None and started[1].poll() is None
        assert said[0].startswith("starting a local Ray cluster on 127.0.0.1")
        assert said[1:] == [f"the local Ray cluster did not come up in Ray's {run.RAYLET_WAIT_S} s (its raylet "
                            "did not register); stopped it, starting it once more ..."]
    finally:
        run.disconnect()
        for p in started:
            p.kill()
    assert started[1].wait(timeout=10) is not None


@pytest.mark.parametrize("errors", [[Exception(TIMED_OUT), Exception(TIMED_OUT)], [OSError("no space"), None],
                                    [KeyboardInterrupt(), None]], ids=["twice", "other", "ctrl-c"])
def test_a_second_time_out_or_another_failure_ends_the_start_with_nothing_left(monkeypatch, errors):
    from training.train import config, run

    monkeypatch.setattr(run, "_say", lambda text: None)
    raised_in_order = list(errors)
    started = _flaky_start(monkeypatch, errors)
    try:
        with pytest.raises(BaseException) as raised:
            run.connect(config.load_config("tiny", {"parallel.workers": 1}))
        tries = 2 if str(raised_in_order[0]) == TIMED_OUT else 1  # only a time-out is tried again
        assert len(started) == tries and raised.value is raised_in_order[tries - 1]
        assert all(p.wait(timeout=10) is not None for p in started)  # stopped, none left running
    finally:
        for p in started:
            p.kill()


def test_rays_wait_for_a_new_raylet_is_still_what_run_says():
    from ray._private import node

    from training.train import run

    source = Path(node.__file__).read_text()
    assert f"raylet_start_wait_time_s = {run.RAYLET_WAIT_S}\n" in source and "timed out during startup" in source
