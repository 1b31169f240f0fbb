"""Third-party lines that a normal `canine` run would print and that say nothing to its user,
silenced where they come from, one by one, each with the reason it is harmless. Records at
ERROR or above pass these filters, so a failure still shows in full; anything not listed here
shows. The one exception, a Beam job's own error records, which the failure's report repeats,
is `runner_errors_held`: it keeps them for the traceback file of an unexpected failure.

`install()` runs in jobs/cli.py before a command. What is silenced elsewhere, and why:
- transformers' "Writing model shards" bar: training/hf.py turns off its bars around the save;
- Ray's worker logs: the driver connects with log_to_driver=False, to a cluster it starts or to a
  given one (training/train/run.py); a submitted job's log has Ray's own preamble taken out
  (jobs/submit.py JobLog);
- Beam's "Failed to import GCSFileSystem" / "apitools not found": gone since apache-beam[gcp]
  is a dependency (tests/jobs/test_smoke.py counts every line `canine smoke` prints);
- Beam's "Using fallback deterministic coder" and "input type hint will be ignored": the job's
  keys have a coder of their own and its steps declare their types (pipeline/beam/elements.py);
- dask.distributed's INFO lines of a DaskRunner run: pipeline/beam/dask_runner.py;
- a failed Beam job's own ERROR records: held while the job runs (`runner_errors_held`).
"""

import contextlib
import faulthandler
import logging
import os
import re
import sys
import threading
import traceback

# (logger, message pattern, the module that says it, why it is noise). Logger filters see the
# records that logger itself creates: exactly these messages. tests/jobs/test_quiet.py checks
# that each message is still in its module of the pinned version, so a changed one is noticed.
NOISE = (
    # The DirectRunner's worker processes send their log records to the launcher, which logs them
    # under local_job_service's logger.
    ("apache_beam.runners.portability.local_job_service", r"No semi_persistent_directory found",
     "apache_beam.runners.worker.sdk_worker_main",
     "the DirectRunner's worker processes run without a semi-persistent directory; this job registers no schemas "
     "or logical types there"),
    ("apache_beam.runners.portability.local_job_service", r"Discarding unparseable args",
     "apache_beam.options.pipeline_options",
     "DirectRunner options (--direct_runner_use_stacked_bundle, --pipeline_type_check) that the runner's own "
     "worker processes do not parse"),
    ("ray._private.authentication.authentication_token_setup", r"Token authentication is enabled for this Ray cluster",
     "ray._private.authentication.authentication_token_setup",
     "a local cluster bound to 127.0.0.1 gets a generated token; there is nothing to do (a remote cluster's token: "
     "docs/cluster.md)"),
    # DeepSpeed's logger writes to stdout (deepspeed/utils/logging.py): this warning came before
    # the JSON of `canine evaluate RUN --step N --json` unless the user set DS_ACCELERATOR=cpu.
    ("DeepSpeed", r"^Setting accelerator to CPU\. If you have GPU", "deepspeed.accelerator.real_accelerator",
     "evaluate and export consolidate checkpoints on the CPU by design, and the trainer picks its device itself "
     "(training/train/config.py resolve: cuda when torch sees a GPU) and says it; DeepSpeed's fallback to its CPU "
     "accelerator is what this project needs there, without the user setting DS_ACCELERATOR"),
    ("ray._private.node", r"^Failed to get node info ", "ray._private.node",
     "Ray's wait for a new raylet to register, once a second; `canine pretrain` says itself when a local start "
     "times out and starts it once more (training/train/run.py)"),
    ("ray._private.worker", r"^Started a local Ray instance\.$", "ray._private.worker",
     "`canine pretrain` says itself how many workers it starts and where"),
    ("ray._private.authentication.authentication_token_setup", r"^Generated new authentication token and saved to ",
     "ray._private.authentication.authentication_token_setup",
     "the first local cluster on a machine makes Ray's token file (~/.ray/auth_token); Ray reads it itself, there "
     "is nothing to do"),
    ("ray._private.worker", r"^Connecting to existing Ray cluster at address", "ray._private.worker",
     "`canine pretrain --ray-address` (and a submitted job, through RAY_ADDRESS) says itself which cluster it "
     "connects to, before it does"),
    ("ray._private.worker", r"^Connected to Ray cluster\.", "ray._private.worker",
     "the line before said where; `canine submit` names the dashboard it submitted to"),
    # `canine submit`'s upload of the checkout (Ray's SDK logs each step of it on the client).
    ("ray._private.runtime_env.working_dir", r"is now ignored by default when packaging the working",
     "ray._private.runtime_env.working_dir",
     "submit leaves .git and .venv out itself (jobs/submit.py EXCLUDES); the default only agrees"),
    ("ray._private.runtime_env.packaging", r"^Ignoring upload to cluster for these files", "ray._private.runtime_env.packaging",
     "Ray names each .gitignore file it honours while zipping the checkout; submit says once what it uploads"),
    ("ray._private.runtime_env.packaging", r"^Creating a file package for local module", "ray._private.runtime_env.packaging",
     "submit says once what it uploads"),
    ("ray.dashboard.modules.dashboard_sdk", r"^Uploading package ", "ray.dashboard.modules.dashboard_sdk",
     "submit says once what it uploads; the package's gcs:// name is Ray's content hash, nothing to act on"),
    ("ray.dashboard.modules.dashboard_sdk", r"already exists, skipping upload\.", "ray.dashboard.modules.dashboard_sdk",
     "an unchanged checkout is not sent twice (Ray's content hash): nothing to act on"),
    ("ray.dashboard.modules.job.sdk", r"^WebSocket closed for job ", "ray.dashboard.modules.job.sdk",
     "the followed log ends when the job does; submit then says how it ended"),
)

