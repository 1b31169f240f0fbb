"""`canine submit`: run a canine command on a Ray cluster through the Ray Jobs API.

    canine submit --address http://127.0.0.1:8265 -- pretrain --data gs://b/shards --output gs://b/runs/base --config base
    canine submit --address URL --no-wait -- preprocess gs://b/dumps/*.bz2 --output gs://b/shards -- --runner=FlinkRunner --flink_master=flink:8081
    canine submit --address URL --python /opt/venv/bin/python -- pretrain ...
    canine submit --address URL list [--json]
    canine submit --address URL status raysubmit_XXXX
    canine submit --address URL logs raysubmit_XXXX [--follow]
    canine submit --address URL stop raysubmit_XXXX

The job runs `PYTHON -m jobs.cli COMMAND ...` on the cluster's head, in one of three places:
this checkout uploaded as the job's working directory (default; .venv, runs/, .git and other
bulk are excluded), `--image IMAGE` (Ray's `image_uri`: the nodes start the job in that image,
which must have the project installed), or `--installed` (the nodes' own python already has the
project, e.g. the KubeRay image from infra/docker/gpu.Dockerfile: nothing is uploaded).

PYTHON is `--python`; by default this very interpreter when the head runs on this machine (it
has the project: it is running it), else `python` on the head's PATH, as `ray job submit --
python ...` does (in the project's images that is the one Ray runs on). An interpreter named by
its path also goes first on the job's PATH, as activating its environment would: DeepSpeed's op
builder finds `ninja` there. Before the command, the job checks that PYTHON can import the
project and what the command needs (pyarrow, apache_beam; torch, ray, deepspeed for training):
if not, it stops there and submit says in one line what is missing and which flag fixes it.

Token authentication (Ray >= 2.52, on by default in 2.60 clusters started with a token): the
token is read like Ray reads it, RAY_AUTH_TOKEN, then the file named by RAY_AUTH_TOKEN_PATH,
then ~/.ray/auth_token; it is sent only as the Authorization header, never printed, and
masked out of the job's streamed logs. docs/cluster.md says how to get it from the cluster.
It is never sent in cleartext off this machine: `http://` only to a loopback address (where
`kubectl port-forward` listens), `https://` anywhere, else `--allow-insecure-http` must say so.

Secrets never go in `--env`: a job's environment is stored with the job and shown in plain text
by the dashboard and `ray job list`. A NAME or VALUE that looks like a secret is refused (say
`--not-secret NAME` if it is not one); the cluster's pods get secrets from Kubernetes instead.

Exit status:
    0    the job succeeded; right after submitting with --no-wait; list, status, logs, stop answered
         (logs --follow: the job's own status, as below)
    the job's own exit code (or 1 if it has none) when it failed
    2    refused before contacting the cluster: a bad flag, value or combination
    3    the job was stopped (canine submit stop, ray job stop, the dashboard)
    4    the cluster could not be reached, refused the token, refused the job, or has no such job
    5    --job-id names a job that already exists on the cluster
    6    the job's python cannot import the project or what the command needs (or does not exist)
    130  Ctrl-C detached from a job that keeps running
"""

import asyncio
import dataclasses
import datetime
import ipaddress
import json
import os
import re
import shlex
import socket
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from contract.extras import project_hint
from jobs.commands import COMMANDS

EXIT_STOPPED = 3
EXIT_CLUSTER = 4
EXIT_DUPLICATE = 5
EXIT_MISSING = 6  # also the preflight's own exit status inside the job
EXIT_DETACHED = 130
ACTIONS = ("status", "logs", "stop")  # each takes a JOB_ID; `list` takes none
# Never uploaded with the working directory: environments, outputs, caches. Ray also honours the
# checkout's .gitignore; these hold even where there is none (a copied tree) and keep the
# package far below Ray's working_dir limit (the upload is a zip held in the cluster's GCS). Wheels
# anywhere (a local wheel cache is tens of MB): the cluster installs packages from its image. The
# checkout's tests (their data is most of its bytes), benchmarks and docs: a job runs a canine
# command, which reads none of them.
EXCLUDES = (".venv", ".git", "runs", "out", "build", ".whl", ".gl", "**/__pycache__", "*.egg-info",
            ".pytest_cache", "*.pyc", "*.whl", "/tests/", "/benchmarks/", "/docs/")
