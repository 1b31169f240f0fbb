"""pipeline/beam/runners.py, dask_runner.py: the job on a second, distributed runner, Beam's DaskRunner (as filled in
by dask_runner.py) over a dask.distributed LocalCluster of 2 worker processes on 127.0.0.1.

One cluster serves the file (starting one costs seconds); runs reach it by
--dask_client_address, as runs on a real cluster do. One test starts its own, as
`--runner DaskRunner --workers N` without an address does."""

import gzip
import multiprocessing
import os
import re
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to

from pipeline import sources
from pipeline.output import output
from pipeline.beam import dask_runner, runners
from pipeline.run import run_job
from test_job_e2e import SAMPLE, shard_hashes, small_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    c = dask_runner.local_cluster(2)
    yield c
    c.close()


def on_dask(cluster, workers=2):
    return runners.beam_options(workers, "DaskRunner", [f"--dask_client_address={cluster.scheduler_address}"])


def test_dask_runner_is_named_by_its_short_name():
    opts = runners.beam_options(3, "DaskRunner")
    assert opts.view_as(StandardOptions).runner == "pipeline.beam.dask_runner.DaskRunner"
    assert opts.get_all_options()["dask_local_workers"] == 3
    from apache_beam.runners.runner import create_runner

    assert create_runner("pipeline.beam.dask_runner.DaskRunner").__class__.__name__ == "DaskRunner"


