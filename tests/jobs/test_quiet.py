"""jobs/quiet.py: the third-party lines it drops are exactly the listed ones, errors always pass,
and each message it matches is still where the pinned version says it."""

import importlib.util
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jobs import errors, quiet


def _source(module: str) -> str:
    """A module's source, found without importing it (nor its package's heavy __init__)."""
    top, *rest = module.split(".")
    root = Path(importlib.util.find_spec(top).origin).parent
    return root.joinpath(*rest[:-1], rest[-1] + ".py").read_text(encoding="utf-8")


@pytest.mark.parametrize("logger_name, pattern, origin, why", quiet.NOISE)
def test_each_silenced_message_is_still_said_where_we_say(logger_name, pattern, origin, why):
    literal = re.sub(r"\\(.)", r"\1", pattern.strip("^$"))
    assert literal in _source(origin), f"{origin} no longer says {literal!r}: drop or update this filter"
    assert why


@pytest.mark.parametrize("warning_filter, origin, why", quiet.CHILD_WARNINGS)
def test_each_silenced_warning_is_still_warned_where_we_say(warning_filter, origin, why):
    action, message, category, module = warning_filter.split(":")
    assert module == origin and f"warnings.warn('{origin.rsplit('.', 1)[1]}: There appear" in _source(origin)
    assert why