_TOKEN_ENV_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")
# --env names that look like a secret's. TOKEN, KEY, AUTH and PASS as whole words only, so that
# TOKENIZER_PATH, TOKENS_PER_BATCH, MONKEYPATCH or AUTHOR pass.
_SECRET_NAME_RE = re.compile(r"(?:^|_)(?:TOKEN|KEYS?|AUTH|PASS)(?:_|$)|SECRET|PASSW(?:OR)?D|CREDENTIAL|APIKEY|PRIVATE", re.I)
# --env values that look like a secret whatever their name.
_SECRET_VALUES = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a bearer token", re.compile(r"^\s*bearer\s+\S", re.I)),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a JSON web token", re.compile(r"\beyJ[\w-]{8,}\.[\w-]{8,}\.")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_\w{22,})")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
)
# What each command imports on the cluster, by install role (pyproject.toml): the project's own
# packages, then the stack. Top-level names: the preflight looks them up without importing them.
_PREPROCESS_NEEDS = ("jobs", "contract", "pipeline", "pyarrow", "apache_beam")
_TRAIN_NEEDS = (*_PREPROCESS_NEEDS, "training", "torch", "ray", "deepspeed")
NEEDS = {"preprocess": _PREPROCESS_NEEDS, "inspect": _PREPROCESS_NEEDS, "validate": _PREPROCESS_NEEDS}
_PROJECT = frozenset(("jobs", "contract", "pipeline", "training"))
# The job's first step, run by the job's interpreter before any canine code, which would otherwise
# fail deep inside with a bare ModuleNotFoundError. find_spec, not import: importing torch,
# DeepSpeed and Beam costs seconds that the command spends again right after, and a package that
# is there but broken fails at its own import with its own message. One line, Python 3 only, no
# f-strings: it must report from whatever interpreter it meets. The mark starts the line that
# exit_code() reads back from the job's log tail.
_MARK = "canine-preflight:"
PREFLIGHT = ("import sys,importlib.util as u;m=[n for n in sys.argv[1:] if u.find_spec(n) is None];"
             f'm and sys.stderr.write("{_MARK} %s (Python %s) cannot import: %s\\n"'
             '%(sys.executable,sys.version.split()[0]," ".join(m)));'
             f"sys.exit({EXIT_MISSING} if m else 0)")
# At the start of a line: Ray's log also starts with the entrypoint, which holds the mark too.
_PREFLIGHT_LINE = re.compile("^" + re.escape(_MARK) + r" (.*) \(Python (\S+)\) cannot import: (.+)$", re.M)


class ClusterError(RuntimeError):
    """The cluster could not be reached, refused the token, or does not know the job."""


class DuplicateJob(ClusterError):
    """--job-id names a job that the cluster already has."""


@dataclasses.dataclass(frozen=True)
class Token:
    value: str = dataclasses.field(repr=False)  # the secret: only ever put in the Authorization header
    source: str  # where it came from, safe to print ("RAY_AUTH_TOKEN", a file path)


@dataclasses.dataclass(frozen=True)
class SubmitSpec:
    argv: tuple  # the canine command and its arguments, e.g. ("pretrain", "--config", "tiny")
    working_dir: str | None = None  # uploaded as the job's cwd; None with image or installed
    image: str | None = None  # container image with the project installed (Ray runtime_env image_uri)
    env_vars: tuple = ()  # (name, value) pairs for the job's environment
    submission_id: str | None = None  # fixed job id, so a scheduler that retries cannot submit twice
    python: str = "python"  # the job's interpreter on the head: a path, or a name looked up on its PATH

    def entrypoint(self) -> str:
        # `PYTHON -m jobs.cli` rather than the `canine` script: it runs from the uploaded working
        # directory as well as from an installed package. The interpreter is named, not left to
        # the head's PATH alone, which is whatever the shell that started Ray had (a head started
        # as `.venv/bin/ray start` runs Ray in the venv and a `python` without the project). The
        # preflight runs first; `exec` makes the command the job's process, so its exit status
        # and Ray's stop signal are the command's own.
        check = shlex.join([self.python, "-c", PREFLIGHT, *NEEDS.get(self.argv[0], _TRAIN_NEEDS)])
        return f"{check} && exec {shlex.join([self.python, '-m', 'jobs.cli', *self.argv])}"

    def runtime_env(self) -> dict:
        # Unbuffered output: the driver's prints reach the log tail as they happen, not per 8 KiB.
        # An interpreter given by its path puts its directory first on PATH, as activating its
        # environment would, for the driver and the job's workers alike: console scripts of that
        # environment (ninja, which DeepSpeed's op builder runs) are found. Ray expands ${PATH}
        # on each node. A --env PATH=... of the user's wins.
        bin_dir = {"PATH": f"{os.path.dirname(self.python)}:${{PATH}}"} if "/" in self.python else {}
        env = {"env_vars": {"PYTHONUNBUFFERED": "1", **bin_dir, **dict(self.env_vars)}}
        if self.working_dir:
            env.update(working_dir=self.working_dir, excludes=list(EXCLUDES))
        if self.image:
            env["image_uri"] = self.image
        return env


