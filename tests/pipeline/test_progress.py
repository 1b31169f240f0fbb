"""What `canine preprocess` shows while it runs (pipeline/progress.py), read from a staging folder
the test fills by hand with a clock it moves: no pipeline runs here."""

import dataclasses
import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline import progress
from pipeline.beam import itemcache, runners
from pipeline.sources import WorkItem, plan, plan_work_items


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _finish(staging, item, pages, kept=None):
    """What a worker leaves when it finishes an item: its cache file (only the row count matters,
    and the footer's count of kept pages where given)."""
    url = itemcache.cache_url(str(staging), item)
    (staging / "items").mkdir(parents=True, exist_ok=True)
    table = pa.table({"page_id": list(range(pages))})
    if kept is not None:
        table = table.replace_schema_metadata({itemcache.KEPT_KEY: str(kept)})
    pq.write_table(table, url)


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
    # The ETA is to publish: 2 MB left at 0.2 MB/s, then the steps after reading, each its share
    # of the reading's time over the whole input (5 MB: 25 s)
    after = sum(progress.AFTER_READING.values())
    assert snap.eta_s() == pytest.approx(10.0 + 25 * after)
    assert snap.describe() == f"items 3/5 (60%)  50.0 pages/s  0.20 MB/s  ETA {progress.duration(10 + 25 * after)}"
    for item in ITEMS[2:4]:
        _finish(staging, item, 1)
    assert watch.poll().describe().startswith("items 5/5 read  ETA ")
    (staging / "train").mkdir()
    (staging / "train" / "part-00000-of-00003.parquet").write_bytes(b"")
    (staging / "validation").mkdir()
    (staging / "validation" / "part-00000-of-00001.parquet").write_bytes(b"")
    snap = watch.poll()
    assert snap.describe().startswith("items 5/5 read; shards 2/4 written  ETA ")
    filled = int(progress.BAR_WIDTH * 10 / (10 + snap.eta_s()))  # the run's time: 10 s of 10 + the ETA
    assert snap.bar() == f"[{'#' * filled}{'-' * (progress.BAR_WIDTH - filled)}]"


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
    assert "preprocess: items 1/5 (20%)" in lines[1] and f"ETA {progress.duration(140 + 175 * sum(progress.AFTER_READING.values()))}" in lines[1]
    assert "preprocess: done in 0:35: 1 item read (10 pages, 1.0 MB" in lines[2]

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


# --- within a work item: what a worker writes to STAGING/progress/ while it reads ----------------


def _report(staging, item, pages, read):
    """What a worker reading `item` leaves (pipeline/sources/plan.py `_reported`)."""
    (staging / "progress").mkdir(parents=True, exist_ok=True)
    (staging / "progress" / plan.progress_name(item)).write_text(json.dumps({"pages": pages, "bytes": read}))


def test_a_single_item_shows_its_progress_before_it_ends(tmp_path):
    staging, clock, out = tmp_path / ".staging-x", Clock(), io.StringIO()
    item = WorkItem("dump.xml.bz2", "xml")
    watch = progress.ItemProgress([item], {"dump.xml.bz2": 30 * 10**6}, str(staging), stream=out, clock=clock)
    watch.poll()
    watch.started = clock()
    assert watch.poll().describe() == "items 0/1 (0%)"
    _report(staging, item, 2000, 12 * 10**6)
    clock.now += 20
    snap = watch.poll()
    assert snap.describe() == (f"items 0/1 (40%)  100.0 pages/s  0.60 MB/s  "
                               f"ETA {progress.duration(30 + 50 * sum(progress.AFTER_READING.values()))}")
    assert snap.bar() == "[########------------]"
    _finish(staging, item, 5000)  # done: its cache file counts, its last report no more
    snap = watch.poll()
    assert (snap.items_done, snap.pages, snap.read_bytes) == (1, 5000, 30 * 10**6)


def test_a_trial_slice_of_whole_files_counts_pages(tmp_path):
    staging, clock = tmp_path / ".staging-x", Clock()
    items = [WorkItem(f"{lang}.xml.bz2", "xml", max_pages=1000) for lang in ("en", "ko")]
    watch = progress.ItemProgress(items, {}, str(staging), stream=io.StringIO(), clock=clock)
    watch.poll()
    watch.started = clock()
    _finish(staging, items[0], 1000)
    _report(staging, items[1], 500, 3 * 10**6)
    clock.now += 10
    whole = 2000 * 10 / 1500  # the reading's time over the whole slice, in pages
    assert watch.poll().describe() == ("items 1/2 (75%)  150.0 pages/s  0.30 MB/s  "
                                       f"ETA {progress.duration(whole / 4 + whole * sum(progress.AFTER_READING.values()))}")


