"""Every error a `canine` user can meet says, in one line on stderr, what failed, the object and what
to do, and exits 2 (jobs/errors.py; submit's cluster errors 4, a failed training 1, Ctrl-C 130);
an unexpected exception prints its type, its first line and the file that holds its traceback.

All through the real entry point, jobs.cli.main, in-process, and all before Beam runs a pipeline or
Ray starts a cluster: each case asserts the exit status, that stderr is exactly one line, that it
names the object, and that it still says something once the object is taken out of it.
"""

import contextlib
import json
import socket
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from contract import schema
from jobs import cli, errors

SAMPLE = Path(__file__).resolve().parents[2] / "pipeline" / "sample"
XML = SAMPLE / "kowiki-20261101-pages-articles.xml"
FAST = ["--seq-len", "512", "--vocab-size", "600"]


@pytest.fixture(autouse=True)
def traceback_dir(tmp_path, monkeypatch):
    """Tracebacks go to this test's own temp folder (tempfile.gettempdir() reads tempfile.tempdir)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token of the developer's
    return tmp / "canine"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(capsys, argv) -> tuple[int, str, str]:
    """(exit status, stdout, the one line on stderr without its `canine COMMAND: ` prefix)."""
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, f"stderr is not one line: {out.err!r}"
    prefix = f"canine {argv[0]}: "
    assert lines[0].startswith(prefix), lines[0]
    return code, out.out, lines[0][len(prefix):]


def says(line: str, obj: str, phrase: str) -> None:
    """The line names `obj`, and what is left without it has `phrase`: more than a path."""
    assert obj in line, f"{obj!r} not in {line!r}"
    assert phrase in line.replace(obj, "<obj>"), f"{phrase!r} not in {line!r}"


def _traceback_of(line: str) -> Path:
    assert line.endswith(")") and "(traceback: " in line, line
    path = Path(line.rsplit("(traceback: ", 1)[1][:-1])
    assert path.is_file() and "Traceback (most recent call last)" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # a traceback holds the run's paths and values
    return path


# --- preprocess ----------------------------------------------------------------------------------
# Each: (id, setup(tmp, stack, monkeypatch) -> (argv after `preprocess`, object), phrase).

def _file(path: Path, data: bytes = b"") -> Path:
    path.write_bytes(data)
    return path


def _raise(error):
    def fail(*_args, **_kwargs):
        raise error
    return fail


def _locked(t, stack, _mp):
    from contract.lock import OutputLock

    stack.enter_context(OutputLock(str(t / "out"), command="another canine preprocess"))
    return [XML, "--output", t / "out", *FAST], str(t / "out")


def _legacy_output(t, _stack, _mp):
    (t / "out").mkdir()
    (t / "out" / schema.LEGACY_MANIFEST).write_text("{}")
    return [XML, "--output", t / "out", *FAST], str(t / "out")


def _bare_staging(t, _stack, mp):
    """The case seen: gcsfs's FileNotFoundError(path), the bucket path without gs://."""
    from pipeline.output import output

    mp.setattr(output, "prepare", _raise(FileNotFoundError("bkt/shards/.staging-ac8a82b31d0c1071")))
    return [XML, "--output", "memory://bkt/shards"], "memory://bkt/shards/.staging-ac8a82b31d0c1071"


def _denied(t, _stack, mp):
    from pipeline.output import output

    mp.setattr(output, "prepare", _raise(PermissionError(13, "Permission denied", str(t / "out" / "x"))))
    return [XML, "--output", t / "out"], str(t / "out" / "x")


def _sample(*flags, obj: str):
    """Setup of a run of the sample into t/out with `flags`, whose error names `obj`."""
    return lambda t, _stack, _mp: ([XML, "--output", t / "out", *flags], obj)


def _input(name: str, data: bytes | None = None):
    """Setup of a run of the input t/name (written with `data` unless None), whose error names it."""
    def setup(t, _stack, _mp):
        if data is not None:
            _file(t / name, data)
        return [t / name, "--output", t / "out"], str(t / name)
    return setup


