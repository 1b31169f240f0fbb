"""The output lock: a second run refuses while the first is alive, a dead holder's lock
expires, heartbeats refresh it, a taken-over holder notices. Real processes and real fsspec
filesystems (local and memory://); time is advanced through the injectable clock, not slept."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from contract.lock import LockConfig, LockHeld, LockLost, OutputLock, _dead_on_this_host, _process_start, read_lock

HOLDER = """
import sys
from contract.lock import OutputLock
lock = OutputLock(sys.argv[1], command="canine preprocess --dump en:20261101").acquire()
print("held", flush=True)
sys.stdin.read()  # hold until the test closes stdin or kills us
lock.release()
"""


@pytest.fixture(params=["local", "memory", "s3", "gs"])
def output(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "shards" / "en" / "20261101")
    if request.param == "s3":
        return request.getfixturevalue("s3_store").url() + "/shards/en/20261101"
    if request.param == "gs":
        return request.getfixturevalue("gcs_store").url() + "/shards/en/20261101"
    return f"memory://lock-test-{uuid.uuid4().hex}/shards/en/20261101"


def test_second_run_refuses_while_first_holds(output):
    first = OutputLock(output, command="run one").acquire()
    try:
        with pytest.raises(LockHeld) as e:
            OutputLock(output).acquire()
        msg = str(e.value)
        assert f"output {output} is locked by another run" in msg
        assert f"pid {os.getpid()}" in msg and "'run one'" in msg and f"{output}/.canine.lock" in msg
        assert "expires 300 s after its last heartbeat" in msg
    finally:
        first.release()
    assert read_lock(first.url) is None  # released: the file is gone
    with OutputLock(output):  # and the output is free again
        pass


def _holder(output: str) -> subprocess.Popen:
    """A process of its own that holds the lock on `output` (it says "held" once it does)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, output], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_dead_holders_lock_expires(tmp_path):
    """A real process takes the lock and is SIGKILLed on 'another host': the lock stays until its ttl has passed."""
    output = str(tmp_path / "out")
    proc = _holder(output)
    try:
        with pytest.raises(LockHeld, match=f"pid {proc.pid}, command 'canine preprocess --dump en:20261101'"):
            OutputLock(output).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert read_lock(f"{output}/.canine.lock")["pid"] == proc.pid  # dying left the lock behind
    # As if it had run on another machine (a dead pod): only the heartbeat can tell, so the ttl rules.
    path = f"{output}/.canine.lock"
    record = json.loads(open(path).read())
    with open(path, "w") as f:
        f.write(json.dumps({**record, "host": "another-host"}))
    with pytest.raises(LockHeld):  # not yet expired
        OutputLock(output, clock=lambda: time.time() + 299).acquire()
    later = OutputLock(output, clock=lambda: time.time() + 301).acquire()  # past the holder's 300 s ttl
    try:
        assert read_lock(later.url)["pid"] == os.getpid()
    finally:
        later.release()


def test_holder_process_releases_on_exit(tmp_path):
    output = str(tmp_path / "out")
    proc = subprocess.run([sys.executable, "-c", HOLDER, output], input="", capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))), timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "held", proc.stderr
    assert read_lock(f"{output}/.canine.lock") is None


def test_heartbeat_thread_refreshes_the_record(output):
    lock = OutputLock(output, LockConfig(ttl_s=5.0, heartbeat_s=0.05)).acquire()
    try:
        first = read_lock(lock.url)["heartbeat"]
        deadline = time.monotonic() + 10
        while read_lock(lock.url)["heartbeat"] == first:  # the daemon thread's rewrite is what we wait for
            assert time.monotonic() < deadline, "no heartbeat within 10 s"
            time.sleep(0.01)
        lock.check()
    finally:
        lock.release()


def test_taken_over_holder_notices_and_leaves_the_new_lock(output):
    lock = OutputLock(output, LockConfig(ttl_s=5.0, heartbeat_s=0.05)).acquire()
    record = dict(read_lock(lock.url), owner="someone-else", pid=424242)
    lock._fs.pipe_file(lock._path, json.dumps(record).encode())  # what a run that broke our lock would write
    deadline = time.monotonic() + 10
    while not lock._lost:
        assert time.monotonic() < deadline, "heartbeat thread did not notice the takeover"
        time.sleep(0.01)
    with pytest.raises(LockLost, match="taken over by host .* pid 424242"):
        lock.check()
    with pytest.raises(LockLost):
        lock.heartbeat()
    lock.release()
    assert read_lock(lock.url)["owner"] == "someone-else"  # not ours, so not removed