def test_checking_a_runner_leaves_nothing_in_the_temp_dir(tmp_path, monkeypatch):
    """runners.check_runner makes a Pipeline to have Beam check the runner and its options; Beam
    makes a beam-pipeline-temp* folder for it, removed only by a run, which this one never has."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    runners.check_runner(2, "DaskRunner")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="--runner NoSuchRunner"):
        runners.check_runner(1, "NoSuchRunner")
    assert list(tmp_path.iterdir()) == []


def test_the_filled_gaps_are_those_of_the_pinned_beam():
    """dask_runner.py fills gaps of Beam 2.77's DaskRunner, reading its translation tables; a new
    Beam may have closed some of them (or moved what is read): re-check the list there."""
    assert beam.__version__ == "2.77.0"


def test_options_for_the_direct_runner_load_no_dask():
    code = ("import sys; from pipeline.beam import runners; runners.beam_options(2, 'DirectRunner'); "
            "print(sorted(m for m in ('dask', 'distributed', 'pipeline.beam.dask_runner') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


class _Route(beam.DoFn):
    """Counts every element; odd numbers also go to a tagged output."""

    def __init__(self):
        self.seen = Metrics.counter("test", "seen")

    def process(self, n):
        self.seen.inc()
        yield n
        if n % 2:
            yield pvalue.TaggedOutput("odd", n)


def test_side_inputs_reshuffle_and_combine_per_key_on_two_worker_processes(cluster):
    assert len(cluster.workers) == 2
    names = {0: "zero", 1: "one", 2: "two"}
    p = beam.Pipeline(options=on_dask(cluster))
    routed = (
        p | "Numbers" >> beam.Create(range(30))
        | "Reshuffle" >> beam.Reshuffle()
        | "Route" >> beam.ParDo(_Route()).with_outputs("odd", main="all")
    )
    names_pc = p | "Names" >> beam.Create(sorted(names.items()))
    total = routed.all | "Total" >> beam.CombineGlobally(sum)  # 435; read by the step below as a side input
    sums = (
        routed.all
        | "Key" >> beam.Map(lambda n, names: (names[n % 3], n), pvalue.AsDict(names_pc))
        | "Sum" >> beam.CombinePerKey(sum)
        | "Share" >> beam.Map(lambda kv, total: (kv[0], kv[1], kv[1] / total), pvalue.AsSingleton(total))
    )
    assert_that(sums, equal_to([("zero", 135, 135 / 435), ("one", 145, 145 / 435), ("two", 155, 155 / 435)]))
    assert_that(routed.odd | "CountOdd" >> beam.combiners.Count.Globally(), equal_to([15]), label="Odd")
    result = p.run()
    assert result.wait_until_finish() == PipelineState.DONE
    # Each element once: the side input's upstream is not computed again per reading task.
    seen = result.metrics().query(MetricsFilter().with_name("seen"))["counters"]
    assert [(c.committed, c.attempted) for c in seen] == [(30, 30)]


def test_a_failed_assertion_and_a_failing_dofn_fail_the_run_naming_the_error(cluster):
    p = beam.Pipeline(options=on_dask(cluster))
    assert_that(p | beam.Create([1, 2]) | beam.Map(lambda n: n * 10), equal_to([10, 21]))
    with pytest.raises(BeamAssertException, match=r"missing elements \[21\]"):
        p.run().wait_until_finish()

    def boom(n):
        if n == 3:
            raise ValueError(f"element {n} is bad")
        return n

    p = beam.Pipeline(options=on_dask(cluster))
    _ = p | beam.Create(range(5)) | "Boom" >> beam.Map(boom)
    result = p.run()
    with pytest.raises(ValueError, match=r"element 3 is bad \[while running 'Boom'\]"):
        result.wait_until_finish()
    assert result.state == PipelineState.FAILED


def test_without_an_address_a_run_starts_its_own_cluster_and_closes_it():
    before = set(multiprocessing.active_children())
    with beam.Pipeline(options=runners.beam_options(1, "DaskRunner")) as p:  # 1: each process costs seconds
        assert_that(p | beam.Create(["a", "b", "a"]) | beam.combiners.Count.PerElement(), equal_to([("a", 2), ("b", 1)]))
    assert set(multiprocessing.active_children()) <= before  # its worker process is gone


def test_the_job_writes_the_direct_runners_shards_byte_for_byte(cluster, tmp_path):
    direct_run = run_job(small_config(tmp_path / "direct"), workers=1)
    dask_run = run_job(small_config(tmp_path / "dask"), workers=2, runner="DaskRunner",
                       beam_args=[f"--dask_client_address={cluster.scheduler_address}"])
    direct, dask = direct_run.manifest, dask_run.manifest
    assert shard_hashes(dask) == shard_hashes(direct) and len(shard_hashes(dask)) >= 3
    assert dask.languages == direct.languages
    assert dask.tokenizer.sha256 == direct.tokenizer.sha256
    assert dask.rejects == direct.rejects
    for rel in dask.rejects:
        assert (tmp_path / "dask" / rel).read_bytes() == (tmp_path / "direct" / rel).read_bytes()
    # The job's Metrics counters, read back from result.metrics() by run_job.
    assert dask_run.run.items_parsed == direct_run.run.items_parsed == dask_run.run.work_items
    assert not any(name.startswith(".staging") for name in os.listdir(tmp_path / "dask"))


def test_an_input_error_in_a_worker_reaches_the_user_naming_the_file(cluster, tmp_path):
    """gzip has no end marker: the cut is found by a worker, inside the job."""
    bad = tmp_path / "enwiki-20261101-pages-articles.xml.gz"
    bad.write_bytes(gzip.compress((SAMPLE / "enwiki-20261101-pages-articles.xml").read_bytes())[:-30])
    with pytest.raises(sources.InputError, match=rf"^{re.escape(str(bad))}: truncated gzip data: input ends at byte \d+ inside the stream starting at byte 0$"):
        run_job(small_config(tmp_path / "out", inputs=(str(bad),)), workers=2, runner="DaskRunner",
                beam_args=[f"--dask_client_address={cluster.scheduler_address}"])
    assert not (tmp_path / "out" / "_manifest.json").exists()


def test_a_heartbeat_cut_by_the_closing_cluster_is_not_printed_but_another_failure_is():
    """A LocalCluster that closes its scheduler first cancels a worker's heartbeat connection:
    distributed logs that at ERROR with a traceback (seen on a loaded machine in
    tests/jobs/test_preprocess_endings.py's Dask run). Dropped; a failure of another cause shows."""
    import asyncio
    import logging
    import sys

    from distributed.core import Status

    from pipeline.beam import dask_runner

    class Worker:
        status = Status.running

    def record(cause):
        try:
            try:
                raise cause
            except BaseException as e:
                raise OSError("Timed out trying to connect") from e
        except OSError:
            return logging.LogRecord("distributed.worker", logging.ERROR, "", 0,
                                     "Failed to communicate with scheduler during heartbeat.", (), sys.exc_info())

    running = dask_runner._HeartbeatWhileClosing(Worker())
    assert not running.filter(record(asyncio.CancelledError()))
    assert running.filter(record(ConnectionRefusedError()))
    Worker.status = Status.closing
    assert not running.filter(record(ConnectionRefusedError()))