PREPROCESS = [
    ("missing input", _input("nope-pages-articles.xml"), "input not found; check the path"),
    ("glob matches nothing", _input("*.xml"), "no input files match"),
    ("unknown input kind", _input("notes.txt", b"x"), "unrecognized input kind"),
    ("empty input", _input("a-pages-articles.xml.bz2", b""), "empty file (0 bytes)"),
    ("corrupt input", _input("a-pages-articles.xml.bz2", b"not bzip2 " * 50), "not bz2 data at byte 0"),
    ("dump missing on the mirror", lambda t, s, m: (["--dump", "ko:20261101", "--mirror", t, "--output", t / "out"],
                                                    "--dump ko:20261101"), "missing on the mirror"),
    ("no latest feed", lambda t, s, m: (["--dump", "ko:latest", "--mirror", t, "--output", t / "out"],
                                        f"{t}/kowiki/latest/"), "no feed for kowiki latest on this mirror; name the"),
    ("bad dump spec", lambda t, s, m: (["--dump", "english", "--output", t / "out"], "--dump 'english'"),
     "expected LANG:DATE"),
    ("bad config value", _sample("--seq-len", "0", obj="--seq-len 0"), "too short"),
    ("unknown --set key", _sample("--set", "no_such=1", obj="no_such"), "unknown key"),
    ("output is a file", lambda t, s, m: ([XML, "--output", _file(t / "a-file", b"x")], str(t / "a-file")),
     "is a file; it must be a directory"),
    ("output of an older version", _legacy_output, "written by an older version"),
    ("output locked", _locked, "is locked by another run"),
    ("missing tokenizer", lambda t, s, m: ([XML, "--output", t / "out", "--tokenizer", t / "tok.json"],
                                           str(t / "tok.json")), "no such file; give the _tokenizer.json"),
    ("no workers", _sample("--workers", "0", obj="--workers 0"), "must be 1 or more"),
    ("unknown runner", _sample("--runner", "Bogus", obj="--runner Bogus"), "Unexpected pipeline runner"),
    ("runner without its options", _sample("--runner", "DataflowRunner", obj="--runner DataflowRunner"),
     "Missing required option: project"),
    ("bare path from the store", _bare_staging,
     "no such file or object (this run's staging folder in the output directory); check the path or URL"),
    ("permission denied", _denied, "permission denied (the output directory (--output)); check the credentials"),
]


@pytest.mark.parametrize("setup, phrase", [c[1:] for c in PREPROCESS], ids=[c[0] for c in PREPROCESS])
def test_preprocess_errors(setup, phrase, tmp_path, capsys, monkeypatch):
    with contextlib.ExitStack() as stack:
        argv, obj = setup(tmp_path, stack, monkeypatch)
        code, stdout, line = run(capsys, ["preprocess", *argv, "--json"])
    assert code == 2
    says(line, obj, phrase)
    assert json.loads(stdout) == {"error": line}  # --json: stdout is still one JSON document
    assert not (tmp_path / "out" / schema.MANIFEST).exists()
    if "no such file or object" in phrase or "permission denied" in phrase:
        _traceback_of(line)  # a path the user did not name may be a bug: its traceback is kept
    else:
        assert "traceback" not in line


def test_a_bare_path_keeps_its_credentials_masked(tmp_path, capsys, monkeypatch):
    from pipeline.output import output

    url = "https://bob:hunter2@mirror.example/dumps/enwiki-20261101-pages-articles.xml?X-Amz-Signature=deadbeef"
    monkeypatch.setattr(output, "prepare", _raise(FileNotFoundError(url)))
    code, _, line = run(capsys, ["preprocess", "https://bob:hunter2@mirror.example/dumps/*.xml", "--output", tmp_path])
    assert code == 2
    says(line, "https://***@mirror.example/dumps/enwiki-20261101-pages-articles.xml", "(an input (INPUT))")
    for text in (line, _traceback_of(line).read_text()):
        assert "hunter2" not in text and "deadbeef" not in text


# --- pretrain ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> str:
    from pipeline.synthetic import write_contract_shards

    return write_contract_shards(str(tmp_path_factory.mktemp("shards")), train_rows=(64,), validation_rows=16)