def resolve_token(environ=None, home: Path | None = None) -> Token | None:
    """The cluster token, looked up in Ray's own order; None when there is none."""
    environ = os.environ if environ is None else environ
    if environ.get("RAY_AUTH_TOKEN", "").strip():
        return Token(environ["RAY_AUTH_TOKEN"].strip(), "RAY_AUTH_TOKEN")
    path_env = environ.get("RAY_AUTH_TOKEN_PATH", "").strip()
    path = Path(path_env) if path_env else (home or Path.home()) / ".ray" / "auth_token"
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        if path_env:  # named explicitly, so its absence is a mistake, as Ray itself treats it
            raise ClusterError(f"RAY_AUTH_TOKEN_PATH={path}: no such file; point it at the file that holds the "
                               "cluster's token, or unset it (docs/cluster.md)") from None
        return None
    except OSError as e:
        raise ClusterError(f"token file {path}: cannot read it ({e.strerror}); check its permissions") from None
    if not value:
        raise ClusterError(f"token file {path} is empty; write the cluster's token in it (docs/cluster.md: how to "
                           "read it from the cluster)")
    return Token(value, str(path))


def check_transport(address: str, token: Token | None, allow_insecure_http: bool = False) -> None:
    """Refuse to send the token in cleartext to another machine: anyone on the path could read
    it and act as the cluster's owner. Loopback `http://` is fine (a `kubectl port-forward`
    listens there and reaches the cluster through the API server's TLS), `https://` always.
    Other schemes are Ray's address plugins, which choose their own transport."""
    host = urllib.parse.urlsplit(address).hostname
    if token is None or allow_insecure_http or not address.lower().startswith("http://") or _is_loopback(host):
        return
    raise ValueError(
        f"--address {address}: refusing to send the Ray auth token (from {token.source}) in cleartext over http:// "
        f"to {host}, which is not this machine. Use https:// if the dashboard serves it; or forward the port to this "
        "machine (kubectl -n canine port-forward svc/canine-head-svc 8265:8265, then --address http://127.0.0.1:8265); "
        "or, on a network you trust, add --allow-insecure-http")


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback  # 127.0.0.0/8 and ::1
    except ValueError:  # another name: it may resolve anywhere
        return False


def connect(address: str, token: Token | None):
    """A JobSubmissionClient for `address`, with token failures turned into clear messages."""
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    headers = {"Authorization": f"Bearer {token.value}"} if token else {}
    try:
        return JobSubmissionClient(address, headers=headers)
    except AuthenticationError:
        if token is None:
            raise ClusterError(
                f"the Ray cluster at {address} requires an auth token and none was found: set RAY_AUTH_TOKEN, "
                "or RAY_AUTH_TOKEN_PATH to a file holding it, or write it to ~/.ray/auth_token "
                "(docs/cluster.md: how to read it from the cluster's Kubernetes secret)") from None
        raise ClusterError(f"the Ray cluster at {address} rejected the token from {token.source}: "
                           "it is not this cluster's token") from None
    except ConnectionError:
        raise ClusterError(f"cannot reach a Ray dashboard at {address}: is the cluster up, and is this the "
                           "dashboard's address (port 8265; on Kubernetes, kubectl port-forward to the head "
                           "service)?") from None