def test_the_first_line_says_a_trial_slices_pages_where_its_size_is_unknown(tmp_path):
    """A single-stream file's slice said `1 work items from 1 input file (0.0 MB)`."""
    def first_line(items, sizes, input_files):
        out = io.StringIO()
        watch = progress.ItemProgress(items, sizes, str(tmp_path / ".staging-x"), stream=out, clock=Clock())
        watch._thread.start = lambda: None  # the line alone: no reporting thread
        watch.start(input_files=input_files)
        return out.getvalue().split(" preprocess: ", 1)[1].rstrip("\n")

    sliced = [WorkItem(f"{lang}wiki-20261101-pages-articles.xml.bz2", "xml", max_pages=1000) for lang in ("en", "ko")]
    assert first_line(sliced[:1], {sliced[0].path: 0}, 1) == (
        "1 work item from 1 input file (a trial slice: the first 1000 pages of it)")
    assert first_line(sliced, {}, 2) == "2 work items from 2 input files (a trial slice: the first 1000 pages of each)"
    streams = WorkItem("dewiki.xml.bz2", "xml", start=0, end=3 * 10**6, max_pages=1000)  # a multistream slice
    assert first_line([streams, sliced[1]], {}, 2) == (
        "2 work items from 2 input files (3.0 MB, and the first 1000 pages of 1 file)")
    assert first_line([streams], {}, 1) == "1 work item from 1 input file (3.0 MB)"


def test_a_finished_trial_slice_counts_the_bytes_it_read(tmp_path, input_variants):
    """A single-stream file's slice has no known size (0 in `sizes`): its worker's last report,
    written when the slice ends, is what it read. The run's line said 0.0 MB read."""
    path = str(input_variants["xml_bz2"])
    [item] = plan.plan_work_items([path], streams_per_item=1000, max_pages=3)
    staging, clock = tmp_path / ".staging-x", Clock()
    item = dataclasses.replace(item, progress=str(staging / "progress"))
    watch = progress.ItemProgress([item], {item.path: 0}, str(staging), stream=io.StringIO(), clock=clock)
    watch.poll()
    watch.started = clock()
    assert len(list(plan.read_pages(item))) == 3  # fewer pages than the file, read at once: no timed report
    _finish(staging, item, 3)
    clock.now += 1
    snap = watch.poll()
    assert snap.items_done == 1 and 0 < snap.read_bytes <= os.path.getsize(path), snap  # a small file: read whole


@pytest.mark.parametrize("kind", ["xml", "xml_bz2", "xml_gz", "multistream", "jsonl", "jsonl_gz", "parquet"])
def test_every_kind_of_input_reports_pages_and_bytes_while_it_is_read(kind, input_variants, tmp_path, monkeypatch):
    monkeypatch.setattr(plan, "REPORT_EVERY_S", {True: 0.0, False: 0.0})  # a report after every page
    path = str(input_variants[kind])
    [item] = plan.plan_work_items([path], streams_per_item=1000)
    item = dataclasses.replace(item, progress=str(tmp_path / "progress"))
    report = tmp_path / "progress" / plan.progress_name(item)
    seen = []
    for n, _ in enumerate(plan.read_pages(item), 1):  # each page is reported before it is handed on
        seen.append(json.loads(report.read_text()))
        assert seen[-1]["pages"] == n
    size = os.path.getsize(path)
    assert len(seen) > 10 and 0 < seen[0]["bytes"] <= seen[-1]["bytes"] <= size
    assert seen[-1]["bytes"] >= size // 2, (seen[-1], size)  # read on up to the last page


# --- the whole run: every step's count, rate and an ETA to publish (pipeline/beam/phases.py) -------


def _total(staging, step, n):
    (staging / "progress").mkdir(parents=True, exist_ok=True)
    (staging / "progress" / f"{step}.total").write_text(str(n))


def _units(staging, step, n):
    (staging / "progress" / step).mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (staging / "progress" / step / f"u{i}").write_text("")


def _watching_one_item(tmp_path, size):
    """A launcher watching one work item of `size` input bytes, started at the clock's 0."""
    staging, clock = tmp_path / ".staging-x", Clock()
    item = WorkItem("dump.xml.bz2", "xml")
    watch = progress.ItemProgress([item], {"dump.xml.bz2": size}, str(staging), stream=io.StringIO(), clock=clock)
    watch.poll()
    watch.started = clock()
    return staging, clock, item, watch