def _unreachable(t, shards, mp):
    """An earlier test's Ray cluster in this process would be used instead of the address (run.connect
    keeps a connected cluster): the check is of the address, whatever ran before."""
    import ray

    mp.setattr(ray, "is_initialized", lambda: False)
    mp.delenv("RAY_ADDRESS", raising=False)
    port = _free_port()
    return ["--data", shards, "--output", t / "run", "--ray-address", f"127.0.0.1:{port}"], \
        f"--ray-address 127.0.0.1:{port}"


def _corrupt_shard(t, shards, mp):
    """What a worker reports (failures.fatal_error) for a shard whose bytes changed."""
    import shutil

    from training.train import config, data, failures, run as run_mod

    copy = shutil.copytree(shards, t / "shards")
    shard = data.open_dataset(str(copy)).splits["train"][0]
    Path(shard.url).write_bytes(Path(shard.url).read_bytes() + b"damage")
    try:
        data.verify_shard(shard.url, shard.sha256)
    except ValueError as e:
        fatal = failures.fatal_error(e, config.load_config("tiny"), rank=0, step=3)
    mp.setattr(run_mod, "pretrain", _raise(fatal))
    return ["--data", copy, "--output", t / "run"], shard.url


PRETRAIN = [
    ("unknown config", lambda t, s, m: (["--config", "nope"], "'nope'"), "neither a shipped config"),
    ("bad --set value", lambda t, s, m: (["--set", "optim.lr=fast"], "optim.lr"), "expected float"),
    ("bad flag combination", lambda t, s, m: (["--data", s, "--output", t / "run", "--optimizer", "lamb",
                                               "--zero-stage", "2"], "optim.name=lamb"),
     "needs parallel.zero_stage=0"),
    ("no --data", lambda t, s, m: (["--output", t / "run"], "--data"), "required"),
    ("no data dir", lambda t, s, m: (["--data", t / "none", "--output", t / "run"], f"{t / 'none'}/_manifest.json"),
     "no manifest; --data must be a directory written by"),
    ("corrupt manifest", lambda t, s, m: (["--data", _file(t / "_manifest.json", b"{").parent, "--output", t / "run"],
                                          f"{t}/_manifest.json"), "not valid JSON"),
    ("unreachable Ray address", _unreachable, "no Ray cluster answers at"),
    ("corrupt shard", _corrupt_shard, "corrupt shard"),
]


@pytest.mark.parametrize("setup, phrase", [c[1:] for c in PRETRAIN], ids=[c[0] for c in PRETRAIN])
def test_pretrain_errors(setup, phrase, shards, tmp_path, capsys, monkeypatch):
    argv, obj = setup(tmp_path, shards, monkeypatch)
    code, _, line = run(capsys, ["pretrain", *argv])
    assert code == 2
    says(line, obj, phrase)
    assert not (tmp_path / "run").exists()


def test_a_failed_training_is_one_line_and_exit_1(capsys, monkeypatch, tmp_path):
    from ray.train import WorkerGroupError

    from training.train import run as run_mod

    died = RuntimeError("worker died\nTraceback (most recent call last):\n  File ...\nRuntimeError: worker died")
    monkeypatch.setattr(run_mod, "pretrain", _raise(WorkerGroupError("worker errors", {1: died})))
    code, _, line = run(capsys, ["pretrain", "--data", tmp_path, "--output", tmp_path / "run", "--max-failures", "0"])
    assert code == 1
    says(line, "rank 1: RuntimeError: worker died", "training failed after 0 restart(s)")
    assert "resumes from the last checkpoint" in line


# --- export --------------------------------------------------------------------------------------


def _run_dir(t) -> Path:
    """A run directory holding only its config.yaml: a run that never finished."""
    from training.train import config

    (t / "run").mkdir()
    cfg = config.load_config("tiny", {"output": str(t / "run"), "data.path": str(t / "shards")})
    (t / "run" / "config.yaml").write_text(config.to_yaml(cfg))
    return t / "run"


