"""`canine pretrain --output DIR` where DIR cannot be written: one line, exit 2, before Ray starts
(Ray's start-up alone is 10-50 s)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CANINE = Path(sys.executable).parent / "canine"


@pytest.fixture
def read_only(tmp_path):
    """A folder this process cannot write in: mode 555, or immutable for root (whom modes do not stop)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("root, and no immutable folder here (chattr)")
        yield folder
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)


def test_a_read_only_output_is_refused_before_ray_starts(read_only, tmp_path):
    command = [str(CANINE)] if CANINE.exists() else [sys.executable, "-m", "jobs.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DS_ACCELERATOR": "cpu"}
    env.pop("RAY_ADDRESS", None)
    started = time.monotonic()
    done = subprocess.run([*command, "pretrain", "--data", "shards", "--output", "read-only/run"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"canine pretrain: --output {read_only}/run: cannot write there ({read_only}, where it would be made): "
        f"{os.strerror(1 if os.geteuid() == 0 else 13)}; choose another --output, or make it writable"], done.stderr
    assert "Ray" not in done.stderr and time.monotonic() - started < 60
    assert not list(read_only.iterdir())
