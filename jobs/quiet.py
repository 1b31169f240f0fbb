"""Third-party lines that a normal `canine` run would print and that say nothing to its user,
silenced where they come from, one by one, each with the reason it is harmless. Records at
ERROR or above always pass, so a failure still shows in full; anything not listed here shows.

`install()` runs in jobs/cli.py before a command. What is silenced elsewhere, and why:
- transformers' "Writing model shards" bar: training/hf.py turns off its bars around the save;
- Ray's worker logs: a local cluster is started with log_to_driver=False (training/train/run.py);
- Beam's "Failed to import GCSFileSystem" / "apitools not found": gone since apache-beam[gcp]
  is a dependency (tests/jobs/test_smoke.py counts every line `canine smoke` prints).
"""

import faulthandler
import logging
import os
import re

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
    ("ray._private.worker", r"^Started a local Ray instance\.$", "ray._private.worker",
     "`canine pretrain` says itself how many workers it starts and where"),
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
}


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
    if not faulthandler.is_enabled():
        faulthandler.enable()  # a native crash prints the Python stack of every thread
    for logger_name, pattern, _origin, _why in NOISE:
        logger = logging.getLogger(logger_name)
        if not any(isinstance(f, DropNoise) and f.pattern.pattern == pattern for f in logger.filters):
            logger.addFilter(DropNoise(pattern))