# Environment defaults, set before Ray or Beam start (a value already set is kept).
ENV_DEFAULTS = {
    # Ray installs absl's failure signal handler in every Ray process, the driver included
    # (ray/_private/ray_constants.py reads this variable): a
    # SIGTERM (Kubernetes stopping a pod, `canine submit stop`, a job's timeout) then prints
    # "*** SIGTERM received ..." with a native stack trace from each process. A SIGTERM is a
    # request to stop, not a crash; crashes (SIGSEGV, SIGABRT) still get Python's traceback
    # from faulthandler, enabled below.
    "RAY_DISABLE_FAILURE_SIGNAL_HANDLER": "1",
    # MLflow writes "View run NAME at: URL" and "View experiment at: URL" to stdout when a run
    # ends (mlflow/tracking/_tracking_service/client.py _log_url), before `canine pretrain`'s JSON
    # summary; the run is found from OUTPUT/mlflow.json and the MLflow UI (docs/tracking.md).
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}

# Warnings filters for the Python processes a command starts (PYTHONWARNINGS, added to any the
# user set; a process reads it when it starts): (filter, the module that warns, why it is noise).
# tests/jobs/test_quiet.py checks each module still warns so.
CHILD_WARNINGS = (
    ("ignore::UserWarning:multiprocessing.resource_tracker", "multiprocessing.resource_tracker",
     "a run's processes stopped by a signal (a DaskRunner run's LocalCluster after a SIGTERM, 12 semaphores) "
     "leave their semaphores to multiprocessing's resource tracker, a process of their own, which removes them "
     "as designed and warns 'There appear to be 12 leaked semaphore objects to clean up at shutdown': nothing "
     "is left behind and there is nothing to do; the same command resumes the run"),
)


class DropNoise(logging.Filter):
    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not self.pattern.search(record.getMessage())


def install() -> None:
    """Idempotent: filters already in place are not added twice."""
    for name, value in ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)
    given = [w for w in os.environ.get("PYTHONWARNINGS", "").split(",") if w]
    os.environ["PYTHONWARNINGS"] = ",".join([*given, *(w for w, *_ in CHILD_WARNINGS if w not in given)])
    if not faulthandler.is_enabled():
        faulthandler.enable()  # a native crash prints the Python stack of every thread
    for logger_name, pattern, _origin, _why in NOISE:
        logger = logging.getLogger(logger_name)
        if not any(isinstance(f, DropNoise) and f.pattern.pattern == pattern for f in logger.filters):
            logger.addFilter(DropNoise(pattern))


# Beam logs a step's failure where it happens (apache_beam.runners.common: "ERROR ... [while
# running 'STEP']" and a traceback; a worker process's records relayed by local_job_service), and
# what breaks as a job stops (its gRPC channels, its worker handlers; on Ctrl-C the thread that
# waits for each worker process raises "Worker subprocess exited with return code -15", as the
# launcher stops the workers, which ignore SIGINT: pipeline/run.py), then raises the failure to
# the launcher, where jobs/errors.py reports it: our one line for a known error (a bad input) or Ctrl-C, its type and
# a traceback file otherwise. So what they print says again what the report says.
RUNNER_LOGGERS = "apache_beam.runners"


