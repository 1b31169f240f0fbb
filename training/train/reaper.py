"""The processes of a local Ray cluster go with the driver that started them, even a killed one.

A driver killed with SIGKILL cannot stop its cluster. Ray fate-shares the GCS and the raylet
with it, but the raylet's agents (ray::DashboardAgent, ray::RuntimeEnvAgent) notice their
raylet's death and then report it to the dead GCS with a 60 s timeout
(ray/_private/process_watcher.py report_raylet_error_logs -> publish_error_to_driver(..., 60)):
they lived on for a minute, holding ports and memory. So `run.connect` starts this reaper
beside a local cluster: a small process in a session of its own (a Ctrl-C to the terminal does
not reach it), reading a pipe whose other end only the driver holds. It records the cluster's
process tree every second; when the pipe ends (the driver exited, however it died) it stops
whatever of that tree is left: SIGTERM, then SIGKILL after GRACE_S. Psutil comes with Ray.
"""

import os
import select
import subprocess
import sys
from pathlib import Path

GRACE_S = 3.0
SNAPSHOT_S = 1.0


def start(roots: list[int]) -> subprocess.Popen:
    """Watch the process trees under `roots` (the processes ray.init started) for this driver."""
    root = str(Path(__file__).resolve().parents[2])  # the project's root: `-m` finds this module
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "training.train.reaper", *map(str, roots)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
                            close_fds=True)


def _tree(roots, tracked: dict) -> None:
    """Add the live processes under `roots` to tracked {pid: create time} (a pid reused later by
    another process has another create time, and is left alone)."""
    import psutil

    for pid in roots:
        try:
            top = psutil.Process(pid)
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            try:
                tracked.setdefault(p.pid, p.create_time())
            except psutil.Error:
                pass


def stop(tracked: dict) -> None:
    import psutil

    alive = []
    for pid, created in tracked.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created:
                p.terminate()
                alive.append(p)
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(alive, timeout=GRACE_S)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass


def stop_trees(roots: list[int]) -> None:
    """Stop the process trees under `roots` now, as the reaper does when its driver goes (run.py:
    a local start that failed, whose processes Ray's shutdown does not know)."""
    tracked: dict = {}
    _tree(roots, tracked)
    stop(tracked)


def main(roots: list[int]) -> None:
    tracked: dict = {}
    while True:
        _tree(roots, tracked)
        ready, _, _ = select.select([sys.stdin], [], [], SNAPSHOT_S)
        if ready and not os.read(sys.stdin.fileno(), 1024):  # end of the pipe: the driver is gone
            break
    _tree(roots, tracked)
    stop(tracked)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]])