def test_no_eta_before_it_can_be_estimated(tmp_path):
    """A 28-minute run's first line said ETA 10:19:22: the rate of its workers' first seconds."""
    staging, clock, item, watch = _watching_one_item(tmp_path, 10**9)
    clock.now += 3
    _report(staging, item, 10, 10**9 * progress.READ_TO_ESTIMATE / 2)
    snap = watch.poll()
    assert snap.eta_s() is None and "ETA" not in snap.describe()
    clock.now += 3
    _report(staging, item, 20, 10**9 * progress.READ_TO_ESTIMATE)
    assert "ETA" in watch.poll().describe()


def test_the_readings_clock_starts_as_the_first_item_begins_not_at_its_first_bytes(tmp_path, input_variants):
    """A worker says an item has begun at once (0 pages), its bytes only every REPORT_EVERY_S: the
    rate counts from the last poll before the first item was seen begun. From the last poll that
    saw nothing read, 2.5 s into a 300 MB run's reading, it said 2.6x the real rate (ETA 17 s for 44)."""
    item = dataclasses.replace(plan.plan_work_items([str(input_variants["xml"])])[0], progress=str(tmp_path / "p"))
    pages = plan.read_pages(item)
    next(pages)  # a first page read, within the first report's 2 s: the item has said it began
    assert json.loads((tmp_path / "p" / plan.progress_name(item)).read_text()) == {"pages": 0, "bytes": 0}
    pages.close()

    staging, clock, item, watch = _watching_one_item(tmp_path, 10**8)
    clock.now += 1
    watch.poll()  # nothing yet: the workers are starting
    _report(staging, item, 0, 0)  # begun (at 1.5 s, say)
    clock.now += 1
    watch.poll()  # begun, nothing read yet
    clock.now += 1.5
    _report(staging, item, 100, 10**7)  # its first bytes, 2 s after it began
    snap = watch.poll()  # at 3.5 s: 10 MB in the 2.5 s since the poll before it was seen begun
    assert snap.read_from_s == 1
    whole = 10**8 / (10**7 / 2.5)  # the reading's 25 s, and the steps after it in proportion (one worker)
    assert snap.eta_s() == pytest.approx(whole * 0.9 + whole * sum(progress.AFTER_READING.values()))


def test_an_item_caches_footer_counts_its_kept_pages_and_the_launcher_reads_them(tmp_path):
    """A real dump excerpt's cache file (133 pages, 29 kept: redirects, talk and the like): its footer says
    how many were kept, and the launcher reads pages and kept pages from the footer alone."""
    path = str(Path(__file__).resolve().parents[2] / "tests/data/wiki/enwiki-201605-excerpt.xml.bz2")
    [item] = plan_work_items([path])
    staging = tmp_path / ".staging-x"
    outcomes = [c.outcome for c in itemcache.parse_and_store(item, itemcache.cache_url(str(staging), item))]
    assert 0 < outcomes.count("kept") < len(outcomes)  # something was not kept, or the test says nothing
    watch = progress.ItemProgress([item], {path: os.path.getsize(path)}, str(staging), stream=io.StringIO())
    name = itemcache.cache_url("", item).rsplit("/", 1)[-1]
    assert watch._pages(name) == (len(outcomes), outcomes.count("kept"))


def test_the_vocabularys_model_sizes_its_sample_against_the_kept_pages(tmp_path):
    """The sample is of kept pages: where half the pages read are redirects and the like, 1000 pages
    are 80% of the 1250 kept, not 40% of the 2500 read (at 1 GB of the benchmark's input the share
    by pages read said 19 s for a vocabulary that took 34)."""
    staging, clock = tmp_path / ".staging-x", Clock()
    watch = progress.ItemProgress(ITEMS, SIZES, str(staging), stream=io.StringIO(), clock=clock, workers=2,
                                  tokenizer_pages=1000)
    watch.poll()
    watch.started = clock()
    for item in ITEMS:
        _finish(staging, item, 500, kept=250)
    clock.now += 50
    snap = watch.poll()
    assert snap.kept_share == 0.5
    after = progress.AFTER_READING
    tokenizer = 50 * 2 * (1000 / 1250) * progress.TOKENIZER_PER_READ
    # the sampling (4.5 s spread over both workers) runs beside the training (12.8 s on one): the longer
    assert tokenizer > (tokenizer + 2 * 50 * after["sampling"]) / 2
    assert snap.eta_s() == pytest.approx(50 * (after["packing"] + after["shards"]) + tokenizer)