EXPORT = [
    ("no such run", lambda t, m: ([t / "nowhere"], str(t / "nowhere")), "has no config.yaml: not a run directory"),
    ("no checkpoint", lambda t, m: ([_run_dir(t)], str(t / "run")), "no consolidated weights"),
    ("target is a file", lambda t, m: ([_run_dir(t), "--to", _file(t / "f", b"x")], str(t / "f")),
     "a file, and an export is a directory; choose another --to"),
    ("extra missing", lambda t, m: _without_transformers(t, m), "is not installed (pip install"),
]


def _without_transformers(t, m):
    m.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    return [_run_dir(t)], "transformers"


@pytest.mark.parametrize("setup, phrase", [c[1:] for c in EXPORT], ids=[c[0] for c in EXPORT])
def test_export_errors(setup, phrase, tmp_path, capsys, monkeypatch):
    argv, obj = setup(tmp_path, monkeypatch)
    code, _, line = run(capsys, ["export", *argv])
    assert code == 2
    says(line, obj, phrase)
    assert not (tmp_path / "run" / "hf").exists()


# --- submit --------------------------------------------------------------------------------------


def _token_file(t, m, text=None):
    path = t / "token"
    if text is not None:
        path.write_text(text)
    m.setenv("RAY_AUTH_TOKEN_PATH", str(path))
    return str(path)


def _token_to(m, address):
    m.setenv("RAY_AUTH_TOKEN", "t")
    return ["--address", address, "--", "pretrain"], address


SUBMIT = [
    ("no address", lambda t, m: ([], "--address"), "is required", 2),
    ("unreachable address", lambda t, m: (["--address", "127.0.0.1:9", "status", "j"], "http://127.0.0.1:9"),
     "cannot reach a Ray dashboard", 4),
    ("token file missing", lambda t, m: (["--address", "127.0.0.1:9", "status", "j"], _token_file(t, m)),
     "no such file; point it at the file", 4),
    ("token file empty", lambda t, m: (["--address", "127.0.0.1:9", "status", "j"], _token_file(t, m, "\n")),
     "is empty; write the cluster's token", 4),
    ("token in cleartext", lambda t, m: _token_to(m, "http://10.0.0.5:8265"), "refusing to send the Ray auth token", 2),
    ("not a command", lambda t, m: (["--address", "127.0.0.1:9", "--", "train"], "'train'"),
     "expected `-- COMMAND ...`", 2),
    ("secret in --env", lambda t, m: (["--address", "127.0.0.1:9", "--env", "HF_TOKEN=x", "--", "pretrain"],
                                      "--env HF_TOKEN"), "looks like a secret", 2),
    ("no working dir", lambda t, m: (["--address", "127.0.0.1:9", "--working-dir", t / "none", "--", "pretrain"],
                                     str(t / "none")), "not a directory; give the project checkout", 2),
]


@pytest.mark.parametrize("setup, phrase, status", [c[1:] for c in SUBMIT], ids=[c[0] for c in SUBMIT])
def test_submit_errors(setup, phrase, status, tmp_path, capsys, monkeypatch):
    argv, obj = setup(tmp_path, monkeypatch)
    code, _, line = run(capsys, ["submit", *argv])
    assert code == status  # 4: the cluster could not be reached or refused the token (jobs/submit.py)
    says(line, obj, phrase)


def test_a_failed_job_is_one_line_naming_how_to_read_its_logs(capsys):
    from types import SimpleNamespace

    from jobs import submit

    info = SimpleNamespace(status="FAILED", submission_id="raysubmit_x", driver_exit_code=2,
                           message="Job entrypoint command failed with exit code 2, last available logs (truncated to "
                                   "20,000 chars):\ncanine inspect: /no/such: no manifest\n")
    assert submit.exit_code(info, None, "http://127.0.0.1:8265") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    says(line, "raysubmit_x", "FAILED: Job entrypoint command failed with exit code 2")
    assert "canine submit --address http://127.0.0.1:8265 logs raysubmit_x" in line and "/no/such" not in line


# --- unexpected exceptions, Ctrl-C ---------------------------------------------------------------

ARGV = {"preprocess": [XML, "--output", "o"], "pretrain": [], "export": ["r"],
        "submit": ["--address", "127.0.0.1:9", "status", "j"]}


