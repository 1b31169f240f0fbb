"""Kill points for crash tests: `CANINE_PREPROCESS_FAULT=POINT[:N]` kills the whole job with
SIGKILL the N-th time (default 1) one process passes POINT, as an OOM kill or a preempted node
would: no `finally`, no atexit, files left as they are. `POINT:N:INT` sends SIGINT instead, what
a terminal's Ctrl-C sends the foreground process group, at a known point of the job (a test
that signals from outside races a job that may finish first).

Points: `start` (a worker sets up the reading step: other workers may still be starting), `item`
(a work item was parsed and cached), `tokenizer` (vocabulary training starts), `pack` (a pack
group's examples were written to staging), `shard` (a shard file was written to staging), `publish` (one file was moved into place),
`published` (the manifest is written, staging not yet removed).

The signal goes to the process group, so the DirectRunner's worker processes and the launcher
die together, like a pod. Run a job with this set in a session of its own (`setsid`, or
`subprocess.Popen(..., start_new_session=True)`), or it takes its caller down too.
"""

import collections
import os
import signal

FAULT_ENV = "CANINE_PREPROCESS_FAULT"
POINTS = ("start", "item", "tokenizer", "pack", "shard", "publish", "published")
_passed = collections.Counter()


def point(name: str) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    want, _, rest = spec.partition(":")
    n, _, sig = rest.partition(":")
    if want not in POINTS or sig not in ("", "INT"):
        raise ValueError(f"{FAULT_ENV}={spec!r}: not POINT[:N[:INT]] with POINT one of {', '.join(POINTS)}")
    if want != name:
        return
    _passed[name] += 1
    if _passed[name] == int(n or 1):  # once: a SIGINT the job outlives must not come again
        os.killpg(os.getpgrp(), signal.SIGINT if sig else signal.SIGKILL)