def test_every_step_after_reading_counts_out_of_its_total_with_a_rate_and_the_eta_runs_to_publish(tmp_path):
    staging, clock, out = tmp_path / ".staging-x", Clock(), io.StringIO()
    watch = progress.ItemProgress(ITEMS, SIZES, str(staging), stream=out, clock=clock, workers=2,
                                  tokenizer_pages=1000)
    watch.poll()
    watch.started = clock()
    for item in ITEMS:
        _finish(staging, item, 500)  # 2500 pages, 5 MB, read in 50 s
    clock.now += 50
    _total(staging, "packing", 8)
    _total(staging, "sampling", 8)
    _total(staging, "tokenizer", 4)
    _total(staging, "shards", 13)
    snap = watch.poll()
    assert snap.read_s == 50
    after = progress.AFTER_READING
    tokenizer = 50 * 2 * (1000 / 2500) * progress.TOKENIZER_PER_READ  # one worker, 40% of the input's pages
    # beside it the sampling, dealt so that both workers end together: its 2 x 4.5 worker-s and the
    # training's 6.4 over two workers, 7.7 s (job.deal)
    beside = (tokenizer + 2 * 50 * after["sampling"]) / 2
    assert beside > tokenizer
    assert snap.eta_s() == pytest.approx(50 * (after["packing"] + after["shards"]) + beside)
    assert snap.describe() == ("items 5/5 read; pack groups 0/8 packed; tokenizer chunks 0/4 read; pack groups 0/8 "
                               f"sampled; shards 0/13 written  ETA {progress.duration(snap.eta_s())}")
    _units(staging, "packing", 2)
    watch.poll()
    clock.now += 20
    _units(staging, "packing", 6)  # 4 more in 20 s: 0.2 a second, 2 left; the model's 11 s are spent
    snap = watch.poll()
    assert "pack groups 6/8 packed (0.20/s); tokenizer chunks 0/4 read" in snap.describe()
    assert snap.eta_s() == pytest.approx(2 / 0.2 + 50 * after["shards"] + beside)
    _units(staging, "packing", 8)
    _units(staging, "tokenizer", 1)  # the trainer reads the chunks as it counts: a rate needs two
    clock.now += 1
    snap = watch.poll()
    assert snap.eta_s() == pytest.approx(50 * after["shards"] + beside)  # the model's
    _units(staging, "tokenizer", 2)
    clock.now += 5  # a chunk in 5 s, the trainer's pace: 10 s for the last two; the sampling's model
    snap = watch.poll()  # is spent (5 s of the step against its 4.5), none of its units done
    assert snap.eta_s() == pytest.approx(10 + 50 * after["shards"])
    _units(staging, "sampling", 2)
    clock.now += 1
    watch.poll()
    _units(staging, "sampling", 4)
    clock.now += 1  # 2 pack groups sampled a second beside the training: 2 s for the last 4; the
    snap = watch.poll()  # trainer's pace, a chunk in 7 s now: 14 s for its last two, the longer
    assert snap.eta_s() == pytest.approx(max(2 * 7, 4 / 2) + 50 * after["shards"])
    _units(staging, "tokenizer", 4)
    _units(staging, "sampling", 8)
    (staging / "train").mkdir()
    for i in range(12):
        (staging / "train" / f"part-{i:05d}-of-00012.parquet").write_bytes(b"")
    snap = watch.poll()
    # the validation shard is not written yet: 12 of 13, not 12/12 (then 13 shards written)
    assert "shards 12/13 written" in snap.describe()
    (staging / "validation").mkdir()
    (staging / "validation" / "part-00000-of-00001.parquet").write_bytes(b"")
    assert "shards 13/13 written" in watch.poll().describe()
    watch.stop()
    assert out.getvalue().rstrip().endswith(", 13 shards written")


