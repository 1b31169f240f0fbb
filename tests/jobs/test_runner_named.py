"""`canine preprocess` with the runner named wherever a user names it: the flag, Beam's options after `--` as infra/beam/dataflow.flags writes
them, the flags file handed on by the scheduled script through its environment. Every way gets the
same Dataflow preflight, in seconds, before the output's lock: a local output or input refused, an
endpoint that does not answer named, a machine without Google credentials named (Beam would
otherwise retry those with tracebacks, then stage for about 10 minutes holding the lock). Each run
is `python -m jobs.cli` in a process of its own, with no proxy and no Google credentials of the
developer's.
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "pipeline" / "sample"
FLAGS = ROOT / "infra" / "beam" / "dataflow.flags"
# The options of infra/beam/dataflow.flags that a launch needs, the runner among them.
BEAM = ["--runner=DataflowRunner", "--project=canine-test", "--region=us-central1",
        "--temp_location=gs://canine-test-bucket/tmp"]


def _env(tmp_path, **extra):
    """A clean environment: no proxy, no credentials file, a HOME without gcloud's config."""
    drop = ("http_proxy", "https_proxy", "no_proxy", "google_application_credentials", "storage_emulator_host",
            "cloudsdk_config")
    base = {k: v for k, v in os.environ.items() if k.lower() not in drop}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**base, "HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def _canine(*args, cwd, env, timeout=90):
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _one_line(result) -> str:
    """A refusal is one line, exit 2; no Beam warning or traceback before it."""
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("canine preprocess: "), result.stderr[-3000:]
    return lines[0].removeprefix("canine preprocess: ")


def test_dataflow_named_after_the_double_dash_gets_the_same_refusals(tmp_path):
    xml = SAMPLE / "kowiki-20261101-pages-articles.xml"
    t = time.monotonic()
    result = _canine("preprocess", xml, "--output", "out/shards", "--", *BEAM, cwd=tmp_path, env=_env(tmp_path))
    assert _one_line(result).startswith("--output out/shards: a path on this machine, which Dataflow's workers")
    result = _canine("preprocess", xml, "--output", "gs://canine-test-bucket/shards", "--", *BEAM, cwd=tmp_path,
                     env=_env(tmp_path))
    assert _one_line(result).startswith(f"{xml}: an input on this machine, which Dataflow's workers cannot read")
    # Beam's parser reads `--runner X` as well as `--runner=X`.
    result = _canine("preprocess", xml, "--output", "out/shards", "--", "--runner", "DataflowRunner", *BEAM[1:],
                     cwd=tmp_path, env=_env(tmp_path))
    assert _one_line(result).startswith("--output out/shards: a path on this machine")
    # Beam's own spelling of the runner: Beam ran the job on Dataflow with none of
    # the checks, retrying credentials and the staging bucket for minutes with a traceback each.
    result = _canine("preprocess", xml, "--output", "out/shards", "--", "--runner=dataflow", *BEAM[1:],
                     cwd=tmp_path, env=_env(tmp_path))
    assert _one_line(result).startswith("--output out/shards: a path on this machine")
    assert time.monotonic() - t < 80
    assert not (tmp_path / "out").exists()