@pytest.mark.parametrize("command", sorted(ARGV))
def test_an_unexpected_error_is_one_line_and_its_traceback_a_file(command, capsys, monkeypatch, traceback_dir):
    monkeypatch.setattr(cli._module(command), "main", _raise(RuntimeError("boom: it broke\nsecond line of detail")))
    code, _, line = run(capsys, [command, *ARGV[command]])
    assert code == 2
    assert line.startswith("unexpected RuntimeError: boom: it broke (traceback: ")
    path = _traceback_of(line)
    assert path.parent == traceback_dir and path.name.startswith(f"{command}-")
    assert "second line of detail" in path.read_text() and "second line" not in line


def test_an_unexpected_error_inside_preprocess_keeps_stdout_json(tmp_path, capsys, monkeypatch):
    from pipeline.output import output

    monkeypatch.setattr(output, "prepare", _raise(KeyError("x")))
    code, stdout, line = run(capsys, ["preprocess", XML, "--output", tmp_path / "out", "--json"])
    assert code == 2 and line.startswith("unexpected KeyError: 'x' (traceback: ")
    assert json.loads(stdout) == {"error": line}
    assert "output.prepare" not in line and "prepare" in _traceback_of(line).read_text()


def test_ctrl_c_is_one_line_and_130(capsys, monkeypatch):
    monkeypatch.setattr(cli._module("export"), "main", _raise(KeyboardInterrupt()))
    code, _, line = run(capsys, ["export", "r"])
    assert (code, line) == (130, "interrupted")


def test_a_shortened_library_error_names_the_file_with_the_whole_of_it(capsys, monkeypatch, traceback_dir):
    from training.train import tracking

    cause = ConnectionError("Max retries exceeded with url: /api/2.0/mlflow/experiments/search " * 5
                            + "(Failed to establish a new connection: [Errno 111] Connection refused)")
    error = tracking.unreachable("http://127.0.0.1:9", cause)
    error.__cause__ = cause
    monkeypatch.setattr(cli._module("pretrain"), "main", _raise(error))
    code, _, line = run(capsys, ["pretrain"])
    assert code == 2 and " … [Errno 111] Connection refused; check the server" in line
    assert line.endswith(")") and "(the whole error: " in line, line
    path = Path(line.rsplit("(the whole error: ", 1)[1][:-1])
    assert path.parent == traceback_dir and str(cause) in path.read_text()


def test_every_known_error_class_exists():
    import importlib

    for name in errors.KNOWN:
        module, _, cls = name.rpartition(".")
        assert issubclass(getattr(importlib.import_module(module), cls), BaseException), name


@pytest.mark.parametrize("error, bare", [
    (FileNotFoundError("bkt/shards/.staging-ac8a"), True),
    (FileNotFoundError(2, "No such file or directory", "/x/y"), True),
    (FileNotFoundError(), True),
    (FileNotFoundError("gs://b/d/_manifest.json: no manifest; --data must be a directory written by it"), False),
    (FileNotFoundError("config 'x' is neither a shipped config ['tiny'] nor a YAML file"), False),
])
def test_a_bare_os_error_is_told_from_one_of_our_sentences(error, bare):
    assert errors.is_known(error) is not bare
    assert (errors._bare(error)) is bare


@pytest.mark.parametrize("argv, phrase", [
    (["--address", "127.0.0.1:9", "list", "j1"], "usage: canine submit --address URL list"),
    (["--address", "127.0.0.1:9", "--python", "bin/python", "--", "pretrain"], "a relative path would be looked up"),
])
def test_submit_list_and_python_refusals(argv, phrase, capsys):
    code, _, line = run(capsys, ["submit", *argv])
    assert code == 2
    says(line, argv[3], phrase)