def head_is_here(client, wait_s: float = 60.0) -> bool:
    """Whether the cluster's head node runs on this machine: its node IP is one of this machine's
    addresses, which a socket can be bound to only then (any 127.x can). The dashboard's address
    cannot tell: `kubectl port-forward` listens on 127.0.0.1 too. The State API's node list is
    the dashboard's REST endpoint, asked through the client for its token and TLS settings; any
    failure reads as "not here", the safe side (the head's own `python`). A head that has just
    started answers with no nodes for a few seconds: it is waited for, as a job would wait."""
    deadline, pause = time.monotonic() + wait_s, threading.Event()  # never set: an interruptible sleep
    try:
        while True:
            nodes = client._do_request("GET", "/api/v0/nodes", params={
                "filter_keys": "is_head_node", "filter_predicates": "=", "filter_values": "True", "limit": "1"})
            heads = nodes.json()["data"]["result"]["result"]
            if heads or time.monotonic() > deadline:
                return bool(heads) and is_this_machine(heads[0]["node_ip"])
            pause.wait(1.0)
    except Exception:  # an older dashboard, an answer of another shape
        return False


def is_this_machine(ip: str) -> bool:
    try:
        with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET) as s:
            s.bind((ip, 0))
        return True
    except OSError:  # EADDRNOTAVAIL: an address of another machine
        return False


def choose_python(client, spec: SubmitSpec, asked: str | None, here: bool | None = None) -> SubmitSpec:
    """The spec with its interpreter: --python if given; else this interpreter when the head runs
    here (the job then runs on this machine, and this interpreter has the project and its stack:
    it is running `canine`), else `python` on the head's PATH, what `ray job submit -- python`
    runs and, in the project's images, the interpreter Ray itself runs on. In an --image the
    image's `python`: a path of this machine means nothing there."""
    if asked:
        python = asked
    elif not spec.image and sys.executable and (head_is_here(client) if here is None else here):
        python = sys.executable  # as started (a venv's bin/python), never resolved: that would leave the venv
    else:
        python = "python"
    return dataclasses.replace(spec, python=python)


# The job's flags and positionals that name files or folders (jobs/*.py add_arguments). --config
# is a path only when it is not a preset name.
PATH_FLAGS = ("--data", "--output", "--to", "--tokenizer", "--mirror", "--config")
PATH_POSITIONALS = ("preprocess", "evaluate", "report", "export", "inspect", "validate")


def job_paths(words: tuple, here: bool, address: str = "URL") -> tuple:
    """The job's command with its relative local paths made absolute against this working
    directory, as a local command would read them: the job runs in another one (the uploaded
    checkout's copy, or the image's). With the head on another machine a relative path names a
    place of this machine, which its nodes cannot read: refused, in one line. URLs, absolute
    paths, preset names and everything after the job's own `--` (Beam options) are left alone."""
    from jobs import cli  # the command's own parser says which of its flags take a value

    parser = cli.build_parser(words[0]).commands[words[0]]
    takes_value = {o for a in parser._actions for o in a.option_strings if a.nargs != 0}
    out, expect, rest = [words[0]], None, list(words[1:])

    def local(value: str, what: str) -> str:
        if not value or "://" in value or os.path.isabs(value) or value.startswith("~"):
            return value
        if what == "--config" and "/" not in value and not value.endswith((".yaml", ".yml")):
            return value  # a preset: tiny, small, base
        if not here:
            raise ValueError(f"{what} {value}: a relative path names a place on this machine, and the job runs on "
                             f"the cluster at {address}; give a URL (s3://, gs://) or an absolute path that the "
                             "cluster's nodes share")
        return os.path.abspath(value)

    while rest:
        word = rest.pop(0)
        if word == "--":
            out += [word, *rest]
            break
        if expect is not None:
            out.append(local(word, expect) if expect in PATH_FLAGS else word)
            expect = None
        elif word.startswith("--") and "=" in word:
            flag, value = word.split("=", 1)
            out.append(f"{flag}={local(value, flag)}" if flag in PATH_FLAGS else word)
        elif word in takes_value:
            out.append(word)
            expect = word
        elif word.startswith("-"):
            out.append(word)
        else:
            out.append(local(word, words[0]) if words[0] in PATH_POSITIONALS else word)
    return tuple(out)