class _Hold(logging.Filter):
    """On the root logger's handlers: keeps Beam runner records at ERROR or above instead of
    letting them through."""

    def __init__(self):
        super().__init__()
        self.records = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.name.startswith(RUNNER_LOGGERS):
            self.records.append(record)
            return False
        return True


def _beam_threads_dropped(hook):
    """`hook` for every thread but Beam's own: after a job ended by our line (Ctrl-C, a known
    error), the DirectRunner's threads in the launcher raise as its workers go
    (grpc.RpcError, "Worker subprocess exited with return code -15"): nothing for the user."""
    if getattr(hook, "wraps", None) is not None:  # dropping them already: once a process
        return hook

    def excepthook(args):
        frames = traceback.extract_tb(args.exc_traceback)
        if not any(f"{os.sep}{lib}{os.sep}" in f.filename for f in frames for lib in ("apache_beam", "grpc")):
            hook(args)

    excepthook.wraps = hook
    return excepthook


@contextlib.contextmanager
def runner_errors_held(is_known):
    """While a Beam job runs: its runner's error records, and the exceptions that end a thread,
    are held. A failure that becomes our one line (`is_known(error)`: jobs/errors.py's; Ctrl-C)
    drops them; an unexpected one carries them as notes, which its traceback file shows
    (jobs/errors.py write_traceback); after a job that succeeded they are printed as they would
    have been. `is_known` is passed in: jobs/errors.py imports this module, not the other way."""
    hold, handlers = _Hold(), list(logging.getLogger().handlers)
    threads, hook = [], threading.excepthook
    for handler in handlers:
        handler.addFilter(hold)
    threading.excepthook = threads.append
    ended = False  # by our one line: Beam's threads may still raise as its workers go
    try:
        yield
    except BaseException as e:
        ended = is_known(e) or isinstance(e, (KeyboardInterrupt, BrokenPipeError))
        if not ended:
            formatter = logging.Formatter("%(levelname)s %(name)s: %(message)s")
            for record in hold.records:
                e.add_note(f"logged while the job ran: {formatter.format(record)}")
            for args in threads:
                text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
                e.add_note(f"raised in thread {getattr(args.thread, 'name', '?')} while the job ran: {text}")
        raise
    finally:
        threading.excepthook = _beam_threads_dropped(hook) if ended else hook
        for handler in handlers:
            handler.removeFilter(hold)
    for record in hold.records:
        for handler in handlers:
            if record.levelno >= handler.level:
                handler.handle(record)
    for args in threads:
        hook(args)


# Where a command's JSON document goes while `stdout_for_json` holds stdout: the real stdout.
_document = None


def document():
    """The stream for a command's one JSON document (`print(json.dumps(...), file=quiet.document())`):
    stdout, kept for it alone inside `stdout_for_json`."""
    return _document or sys.stdout


def _on_descriptor_1(stream) -> bool:
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):  # io.StringIO: UnsupportedOperation is an OSError
        return False


@contextlib.contextmanager
def stdout_for_json(on: bool = True):
    """While the block runs, file descriptor 1 is stderr's, so that whatever a library writes to
    stdout (a logger's handler made on sys.stdout, a print, a child process, native code) lands on
    stderr; only `document()` writes to the real stdout, so `--json` output always parses. The
    streams that libraries hold keep working: they still write to descriptor 1."""
    global _document
    if not on or _document is not None or not _on_descriptor_1(sys.stdout):
        # A caller that replaced sys.stdout (contextlib.redirect_stdout, pytest's capsys, a
        # notebook) reads the document where it asked for it: document() is sys.stdout then.
        yield
        return
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    _document = open(real, "w", encoding="utf-8", closefd=False)
    closed = None
    try:
        yield
    finally:
        sys.stdout.flush()
        doc, _document = _document, None
        try:
            doc.close()  # flushes; the descriptor is closed below
        except BrokenPipeError as e:  # the document's reader went away (`canine pretrain ... | true`)
            closed = e
        except OSError:
            pass
        os.dup2(real, 1)
        os.close(real)
    if closed is not None:  # raised once stdout is back: jobs/cli.py ends quietly, 141, as for any closed pipe
        raise closed
