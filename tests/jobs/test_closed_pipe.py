"""A reader that stops reading (`canine preprocess ... 2>&1 | head -1`) ends the job quietly: exit 141
(128 + SIGPIPE, what a shell reports for `yes | head`), no traceback file, the output's lock released,
and the same command then finishes."""

import errno
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contract import schema
from jobs import errors
from pipeline import progress, run
from pipeline.sources import WorkItem

ROOT = Path(__file__).resolve().parents[2]
CANINE = Path(sys.executable).parent / "canine"


def _canine():
    # The entry point as the README runs it, else the module (a checkout whose venv lacks the script).
    return [str(CANINE)] if CANINE.exists() else [sys.executable, "-m", "jobs.cli"]


def _env(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"), PYTHONPATH=str(ROOT), DS_ACCELERATOR="cpu")
    env.pop("CI", None)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return env


@pytest.mark.slow  # the Beam job end to end
def test_preprocess_into_a_pipe_closed_after_one_line_ends_with_141_and_resumes(tmp_path):
    sample = os.path.relpath(ROOT / "pipeline" / "sample", tmp_path)  # relative, from another directory
    command = [*_canine(), "preprocess", sample, "--output", "out", "--seq-len", "512", "--vocab-size", "600"]
    env = _env(tmp_path)
    # `2>&1 | head -1`: stdout and stderr into one pipe whose reader leaves after the first line
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    first = proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=300) == 128 + signal.SIGPIPE, first
    assert b"preprocess:" in first
    assert not list((tmp_path / "tmp").rglob("*.txt"))  # no traceback file
    assert not (tmp_path / "out" / schema.LOCK).exists()  # the lock released
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "out" / schema.MANIFEST).exists()
    assert "Traceback" not in again.stderr


class ClosedAfterFirstLine(io.StringIO):
    """A stream whose reader leaves after the first line."""

    def write(self, text):
        if self.getvalue():
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        return super().write(text)


def test_a_progress_line_on_a_closed_pipe_stops_the_job_as_a_broken_pipe(tmp_path, monkeypatch, sigint_raises):
    """The progress thread's line meets the closed pipe: the main thread, waiting for the job, is
    stopped as by Ctrl-C, and the job's driver raises BrokenPipeError (the CLI's quiet 141), not
    Interrupted ("interrupted after ..." on a stream nobody reads)."""
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.0)
    items = [WorkItem("pages.jsonl", "jsonl")]
    watch = progress.ItemProgress(items, {"pages.jsonl": 10}, str(tmp_path / ".staging-x"),
                                  stream=ClosedAfterFirstLine())
    watch.interval_s = 0.01
    with pytest.raises(KeyboardInterrupt):
        watch.start(input_files=1)  # its first line is read; the thread's next one is not
        time.sleep(30)  # the job's wait, which the thread interrupts
    watch.stop(ok=False)
    assert watch.closed
    with pytest.raises(BrokenPipeError):
        run._closed(watch)


def test_the_report_of_a_closed_pipe_is_silent_and_141(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    assert errors.report("preprocess", BrokenPipeError(errno.EPIPE, "Broken pipe")) == 141
    assert capsys.readouterr() == ("", "")
    assert not list(tmp_path.rglob("*.txt"))