def test_empty_lock_file_is_held_until_old(tmp_path):
    """A holder killed between creating and writing leaves an empty file: judged by its mtime."""
    output = tmp_path / "out"
    output.mkdir()
    (output / ".canine.lock").write_bytes(b"")
    with pytest.raises(LockHeld, match="exists but is not a lock record"):
        OutputLock(str(output)).acquire()
    with OutputLock(str(output), clock=lambda: time.time() + 301) as lock:
        assert read_lock(lock.url)["owner"] == lock._owner


def test_config_rejects_heartbeat_slower_than_ttl():
    with pytest.raises(ValueError, match="heartbeat_s"):
        LockConfig(ttl_s=10, heartbeat_s=10)


def test_lock_of_a_dead_process_on_this_host_is_stale_at_once(tmp_path):
    out = tmp_path / "out"
    code = (f"from contract.lock import OutputLock; l = OutputLock({str(out)!r}, command='doomed'); l.acquire(); "
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert (out / ".canine.lock").exists()
    with OutputLock(str(out), command="next") as lock:  # no LockHeld, no waiting for the ttl
        lock.check()


def _held_by(proc, **extra):
    return {"host": socket.gethostname(), "pid": proc.pid, "pid_start": _process_start(proc.pid), **extra}


def test_a_zombie_or_reused_pid_is_dead_and_a_live_one_is_not():
    """`kill(pid, 0)` answers for an unreaped zombie and for a pid reused by a later process;
    /proc tells both apart from a live holder."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        held = _held_by(proc)
        assert not _dead_on_this_host(held)
        assert _dead_on_this_host({**held, "pid_start": str(int(held["pid_start"]) + 1)})  # same pid, later process
        proc.kill()
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: a zombie
        assert open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
        assert _dead_on_this_host(held)
    finally:
        proc.kill()
        proc.wait()
    assert _dead_on_this_host(held)  # reaped: gone


def test_a_sigkilled_holder_still_a_zombie_does_not_block_the_rerun(tmp_path):
    output = str(tmp_path / "out")
    proc = _holder(output)
    try:
        proc.kill()
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        with OutputLock(output, command="rerun") as lock:  # at once: no 5-minute wait
            assert read_lock(lock.url)["command"] == "rerun"
    finally:
        proc.wait()


def test_lock_file_is_created_whole_or_not_at_all(tmp_path, monkeypatch):
    """Locally the record is written beside and linked into place: a crash before the link
    leaves no lock file at all, never an empty one."""
    output = tmp_path / "out"

    def crash(*a):
        raise KeyboardInterrupt("killed before the link")

    monkeypatch.setattr(os, "link", crash)
    with pytest.raises(KeyboardInterrupt):
        OutputLock(str(output)).acquire()
    assert os.listdir(output) == []


def test_s3_create_and_heartbeat_are_conditional(s3_store):
    """On S3 the create is If-None-Match: * and the heartbeat If-Match: <ETag>, both enforced by
    the server (moto's, a real protocol server): a racing creator gets FileExistsError, and a
    holder whose lock changed after it read it cannot write its heartbeat over the change."""
    from contract.lock import _replace_if_unchanged, _version

    lock = OutputLock(s3_store.url() + "/out").acquire()
    try:
        with pytest.raises(FileExistsError):
            lock._create(b'{"owner": "racer"}')
        seen = _version(lock._fs, lock._path)
        lock._fs.pipe_file(lock._path, json.dumps(dict(read_lock(lock.url), owner="new-holder")).encode())
        assert not _replace_if_unchanged(lock._fs, lock._path, b'{"owner": "old"}', seen)
        assert read_lock(lock.url)["owner"] == "new-holder"
        assert _replace_if_unchanged(lock._fs, lock._path, b'{"owner": "x"}', _version(lock._fs, lock._path))
    finally:
        lock.release()
