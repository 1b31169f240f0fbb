"""What the project's own loggers say reaches the user as the command's own lines,
`canine COMMAND: MESSAGE`, whether the command configures logging (preprocess) or not (pretrain)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contract import schema

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "pipeline" / "sample" / "kowiki-20261101-pages-articles.xml"


def _stale_lock(out: Path) -> None:
    """The lock of a run killed with SIGKILL on this host: stale at once (contract/lock.py)."""
    code = (f"from contract.lock import OutputLock; l = OutputLock({str(out)!r}, command='killed'); l.acquire(); "
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT)
    assert (out / schema.LOCK).exists()


@pytest.mark.slow  # the Beam job end to end
def test_a_stale_lock_removed_by_preprocess_is_said_as_its_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "jobs.cli", "preprocess", os.path.relpath(SAMPLE, tmp_path), "--output", "out",
               "--seq-len", "512", "--vocab-size", "600"]
    assert subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300).returncode == 0
    _stale_lock(tmp_path / "out")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "stale lock" in line]
    assert line.startswith(f"canine preprocess: removing stale lock out/{schema.LOCK} (host "), line
    assert "command 'killed'" in line


def test_a_command_without_logging_of_its_own_prefixes_our_warnings():
    """pretrain configures no logging: its warnings went to logging's handler of last resort, the
    message alone. A process of its own: pytest's handlers on the root logger take every record."""
    code = ("import logging; from jobs import logs; logs.own_log_lines('pretrain'); "
            "logging.getLogger('contract.lock').warning('removing stale lock %s (%s)', 'runs/x/.canine.lock', 'host h'); "
            "logging.getLogger('some.library').warning('its own words'); logging.getLogger('training').info('quiet')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stderr.splitlines() == ["canine pretrain: removing stale lock runs/x/.canine.lock (host h)",
                                        "WARNING some.library: its own words"]
