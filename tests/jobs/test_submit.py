"""`canine submit` against a real Ray head started here on 127.0.0.1 with token authentication.

The head runs Ray from this checkout's .venv, started as `.venv/bin/ray start` from a shell
without that environment: the `python` first on its PATH is a bare venv without the project or
its stack, as on a head started by hand. Jobs run by default all the same (the head is on this
machine, so they get this interpreter), and fail in one line with `--python python`. The head
has its own temp dir, free ports and process group, and is stopped at the end: it never touches
another engineer's local cluster, and no process outlives the module. The token is random per
run; every captured output is checked not to contain it.
"""

import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from jobs import submit

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    """The environment of a client or head: no token from the developer's own setup leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env.update(RAY_USAGE_STATS_ENABLED="0", DS_ACCELERATOR="cpu", PYTHONUNBUFFERED="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def head():
    """A token-authenticated Ray head on 127.0.0.1; yields (dashboard URL, token)."""
    tmp = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    token = secrets.token_hex(24)
    dash = _free_port()
    # The token comes from RAY_AUTH_TOKEN, which Ray reads before any token file, so the head keeps
    # the real HOME (and with it DeepSpeed's compiled-op cache, a minute to rebuild on CPU).
    # The head's PATH: a bare venv's bin first (python, python3: no pyarrow, torch, ray), then the
    # machine's PATH without this checkout's .venv/bin.
    bare = Path(tmp, "bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=60)
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join([str(bare / "bin"), *(d for d in os.environ.get("PATH", "").split(os.pathsep) if d != venv_bin)])
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, PATH=path,
               # Linux Ray swaps a loopback --node-ip-address for the host's address; this keeps 127.0.0.1.
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    ports = {flag: _free_port() for flag in ("port", "node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
                                             "dashboard-agent-grpc-port", "metrics-export-port", "runtime-env-agent-port",
                                             "ray-client-server-port")}
    cmd = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
           "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--temp-dir={tmp}",
           # 4 logical CPUs on a 2-core machine: the tiny run's 2 training workers (1 CPU each)
           # plus its input-pipeline tasks (0.5 each) must all fit, or the data tasks wait forever.
           "--num-cpus=4",
           "--num-gpus=0", "--include-dashboard=true", "--disable-usage-stats",
           *(f"--{k}={v}" for k, v in ports.items())]
    log = open(os.path.join(tmp, "head.log"), "w")
    # cwd: its own temp dir, which a job without a working dir (--installed) inherits; not this checkout.
    proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                req = urllib.request.Request(f"{url}/api/version", headers={"Authorization": f"Bearer {token}"})
                urllib.request.urlopen(req, timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None, Path(tmp, "head.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "Ray head did not come up in 120 s"
                time.sleep(0.5)  # polling the dashboard until it answers, not synchronizing
        yield SimpleNamespace(url=url, token=token, tmp=tmp, bare_python=str(bare / "bin" / "python"))
    finally:
        # SIGTERM to `ray start --block` alone: it stops its children in order (~4 s idle). Killing
        # the whole group at once leaves it waiting on a dead GCS, so the group gets SIGKILL only
        # after, and only if the orderly stop is slow (a loaded machine): this cluster is disposable.
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def canine(*args, env=None, timeout=240, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "jobs.cli", *args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=timeout)


def _ours(stderr: str) -> list[str]:
    """canine's own lines on stderr (anything else would be a library's: tests say where none is)."""
    return [ln for ln in stderr.splitlines() if ln.startswith("canine ")]


def _no_token(result, token):
    assert token not in result.stdout and token not in result.stderr


# --- against the cluster ---------------------------------------------------------------------


def test_tiny_pretraining_job_succeeds(head, contract_shards, tmp_path):
    """The success case: `canine pretrain` (tiny config, 2 steps) as a Ray job on the head, on a
    copy of the session's contract-valid shards (what `canine preprocess` writes; the preprocessing
    command itself is tests/jobs/test_preprocess*.py's)."""
    shards, run = tmp_path / "shards", tmp_path / "run"
    shutil.copytree(contract_shards, shards)
    # Relative paths, as README writes them, from the caller's working directory: the job runs in
    # another one (the uploaded checkout), and gets them made absolute (the head is this machine).
    r = canine("submit", "--address", head.url, "--", "pretrain", "--config", "tiny", "--data", "shards",
               "--output", "run", "--max-steps", "2", "--eval-every", "0", "--checkpoint-every", "2",
               env=_env(RAY_AUTH_TOKEN=head.token), timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert '"final_loss"' in r.stdout and "submitted to" in r.stderr  # the job's summary, streamed back
    # The head's `python` is a bare venv: the job ran on this interpreter, the head being this machine.
    assert f"(python: {sys.executable})" in r.stderr
    # Every line is the project's: on stderr what submit did (Ray's SDK logged each step of the
    # upload there), on stdout the job's own (Ray's job preamble, its connect lines and every
    # worker's forwarded log were most of a 10-step job's log).
    assert [ln.split(" ", 3)[2] for ln in r.stderr.splitlines()] == ["uploading", "job"], r.stderr
    summary = r.stdout.index("\n{\n")
    foreign = [ln for ln in r.stdout[:summary].splitlines()
               if not (ln.startswith("canine pretrain: ") or re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  step ", ln))]
    assert not foreign, r.stdout
    json.loads(r.stdout[summary:])
    assert (run / "final" / "model_fp32.pt").is_file()
    _no_token(r, head.token)


def test_failing_job_exits_with_its_code(head, tmp_path):
    missing = tmp_path / "no-such-shards"
    r = canine("submit", "--address", head.url, "--", "inspect", str(missing), env=_env(RAY_AUTH_TOKEN=head.token))
    assert r.returncode not in (0, submit.EXIT_CLUSTER), r.stderr[-3000:]
    (line,) = [ln for ln in r.stderr.splitlines() if "FAILED" in ln]  # one line: why, and where the logs are
    assert line.startswith("canine submit: job raysubmit_") and f"canine submit --address {head.url} logs " in line
    _no_token(r, head.token)
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(head.url, headers={"Authorization": f"Bearer {head.token}"})
    failed = [j for j in client.list_jobs() if str(missing) in j.entrypoint]
    assert len(failed) == 1 and str(failed[0].status) == "FAILED"
    assert r.returncode == (failed[0].driver_exit_code or 1)


def test_token_file_no_wait_status_logs_stop(head, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(head.token + "\n")
    env = _env(RAY_AUTH_TOKEN_PATH=str(token_file))
    r = canine("submit", "--address", head.url, "--no-wait", "--job-id", "canine-test-nowait", "--",
               "pretrain", "--help", env=env)
    assert r.returncode == 0 and r.stdout.strip() == "canine-test-nowait", r.stderr[-3000:]
    r = canine("submit", "--address", head.url, "logs", "canine-test-nowait", "--follow", env=env)
    assert r.returncode == 0 and r.stdout.startswith("usage: canine pretrain"), r.stdout[:3000] + r.stderr[-3000:]
    assert r.stderr == ""  # nor "WebSocket closed" from Ray's SDK as the job's log ends
    r = canine("submit", "--address", head.url, "logs", "canine-test-nowait", env=env)
    assert r.returncode == 0 and r.stdout.startswith("usage: canine pretrain"), r.stdout[:3000] + r.stderr[-3000:]
    r = canine("submit", "--address", head.url, "status", "canine-test-nowait", env=env)
    assert r.returncode == 0 and r.stdout.startswith("canine-test-nowait: SUCCEEDED")
    r = canine("submit", "--address", head.url, "stop", "canine-test-nowait", env=env)
    assert r.returncode == 0 and r.stdout.strip() == "canine-test-nowait: already SUCCEEDED"
    r = canine("submit", "--address", head.url, "--job-id", "canine-test-nowait", "--", "pretrain", "--help", env=env)
    assert r.returncode == submit.EXIT_DUPLICATE and r.stdout == ""  # ids are unique: nothing ran
    # Refused before the checkout was packed and uploaded: no "uploading" line, nothing of Ray's.
    (line,) = r.stderr.splitlines()
    assert line.startswith("canine submit: --job-id canine-test-nowait: job canine-test-nowait already exists on the "
                           f"cluster at {head.url} (SUCCEEDED, started ")
    assert f"canine submit --address {head.url} status canine-test-nowait" in line and "choose another --job-id" in line
    r = canine("submit", "--address", head.url, "status", "raysubmit_doesnotexist", env=env)
    assert r.returncode == submit.EXIT_CLUSTER and "no job raysubmit_doesnotexist" in r.stderr
    _no_token(r, head.token)


def test_a_python_without_the_stack_is_named_before_anything_runs(head, tmp_path):
    """The head's own `python` (a bare venv) has neither pyarrow nor torch: the job stops at its
    preflight, before `pretrain` creates anything, and submit says what is missing and which flag
    fixes it, in one line, exit 6. The project itself is there: this checkout was uploaded."""
    env = _env(RAY_AUTH_TOKEN=head.token)
    run = tmp_path / "run"
    r = canine("submit", "--address", head.url, "--python", "python", "--", "pretrain", "--config", "tiny",
               "--data", str(tmp_path / "shards"), "--output", str(run), env=env)
    assert r.returncode == submit.EXIT_MISSING, r.stdout[-3000:] + r.stderr[-3000:]
    assert "(python: python)" in r.stderr and not run.exists()
    uploading, submitted, line = r.stderr.splitlines()
    assert uploading.startswith(f"canine submit: uploading {ROOT} as the job's working directory (without its .venv")
    assert "submitted to" in submitted and line.startswith("canine submit: job raysubmit_") and f"{head.bare_python} (Python " in line
    assert "cannot import pyarrow, apache_beam, torch, ray, deepspeed, so the job stopped before running" in line
    assert "--python PATH" in line and "--image IMAGE" in line and "--installed" not in line
    assert "canine-preflight:" in r.stdout  # the job's own line, streamed with its log
    _no_token(r, head.token)

    # Nothing uploaded, the same interpreter named by its path: the project is missing too.
    r = canine("submit", "--address", head.url, "--installed", "--python", head.bare_python, "--", "inspect", "x",
               env=env)
    assert r.returncode == submit.EXIT_MISSING, r.stdout[-3000:] + r.stderr[-3000:]
    _, line = r.stderr.splitlines()  # nothing uploaded: submitted, why
    assert "cannot import jobs, contract, pipeline, pyarrow, apache_beam, so" in line and "torch" not in line
    assert "leave out --installed so that this checkout is uploaded" in line

    r = canine("submit", "--address", head.url, "--python", "/no/such/python", "--", "inspect", "x", env=env)
    assert r.returncode == submit.EXIT_MISSING, r.stdout[-3000:] + r.stderr[-3000:]
    _, _, line = r.stderr.splitlines()  # uploading, submitted, why
    assert "no interpreter /no/such/python on the cluster's head (not found), so nothing ran; " in line


def test_list_shows_the_clusters_jobs(head, tmp_path):
    env = _env(RAY_AUTH_TOKEN=head.token)
    missing = tmp_path / "no-such-shards"
    r = canine("submit", "--address", head.url, "--job-id", "canine-test-list", "--", "inspect", str(missing), env=env)
    assert r.returncode == 2, r.stderr[-3000:]  # the job's own exit status
    r = canine("submit", "--address", head.url, "list", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["JOB", "ID", "STATUS", "START", "(UTC)", "END", "(UTC)", "EXIT", "COMMAND"]
    (row,) = [ln for ln in rows if ln.startswith("canine-test-list ")]
    cells = row.split()
    assert cells[1] == "FAILED" and cells[6] == "2"  # id, status, start date and time, end date and time, exit
    command = _short(f"{sys.executable} -m jobs.cli inspect {missing}")  # without the preflight
    assert row.endswith(command) and row.index(command) == header.index("COMMAND")  # columns aligned
    r = canine("submit", "--address", head.url, "list", "--json", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    (job,) = [j for j in json.loads(r.stdout) if j["id"] == "canine-test-list"]
    assert job["status"] == "FAILED" and job["exit_code"] == 2 and job["type"] == "SUBMISSION"
    assert job["start"].endswith("Z") and job["end"] >= job["start"]
    assert "canine-preflight:" in job["entrypoint"] and job["entrypoint"].endswith(f"-m jobs.cli inspect {missing}")
    _no_token(r, head.token)


def _short(text: str) -> str:
    return submit._short(text, 72)


def test_a_stopped_job_exits_3(head, tmp_path):
    """A job that waits forever (its manifest a FIFO nobody writes), stopped while it runs."""
    fifo = tmp_path / "shards"
    fifo.mkdir()
    os.mkfifo(fifo / "_manifest.json")
    env = _env(RAY_AUTH_TOKEN=head.token)
    follower = subprocess.Popen([sys.executable, "-m", "jobs.cli", "submit", "--address", head.url, "--job-id",
                                 "canine-test-stop", "--", "inspect", str(fifo)],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(head.url, headers={"Authorization": f"Bearer {head.token}"})
        deadline = time.monotonic() + 120
        while "Running entrypoint" not in _logs(client, "canine-test-stop"):
            assert follower.poll() is None, follower.communicate()
            assert time.monotonic() < deadline, "the job did not start in 120 s"
            time.sleep(0.5)  # polling the job until it runs, not synchronizing
        r = canine("submit", "--address", head.url, "stop", "canine-test-stop", env=env)
        assert r.returncode == 0 and r.stdout.strip() == "canine-test-stop: stop requested", r.stderr
        out, err = follower.communicate(timeout=120)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == submit.EXIT_STOPPED, err[-3000:]
    _, _, line = _ours(err)
    assert line.startswith("canine submit: job canine-test-stop STOPPED: stopped before it ended")
    r = canine("submit", "--address", head.url, "logs", "canine-test-stop", "--follow", env=env)
    assert r.returncode == submit.EXIT_STOPPED


def _logs(client, job_id: str) -> str:
    try:
        return client.get_job_logs(job_id)
    except RuntimeError:  # not submitted yet
        return ""


def test_missing_or_wrong_token_is_refused_clearly(head, tmp_path):
    home = tmp_path / "home"  # an empty home: no ~/.ray/auth_token to fall back on
    home.mkdir()
    r = canine("submit", "--address", head.url, "--", "pretrain", "--help", env=_env(HOME=str(home)))
    assert r.returncode == submit.EXIT_CLUSTER
    assert f"the Ray cluster at {head.url} requires an auth token and none was found" in r.stderr
    wrong = secrets.token_hex(24)
    r = canine("submit", "--address", head.url, "--", "pretrain", "--help", env=_env(HOME=str(home), RAY_AUTH_TOKEN=wrong))
    assert r.returncode == submit.EXIT_CLUSTER
    assert "rejected the token from RAY_AUTH_TOKEN: it is not this cluster's token" in r.stderr
    assert wrong not in r.stdout + r.stderr
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(head.token)  # Ray's default token file
    r = canine("submit", "--address", head.url, "status", "raysubmit_doesnotexist", env=_env(HOME=str(home)))
    assert r.returncode == submit.EXIT_CLUSTER and "no job raysubmit_doesnotexist" in r.stderr  # authenticated
    _no_token(r, head.token)


def test_unreachable_cluster_is_named():
    r = canine("submit", "--address", f"127.0.0.1:{_free_port()}", "status", "x", env=_env(RAY_AUTH_TOKEN="t"))
    assert r.returncode == submit.EXIT_CLUSTER and "cannot reach a Ray dashboard at http://127.0.0.1:" in r.stderr


# --- without a cluster -----------------------------------------------------------------------


def test_a_jobs_log_is_its_commands_own_lines():
    """Ray's supervisor preamble is taken out of a job's log, whole lines only, however the
    stream cuts them; everything else passes, the token masked."""
    token = submit.Token("s3cr3t-token-value", "RAY_AUTH_TOKEN")
    ray = ("2026-11-29 00:19:16,102\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
           "Running entrypoint for job raysubmit_Pp: /v/bin/python -c 'import sys' && exec /v/bin/python -m jobs.cli x\n")
    ours = ("canine pretrain: connecting to the Ray cluster at 127.0.0.1:6379 ...\n"
            "Running entrypoint for job, said by the command itself s3cr3t-token-value\n"
            "2026-11-29 00:20:01  step  1/10  loss 8.3207\n")
    text = ray + ours + "no newline at the end"
    expected = ours.replace(token.value, "***") + "no newline at the end"
    assert submit.JobLog(token).feed(text, end=True) == expected
    for size in (1, 7, 50):  # the stream's chunks end anywhere
        log = submit.JobLog(token)
        streamed = "".join(log.feed(text[i:i + size]) for i in range(0, len(text), size)) + log.feed("", end=True)
        assert streamed == expected


def test_token_lookup_follows_rays_order(tmp_path):
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("from-home\n")
    named = tmp_path / "named"
    named.write_text("from-path")
    assert submit.resolve_token({"RAY_AUTH_TOKEN": " from-env "}, tmp_path) == submit.Token("from-env", "RAY_AUTH_TOKEN")
    assert submit.resolve_token({"RAY_AUTH_TOKEN_PATH": str(named)}, tmp_path).value == "from-path"
    assert submit.resolve_token({}, tmp_path) == submit.Token("from-home", str(tmp_path / ".ray" / "auth_token"))
    assert submit.resolve_token({}, tmp_path / "nowhere") is None
    with pytest.raises(submit.ClusterError, match="RAY_AUTH_TOKEN_PATH=.*: no such file"):
        submit.resolve_token({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "gone")}, tmp_path)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(submit.ClusterError, match="is empty"):
        submit.resolve_token({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "empty")}, tmp_path)
    assert "from-env" not in repr(submit.resolve_token({"RAY_AUTH_TOKEN": "from-env"}))
    assert submit._mask("a from-env b", submit.Token("from-env", "x")) == "a *** b"


def _args(*command, **kw):
    """What cli.main hands to submit.main: options, action words, and the command after `--`."""
    defaults = dict(address="http://h:8265", working_dir=None, image=None, installed=False, env=[], not_secret=[],
                    job_id=None, no_wait=False, follow=False, allow_insecure_http=False, action=[], python=None,
                    json=False)
    return SimpleNamespace(passthrough=list(command), **{**defaults, **kw})


def test_spec_entrypoint_and_runtime_env():
    spec = submit._spec(_args("preprocess", "in dir/*.bz2", "--output", "o", "--", "--runner=FlinkRunner",
                              env=["A=1=2"], job_id="j1"), ["preprocess", "in dir/*.bz2", "--output", "o", "--",
                                                             "--runner=FlinkRunner"])
    command = "python -m jobs.cli preprocess 'in dir/*.bz2' --output o -- --runner=FlinkRunner"
    check, _, rest = spec.entrypoint().partition(" && exec ")
    assert rest == command and submit._command(spec.entrypoint()) == command
    assert check.startswith("python -c ") and check.endswith(" jobs contract pipeline pyarrow apache_beam")
    env = spec.runtime_env()
    assert env["working_dir"] == str(ROOT) and ".venv" in env["excludes"] and ".git" in env["excludes"]
    assert env["env_vars"] == {"PYTHONUNBUFFERED": "1", "A": "1=2"} and spec.submission_id == "j1"
    # An interpreter given by its path: named in both halves, and its directory first on the job's PATH.
    venv = dataclasses.replace(spec, python="/opt/venv/bin/python")
    assert venv.entrypoint().startswith("/opt/venv/bin/python -c ") and " && exec /opt/venv/bin/python -m " in venv.entrypoint()
    assert venv.runtime_env()["env_vars"]["PATH"] == "/opt/venv/bin:${PATH}"
    assert submit._spec(_args(env=["PATH=/x"]), ["pretrain"]).runtime_env()["env_vars"]["PATH"] == "/x"
    assert submit._command("python -c 'x' && exec y") == "python -c 'x' && exec y"  # not ours: as it is
    image = submit._spec(_args(image="ghcr.io/x/canine:1"), ["pretrain"]).runtime_env()
    assert image["image_uri"] == "ghcr.io/x/canine:1" and "working_dir" not in image
    assert "working_dir" not in submit._spec(_args(installed=True), ["pretrain"]).runtime_env()


@pytest.mark.parametrize("words, kw, needle", [
    ([], {}, "got nothing"),
    (["submit"], {}, "got 'submit'"),
    (["train"], {}, "COMMAND one of evaluate, export, finetune, inspect, preprocess, pretrain"),
    (["pretrain"], {"env": ["RAY_AUTH_TOKEN=abc"]}, "never put it in a job's env"),
    (["pretrain"], {"env": ["NOEQUALS"]}, "expected NAME=VALUE"),
    (["pretrain"], {"working_dir": "/no/such/dir"}, "not a directory"),
    (["pretrain"], {"python": ".venv/bin/python"}, "--python .venv/bin/python: a relative path"),
    ([], {"action": ["status"]}, "usage: canine submit"),
    ([], {"action": ["list", "j1"]}, "got 'list j1'"),
    (["pretrain"], {"action": ["list"]}, "usage: canine submit"),
    ([], {"action": ["restart", "j1"]}, "got 'restart j1'"),
    (["pretrain"], {"action": ["logs", "j1"]}, "usage: canine submit"),
])
def test_bad_submissions_are_refused_before_contacting_anyone(words, kw, needle, capsys):
    assert submit.main(_args(*words, **kw)) == 2
    assert needle in capsys.readouterr().err


@pytest.fixture
def reached(monkeypatch, tmp_path):
    """Stops submit.main where it would contact the cluster; returns what connect was given."""
    calls = []

    def connect(address, token):
        calls.append((address, token and token.value))
        raise submit.ClusterError("stopped before contacting the cluster")

    monkeypatch.setattr(submit, "connect", connect)
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token of the developer's
    return calls


SECRET = "s3cr3t-t0ken-value"


@pytest.mark.parametrize("address", ["http://10.0.0.5:8265", "10.0.0.5:8265", "http://ray-head.example.com:8265",
                                     "HTTP://[2001:db8::1]:8265", "http://127.0.0.1.nip.io:8265"])
def test_token_is_not_sent_in_cleartext_off_this_machine(address, reached, monkeypatch, capsys):
    monkeypatch.setenv("RAY_AUTH_TOKEN", SECRET)
    assert submit.main(_args(address=address, action=["status", "j1"])) == 2
    err = capsys.readouterr().err
    assert "refusing to send the Ray auth token (from RAY_AUTH_TOKEN) in cleartext over http://" in err
    assert all(way in err for way in ("https://", "port-forward", "--address http://127.0.0.1:8265", "--allow-insecure-http"))
    assert SECRET not in err and reached == []
    # Said explicitly, it goes; so does a submission without a token, which has nothing to leak.
    assert submit.main(_args(address=address, allow_insecure_http=True, action=["status", "j1"])) == submit.EXIT_CLUSTER
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    assert submit.main(_args(address=address, action=["status", "j1"])) == submit.EXIT_CLUSTER
    assert [token for _, token in reached] == [SECRET, None]


@pytest.mark.parametrize("address", ["http://127.0.0.1:8265", "http://127.3.4.5:8265", "http://localhost:8265",
                                     "http://LOCALHOST.:8265", "http://[::1]:8265", "127.0.0.1:8265", "https://ray.example.com"])
def test_token_goes_to_loopback_http_and_to_https(address, reached, monkeypatch, capsys):
    monkeypatch.setenv("RAY_AUTH_TOKEN", SECRET)
    assert submit.main(_args("pretrain", "--help", address=address, installed=True)) == submit.EXIT_CLUSTER
    assert reached == [(address if "://" in address else f"http://{address}", SECRET)]


@pytest.mark.parametrize("item, why", [
    ("HF_TOKEN=hf_abc", "its name looks like a secret's"),
    ("WANDB_API_KEY=0123abcd", "its name looks like a secret's"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", "its name looks like a secret's"),
    ("db_password=hunter2-pw", "its name looks like a secret's"),
    ("GOOGLE_APPLICATION_CREDENTIALS=/var/secrets/google/key.json", "its name looks like a secret's"),
    ("S3_ID=AKIAIOSFODNN7EXAMPLE", "its value looks like an AWS access key id"),
    ("HEADER=Bearer abc.def", "its value looks like a bearer token"),
    ("PEM=-----BEGIN RSA PRIVATE KEY-----MIIE", "its value looks like a private key"),
    ("GH=ghp_" + "a" * 36, "its value looks like a GitHub token"),
])
def test_secret_looking_env_is_refused_without_quoting_it(item, why, reached, capsys):
    name, _, value = item.partition("=")
    assert submit.main(_args("pretrain", env=[item], installed=True)) == 2
    err = capsys.readouterr().err
    assert f"--env {name}: {why}" in err and "secretKeyRef" in err and f"--not-secret {name}" in err
    assert value not in err and reached == []
    spec = submit._spec(_args(env=[item], not_secret=[name], installed=True), ["pretrain"])  # the explicit override
    assert spec.runtime_env()["env_vars"][name] == value


def test_ordinary_env_is_not_taken_for_a_secret():
    env = ["TOKENIZER_PATH=/data/tok.json", "TOKENS_PER_BATCH=4096", "AUTHOR=me", "NCCL_DEBUG=INFO", "KEYBOARD=us"]
    spec = submit._spec(_args(env=env, installed=True), ["pretrain"])
    assert len(spec.runtime_env()["env_vars"]) == len(env) + 1  # and PYTHONUNBUFFERED


def test_uploaded_package_is_small_and_has_no_venv(tmp_path):
    """Zip the working dir with Ray's own packaging code and our excludes alone (.gitignore not
    consulted: a copied tree has none), as the upload would."""
    from ray._private.runtime_env.packaging import create_package

    spec = submit._spec(_args(), ["pretrain"])
    zip_path = tmp_path / "pkg.zip"
    create_package(spec.working_dir, zip_path, include_gitignore=False, excludes=list(spec.runtime_env()["excludes"]))
    names = zipfile.ZipFile(zip_path).namelist()
    assert "jobs/cli.py" in names and "pyproject.toml" in names
    assert not [n for n in names if n.startswith((".venv/", ".git/", "runs/", "tests/", "benchmarks/", "docs/"))
                or "__pycache__" in n]
    assert "pipeline/sample/enwiki-20261101-pages-articles.xml" in names  # canine smoke's sample dumps travel
    assert zip_path.stat().st_size < 5 * 2**20, f"{zip_path.stat().st_size} bytes"


def test_the_preflight_reports_from_a_bare_interpreter(tmp_path):
    """The preflight as the job runs it (a shell, the interpreter first), without a cluster: this
    interpreter passes it and goes on to the command; a bare venv's stops it with the line that
    exit_code() reads back."""
    spec = submit.SubmitSpec(("inspect", str(tmp_path / "none")), python=sys.executable)
    r = subprocess.run(spec.entrypoint(), shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "canine inspect: " in r.stderr and submit._MARK not in r.stderr  # got past it
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=60)
    bare = dataclasses.replace(spec, python=str(tmp_path / "bare" / "bin" / "python"))
    # A bare venv as on a node without the project: a developer's PYTHONPATH would lend it ours.
    bare_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(bare.entrypoint(), shell=True, cwd=tmp_path, env=bare_env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == submit.EXIT_MISSING
    found = submit._PREFLIGHT_LINE.search(r.stderr)
    assert found and found.group(3).split() == ["jobs", "contract", "pipeline", "pyarrow", "apache_beam"]


@pytest.mark.parametrize("ip, here", [("127.0.0.1", True), ("127.3.4.5", True), ("192.0.2.1", False),
                                      ("2001:db8::1", False)])
def test_a_head_is_here_when_its_node_ip_is_this_machines(ip, here):
    assert submit.is_this_machine(ip) is here


def test_job_paths_are_the_callers_and_refused_for_a_head_elsewhere(tmp_path, monkeypatch):
    from jobs.submit import job_paths

    monkeypatch.chdir(tmp_path)
    words = ("preprocess", "dumps/*.xml.bz2", "gs://b/x.xml", "--output=out", "--tokenizer", "tok.json",
             "--workers", "2", "--", "--temp_location", "tmp")
    assert job_paths(words, here=True) == ("preprocess", f"{tmp_path}/dumps/*.xml.bz2", "gs://b/x.xml",
                                           f"--output={tmp_path}/out", "--tokenizer", f"{tmp_path}/tok.json",
                                           "--workers", "2", "--", "--temp_location", "tmp")
    assert job_paths(("pretrain", "--config", "tiny", "--data", "/abs/shards", "--set", "a=b"), here=False) == \
        ("pretrain", "--config", "tiny", "--data", "/abs/shards", "--set", "a=b")
    assert job_paths(("pretrain", "--config", "cfg/my.yaml"), here=True)[2] == f"{tmp_path}/cfg/my.yaml"
    with pytest.raises(ValueError, match=r"^--data out/shards: a relative path names a place on this machine, and "
                                         r"the job runs on the cluster at http://h:8265; give a URL"):
        job_paths(("pretrain", "--data", "out/shards"), here=False, address="http://h:8265")
    with pytest.raises(ValueError, match=r"^evaluate runs/x: a relative path"):
        job_paths(("evaluate", "runs/x"), here=False)
