"""How a command's log records read: the project's own as `canine COMMAND: MESSAGE` lines, a
library's with its level and logger, credentials in URLs masked in every record. jobs/cli.py
sets it up before a command runs; jobs/preprocess.py's root handler is `log_handler`."""

import logging
import sys

# The project's own loggers: what they warn of is said to the user as the command's own line.
OWN_LOGGERS = ("contract", "pipeline", "training", "jobs")


class LogLines(logging.Formatter):
    """A record of the project's own loggers as `canine COMMAND: MESSAGE`, the form of the
    command's other lines (`canine preprocess: removing stale lock out/.canine.lock (host h pid
    41)`); a library's with its level and logger, which say whose it is."""

    def __init__(self, command: str):
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.command = command

    def format(self, record: logging.LogRecord) -> str:
        if record.name.split(".", 1)[0] not in OWN_LOGGERS:
            return super().format(record)
        line = f"canine {self.command}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _Stderr(logging.StreamHandler):
    """Writes to sys.stderr as it is at each record (pytest's capture, a redirect), as
    logging's own handler of last resort does."""

    def __init__(self, level=logging.NOTSET):
        logging.Handler.__init__(self, level)

    @property
    def stream(self):
        return sys.stderr


def log_handler(command: str, level=logging.NOTSET) -> logging.Handler:
    """A stderr handler whose lines are `LogLines(command)`'s (jobs/preprocess.py's basicConfig)."""
    handler = _Stderr(level)
    handler.setFormatter(LogLines(command))
    return handler


def own_log_lines(command: str) -> None:
    """A command that configures no logging (pretrain, export: no root handler) has its warnings
    printed by logging's handler of last resort, the message alone: `removing stale lock ...`
    under the command's other lines, whose is it not said. It gets ours, at the level of the one
    it replaces (`logging.lastResort`, documented as replaceable)."""
    logging.lastResort = log_handler(command, logging.WARNING)


def redact_logs() -> None:
    """Every log record of this process, from any logger, gets the credentials of URLs in its
    message masked (contract/files.py `redact`). At record creation: a filter on the root logger
    would miss records that other loggers propagate to its handlers."""
    from contract.files import redact

    make = logging.getLogRecordFactory()
    if getattr(make, "redacts", False):
        return

    def redacting(*args, **kwargs):
        record = make(*args, **kwargs)
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return record

    redacting.redacts = True
    logging.setLogRecordFactory(redacting)