def test_a_job_whose_python_lacks_the_stack_is_one_line_and_6(capsys):
    """What Ray keeps of a job stopped by submit's preflight (its entrypoint, exit code, log tail),
    read back into one line: the interpreter, what it lacks, the flags that fix it."""
    from types import SimpleNamespace

    from jobs import submit

    spec = submit.SubmitSpec(("pretrain", "--config", "tiny"), python="/usr/bin/python3")
    tail = (f"Running entrypoint for job raysubmit_x: {spec.entrypoint()}\n"  # Ray's first log line holds the mark too
            "canine-preflight: /usr/bin/python3 (Python 3.11.2) cannot import: pyarrow torch deepspeed\n")
    info = SimpleNamespace(status="FAILED", submission_id="raysubmit_x", driver_exit_code=submit.EXIT_MISSING,
                           entrypoint=spec.entrypoint(), message="Job entrypoint command failed with exit code 6, "
                           "last available logs (truncated to 20,000 chars):\n" + tail)
    assert submit.exit_code(info, None, "http://127.0.0.1:8265") == submit.EXIT_MISSING == 6
    (line,) = capsys.readouterr().err.strip().splitlines()
    says(line, "/usr/bin/python3", "cannot import pyarrow, torch, deepspeed, so the job stopped before running")
    assert "--python PATH" in line and "--image IMAGE" in line and "%s" not in line

    info.driver_exit_code, info.message = 127, "/bin/sh: 1: /usr/bin/python3: not found\n"
    assert submit.exit_code(info, None, "http://127.0.0.1:8265") == submit.EXIT_MISSING
    (line,) = capsys.readouterr().err.strip().splitlines()
    says(line, "/usr/bin/python3", "no interpreter <obj> on the cluster's head (not found)")

    info.driver_exit_code, info.message = 6, "Job entrypoint command failed with exit code 6\n"  # no preflight line
    assert submit.exit_code(info, None, "http://127.0.0.1:8265") == 6
    assert "FAILED: Job entrypoint command failed with exit code 6" in capsys.readouterr().err


@pytest.mark.parametrize("make, phrase", [
    (lambda t, port: (["--dump", "ko:20261101", "--mirror", f"http://127.0.0.1:{port}"],
                      f"http://127.0.0.1:{port}/kowiki/20261101/"), "cannot reach 127.0.0.1:{port} (connection refused)"),
    (lambda t, port: (["--dump", "ko:latest", "--mirror", "http://nonexistent.invalid"], "http://nonexistent.invalid/kowiki/"),
     "(host name not resolved) while reading the feed of kowiki latest"),
    (lambda t, port: ([f"http://127.0.0.1:{port}/x/kowiki-pages-articles.xml"], f"http://127.0.0.1:{port}/x/"),
     "(connection refused) while checking that it exists"),
    (lambda t, port: ([_file(t / "a-pages-articles.xml", b'<?xml version="1.0" encoding="Shift_JIS"?><mediawiki/>')],
                      str(t / "a-pages-articles.xml")), "its XML declaration names encoding 'Shift_JIS'"),
], ids=["mirror refused", "mirror unresolved", "input refused", "unknown encoding"])
def test_network_and_encoding_errors_are_one_line(make, phrase, tmp_path, capsys):
    """A host that cannot be reached is named with what failed, never as a missing file; an
    encoding the reader cannot read is named. Before anything is written."""
    port = _free_port()
    argv, obj = make(tmp_path, port)
    code, stdout, line = run(capsys, ["preprocess", *argv, "--output", tmp_path / "out", "--json"])
    assert code == 2
    says(line, obj, phrase.format(port=port))
    assert "missing" not in line and "not found" not in line and "traceback" not in line
    assert json.loads(stdout) == {"error": line}
    assert not (tmp_path / "out").exists()


# --- pretrain: what the driver checks before Ray starts; Ctrl-C; evaluate without validation rows ---


def _shard_cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def _shard_appended(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"damage")


def _shard_short_a_row(path: Path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)