def submit(client, spec: SubmitSpec, address: str = "URL") -> str:
    try:
        return client.submit_job(entrypoint=spec.entrypoint(), runtime_env=spec.runtime_env(),
                                 submission_id=spec.submission_id)
    except RuntimeError as e:  # e.g. a reused --job-id, a working dir over Ray's upload limit
        reason = _reason(e)
        if spec.submission_id and "already exists" in reason:
            raise DuplicateJob(_duplicate(client, spec.submission_id, address)) from None
        raise ClusterError(f"the cluster refused the job: {reason}") from None


def refuse_duplicate(client, job_id: str, address: str) -> None:
    """Raise DuplicateJob when the cluster has a job `job_id` already; a job it does not know
    comes back from the SDK as a failed request (HTTP 404), and that is the answer wanted."""
    try:
        client.get_job_info(job_id)
    except RuntimeError:
        return
    raise DuplicateJob(_duplicate(client, job_id, address))


def _duplicate(client, job_id: str, address: str) -> str:
    """The line for a --job-id the cluster has already: the cluster keeps every job's record, so
    an id names one job forever (what makes --job-id safe for a scheduler that retries)."""
    try:
        info = client.get_job_info(job_id)
        started = _time(info.start_time)
        what = f" ({info.status}" + (f", started {started} UTC)" if started else ")")
    except Exception:  # the refusal says enough without it
        what = ""
    return (f"--job-id {job_id}: job {job_id} already exists on the cluster at {address}{what}; see it with "
            f"`canine submit --address {address} status {job_id}` (or `logs`, `list`), or choose another --job-id "
            "(or leave it out: Ray makes one up)")


def follow(client, job_id: str, token: Token | None, out=None, address: str | None = None) -> int:
    """Stream the job's logs until it ends; return its exit status (see module docstring)."""
    out = out or sys.stdout

    log = JobLog(token)

    async def tail():
        async for chunk in client.tail_job_logs(job_id):
            out.write(log.feed(chunk))
            out.flush()
        out.write(log.feed("", end=True))

    try:
        asyncio.run(tail())
    except Exception as e:  # the log socket dropped (head restarted, proxy timeout): poll instead
        print(f"canine submit: log stream of {job_id} ended early ({_mask(str(e), token)}); waiting for the job",
              file=sys.stderr)
    return wait(client, job_id, token, address=address)


class JobLog:
    """A job's log as its command wrote it: the token masked, and Ray's own preamble taken out
    (the supervisor's "Runtime env is setting up." and "Running entrypoint for job ID: ...",
    whose entrypoint is the preflight's one-liner; `canine submit` has said what it submitted).
    Lines are judged whole: a chunk's unfinished last line waits for the next chunk."""

    RAY_LINES = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+INFO job_manager\.py:\d+ -- Runtime env is "
                           r"setting up\.|Running entrypoint for job \S+: .*)$")

    def __init__(self, token: Token | None = None):
        self.token, self.rest = token, ""

    def feed(self, chunk: str, end: bool = False) -> str:
        text = self.rest + chunk
        cut = len(text) if end else text.rfind("\n") + 1
        self.rest = text[cut:]
        kept = [ln for ln in text[:cut].splitlines(keepends=True) if not self.RAY_LINES.match(ln.rstrip("\r\n"))]
        return _mask("".join(kept), self.token)


def wait(client, job_id: str, token: Token | None = None, poll_s: float = 2.0, address: str | None = None) -> int:
    """Wait until the job is terminal (after a dropped log stream) and map its status to an exit code."""
    done = threading.Event()  # never set: its wait() is an interruptible poll interval
    while not (info := client.get_job_info(job_id)).status.is_terminal():
        done.wait(poll_s)
    return exit_code(info, token, address)


def exit_code(info, token: Token | None = None, address: str | None = None) -> int:
    """The job's exit status (module docstring); a failed job gets one line on stderr: Ray's first
    line of why (its message goes on with the tail of the job's logs, streamed already) and how
    to read the logs again."""
    status = str(info.status)
    if status == "SUCCEEDED":
        return 0
    logs = f"again: canine submit --address {address} logs {info.submission_id}" if address else "in the job's logs"
    if status == "STOPPED":
        print(f"canine submit: job {info.submission_id} STOPPED: stopped before it ended (canine submit stop, ray job "
              f"stop or the dashboard); its output is above ({logs})", file=sys.stderr)
        return EXIT_STOPPED
    code = getattr(info, "driver_exit_code", None)
    missing = _missing(info, code)
    if missing:
        print(f"canine submit: job {info.submission_id}: {_mask(missing, token)}", file=sys.stderr)
        return EXIT_MISSING
    lines = [ln.strip() for ln in (info.message or "").splitlines() if ln.strip()]
    why = lines[0].split(", last available logs")[0] if lines else "no reason given"
    print(f"canine submit: job {info.submission_id} {status}: {_mask(why, token)}; its output is above ({logs})",
          file=sys.stderr)
    return code if isinstance(code, int) and 0 < code < 256 else 1