def test_the_resource_trackers_leak_warning_after_a_signal_is_not_printed():
    """A DaskRunner run stopped by SIGTERM printed `resource_tracker: There appear to be 12 leaked
    semaphore objects to clean up at shutdown`: the tracker, a process of its own,
    warns as it removes them. The same here in small: a process that holds a semaphore is killed."""
    code = ("import multiprocessing, os, signal, sys; from jobs import quiet; quiet.install(); "
            "lock = multiprocessing.get_context('spawn').Lock(); os.kill(os.getpid(), signal.SIGTERM)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == -signal.SIGTERM and run.stderr == "", run.stderr
    env["PYTHONWARNINGS"] = "default::DeprecationWarning"  # the user's own filters stay, ours are added
    run = subprocess.run([sys.executable, "-c", code.replace("os.kill", "print(os.environ['PYTHONWARNINGS']); os.kill")],
                         capture_output=True, text=True, timeout=60, env=env)
    assert run.stdout.split() == [f"default::DeprecationWarning,{quiet.CHILD_WARNINGS[0][0]}"] and run.stderr == ""


def test_the_failure_signal_switch_is_still_read_by_ray():
    assert "RAY_DISABLE_FAILURE_SIGNAL_HANDLER" in _source("ray._private.ray_constants")


def test_the_harness_still_prints_a_failed_bundles_traceback_where_a_worker_drops_it():
    """pipeline/beam/job.py _HarnessStderr drops what SdkHarness._execute prints, by its code object."""
    import inspect

    from apache_beam.runners.worker import sdk_worker

    assert "print(traceback_string, file=sys.stderr)" in inspect.getsource(sdk_worker.SdkHarness._execute)


_WORKER = """
import os, sys
if sys.argv[1] != "launcher":
    os.environ["CANINE_PREPROCESS_LAUNCHER_PID"] = "1"  # another process launched this one
import pipeline.beam.job

class Late:
    def __del__(self):  # a module's global: collected when the interpreter finalizes
        print("finalized", flush=True)

late = Late()
print("buffered", end="")
if sys.argv[1] == "raise":
    raise ValueError("boom")
"""


@pytest.mark.parametrize("how", ["launcher", "return", "raise"])
def test_a_preprocess_worker_exits_without_finalizing_and_keeps_its_status(how):
    """pipeline/beam/job.py _ExitWithoutFinalizing: a DirectRunner worker process skips the
    interpreter's finalization (where gRPC's threads aborted one), flushes what it printed, and
    exits 1 after an uncaught exception; the launcher finalizes as any process does."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _WORKER, how], cwd=root, capture_output=True, text=True,
                          timeout=120)
    if how == "launcher":
        assert (proc.returncode, proc.stdout) == (0, "bufferedfinalized\n"), proc.stderr
    elif how == "return":
        assert (proc.returncode, proc.stdout) == (0, "buffered"), proc.stderr
    else:
        assert (proc.returncode, proc.stdout) == (1, "buffered"), proc.stderr
        assert proc.stderr.rstrip().endswith("ValueError: boom"), proc.stderr


class _Keep(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_only_the_listed_messages_are_dropped_and_errors_never(monkeypatch):
    import os

    monkeypatch.delenv("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", raising=False)
    quiet.install()
    quiet.install()  # idempotent
    assert os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] == "1"
    ray_auth = logging.getLogger("ray._private.authentication.authentication_token_setup")
    ray_worker = logging.getLogger("ray._private.worker")
    beam = logging.getLogger("apache_beam.runners.portability.local_job_service")
    listed = sum(name == ray_auth.name for name, *_ in quiet.NOISE)
    assert listed == 2 and sum(isinstance(f, quiet.DropNoise) for f in ray_auth.filters) == listed
    # A handler on each logger itself: Ray's own logging config stops propagation to the root.
    keep = _Keep()
    for logger in (ray_auth, ray_worker, beam):
        monkeypatch.setattr(logger, "level", logging.DEBUG)
        logger.addHandler(keep)
    try:
        ray_auth.warning("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled ...")
        ray_auth.info("Generated new authentication token and saved to /home/u/.ray/auth_token")
        beam.warning("Worker: severity: WARN message: \"Discarding unparseable args: ['--pipeline_type_check']\"")
        beam.warning("Worker: severity: WARN message: \"something else\"")
        ray_auth.error("Token authentication is enabled for this Ray cluster, and then it failed")
        ray_worker.info("Started a local Ray instance.")
        ray_worker.info("Connected to Ray cluster. View the dashboard at http://127.0.0.1:8265")
        ray_worker.info("Calling ray.init() again after it has already been called.")
    finally:
        for logger in (ray_auth, ray_worker, beam):
            logger.removeHandler(keep)
    assert [r.getMessage()[:30] for r in keep.records] == [
        "Worker: severity: WARN message", "Token authentication is enable", "Calling ray.init() again after"]
    assert keep.records[1].levelno == logging.ERROR


@pytest.mark.slow  # a real local Ray cluster, started as `canine pretrain` starts one
def test_a_first_local_ray_start_on_a_fresh_machine_prints_nothing(tmp_path):
    """A fresh home: Ray generates its token file and says so; after quiet.install() nothing is
    printed, and the token file is there all the same."""
    import subprocess
    import sys

    code = ("from jobs import quiet\nimport sys\nif sys.argv[1] == 'quiet': quiet.install()\nimport ray\n"
            "from training.train.run import init_local\ninit_local(1, log_to_driver=False)\nray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")} | {"HOME": str(tmp_path)}
    loud = subprocess.run([sys.executable, "-c", code, "loud"], env=env, capture_output=True, text=True, timeout=300)
    assert "Generated new authentication token" in loud.stderr  # what quiet.py silences is still said
    (tmp_path / ".ray" / "auth_token").unlink()
    run = subprocess.run([sys.executable, "-c", code, "quiet"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and (run.stdout, run.stderr) == ("", ""), run.stderr
    assert (tmp_path / ".ray" / "auth_token").exists()


def test_a_beam_jobs_error_records_are_dropped_for_our_errors_kept_as_notes_otherwise(monkeypatch):
    from pipeline.sources import InputError

    seen = []  # what reaches the process's hook for thread exceptions
    monkeypatch.setattr(threading, "excepthook", seen.append)  # restored after the test
    keep, hook = _Keep(), threading.excepthook
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [keep])
    beam = logging.getLogger("apache_beam.runners.common")

    def failing_job(error):
        with quiet.runner_errors_held(errors.is_known):
            beam.error("x.xml: malformed XML at line 3 [while running 'ReadAndClean/ParseAndClean']")
            thread = threading.Thread(target=lambda: 1 / 0, name="run_worker")
            thread.start()
            thread.join()
            logging.getLogger("pipeline.output.output").warning("ours, at once")
            raise error

    for error in (InputError("x.xml: malformed XML at line 3"), KeyboardInterrupt()):  # one line, or Ctrl-C
        with pytest.raises(type(error)) as raised:
            failing_job(error)
        assert not getattr(raised.value, "__notes__", None)
    with pytest.raises(RuntimeError) as raised:  # unexpected: the traceback file shows them
        failing_job(RuntimeError("boom"))
    notes = "\n".join(raised.value.__notes__)
    assert "ERROR apache_beam.runners.common: x.xml: malformed XML" in notes and "ZeroDivisionError" in notes
    assert [r.getMessage() for r in keep.records] == ["ours, at once"] * 3
    # A job ended by our line leaves Beam's threads' exceptions dropped (its workers going:
    # grpc.RpcError, "Worker subprocess exited with return code -15"), once, and no other thread's.
    assert threading.excepthook.wraps is hook and not any(isinstance(f, quiet._Hold) for f in keep.filters)
    namespace = {}
    exec(compile("def worker():\n    raise RuntimeError('Worker subprocess exited with return code -15')\n",
                 os.path.join(os.sep, "site-packages", "apache_beam", "worker_handlers.py"), "exec"), namespace)
    for target in (namespace["worker"], lambda: 1 / 0):
        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
    assert [type(args.exc_value) for args in seen] == [ZeroDivisionError]

    keep.records.clear()
    with quiet.runner_errors_held(errors.is_known):  # a job that succeeded: what it logged is printed after it
        beam.error("a record of a job that succeeded")
    assert [r.getMessage() for r in keep.records] == ["a record of a job that succeeded"]


def test_a_document_whose_reader_went_away_ends_as_a_closed_pipe():
    """`canine pretrain ... | true`: the summary's flush at the end meets a closed stdout; that is
    said as the BrokenPipeError jobs/cli.py ends quietly on (141), not swallowed into exit 0."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import os, sys\n"
            "from jobs import quiet\n"
            "r, w = os.pipe(); os.close(r); os.dup2(w, 1)  # stdout: a pipe nobody reads\n"
            "try:\n"
            "    with quiet.stdout_for_json():\n"
            "        print('{\"steps\": 3}', file=quiet.document())\n"
            "except BrokenPipeError:\n"
            "    sys.stderr.write('closed\\n')\n"
            "    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "closed\n")