@pytest.mark.parametrize("damage, phrase", [
    (_shard_cut, "corrupt shard: not a readable Parquet file (Parquet magic bytes not found in footer"),
    (_shard_appended, "corrupt shard: not a readable Parquet file (Parquet magic bytes not found in footer"),
    (_shard_short_a_row, "corrupt shard: it holds 63 rows, the manifest records 64"),
    (Path.unlink, "missing: the manifest lists it with 64 rows; restore it or rerun `canine preprocess`"),
], ids=["cut", "appended to", "a row short", "missing"])
def test_a_bad_shard_is_refused_before_ray_starts(damage, phrase, shards, tmp_path, capsys, monkeypatch):
    """The driver reads every shard's footer first: one line naming the shard, before any Ray
    cluster (no "starting a local Ray cluster" line; none is running after) or run directory."""
    import shutil

    import ray

    from training.train import data

    monkeypatch.chdir(tmp_path)
    shutil.copytree(shards, tmp_path / "shards")
    shard = Path(data.open_dataset(str(tmp_path / "shards")).splits["train"][0].url)
    damage(shard)
    ray_before = ray.is_initialized()  # an earlier test's cluster in this process, or none
    code, _, line = run(capsys, ["pretrain", "--data", "shards", "--output", "runs/x"])  # relative, as a user types
    assert code == 2 and ray.is_initialized() == ray_before  # one line: no "starting a local Ray cluster" either
    says(line, str(shard), phrase)
    assert line.endswith(f"; `canine validate {tmp_path / 'shards'}` checks every shard whole")
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_in_pretrain_says_what_was_kept_and_130(shards, tmp_path, capsys, monkeypatch):
    """run.pretrain turns the KeyboardInterrupt its run leaves with into contract's Interrupted,
    whose line names the last checkpoint Ray Train recorded (its snapshot, rundir.last_checkpoint),
    or none yet; jobs/cli.py prints it, 130."""
    import json as json_

    from training.train import rundir
    from training.train import run as run_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_mod, "_pretrain", _raise(KeyboardInterrupt()))
    argv = ["pretrain", "--data", shards, "--output", "runs/x"]
    code, _, line = run(capsys, argv)
    assert (code, line) == (130, f"interrupted, before {tmp_path}/runs/x had a checkpoint (every 50 steps, "
                                 "--checkpoint-every); the same command starts the run again")

    out = tmp_path / "runs" / "x"
    (out / rundir.CHECKPOINTS).mkdir(parents=True)
    (out / rundir.METRICS).write_text("".join(json_.dumps({"step": s, "loss": 1.0}) + "\n" for s in (1, 2, 3)))
    (out / rundir.CHECKPOINTS / rundir.RAY_SNAPSHOT).write_text(json_.dumps(  # as Ray Train 2.60 writes it
        {"latest_checkpoint_result": {"version": 0, "checkpoint_dir_name": "checkpoint_step00000002",
                                      "metrics": {"step": 2}}}))
    code, _, line = run(capsys, argv)
    assert (code, line) == (130, f"interrupted at step 3; {out} is checkpointed at step 2 "
                                 f"({out}/ray_train/checkpoint_step00000002); the same command resumes from step 2")


def test_evaluate_on_data_without_validation_rows_names_the_split_and_the_fix(tmp_path, capsys, monkeypatch):
    """A finished run (config, weights) on shards whose validation split is empty."""
    import torch

    from pipeline.synthetic import write_contract_shards
    from training.heads import CaninePretrainingModel
    from training.train.rundir import CONSOLIDATED
    from training.train import config
    from training.train.checkpoint import save_consolidated

    data = write_contract_shards(str(tmp_path / "shards"), train_rows=(64,), validation_rows=0)
    (tmp_path / "run").mkdir()
    cfg = config.load_config("tiny", {"output": str(tmp_path / "run"), "data.path": data, "data.seq_len": 256})
    (tmp_path / "run" / "config.yaml").write_text(config.to_yaml(cfg))
    save_consolidated(CaninePretrainingModel(config.model_config(cfg), "char").state_dict(),
                      str(tmp_path / "run" / CONSOLIDATED))
    monkeypatch.chdir(tmp_path)
    code, _, line = run(capsys, ["evaluate", "run"])
    assert code == 2
    says(line, f"{data}: the validation split", "has no rows: nothing was held out to evaluate on (a language "
                                                 "under 20 kept pages gets only its share of them): canine preprocess "
                                                 "--validation-fraction 0.05 holds out a page of each language")