def _missing(info, code) -> str | None:
    """What the preflight found missing, as the line to print, or None when the job got past it.
    Read from the log tail that Ray keeps in the job's message: the preflight's own line there, or
    the shell's "not found" when the interpreter itself is missing (the shell exits 127, and the
    command after the preflight never runs unless the interpreter started)."""
    message = info.message or ""
    entrypoint = getattr(info, "entrypoint", None) or ""
    fix = ("--python PATH (in the project's images /opt/venv/bin/python, the one Ray runs on there), or run it in an "
           "image that has them with --image IMAGE (docs/cluster.md, \"Which Python runs the job\")")
    if code == 127 and _MARK in entrypoint and "not found" in message:
        python = shlex.split(entrypoint)[0]
        return (f"no interpreter {python} on the cluster's head (not found), so nothing ran; name one there that has "
                f"the project's stack with {fix}")
    found = _PREFLIGHT_LINE.search(message) if code == EXIT_MISSING else None
    if not found:
        return None
    python, version, names = found.group(1).strip(), found.group(2), found.group(3).split()
    stack = [n for n in names if n not in _PROJECT]
    todo = []
    if stack:
        todo.append(f"name an interpreter there that has them with {fix}")
    if len(stack) < len(names):  # the project itself: nothing uploaded (--installed) and not installed there
        todo.append("for the project itself leave out --installed so that this checkout is uploaded, or install it "
                    f"in that interpreter ({project_hint('train')})")
    return (f"{python} (Python {version}) on the cluster's head cannot import {', '.join(names)}, so the job stopped "
            f"before running its command; {'; '.join(todo)}")