def test_two_runners_named_are_refused(tmp_path):
    xml = SAMPLE / "kowiki-20261101-pages-articles.xml"
    result = _canine("preprocess", xml, "--output", "out", "--runner", "DaskRunner", "--", *BEAM, cwd=tmp_path,
                     env=_env(tmp_path))
    assert _one_line(result) == ("--runner DaskRunner: the Beam options after `--` name another runner "
                                 "(DataflowRunner); name the runner once, as --runner or after `--`")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("runner, said", [
    (["--runner", "DataflowRunner", "--", *BEAM[1:]], "--runner DataflowRunner"),
    (["--", *BEAM], "--runner=DataflowRunner"),
    (["--", "--runner=dataflow", *BEAM[1:]], "--runner=dataflow"),  # Beam's short name: as typed
], ids=["flag", "after --", "beam's short name after --"])
def test_a_launch_without_credentials_is_named_before_the_lock(runner, said, tmp_path):
    """Both endpoints take connections (listening sockets standing in for the Dataflow API and the
    storage emulator), so the launch gets as far as credentials: google-auth finds none in this
    clean environment, and the run says so in one line instead of Beam's retries, naming the
    runner as it was typed (a user's report: `--runner DataflowRunner:` for `--runner=dataflow`)."""
    with socket.socket() as api, socket.socket() as storage:
        for s in (api, storage):
            s.bind(("127.0.0.1", 0))
            s.listen(8)
        env = _env(tmp_path, STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{storage.getsockname()[1]}")
        t = time.monotonic()
        result = _canine("preprocess", "gs://canine-test-bucket/data/kowiki-20261101-pages-articles.xml",
                         "--output", "gs://canine-test-bucket/shards", *runner,
                         f"--dataflow_endpoint=http://127.0.0.1:{api.getsockname()[1]}", cwd=tmp_path, env=env)
    line = _one_line(result)
    assert line.startswith(f"{said}: no Google Cloud credentials on this machine ("), line
    assert "GOOGLE_APPLICATION_CREDENTIALS" in line
    assert time.monotonic() - t < 45  # Beam's own retries: 2+4+8+16 s of tracebacks, then staging's 10 minutes


def test_the_scheduled_script_with_the_dataflow_flags_file_refuses_a_local_output(tmp_path, make_multistream):
    """infra/schedule/preprocess-languages.sh as the CronJob runs it: the runner comes from the flags
    file named by CANINE_BEAM_FLAGS, after `--`."""
    make_multistream(SAMPLE / "kowiki-20261101-pages-articles.xml", tmp_path / "mirror" / "kowiki" / "20261101")
    env = _env(tmp_path, CANINE=f"{sys.executable} -m jobs.cli", CANINE_LANGUAGES="ko", CANINE_DUMP_DATE="20261101",
               CANINE_MIRROR=str(tmp_path / "mirror"), CANINE_OUTPUT=str(tmp_path / "shards"),
               CANINE_BEAM_FLAGS=str(FLAGS))
    t = time.monotonic()
    r = subprocess.run(["bash", str(ROOT / "infra" / "schedule" / "preprocess-languages.sh")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 2, r.stderr[-3000:]
    assert (f"canine preprocess: --output {tmp_path / 'shards' / 'ko' / '20261101'}: a path on this machine, "
            "which Dataflow's workers") in r.stderr
    assert "Traceback" not in r.stderr and "WARNING" not in r.stderr
    assert time.monotonic() - t < 60
    assert not (tmp_path / "shards").exists()


def test_a_dump_from_a_local_mirror_is_told_to_give_a_bucket_mirror(tmp_path, make_multistream):
    """A --dump run on Dataflow with --mirror on this machine: the mirror is named, and a gs:// one
    asked for (a user's report: the refusal named the dump's file and said to copy it)."""
    mirror = tmp_path / "mirror"
    make_multistream(SAMPLE / "kowiki-20261101-pages-articles.xml", mirror / "kowiki" / "20261101")
    result = _canine("preprocess", "--dump", "ko:20261101", "--mirror", mirror, "--output",
                     "gs://canine-test-bucket/shards", "--", *BEAM, cwd=tmp_path, env=_env(tmp_path))
    assert result.stderr.count("canine preprocess: --dump ko:20261101: kowiki 20261101") == 1
    line = result.stderr.strip().splitlines()[-1].removeprefix("canine preprocess: ")
    assert result.returncode == 2 and line.startswith(
        f"--mirror {mirror}: a dump mirror on this machine, which Dataflow's workers cannot read; give a gs:// "
        "--mirror"), result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "WARNING" not in result.stderr
