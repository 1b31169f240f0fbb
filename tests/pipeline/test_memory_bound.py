"""The preprocessing job runs in bounded memory (docs/scale.md): under a per-process memory limit
that the in-memory job of b86d9bd exceeds on the same input, both local runners finish, with the
same shards.

The limit is enforced twice, on the job's whole process tree (the launcher, the DirectRunner's
SDK workers, Dask's scheduler, nannies and workers): every process's resident memory is watched
(psutil, every 0.1 s; a process over LIMIT_MB kills the job and fails the test, naming it), and
where a memory cgroup can be made (cgroup v1 or v2, as root) the kernel holds the tree's sum to
(workers + 2) x LIMIT_MB. The input: the bundled sample repeated 16 times, 19.2 MB of XML, one
file a language; `canine preprocess --workers 2 --seq-len 2048`. Measured with
benchmarks/scale.py's sampler on this machine kind (AMD EPYC, AVX2), DirectRunner: at b86d9bd the
largest process peaked at 785 MB (an SDK worker; the launcher 626 MB, all 1834 MB), after the
change at 515 MB (the launcher 256 MB, all 1121 MB). The limit sits between the two.
"""

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

LIMIT_MB = 650
REPEAT = 16

pytestmark = pytest.mark.slow


def _cgroup(limit_bytes: int):
    """A memory cgroup limited to `limit_bytes`: (its cgroup.procs path, its folder), or None
    where none can be made (not root, no memory controller)."""
    name = f"canine-test-{uuid.uuid4().hex[:8]}"
    for base, limit_file in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
        folder = Path(base) / name
        try:
            folder.mkdir()
        except OSError:
            continue
        try:
            (folder / limit_file).write_text(str(limit_bytes))
            return folder / "cgroup.procs", folder
        except OSError:
            folder.rmdir()
    return None


def _remove_cgroup(folder: Path, wait_s: float = 30.0) -> None:
    """Remove the job's cgroup once it is empty: the job's worker processes may still be exiting
    after the job's own process has (rmdir then fails with EBUSY); any left after `wait_s` are
    killed, as the job's process group would be."""
    procs = folder / "cgroup.procs"
    deadline = time.monotonic() + wait_s
    while (pids := [int(p) for p in procs.read_text().split()]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    while True:
        try:
            folder.rmdir()
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline + 10:
                raise
            time.sleep(0.2)


class Watchdog(threading.Thread):
    """Kills the job's process group when one of its processes goes over `limit_mb` of RSS."""

    def __init__(self, proc, limit_mb):
        super().__init__(daemon=True)
        self.proc, self.limit = proc, limit_mb * 1e6
        self.peak, self.over = {}, None
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set() and self.proc.poll() is None:
            try:
                root = psutil.Process(self.proc.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for p in procs:
                try:
                    rss, name = p.memory_info().rss, " ".join(p.cmdline()[1:3])
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                self.peak[name] = max(self.peak.get(name, 0), rss)
                if rss > self.limit and self.over is None:
                    self.over = f"{name} (pid {p.pid}) at {rss / 1e6:.0f} MB"
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    return
            self.stop.wait(0.1)


def run_limited(args, tmp_path, workers):
    limit = _cgroup(int((workers + 2) * LIMIT_MB * 1e6))
    procs_file = str(limit[0]) if limit else None

    def enter_cgroup():
        if procs_file:
            with open(procs_file, "w") as f:
                f.write(str(os.getpid()))

    env = {k: v for k, v in os.environ.items() if not k.startswith("CANINE_")}
    proc = subprocess.Popen([sys.executable, "-m", "jobs.cli", "preprocess", *args, "--workers", str(workers)],
                            cwd=tmp_path, env=dict(env, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=enter_cgroup)
    dog = Watchdog(proc, LIMIT_MB)
    dog.start()
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        dog.stop.set()
        dog.join()
        if limit:
            _remove_cgroup(limit[1])
    assert dog.over is None, f"over the {LIMIT_MB} MB limit: {dog.over}"
    assert proc.returncode == 0, err[-3000:]
    return dog.peak


def test_both_runners_finish_under_a_per_process_limit_with_the_same_shards(tmp_path):
    from preprocess import make_input

    (tmp_path / "in").mkdir()
    inputs = make_input(tmp_path / "in", REPEAT)
    assert sum(p.stat().st_size for p in inputs) > 19e6
    common = [*map(str, inputs), "--seq-len", "2048"]
    peaks = {}
    for runner in ("DirectRunner", "DaskRunner"):
        peaks[runner] = run_limited([*common, "--output", str(tmp_path / runner), "--runner", runner], tmp_path, 2)
    direct, dask = tmp_path / "DirectRunner", tmp_path / "DaskRunner"
    files = sorted(p.relative_to(direct) for p in direct.rglob("*.parquet"))
    assert files and files == sorted(p.relative_to(dask) for p in dask.rglob("*.parquet"))
    for rel in [*files, Path("_tokenizer.json"), Path("_manifest.json")]:
        assert (direct / rel).read_bytes() == (dask / rel).read_bytes(), rel
    assert not list(direct.glob(".staging-*")) and not list(dask.glob(".staging-*"))  # removed after publish