def add_arguments(parser) -> None:
    parser.description = "Submit a canine command to a Ray cluster (Ray Jobs API); put `--` before the command."
    parser.add_argument("--address", default=os.environ.get("RAY_API_SERVER_ADDRESS") or os.environ.get("RAY_ADDRESS"),
                        help="Ray dashboard URL, e.g. http://127.0.0.1:8265 (default: $RAY_API_SERVER_ADDRESS, $RAY_ADDRESS)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--working-dir", help="directory uploaded as the job's cwd (default: this project checkout)")
    where.add_argument("--image", help="container image with the project installed (Ray runtime_env image_uri; "
                                       "default: the cluster's own)")
    where.add_argument("--installed", action="store_true", help="the cluster's python already has the project: upload nothing")
    parser.add_argument("--python", metavar="PYTHON",
                        help="the job's interpreter on the cluster's head, a path or a name on its PATH (default: this "
                             "interpreter when the head runs on this machine, else `python` on the head's PATH)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="job environment variable (repeatable); never a secret: the dashboard shows it")
    parser.add_argument("--not-secret", action="append", default=[], metavar="NAME",
                        help="pass --env NAME although its name or value looks like a secret's (repeatable)")
    parser.add_argument("--allow-insecure-http", action="store_true",
                        help="send the token over http:// to a non-loopback address (readable by anyone on the path)")
    parser.add_argument("--job-id", help="submission id to use (a retried submission with the same id is refused; "
                                         "default: one Ray makes up)")
    parser.add_argument("--no-wait", action="store_true", help="print the job id and return without streaming logs")
    parser.add_argument("--follow", action="store_true", help="with `logs`: keep streaming until the job ends")
    parser.add_argument("--json", action="store_true", help="with `list`: print the jobs as JSON")
    parser.add_argument("action", nargs="*", metavar="list | status|logs|stop JOB_ID",
                        help="list the cluster's jobs, or act on one, instead of submitting `-- COMMAND ...`")


def main(args) -> int:
    from jobs import errors

    as_json = bool(getattr(args, "json", False))  # stdout stays one JSON document, an error's included
    try:
        return _run(args)
    except DuplicateJob as e:
        errors.report("submit", e)
        return EXIT_DUPLICATE
    except ClusterError as e:
        errors.report("submit", e, as_json=as_json)
        return EXIT_CLUSTER
    except ValueError as e:
        return errors.report("submit", e, as_json=as_json)
    except KeyboardInterrupt:  # Ctrl-C while following an existing job's logs: the job is untouched
        print("\ncanine submit: interrupted; the job, if any, keeps running", file=sys.stderr)
        return EXIT_DETACHED


def _run(args) -> int:
    action, command = list(args.action), list(getattr(args, "passthrough", None) or [])  # cli.py splits at `--`
    if not args.address:
        raise ValueError("--address is required (the Ray dashboard URL, e.g. http://127.0.0.1:8265)")
    address = args.address if "://" in args.address else f"http://{args.address}"
    if action:
        if command or not (action == ["list"] or (action[0] in ACTIONS and len(action) == 2)):
            raise ValueError("usage: canine submit --address URL list, canine submit --address URL status|logs|stop "
                             f"JOB_ID, or canine submit --address URL -- COMMAND ...; got {' '.join(action)!r}")
        client, token = _connect(address, args)
        if action == ["list"]:
            return list_jobs(client, token, getattr(args, "json", False), address)
        return _act(client, action[0], action[1], token, args.follow, address)
    spec = _spec(args, command)
    client, token = _connect(address, args)
    if spec.submission_id:  # before anything is packed or uploaded (submit() still catches a race)
        refuse_duplicate(client, spec.submission_id, address)
    here = head_is_here(client)
    spec = dataclasses.replace(spec, argv=job_paths(spec.argv, here, address))
    spec = choose_python(client, spec, args.python, here)
    if spec.working_dir:
        print(f"canine submit: uploading {spec.working_dir} as the job's working directory (without its .venv, .git, "
              "outputs, caches and wheels, nor what its .gitignore lists)", file=sys.stderr)
    job_id = submit(client, spec, address)
    print(f"canine submit: job {job_id} submitted to {address} (python: {spec.python})", file=sys.stderr)
    if args.no_wait:
        print(job_id)
        return 0
    try:
        return follow(client, job_id, token, address=address)
    except KeyboardInterrupt:
        print(f"\ncanine submit: detached; job {job_id} keeps running "
              f"(canine submit --address {address} stop {job_id})", file=sys.stderr)
        return EXIT_DETACHED


def _connect(address: str, args):
    token = resolve_token()
    check_transport(address, token, args.allow_insecure_http)
    return connect(address, token), token


def _spec(args, words) -> SubmitSpec:
    runnable = sorted(set(COMMANDS) - {"submit"})
    if not words or words[0] not in runnable:
        got = f"got {words[0]!r}" if words else "got nothing"
        raise ValueError(f"expected `-- COMMAND ...` with COMMAND one of {', '.join(runnable)}, "
                         f"or status|logs|stop JOB_ID; {got}")
    env = []
    for item in args.env:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise ValueError(f"--env {item!r}: expected NAME=VALUE")
        if name in _TOKEN_ENV_VARS:  # job env vars are stored in the job's record and shown by the dashboard
            raise ValueError(f"--env {name}: the cluster passes its token to jobs itself; never put it in a job's env")
        why = None if name in args.not_secret else _looks_secret(name, value)
        if why:
            raise ValueError(
                f"--env {name}: {why}, and a job's environment is stored with the job and shown in plain text by the "
                "Ray dashboard and `ray job list`. Give the cluster the secret instead: a Kubernetes secret in the Ray "
                "containers' env (valueFrom.secretKeyRef in infra/k8s/raycluster.yaml; docs/cluster.md, \"Secrets\"), "
                f"which every job inherits. If it is not a secret, add --not-secret {name}")
        env.append((name, value))
    python = getattr(args, "python", None)
    if python and "/" in python and not os.path.isabs(python):
        raise ValueError(f"--python {python}: a relative path would be looked up in the job's working directory on the "
                         "cluster; give an absolute path on the cluster's head, or a name on its PATH (python3)")
    working_dir = None
    if not (args.image or args.installed):
        working_dir = args.working_dir or str(_project_root())
        if not Path(working_dir).is_dir():
            raise ValueError(f"--working-dir {working_dir}: not a directory; give the project checkout to upload, "
                             "or use --image or --installed")
    return SubmitSpec(tuple(words), working_dir, args.image, tuple(env), args.job_id)


def _looks_secret(name: str, value: str) -> str | None:
    """Why NAME=VALUE looks like a secret (never quoting the value), or None."""
    if _SECRET_NAME_RE.search(name):
        return "its name looks like a secret's"
    return next((f"its value looks like {what}" for what, pattern in _SECRET_VALUES if pattern.search(value)), None)


def _project_root() -> Path:
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file():
        raise ValueError(f"no project checkout at {root} (installed package?): pass --working-dir, --image or --installed")
    return root


def _act(client, action: str, job_id: str, token: Token | None, follow_logs: bool, address: str = "URL") -> int:
    try:
        if action == "status":
            info = client.get_job_info(job_id)
            print(f"{job_id}: {info.status}" + (f" ({_mask(info.message, token)})" if info.message else ""))
            return 0
        if action == "logs":
            if follow_logs:
                return follow(client, job_id, token, address=address)
            sys.stdout.write(JobLog(token).feed(client.get_job_logs(job_id), end=True))
            return 0
        stopped = client.stop_job(job_id)
        print(f"{job_id}: " + ("stop requested" if stopped else f"already {client.get_job_status(job_id)}"))
        return 0
    except RuntimeError as e:  # the SDK reports an unknown id as a failed request (HTTP 404)
        if "404" in str(e) or "does not exist" in str(e):
            raise ClusterError(f"no job {job_id} on the cluster at {address}; check the id (canine submit --address "
                               f"{address} list lists the jobs)") from None
        raise ClusterError(f"{action} {job_id}: {_mask(_reason(e), token)}") from None


def list_jobs(client, token: Token | None, as_json: bool = False, address: str = "URL", out=None) -> int:
    """The cluster's jobs, oldest first: a table (id, status, start and end in UTC, exit code, the
    start of the command), or with --json a list of objects with the whole entrypoint. Jobs
    submitted by others and drivers started by hand (`canine pretrain --ray-address`) included,
    as `ray job list` has them."""
    out = out or sys.stdout
    jobs = sorted(client.list_jobs(), key=lambda j: j.start_time or 0)
    rows = [{"id": j.submission_id or j.job_id, "type": str(getattr(j.type, "value", j.type)), "status": str(j.status),
             "start": _time(j.start_time, "T", "Z"), "end": _time(j.end_time, "T", "Z"), "exit_code": j.driver_exit_code,
             "entrypoint": _mask(j.entrypoint or "", token)} for j in jobs]
    if as_json:
        out.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if not rows:
        print(f"canine submit: no jobs on the cluster at {address}", file=sys.stderr)
        return 0
    table = [("JOB ID", "STATUS", "START (UTC)", "END (UTC)", "EXIT", "COMMAND")]
    for j, row in zip(jobs, rows):
        code = "" if row["exit_code"] is None else str(row["exit_code"])
        table.append((row["id"], row["status"], _time(j.start_time) or "-", _time(j.end_time) or "-", code,
                      _short(_command(row["entrypoint"]), 72)))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    for r in table:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1] + "\n")
    return 0


def _command(entrypoint: str) -> str:
    """The command of an entrypoint that submit made, without its preflight; any other as it is."""
    check, sep, command = entrypoint.partition(" && exec ")
    return command if sep and _MARK in check else entrypoint


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _time(ms: int | None, sep: str = " ", zone: str = "") -> str | None:
    """Ray's milliseconds since the epoch as UTC, to the second; None for none (a job not yet ended)."""
    if not ms:
        return None
    when = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return when.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + zone


def _reason(error: Exception) -> str:
    """The last line of an SDK error: the dashboard answers a 500 with its whole server-side
    traceback, whose last line is the one that says what went wrong."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip(" .")]
    return lines[-1] if lines else type(error).__name__


def _mask(text: str, token: Token | None) -> str:
    """Hide the token if a job prints it (say, a dump of its environment). A streamed log is
    masked by whole lines (JobLog), so a token cut between two chunks is hidden too."""
    return text.replace(token.value, "***") if token else text
