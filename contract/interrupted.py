"""Ctrl-C as both drivers end on it: one exception type, raised by pipeline/run.py and
training/train/run.py, caught once in jobs/ (jobs/cli.py hands it to jobs/errors.py `report`).

A driver knows what its run had done when the KeyboardInterrupt came and what the same command
will do next; it raises `Interrupted(that line)` from the KeyboardInterrupt. It is a
KeyboardInterrupt itself, so code that lets Ctrl-C pass (`except Exception`) lets it pass too.
"""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what was done and how to go on: "interrupted after 12 of 40 work items (kept);
    the same command resumes". The CLI prints `canine COMMAND: MESSAGE`, exit 130, no traceback."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
