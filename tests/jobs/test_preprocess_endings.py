"""How `canine preprocess` ends, as a user meets it: run as a subprocess from another working
directory, inputs given by relative and absolute paths.

What counts as our line (the rule every test here applies through `assert_only_ours`):
- stderr: `canine preprocess: ...` (a note, or the one line of a failure), or a progress line
  `YYYY-MM-DD HH:MM:SS preprocess: ...` (pipeline/progress.py; not a terminal, so no bar);
- stdout: exactly what `canine inspect OUTPUT` prints for the published output, then the run's
  line `N work items (P parsed, R reused from an interrupted run), S s`; on a rerun the
  `... nothing to do` line first.
Any other line (Beam's WARNING and ERROR records, a worker's traceback, dask.distributed's INFO
lines) is a third-party line, and there must be none.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contract import schema
from pipeline import faults

SAMPLE = Path(__file__).resolve().parents[2] / "pipeline" / "sample"
FAST = ["--seq-len", "512", "--vocab-size", "600"]
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
PROGRESS = re.compile(rf"{STAMP} preprocess: .*")
OURS = re.compile(r"canine preprocess: .*")
RUN_LINE = re.compile(r"(\d+) work items \((\d+) parsed, (\d+) reused from an interrupted run\), [\d.]+ s")


def canine(*args, cwd, timeout=600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def ours(stderr: str) -> list[str]:
    """The `canine preprocess: ...` lines of stderr; fails on any line that is neither that nor progress."""
    lines = stderr.splitlines()
    strangers = [line for line in lines if not (PROGRESS.fullmatch(line) or OURS.fullmatch(line))]
    assert not strangers, f"{len(strangers)} third-party line(s) on stderr:\n" + "\n".join(strangers[:20])
    return [line for line in lines if OURS.fullmatch(line)]


def assert_only_ours(proc, output: Path, cwd: Path) -> list[str]:
    """A successful run: stdout is the published manifest as `canine inspect` prints it and the
    run's line; returns our stderr lines."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    inspect = canine("inspect", output, cwd=cwd)
    assert inspect.returncode == 0, inspect.stderr
    lines = proc.stdout.splitlines()
    assert lines[:-1] == inspect.stdout.splitlines(), proc.stdout
    assert RUN_LINE.fullmatch(lines[-1]), lines[-1]
    return ours(proc.stderr)


def relative(path: Path, cwd: Path) -> str:
    return os.path.relpath(path, cwd)


