"""An expiring lock on an output directory: two preprocessing runs never write one output at once.

    with OutputLock("gs://bucket/shards/en/20261101", command="canine preprocess ...") as lock:
        run_pipeline()
        lock.check()  # raises LockLost if the lock was lost while the pipeline ran

The lock is a small JSON file, `<output>/.canine.lock`, created whole or not at all: locally
written beside it and hard-linked into place (link fails if the name exists, and a kill at any
moment leaves no empty lock); on object stores with fsspec's exclusive mode ("xb", a
create-only precondition where the store supports it). It names its holder (host, pid and the
process's start time, command, start time) and a heartbeat time that a daemon thread rewrites
every `heartbeat_s`. A second run that finds a lock whose heartbeat is younger than `ttl_s`
refuses with LockHeld, naming the holder; an older lock belonged to a run that died (killed
pod, OOM, preempted node): it is stale, is removed, and the new run takes it. A holder on this
host is judged at once by /proc: gone, a zombie, dying with SIGKILL pending, or its pid reused
by a process that started later all mean dead, so a rerun right after `kill -9` goes ahead.

Expiry (LockConfig below): heartbeat every 30 s, stale after 5 min without one. A scheduled
run (infra/k8s/preprocess-cronjob.yaml) is days apart, so a dead run's lock is long gone before
the next one; 10 missed heartbeats absorb object-store hiccups and stop-the-world pauses
without a live run losing its lock; and 5 min dwarfs clock skew between hosts (the heartbeat
is wall-clock time written by one host and read by another).

Limits, said plainly: this is a lease, not consensus. Two runs that find the same stale lock
at the same instant can both remove it; the loser of the re-create sees LockHeld, and a holder
whose lock was taken over finds out at its next heartbeat (`check()` then raises LockLost).
On a backend whose "xb" is not exclusive the read-back after create is the only guard.
"""

import dataclasses
import datetime
import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid

import fsspec

from contract import schema
from contract.files import atomic_write, is_local

logger = logging.getLogger(__name__)

LOCK_NAME = schema.LOCK


@dataclasses.dataclass(frozen=True)
class LockConfig:
    ttl_s: float = 300.0  # a lock without a heartbeat for this long is stale (see module docstring)
    heartbeat_s: float = 30.0  # ttl / 10: a live holder survives 9 failed heartbeat writes in a row
    name: str = LOCK_NAME  # lock file inside the output directory; hidden, so shard globs skip it

    def __post_init__(self):
        if not 0 < self.heartbeat_s < self.ttl_s:
            raise ValueError(f"LockConfig: need 0 < heartbeat_s ({self.heartbeat_s}) < ttl_s ({self.ttl_s})")


class LockHeld(RuntimeError):
    """Another live run holds the output."""


class LockLost(RuntimeError):
    """This run's lock was taken over or could not be refreshed for a whole ttl."""


