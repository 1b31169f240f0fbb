"""What `canine preprocess` shows while it runs (pipeline/progress.py), read from a staging folder
the test fills by hand with a clock it moves: no pipeline runs here."""

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline import itemcache, progress, runners
from pipeline.sources import WorkItem


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _finish(staging, item, pages):
    """What a worker leaves when it finishes an item: its cache file (only the row count matters)."""
    url = itemcache.cache_url(str(staging), item)
    (staging / "items").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"page_id": list(range(pages))}), url)


# One multistream dump of 4 MB in 4 items of 1 MB each, and a 1 MB JSONL file.
ITEMS = [WorkItem("dump.xml.bz2", "xml", start=s, end=s + 10**6) for s in range(0, 4 * 10**6, 10**6)]
ITEMS.append(WorkItem("pages.jsonl", "jsonl"))
SIZES = {"dump.xml.bz2": 4 * 10**6, "pages.jsonl": 10**6}


@pytest.fixture(autouse=True)
def no_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TERM", raising=False)


def test_items_pages_rates_and_eta(tmp_path):
    staging, clock, out = tmp_path / ".staging-x", Clock(), io.StringIO()
    _finish(staging, ITEMS[0], 100)  # done by an earlier, killed run: counted, but not in the rates
    watch = progress.ItemProgress(ITEMS, SIZES, str(staging), stream=out, clock=clock)
    watch.poll()
    watch.started = clock()
    _finish(staging, ITEMS[1], 300)
    _finish(staging, ITEMS[4], 200)
    clock.now += 10
    snap = watch.poll()
    assert (snap.items_done, snap.items_total, snap.pages, snap.read_bytes) == (3, 5, 500, 2 * 10**6)
    assert snap.eta_s() == pytest.approx(10.0)  # 2 MB left at 0.2 MB/s
    assert snap.describe() == "items 3/5 (60%)  50.0 pages/s  0.20 MB/s  ETA 0:10"
    for item in ITEMS[2:4]:
        _finish(staging, item, 1)
    assert watch.poll().describe() == "items 5/5 read; packing examples"
    (staging / "train").mkdir()
    (staging / "train" / "part-00000-of-00003.parquet").write_bytes(b"")
    (staging / "validation").mkdir()
    (staging / "validation" / "part-00000-of-00001.parquet").write_bytes(b"")
    snap = watch.poll()
    assert snap.describe() == "items 5/5 read; shards 2/4 written" and snap.bar() == "[##########----------]"


def test_a_log_gets_timestamped_lines_and_a_terminal_a_bar(tmp_path, monkeypatch):
    staging, clock = tmp_path / ".staging-x", Clock()
    out = io.StringIO()
    watch = progress.ItemProgress(ITEMS, SIZES, str(staging), stream=out, clock=clock).start(input_files=2)
    watch._stop.set()  # drive it by hand: no thread reporting in between
    _finish(staging, ITEMS[0], 10)
    clock.now += 5
    watch._show(watch.poll())  # too soon after the first line: nothing
    clock.now += progress.PLAIN_EVERY_S
    watch._show(watch.poll())
    watch.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in out.getvalue()
    assert lines[0].endswith("preprocess: 5 work items from 2 input files (5.0 MB)")
    assert "preprocess: items 1/5 (20%)" in lines[1] and "ETA 2:20" in lines[1]
    assert "preprocess: done in 0:35: 1 items read (10 pages, 1.0 MB" in lines[2]

    tty = Terminal()
    watch = progress.ItemProgress(ITEMS, SIZES, str(tmp_path / ".staging-y"), stream=tty, clock=clock)
    assert watch.terminal
    watch._show(watch.poll())
    assert tty.getvalue() == "\r\033[Kpreprocess [--------------------] items 0/5 (0%)"
    monkeypatch.setenv("CI", "true")  # a terminal under CI still gets lines
    assert not progress.ItemProgress(ITEMS, SIZES, str(tmp_path), stream=Terminal()).terminal


def test_the_dataflow_job_is_linked_and_no_other():
    class Result:
        def job_id(self):
            return "2026-11-23_01_02_03-123"

    dataflow = PipelineOptions(["--runner=DataflowRunner", "--project=canine-project", "--region=us-central1"])
    assert runners.job_link(Result(), dataflow) == (
        "https://console.cloud.google.com/dataflow/jobs/us-central1/2026-11-23_01_02_03-123?project=canine-project")
    assert runners.job_link(Result(), PipelineOptions(["--runner=DirectRunner"])) is None
    assert runners.job_link(object(), dataflow) is None


def test_durations_read_at_a_glance():
    assert [progress.duration(s) for s in (0, 37.4, 725, 10930)] == ["0:00", "0:37", "12:05", "3:02:10"]