@pytest.mark.slow  # the Beam job with 2 worker processes, then 3 reruns
def test_a_run_prints_only_our_lines_and_the_same_bytes_elsewhere_are_the_same_input(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    xml = SAMPLE / "kowiki-20261101-pages-articles.xml"
    out = tmp_path / "out"
    first = canine("preprocess", relative(xml, cwd), "--output", relative(out, cwd), "--workers", "2", *FAST, cwd=cwd)
    assert assert_only_ours(first, out, cwd) == []  # no note: ko has 27 kept pages, one held out
    manifest = (out / schema.MANIFEST).read_bytes()

    copy = tmp_path / "elsewhere" / "copy-of-ko.xml"  # a copy under another name and folder
    copy.parent.mkdir()
    shutil.copyfile(xml, copy)
    for spelling in (xml, relative(copy, cwd), copy):  # absolute; relative; absolute, another file
        again = canine("preprocess", spelling, "--output", out, *FAST, cwd=cwd)
        assert again.returncode == 0, again.stderr
        assert (again.stdout + again.stderr).count("nothing to do") == 1, again.stdout + again.stderr
        assert again.stdout.splitlines()[0].endswith("nothing to do") and ours(again.stderr) == []
        assert (out / schema.MANIFEST).read_bytes() == manifest

    copy.write_bytes(copy.read_bytes().replace("인구".encode(), "인구수".encode(), 1))  # other bytes
    changed = canine("preprocess", copy, "--output", out, *FAST, cwd=cwd)
    assert changed.returncode == 2
    [line] = ours(changed.stderr)
    assert "different config" in line and f"input {copy} is new" in line and f"input {xml} is no longer given" in line
    assert (out / schema.MANIFEST).read_bytes() == manifest


@pytest.mark.slow  # a LocalCluster of 2 worker processes for the run
def test_a_dask_runner_run_prints_no_distributed_line(tmp_path):
    xml = SAMPLE / "enwiki-20261101-pages-articles.xml"
    proc = canine("preprocess", xml, "--output", tmp_path / "out", "--runner", "DaskRunner", "--workers", "2", *FAST,
                  cwd=tmp_path)
    assert assert_only_ours(proc, tmp_path / "out", tmp_path) == []


ITEMS = 24


@pytest.fixture(scope="module")
def long_input(tmp_path_factory, make_synthetic_dump, make_multistream):
    """A multistream dump of 20 * ITEMS pages, 20 a stream: ITEMS work items of one stream each
    (the SIGINT comes at a fixed point, pipeline/faults.py; 100 items took 12 s more of the three
    runs for the same checks)."""
    root = tmp_path_factory.mktemp("long")
    plain = make_synthetic_dump(root / "enwiki-20261101-pages-articles.xml", 20 * ITEMS)
    dump, _ = make_multistream(plain, root / "ms", pages_per_stream=20)
    return dump


@pytest.mark.slow  # the job is interrupted, then run to the end
@pytest.mark.parametrize("runner, workers", [("DirectRunner", 1), ("DirectRunner", 2), ("DaskRunner", 2)])
def test_ctrl_c_is_one_line_and_130_and_the_same_command_resumes(long_input, tmp_path, runner, workers):
    cwd, out = tmp_path, tmp_path / "out"
    args = [sys.executable, "-m", "jobs.cli", "preprocess", relative(long_input, cwd), "--output", "out",
            "--streams-per-item", "1", "--runner", runner, "--workers", str(workers), *FAST]
    # A session of its own, and SIGINT to all of it: what a terminal's Ctrl-C does to the
    # foreground process group (the DirectRunner's worker processes included). Sent by the job
    # itself when vocabulary training starts (pipeline/faults.py), every worker process running:
    # a signal sent from here once an item was cached raced the job, which under load could
    # finish first (exit 0).
    # SIGINT's default disposition in the job: a test run started in the background (`cmd &`
    # without job control) inherits SIGINT ignored, and so would the job.
    env = {**os.environ, faults.FAULT_ENV: "tokenizer:1:INT"}
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    assert stdout == "" and "Traceback" not in stderr
    [line] = ours(stderr)
    done = re.fullmatch(rf"canine preprocess: interrupted after (\d+) of {ITEMS} work items \(kept\); "
                        r"the same command resumes", line)
    assert done and 1 <= int(done.group(1)) <= ITEMS, line
    [staging] = out.glob(f"{schema.STAGING_PREFIX}*")
    assert len(list(staging.glob("items/*.parquet"))) == int(done.group(1))

    rerun = canine(*args[3:], cwd=cwd)
    assert_only_ours(rerun, out, cwd)
    items, parsed, reused = map(int, RUN_LINE.fullmatch(rerun.stdout.splitlines()[-1]).groups())
    assert (items, reused, parsed) == (ITEMS, int(done.group(1)), ITEMS - reused)
    assert not staging.exists()


@pytest.mark.slow  # the job is interrupted, then run to the end
def test_ctrl_c_while_the_workers_start_ends_and_the_same_command_resumes(tmp_path):
    """SIGINT to the whole group as the first DirectRunner worker sets up its first step, the other
    still starting: the launcher printed its line, then waited at exit for a worker that ignores
    SIGINT and was never told to stop (3 of 3 tries hung; benchmarks/ctrl_c.py tries every phase)."""
    args = [sys.executable, "-m", "jobs.cli", "preprocess", relative(SAMPLE, tmp_path), "--output", "out",
            "--workers", "2", *FAST]
    env = {**os.environ, faults.FAULT_ENV: "start:1:INT"}
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the interrupted job did not end within 120 s") from None
    assert proc.returncode == 130 and stdout == "", stderr[-3000:]
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr[-3000:]
    [line] = ours(stderr)
    assert re.fullmatch(r"canine preprocess: interrupted (after \d+ of \d+ work items \(kept\); the same command "
                        r"resumes|before the job started; nothing was written)", line), line
    assert_only_ours(canine(*args[3:], cwd=tmp_path), tmp_path / "out", tmp_path)


def _workers_of(group: int) -> list[int]:
    """The DirectRunner worker processes in process group `group` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pgid = int(stat.read_text().rsplit(")", 1)[1].split()[2])
            if pgid == group and b"sdk_worker_main" in (stat.parent / "cmdline").read_bytes():
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):  # gone meanwhile
            pass
    return found


@pytest.mark.slow  # the job's start, interrupted
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker processes in /proc")
@pytest.mark.parametrize("when", ["1 s after the start", "as the workers start"])
def test_ctrl_c_in_the_first_seconds_is_the_launchers_line_alone(when, tmp_path):
    """Ctrl-C soon after a 2-worker start: each worker, still importing
    apache_beam, printed a KeyboardInterrupt traceback (36-92 lines, 5 of 5 tries), and a Ctrl-C
    during the launcher's own imports printed its traceback. Now the launcher's line alone, 130,
    and no worker left."""
    args = [sys.executable, "-m", "jobs.cli", "preprocess", relative(SAMPLE, tmp_path), "--output", "out",
            "--workers", "2", *FAST]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        if when == "1 s after the start":
            time.sleep(1)
        else:  # the moment Beam has started them: they import apache_beam for a second or more
            deadline = time.monotonic() + 120
            while not _workers_of(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _workers_of(proc.pid), "no worker process started"
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        stdout, stderr = proc.communicate(timeout=120)
    except (subprocess.TimeoutExpired, AssertionError):
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 130 and stdout == "", stderr[-3000:]
    [line] = ours(stderr)
    assert re.fullmatch(r"canine preprocess: interrupted( after 0 of \d+ work items \(kept\); the same command "
                        r"resumes| before the job started; nothing was written)?", line), line
    assert _workers_of(proc.pid) == []


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_every_page_rejected_publishes_nothing_and_counts_the_reasons(kind, tmp_path, write_rows):
    rows = [{"id": f"p{i}", "title": f"T{i}", "text": "Some text of a page. " * 20, "lang": "sw"} for i in range(3)]
    data = write_rows(rows, tmp_path / f"pages.{kind}")
    proc = canine("preprocess", data.name, "--output", "out", *FAST, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = ours(proc.stderr)
    assert line.startswith(f"canine preprocess: {data.name}: no training example, so nothing was published: "
                           "none of the 3 pages read was kept (3 parse_errors; commonest reasons: "), line
    assert "non-integer id" in line and line.endswith("with an integer id and a text")
    assert not (tmp_path / "out").exists()  # nothing published, no folder left behind
    check = canine("validate", "out", cwd=tmp_path)
    assert check.returncode != 0 and "valid" not in check.stdout


def test_a_language_without_validation_pages_is_named_with_the_flag_that_fixes_it(tmp_path, write_rows):
    rows = [{"id": i + 1, "title": f"T{i}", "text": f"Habari ya dunia, ukurasa {i}. " * 30, "lang": "sw"}
            for i in range(10)]
    small = write_rows(rows, tmp_path / "sw.jsonl")
    xml = SAMPLE / "kowiki-20261101-pages-articles.xml"
    proc = canine("preprocess", small, xml, "--output", tmp_path / "a", *FAST, cwd=tmp_path)
    [note] = assert_only_ours(proc, tmp_path / "a", tmp_path)
    assert note.startswith("canine preprocess: note: no validation page for sw (10 kept pages): "), note
    fraction = re.search(r"--validation-fraction (\S+) holds out", note).group(1)
    assert fraction == "0.05" and "ko (" not in note  # ko: 27 kept pages, one held out
    fixed = canine("preprocess", small, xml, "--output", tmp_path / "b", "--validation-fraction", fraction, *FAST,
                   cwd=tmp_path)
    assert assert_only_ours(fixed, tmp_path / "b", tmp_path) == []


@pytest.mark.parametrize("pages", [1, 2])
def test_the_validation_hint_for_a_tiny_language_leads_to_a_run_that_works(pages, tmp_path, write_rows):
    """A fixed "0.05" held out nothing of 2 pages, and "0.5" for 1 page sent it all to validation (exit 2)."""
    rows = [{"id": i + 1, "title": f"T{i}", "text": f"Habari ya dunia, ukurasa {i}. " * 30, "lang": "sw"}
            for i in range(pages)]
    small = write_rows(rows, tmp_path / "sw.jsonl")
    [note] = assert_only_ours(canine("preprocess", small, "--output", "a", *FAST, cwd=tmp_path), tmp_path / "a", tmp_path)
    if pages == 1:
        assert note.endswith("no validation page for sw (1 kept page): a language of fewer than 20 kept pages gets "
                             "only its share (0.005 of its pages, rounded); sw has a single kept page, which cannot "
                             "be both trained on and held out; preprocess more of its text"), note
        return
    fraction = re.search(r"--validation-fraction (\S+) holds out a page of each language", note).group(1)
    fixed = canine("preprocess", small, "--output", "b", "--validation-fraction", fraction, *FAST, cwd=tmp_path)
    assert assert_only_ours(fixed, tmp_path / "b", tmp_path) == []
    manifest = json.loads((tmp_path / "b" / schema.MANIFEST).read_text())
    assert manifest["splits"]["validation"]["rows"] >= 1 and manifest["splits"]["train"]["rows"] >= 1


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kind", ["xml", "xml.bz2"])
def test_malformed_xml_found_while_reading_is_one_line(kind, workers, bad_inputs, compress, tmp_path):
    xml = bad_inputs["malformed_xml"]  # ends with </mediawiki>: past the checks made before the job
    data = xml if kind == "xml" else compress(xml, tmp_path / "enwiki-20261101-pages-articles.xml.bz2")
    proc = canine("preprocess", data, "--output", tmp_path / "out", "--workers", workers, *FAST, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = ours(proc.stderr)
    assert line.startswith(f"canine preprocess: {data}: malformed XML at line "), line
    assert not (tmp_path / "out").exists()


def test_a_given_tokenizer_counts_by_its_text_not_its_path(tmp_path):
    xml = SAMPLE / "kowiki-20261101-pages-articles.xml"
    first = canine("preprocess", xml, "--output", "trained", *FAST, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    tok = tmp_path / "tok.json"
    shutil.copyfile(tmp_path / "trained" / schema.TOKENIZER, tok)
    given = ["preprocess", xml, "--output", "given", "--seq-len", "512"]
    assert assert_only_ours(canine(*given, "--tokenizer", "tok.json", cwd=tmp_path), tmp_path / "given", tmp_path) == []
    (tmp_path / "elsewhere").mkdir()
    shutil.copyfile(tok, tmp_path / "elsewhere" / "same.json")
    again = canine(*given, "--tokenizer", "elsewhere/same.json", cwd=tmp_path)
    assert again.returncode == 0 and (again.stdout + again.stderr).count("nothing to do") == 1, again.stderr
    tok.write_text(tok.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # other bytes, same name
    changed = canine(*given, "--tokenizer", "tok.json", cwd=tmp_path)
    assert changed.returncode == 2
    [line] = ours(changed.stderr)
    assert "different config" in line and "tokenizer tok.json changed content" in line, line