class OutputLock:
    def __init__(self, output: str, config: LockConfig = LockConfig(), *, command: str = "",
                 clock=time.time, storage_options: dict | None = None):
        self.output = output.rstrip("/")
        self.config = config
        self.url = f"{self.output}/{config.name}"
        self.command = command
        self._clock = clock  # injectable so tests can age a lock without sleeping
        self._fs, self._path = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        self._owner = uuid.uuid4().hex  # tells this holder apart from any other on the same host and pid
        self._record: dict | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost: str | None = None
        self._last_beat = 0.0

    # --- holder side ---------------------------------------------------------------------
    def acquire(self) -> "OutputLock":
        """Take the lock or raise LockHeld naming the live holder; starts the heartbeat."""
        self._fs.makedirs(posixpath.dirname(self._path), exist_ok=True)
        now = self._clock()
        self._record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "pid_start": _process_start(os.getpid()),
            "owner": self._owner,
            "command": self.command,
            "started": _iso(now),
            "heartbeat": now,
            "ttl_s": self.config.ttl_s,
        }
        for _ in range(3):  # a retry only follows removing a stale lock or a lock released meanwhile
            try:
                # Looked at first, not only on FileExistsError: on a backend whose create is not
                # exclusive (not every GCS-compatible server honours ifGenerationMatch=0), a live
                # lock is still never overwritten by a run that starts after it.
                if read_lock(self.url) is not None:
                    raise FileExistsError(self.url)
                self._create(_encode(self._record))
                break
            except FileExistsError:
                held = read_lock(self.url)
                if held is not None and not self._is_stale(held):
                    raise LockHeld(self._describe(held)) from None
                if held is not None:  # None: released between our create and our read; just retry
                    logger.warning("removing stale lock %s (%s)", self.url, _holder(held))
                    self._remove_if_unchanged(held)
        else:
            raise LockHeld(f"{self.url}: another run keeps re-creating this lock; is a second run starting right now?")
        back = read_lock(self.url)
        if not back or back.get("owner") != self._owner:  # a racing creator on a backend without exclusive create
            raise LockHeld(self._describe(back or {}))
        self._last_beat = now
        self._thread = threading.Thread(target=self._beat_forever, name=f"lock-heartbeat {self.url}", daemon=True)
        self._thread.start()
        return self

    def _create(self, data: bytes) -> None:
        """Create the lock file with `data`, or raise FileExistsError; never leaves it empty."""
        if is_local(self._fs):
            tmp = f"{self._path}.{self._owner}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            try:
                os.link(tmp, self._path)  # atomic, and fails if the name exists
            finally:
                os.unlink(tmp)
            return
        with self._fs.open(self._path, "xb") as f:
            f.write(data)

    def heartbeat(self) -> None:
        """Refresh the heartbeat time; raise LockLost if the file now names another holder. The
        write is conditional on the version just read (`_replace_if_unchanged`), so a holder
        whose lock was taken over in between never overwrites the new holder's record."""
        version = _version(self._fs, self._path)
        current = read_lock(self.url)
        if not current or current.get("owner") != self._owner:
            raise LockLost(f"{self.url}: lock taken over by {_holder(current)}; this run must not keep writing")
        now = self._clock()
        self._record["heartbeat"] = now
        if not _replace_if_unchanged(self._fs, self._path, _encode(self._record), version):
            raise LockLost(f"{self.url}: lock changed while this run refreshed it (taken over by "
                           f"{_holder(read_lock(self.url))}); this run must not keep writing")
        self._last_beat = now

    def check(self) -> None:
        """Raise LockLost if the heartbeat thread lost the lock. Call before committing output."""
        if self._lost:
            raise LockLost(self._lost)

    def release(self) -> None:
        """Stop the heartbeat and remove the lock if it is still ours. Safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        current = read_lock(self.url)
        if current and current.get("owner") == self._owner:
            self._fs.rm_file(self._path)
        elif self._record is not None and not self._lost:
            logger.warning("not removing %s: it now belongs to %s", self.url, _holder(current))
        self._record = None

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def _beat_forever(self) -> None:
        while not self._stop.wait(self.config.heartbeat_s):
            try:
                self.heartbeat()
            except LockLost as e:
                self._lost = str(e)
                return
            except Exception as e:  # a transient storage error: keep trying until a whole ttl has passed
                if self._clock() - self._last_beat >= self.config.ttl_s:
                    self._lost = f"{self.url}: no heartbeat written for {self.config.ttl_s:.0f} s (last error: {e})"
                    return
                logger.warning("heartbeat of %s failed, retrying: %s", self.url, e)

    # --- contender side --------------------------------------------------------------------
    def _is_stale(self, held: dict) -> bool:
        if held.get("unreadable"):
            # A holder killed while creating the file leaves it empty: judge by its mtime.
            return held.get("modified") is not None and self._clock() - held["modified"] > self.config.ttl_s
        if _dead_on_this_host(held):
            return True  # killed run on this machine (kill -9, OOM): no need to wait out the ttl
        ttl = held.get("ttl_s") if isinstance(held.get("ttl_s"), (int, float)) else self.config.ttl_s
        return self._clock() - float(held.get("heartbeat", 0)) > ttl

    def _describe(self, held: dict) -> str:
        if held.get("unreadable"):
            return (f"output {self.output} is locked: {self.url} exists but is not a lock record "
                    f"({held['unreadable']}); if no run is writing there, delete that file")
        age = self._clock() - float(held.get("heartbeat", 0))
        ttl = held.get("ttl_s", self.config.ttl_s)
        return (f"output {self.output} is locked by another run: {_holder(held)}, started {held.get('started')}, "
                f"last heartbeat {age:.0f} s ago. If that run died, its lock expires {ttl:.0f} s after its last "
                f"heartbeat (in {max(0.0, ttl - age):.0f} s); lock file {self.url}")

    def _remove_if_unchanged(self, seen: dict | None) -> None:
        """Remove a stale lock unless it changed since we read it (a holder's heartbeat revived it)."""
        now = read_lock(self.url)
        if now is None:
            return
        if seen is not None and now.get("owner") == seen.get("owner") and now.get("heartbeat") == seen.get("heartbeat"):
            try:
                self._fs.rm_file(self._path)
            except FileNotFoundError:
                pass


def _dead_on_this_host(held: dict) -> bool:
    """True if the holder ran on this host and its process is gone or going: no such pid, a
    zombie (an unreaped child still answers `kill(pid, 0)`), SIGKILL pending (being torn
    down), or a pid now used by a process that started at another time. Only a local pid can
    be checked; a holder elsewhere is judged by its heartbeat alone."""
    pid = held.get("pid")
    if held.get("host") != socket.gethostname() or not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by someone else: /proc still tells its state
        pass
    try:
        fields = _proc_stat(pid)
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # no /proc (not Linux): the pid exists, trust it
    if fields[0] in ("Z", "X"):
        return True
    if held.get("pid_start") is not None and str(held["pid_start"]) != fields[_STARTTIME]:
        return True
    sigkill = 1 << (9 - 1)
    return any(int(status.get(k, "0").strip(), 16) & sigkill for k in ("SigPnd", "ShdPnd"))


# /proc/PID/stat after "pid (comm)": fields from the state (field 3) on; starttime is field 22,
# the process's start in clock ticks since boot: with the pid it tells a process apart from a
# later one that reuses its pid (proc(5)).
_STARTTIME = 22 - 3


def _proc_stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()  # comm may contain spaces and ")"


def _process_start(pid: int) -> str | None:
    try:
        return _proc_stat(pid)[_STARTTIME]
    except (OSError, IndexError):
        return None


# --- conditional writes, per backend (docs/schedule.md "What the lock guarantees") -------------


def _version(fs, path: str) -> str | None:
    """The store's version token of the object: S3's ETag, GCS's generation; None elsewhere."""
    if "s3" in fs.protocol:
        return fs.info(path, refresh=True).get("ETag")
    if "gs" in fs.protocol:
        fs.invalidate_cache(path)
        return str(fs.info(path)["generation"])
    return None


def _replace_if_unchanged(fs, path: str, data: bytes, version: str | None) -> bool:
    """Write `data` over `path` only if the object is still at `version`; False if it changed.
    S3: PutObject with If-Match (s3fs passes the argument through to the call). GCS: an
    upload with ifGenerationMatch, through google-cloud-storage's public API, since gcsfs
    only exposes ifGenerationMatch=0. Local disks: temp file and rename; the read before it is
    on the same host, microseconds earlier. Other filesystems: a plain whole write."""
    if "s3" in fs.protocol and version:
        try:
            fs.pipe_file(path, data, IfMatch=version)
        except OSError as e:
            if "pre-condition" in str(e) or "PreconditionFailed" in str(e) or "412" in str(e):
                return False
            raise
        return True
    if "gs" in fs.protocol and version:
        from google.api_core.exceptions import PreconditionFailed
        from google.cloud import storage

        bucket, _, key = path.partition("/")
        try:
            storage.Client().bucket(bucket).blob(key).upload_from_string(
                data, content_type="application/json", if_generation_match=int(version))
        except PreconditionFailed:
            return False
        fs.invalidate_cache(path)
        return True
    atomic_write(fs.unstrip_protocol(path), data)
    return True


def read_lock(url: str, storage_options: dict | None = None) -> dict | None:
    """The lock record at `url` (a lock file URL), None if absent, or {"unreadable": why, "modified": t}."""
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return None
    try:
        record = json.loads(data)
        if not isinstance(record, dict) or "owner" not in record:
            raise ValueError("no 'owner' field")
        return record
    except ValueError as e:
        try:
            modified = fs.modified(path).timestamp()
        except (NotImplementedError, FileNotFoundError, AttributeError):
            modified = None
        return {"unreadable": f"{len(data)} bytes, {e}", "modified": modified}


def _holder(record: dict | None) -> str:
    if not record:
        return "nobody (the file is gone)"
    if record.get("unreadable"):
        return f"an unreadable record ({record['unreadable']})"
    cmd = f", command {record['command']!r}" if record.get("command") else ""
    return f"host {record.get('host')} pid {record.get('pid')}{cmd}"


def _encode(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True).encode("utf-8")


def _iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="seconds")
