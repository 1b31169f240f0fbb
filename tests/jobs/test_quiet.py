"""jobs/quiet.py: the third-party lines it drops are exactly the listed ones, errors always pass,
and each message it matches is still where the pinned version says it."""

import importlib.util
import logging
import re
from pathlib import Path

import pytest

from jobs import quiet


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


def test_the_failure_signal_switch_is_still_read_by_ray():
    assert "RAY_DISABLE_FAILURE_SIGNAL_HANDLER" in _source("ray._private.ray_constants")


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
    assert sum(isinstance(f, quiet.DropNoise) for f in ray_auth.filters) == 1
    # A handler on each logger itself: Ray's own logging config stops propagation to the root.
    keep = _Keep()
    for logger in (ray_auth, ray_worker, beam):
        monkeypatch.setattr(logger, "level", logging.DEBUG)
        logger.addHandler(keep)
    try:
        ray_auth.warning("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled ...")
        beam.warning("Worker: severity: WARN message: \"Discarding unparseable args: ['--pipeline_type_check']\"")
        beam.warning("Worker: severity: WARN message: \"something else\"")
        ray_auth.error("Token authentication is enabled for this Ray cluster, and then it failed")
        ray_worker.info("Started a local Ray instance.")
        ray_worker.info("Connected to Ray cluster.")
    finally:
        for logger in (ray_auth, ray_worker, beam):
            logger.removeHandler(keep)
    assert [r.getMessage()[:30] for r in keep.records] == [
        "Worker: severity: WARN message", "Token authentication is enable", "Connected to Ray cluster."]
    assert keep.records[1].levelno == logging.ERROR