def test_a_steps_few_first_units_do_not_outweigh_its_model(tmp_path):
    """13 shards on 2 workers finish in bursts: 3 in the step's first 36 s, then 10 in 40 s. The rate of
    the first few said 80 s left where 40 were; the model's time, less the step's, says less and wins
    until it is spent; then the rate alone."""
    staging, clock = tmp_path / ".staging-x", Clock()
    watch = progress.ItemProgress(ITEMS[:1], {"dump.xml.bz2": 10**6}, str(staging), stream=io.StringIO(), clock=clock)
    watch.poll()
    watch.started = clock()
    _finish(staging, ITEMS[0], 100)
    clock.now += 100  # read in 100 s
    for step in ("packing", "sampling"):
        _total(staging, step, 1)
        _units(staging, step, 1)
    _total(staging, "shards", 13)
    (staging / "train").mkdir()
    watch.poll()  # the shards' step begins
    model = 100 * progress.AFTER_READING["shards"]
    for i in range(2):
        (staging / "train" / f"part-{i:05d}-of-00013.parquet").write_bytes(b"")
    clock.now += 30
    watch.poll()
    (staging / "train" / "part-00002-of-00013.parquet").write_bytes(b"")
    clock.now += 10  # 1 more in 10 s: the rate says 100 s for the 10 left
    snap = watch.poll()
    assert snap.eta_s() == pytest.approx(model - 40)
    clock.now += model  # the model spent: the rate alone
    assert watch.poll().eta_s() == pytest.approx(10 / (1 / (10 + model)))


def test_the_shards_eta_follows_the_rows_of_the_shards_under_way(tmp_path):
    """5 shards on 2 workers: the finished ones came in bursts (0.41x, then 2.8x the time left at
    300 MB). Each shard being written says how far its rows are (phases.Reporter, the workers'
    writer); the shards left are scheduled on the workers at the pace of those under way, each
    weighed by its share of the codepoints (the validation shard is a small one)."""
    from pipeline.beam import job, phases
    from pipeline.beam.elements import Sizing

    staging, clock = tmp_path / ".staging-x", Clock()
    watch = progress.ItemProgress(ITEMS[:1], {"dump.xml.bz2": 10**6}, str(staging), stream=io.StringIO(), clock=clock,
                                  workers=2)
    watch.poll()
    watch.started = clock()
    _finish(staging, ITEMS[0], 100)
    clock.now += 100
    for step in ("packing", "sampling"):
        _total(staging, step, 1)
        _units(staging, step, 1)
    sizing = Sizing({}, {"train": 4, "validation": 1}, {"train": 4000.0, "validation": 100.0})
    phases.total(str(staging), "shards", 5, job.shard_shares(sizing))  # as the job's SayShards does
    worker = Clock()
    reports = [phases.Reporter(str(staging), "shards", job.shard_name("train", i, 4), clock=worker) for i in range(2)]
    for report in reports:
        report(0, 1000)
    snap = watch.poll()  # no pace yet: the model's time
    assert snap.eta_s() == pytest.approx(100 * progress.AFTER_READING["shards"])
    assert "shards 0/5 written, 2 under way (0%, 0%)" in snap.describe()
    worker.now += 1  # within REPORT_EVERY_S of the first: not rewritten
    reports[0](999, 1000)
    worker.now += 1
    reports[0](200, 1000)
    reports[1](100, 1000)
    clock.now += 30  # the launcher's clock is not the workers'
    snap = watch.poll()  # one report of rows each: a pace from the start would count the first pass's read
    assert snap.eta_s() == pytest.approx(100 * progress.AFTER_READING["shards"] - 30)
    worker.now += 2
    reports[0](400, 1000)
    reports[1](200, 1000)
    clock.now += 1
    snap = watch.poll()
    # 0.1 and 0.05 of a training shard a second: 6 and 16 s to go, 10 and 20 s each in all; the others at
    # the mean speed, 0.075: two training shards of 13.3 s, then the validation shard (a tenth of one)
    assert snap.eta_s() == pytest.approx(16 + 40 / 3)
    assert "shards 0/5 written, 2 under way (20%, 40%)  ETA 0:29" in snap.describe()
    (staging / "train").mkdir()
    (staging / "train" / "part-00000-of-00004.parquet").write_bytes(b"")  # its report stays: not counted again
    snap = watch.poll()
    assert "shards 1/5 written, 1 under way (20%)" in snap.describe()
    # the finished shard's pace still counts (13.3 s a training shard): both left on the free worker
    assert snap.eta_s() == pytest.approx(2 * 40 / 3)
    reports.append(phases.Reporter(str(staging), "shards", job.shard_name("train", 2, 4), clock=worker))
    reports[-1](0, 1000)  # begun, no pace of its own yet: the mean's
    snap = watch.poll()
    assert "shards 1/5 written, 2 under way (0%, 20%)" in snap.describe()
    assert snap.eta_s() == pytest.approx(max(16, 2 * 40 / 3))
