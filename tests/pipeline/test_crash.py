"""Kill -9 at each stage of a 2-worker run on a multi-MB multistream dump, rerun at once, and
get shards byte-identical to an uninterrupted run of the plain dump.

The kills come from pipeline/faults.py: SIGKILL to the job's whole process group (launcher and
DirectRunner workers) the moment a stage is reached, as a killed pod dies. Each rerun starts
while the killed launcher is still an unreaped zombie, so the lock must see it as dead.
"""

import json
import os
import subprocess
import sys

import pytest

from contract import schema
from pipeline import faults
from pipeline.preprocess_config import PreprocessConfig
from pipeline.run import run_job

pytestmark = pytest.mark.slow

FLAGS = ["--seq-len", "512", "--vocab-size", "800", "--validation-fraction", "0.05",
         "--shard-codepoints", "400000", "--seed", "5", "--streams-per-item", "2", "--json"]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory, make_synthetic_dump, make_multistream):
    """A ~5.5 MB dump, plain and multistream (100 pages a stream, as Wikimedia's), and the
    manifest of an uninterrupted single-process run of the plain form."""
    root = tmp_path_factory.mktemp("crash")
    (root / "plain").mkdir()
    plain = make_synthetic_dump(root / "plain" / "enwiki-20261101-pages-articles.xml", 1300)
    multistream, _ = make_multistream(plain, root / "multistream", pages_per_stream=100)
    cfg = PreprocessConfig(inputs=(str(plain),), output=str(root / "baseline"), seq_len=512, vocab_size=800,
                           validation_fraction=0.05, shard_codepoints=400_000, seed=5, streams_per_item=2)
    return plain, multistream, run_job(cfg, workers=1).to_dict()  # as `canine preprocess --json` prints it


def shards_of(manifest):
    return {s["path"]: s["sha256"] for split in manifest["splits"].values() for s in split["shards"]}


def start(dump, out, fault=None):
    env = {k: v for k, v in os.environ.items() if k != faults.FAULT_ENV}
    if fault:
        env[faults.FAULT_ENV] = fault
    cmd = [sys.executable, "-m", "jobs.cli", "preprocess", str(dump), "--output", str(out), "--workers", "2", *FLAGS]
    # A session of its own: the fault kills the process group, which must not be pytest's.
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def wait_killed(proc):
    """Wait until the launcher has died, without reaping it: it stays a zombie that still
    answers kill(pid, 0), as a process being torn down does."""
    info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    assert info.si_code == os.CLD_KILLED and info.si_status == 9, proc.stderr.read()[-3000:]


def test_plain_and_multistream_give_the_same_rows(dumps, tmp_path):
    plain, multistream, baseline = dumps
    proc = start(multistream, tmp_path / "out")
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    manifest = json.loads(stdout)
    assert manifest["run"]["work_items"] >= 6  # one per 2 streams of 100 pages, spread over both workers
    assert shards_of(manifest) == shards_of(baseline)
    assert manifest["languages"] == baseline["languages"]
    assert baseline["splits"]["train"]["rows"] > 100 and len(baseline["splits"]["train"]["shards"]) >= 3


def test_kill_at_every_stage_then_rerun_gives_the_same_shards(dumps, tmp_path):
    _, multistream, baseline = dumps
    out = tmp_path / "out"
    killed = []
    # Each run is killed at the next stage, started right after the last one was killed; each
    # resumes what the one before it left: cached items, a half-published output, a manifest
    # with staging still beside it.
    for fault in ("item:2", "tokenizer", "shard:1", "publish:3", "published"):
        proc = start(multistream, out, fault)
        wait_killed(proc)
        killed.append(proc)
        staging = [n for n in os.listdir(out) if n.startswith(schema.STAGING_PREFIX)]
        assert len(staging) == 1, (fault, os.listdir(out))
        items = os.listdir(out / staging[0] / "items")
        assert len([n for n in items if n.endswith(".parquet")]) >= 2, fault
        assert (out / schema.MANIFEST).exists() == (fault == "published"), fault
    final = start(multistream, out)
    stdout, stderr = final.communicate(timeout=600)
    assert final.returncode == 0, stderr[-3000:]
    assert "nothing to do" in stderr  # the last kill came after the manifest: only staging was left
    for proc in killed:
        proc.wait()
    manifest = json.loads(stdout)
    assert shards_of(manifest) == shards_of(baseline)
    assert sorted(os.listdir(out)) == sorted([schema.MANIFEST, schema.REJECTS, schema.TOKENIZER, *schema.SPLITS])
    from pipeline.output.validate import validate

    assert validate(str(out))[1] == 0


def test_kill_while_reading_then_rerun_reuses_finished_items(dumps, tmp_path):
    _, multistream, baseline = dumps
    out = tmp_path / "out"
    proc = start(multistream, out, "item:3")
    wait_killed(proc)
    rerun = start(multistream, out)
    stdout, stderr = rerun.communicate(timeout=600)
    proc.wait()
    assert rerun.returncode == 0, stderr[-3000:]
    run = json.loads(stdout)["run"]
    assert run["items_reused"] >= 3 and run["items_parsed"] + run["items_reused"] == run["work_items"]
    assert shards_of(json.loads((out / schema.MANIFEST).read_text())) == shards_of(baseline)
