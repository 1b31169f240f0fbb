"""Several workers publishing to an object store: the bundled sample preprocessed to
gs:// (gcp-storage-emulator) and s3:// (moto) by the DirectRunner's worker processes and by the
DaskRunner gives the same objects, byte for byte, as a 1-worker run on a local disk.

Runs go through `pipeline.run.preprocess`, as `canine preprocess` does: its lock creates the
output's root before the job, and the launcher's listing of that root is what went stale while
the workers wrote staging from other processes (pipeline/output/output.py, `finalize`)."""

import json

import fsspec
import pytest

from contract import schema
from pipeline import progress
from pipeline.output import output
from pipeline.beam import dask_runner, itemcache
from pipeline.run import preprocess
from pipeline.sources import WorkItem
from test_job_e2e import small_config

pytestmark = pytest.mark.slow


def published(url: str) -> dict[str, bytes]:
    """Every object (file) below `url`, by its path relative to `url`."""
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    fs.invalidate_cache()
    return {name[len(root) + 1 :]: fs.cat_file(name) for name in fs.find(root)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One 1-worker run on a local disk: what every other run must publish."""
    out = tmp_path_factory.mktemp("reference") / "out"
    preprocess(small_config(out), workers=1, progress=False)
    objects = published(str(out))
    assert len([n for n in objects if n.endswith(".parquet")]) >= 3  # several shards, so the hash spread is tested
    return objects


@pytest.fixture(scope="module")
def cluster(s3_store, gcs_store):
    """A Dask LocalCluster of 2 worker processes, started after both store servers: its workers
    inherit their addresses and credentials from the environment, as a real cluster's nodes
    get them from theirs."""
    c = dask_runner.local_cluster(2)
    yield c
    c.close()


RUNS = {"direct-2": ("DirectRunner", 2), "direct-4": ("DirectRunner", 4), "dask-2": ("DaskRunner", 2)}


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("store", ["gcs_store", "s3_store"])
def test_several_workers_publish_the_one_worker_bytes(store, run, reference, request):
    store = request.getfixturevalue(store)
    runner, workers = RUNS[run]
    beam_args = []
    if runner == "DaskRunner":
        beam_args = [f"--dask_client_address={request.getfixturevalue('cluster').scheduler_address}"]
    out = f"{store.url()}/shards"  # a fresh folder: the bucket is the session's
    _, result = preprocess(small_config(out), workers=workers, runner=runner, beam_args=beam_args, progress=False)
    assert result.run is not None and not result.up_to_date
    objects = published(out)
    # The same names (no staging, lock or temp object left), and the same bytes, manifest included.
    assert sorted(objects) == sorted(reference)
    assert [n for n in objects if objects[n] != reference[n]] == []


# --- the launcher's view of what the workers write (no pipeline runs here) ---------------------


@pytest.mark.parametrize("store", ["gcs_store", "s3_store"])
def test_the_launcher_sees_staging_that_other_processes_write(store, request):
    """The launcher lists the output (and the progress watcher staging) before and while the
    workers write: a listing it cached then must not hide what they wrote since."""
    store = request.getfixturevalue(store)
    out = f"{store.url()}/shards"  # a fresh folder: the bucket is the session's
    root = out.split("://", 1)[1]
    fs = fsspec.filesystem(store.protocol)  # the launcher's instance, as output.py's `_fs` gets it
    worker = fsspec.filesystem(store.protocol, skip_instance_cache=True)  # another process's
    fs.pipe_file(f"{root}/{schema.LOCK}", b"{}")  # the lock creates the root
    assert output.stagings(out) == []  # ... and run_job lists it, before the job
    staging = f"{root}/{schema.STAGING_PREFIX}0123456789abcdef"
    worker.pipe_file(f"{staging}/stats.json", b"[]")
    assert output.stagings(out) == [staging]
    # The progress watcher lists staging/items while the workers add to it.
    items = [WorkItem("a.xml", "xml"), WorkItem("b.xml", "xml")]
    worker.pipe_file(itemcache.cache_url(staging, items[0]), b"")
    watch = progress.ItemProgress(items, {"a.xml": 10, "b.xml": 10}, fs.unstrip_protocol(staging))
    assert watch.poll().items_done == 1
    worker.pipe_file(itemcache.cache_url(staging, items[1]), b"")
    assert watch.poll().items_done == 2
    assert output.remove_staging(out) == [staging] and not fs.exists(f"{staging}/stats.json")


def _staging_with_a_shard(tmp_path, shard_bytes: bytes | None):
    """A staging folder as the job leaves it, with one recorded shard of 10 bytes; the shard
    file holds `shard_bytes` (None: it is missing)."""
    cfg = small_config(tmp_path / "out")
    stage = tmp_path / "out" / f"{schema.STAGING_PREFIX}{cfg.sha256()[:16]}"
    (stage / "train").mkdir(parents=True)
    shard = "train/part-00000-of-00001.parquet"
    (stage / "stats.json").write_text("[]")
    (stage / "shards.json").write_text(json.dumps([{"split": "train", "path": shard, "rows": 1, "codepoints": 10,
                                                    "sha256": "0" * 64, "bytes": 10}]))
    (stage / "rejects.json").write_text("[]")
    (stage / schema.TOKENIZER).write_text("{}")
    if shard_bytes is not None:
        (stage / shard).write_bytes(shard_bytes)
    return cfg, stage, shard


@pytest.mark.parametrize("shard_bytes, problem",
                         [(None, "is missing"), (b"12345", "has 5 bytes where the job wrote 10")])
def test_a_missing_or_short_staged_file_fails_publishing_naming_it(tmp_path, shard_bytes, problem):
    cfg, stage, shard = _staging_with_a_shard(tmp_path, shard_bytes)
    with pytest.raises(output.PublishError) as e:
        output.finalize(cfg, str(stage))
    assert str(e.value).startswith(f"file://{stage / shard}, which the job wrote, {problem}: nothing was published")
    assert "Run the same command again" in str(e.value)
    assert not (tmp_path / "out" / schema.MANIFEST).exists()
