"""pipeline/downstream/prepare.py and job.py: the official tiny_dev file windowed by the Beam job
(DirectRunner, 1 and 2 worker processes) into byte-identical shards, the manifests' counts adding
up and matching the windows read back, a second run that does nothing, changed settings refused
before anything is written, and a killed run's leftovers cleaned by the next run."""

import gzip
import json
import os
import shutil
from collections import Counter

import pyarrow.parquet as pq
import pytest

from contract.tydiqa import WINDOW_COLUMN_NAMES, AnswerType, window_schema
from pipeline import seeds
from pipeline.beam import spill
from pipeline.downstream.prepare import prepare
from pipeline.downstream.windows import WindowSettings, window_line
from pipeline.output.output import OutputExistsError

pytestmark = pytest.mark.slow  # Beam jobs end to end
TINY_DEV = os.path.join(os.path.dirname(__file__), "..", "..", "data", "tydiqa", "tiny_dev.jsonl.gz")
# 3 shards a role (79,774 bytes of input), chunks of about 40 kB of lines (tiny_dev is 11 lines of
# 6-100 kB: several chunks)
SMALL_FILES = dict(shard_input_bytes=30_000, chunk_bytes=40_000)


def inputs():
    return {"train": [TINY_DEV], "dev": [TINY_DEV]}


def files(root):
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, names in os.walk(root) for f in names}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for workers in (1, 2):
        root = str(tmp_path_factory.mktemp(f"w{workers}") / "tydiqa")
        said = []
        manifests = prepare(inputs(), root, WindowSettings(), workers=workers, say=said.append, **SMALL_FILES)
        out[workers] = (root, manifests, said)
    return out


def test_one_and_two_workers_write_the_same_bytes(runs):
    (one, m1, said), (two, m2, _) = runs[1], runs[2]
    assert files(one) == files(two)
    assert sorted(files(one)) == sorted(
        [f"dev/part-0000{i}-of-00003.parquet" for i in range(3)] + ["dev/_manifest.json", "train/_manifest.json"]
        + [f"train/{s['path']}" for s in m1["train"]["shards"]])
    assert m1 == m2 and not m1["dev"]["up_to_date"]
    assert said[-1].startswith("done in") and "22 examples read, 234 windows written so far" in said
    assert any(line.startswith("dev: 11 examples read, 11 windowed; 200 windows written") for line in said)


def read_rows(root, manifest):
    rows = []
    for shard in manifest["shards"]:
        table = pq.read_table(os.path.join(root, manifest["role"], shard["path"]))
        assert table.schema.equals(window_schema(), check_metadata=False) and table.num_rows == shard["rows"]
        rows.append(table.to_pylist())
    return rows


def test_the_manifests_count_what_the_shards_hold(runs):
    root, manifests, _ = runs[1]
    for role, training in (("train", True), ("dev", False)):
        m = manifests[role]
        c = m["counts"]
        assert m["columns"] == list(WINDOW_COLUMN_NAMES) and m["mode"] == ("training" if training else "prediction")
        assert c["examples"]["read"] == 11 == c["examples"]["windowed"] + sum(c.get("rejected", {}).values())
        assert sum(c["labels"].values()) == c["examples"]["windowed"]
        assert c["labels"] == {"MINIMAL": 4, "UNKNOWN": 6, "YES": 1}  # the Russian NO is past passage 45
        assert c["answers_lost"] == {"beyond_max_passages": 1}
        assert sum(c["windows"].values()) == m["rows"] == sum(s["rows"] for s in m["shards"])
        assert m["inputs"][0]["bytes"] == os.path.getsize(TINY_DEV) and len(m["inputs"][0]["sha256"]) == 64
        # every shard's rows: its examples by the hash of their id, in input order, windows in order
        expected, counts = [], Counter()
        with gzip.open(TINY_DEV, "rb") as f:
            for line in f:
                expected += window_line(line, WindowSettings(), training, counts)
        assert {k: dict(v) for k, v in c.items()} == {
            g: {n: v for (gg, n), v in sorted(counts.items()) if gg == g} for g in {g for g, _ in counts}}
        for shard, rows in zip(m["shards"], read_rows(root, m)):
            index = int(shard["path"][5:10])
            want = [w for w in expected if seeds.shard_index(str(w.example_id), 3) == index]
            assert [(r["example_id"], r["window"]) for r in rows] == [(w.example_id, w.window) for w in want]
            for r, w in zip(rows, want):
                assert r["input_ids"] == w.input_ids.tolist() and r["doc_chars"] == w.doc_chars.tolist()
                assert (r["doc_start"], r["start"], r["end"], r["answer_type"], r["language"]) == (
                    w.doc_start, w.start, w.end, w.answer_type, w.language)
    assert manifests["train"]["counts"]["windows"]["UNKNOWN"] < manifests["dev"]["counts"]["windows"]["UNKNOWN"]
    assert manifests["dev"]["counts"]["windows"][AnswerType.MINIMAL.name] == 11


def test_doc_chars_are_delta_packed(runs):
    root, manifests, _ = runs[1]
    path = os.path.join(root, "dev", manifests["dev"]["shards"][0]["path"])
    meta = pq.ParquetFile(path).metadata
    column = [meta.row_group(0).column(i) for i in range(meta.num_columns)
              if meta.row_group(0).column(i).path_in_schema == "doc_chars.list.element"][0]
    assert "DELTA_BINARY_PACKED" in column.encodings and not column.has_dictionary_page


def test_the_same_run_again_does_nothing(runs, tmp_path):
    root = str(tmp_path / "again")
    shutil.copytree(runs[1][0], root)
    before = {p: os.stat(os.path.join(root, p)).st_mtime_ns for p in files(root)}
    said = []
    manifests = prepare(inputs(), root, WindowSettings(), say=said.append, **SMALL_FILES)
    assert all(m["up_to_date"] for m in manifests.values())
    assert said == ["dev: already prepared (200 windows in 3 shards); nothing to do",
                    f"train: already prepared ({manifests['train']['rows']} windows in "
                    f"{len(manifests['train']['shards'])} shards); nothing to do"]
    assert {p: os.stat(os.path.join(root, p)).st_mtime_ns for p in files(root)} == before
    assert not any(n.startswith(".") for n in os.listdir(root))  # no lock, no staging left


def test_changed_settings_are_refused_before_anything_is_written(runs, tmp_path):
    root = str(tmp_path / "changed")
    shutil.copytree(runs[1][0], root)
    before = files(root)
    with pytest.raises(OutputExistsError, match=r"dev already holds windows made otherwise: max_length: 2048 -> 1024"):
        prepare(inputs(), root, WindowSettings(max_length=1024), **SMALL_FILES)
    with pytest.raises(OutputExistsError, match="the input files' bytes differ"):
        prepare({"dev": [os.path.join(os.path.dirname(TINY_DEV), "small_gold_annotation.jsonl")]}, root,
                WindowSettings(), **SMALL_FILES)
    assert files(root) == before and sorted(os.listdir(root)) == ["dev", "train"]


def test_a_killed_runs_leftovers_are_cleaned_by_the_next_run(runs, tmp_path):
    """A run killed while publishing: staging left behind, dev's shards half moved and no manifest.
    The next run redoes dev from the start and ends with exactly the complete output."""
    root = tmp_path / "killed"
    shutil.copytree(runs[1][0], root)
    os.remove(root / "dev" / "_manifest.json")
    os.remove(root / "dev" / "part-00001-of-00003.parquet")
    (root / ".staging-tydiqa-0123456789abcdef" / "chunks").mkdir(parents=True)
    (root / ".staging-tydiqa-0123456789abcdef" / "chunks" / "x.parquet").write_bytes(b"partial")
    manifests = prepare(inputs(), str(root), WindowSettings(), **SMALL_FILES)
    assert manifests["train"]["up_to_date"] and not manifests["dev"]["up_to_date"]
    assert files(root) == files(runs[1][0])
    assert sorted(os.listdir(root)) == ["dev", "train"]


def test_bad_requests_are_refused_with_nothing_written(tmp_path):
    root = tmp_path / "none"
    with pytest.raises(FileNotFoundError, match="no such file"):
        prepare({"dev": [str(tmp_path / "missing.jsonl.gz")]}, str(root))
    with pytest.raises(ValueError, match="max_length"):
        prepare(inputs(), str(root), WindowSettings(max_length=100, max_question=256))
    with pytest.raises(ValueError, match="role"):
        prepare({"_x": [TINY_DEV]}, str(root))
    assert not root.exists()


def test_a_file_of_no_examples_publishes_an_empty_role(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    manifests = prepare({"test": [str(empty)]}, str(tmp_path / "out"))
    assert manifests["test"]["rows"] == 0 and manifests["test"]["shards"] == []
    assert json.loads((tmp_path / "out" / "test" / "_manifest.json").read_text())["counts"] == {}


def test_the_read_and_window_steps_alone(tmp_path):
    """Read's chunks (cut by bytes alone: the same on any rerun), then Window with TestPipeline:
    its counts, and row groups per shard that hold every window once."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from pipeline.downstream import job

    staging = str(tmp_path)
    chunks = list(job._ReadFn(staging, 40_000).process(("dev", 0, TINY_DEV)))
    assert chunks == list(job._ReadFn(staging, 40_000).process(("dev", 0, TINY_DEV))) and len(chunks) > 3
    assert sum(int(url.rsplit("-", 1)[1].split(".")[0]) for *_, url in chunks) == 11  # examples in the names
    expected, counts = Counter(), Counter()
    with gzip.open(TINY_DEV, "rb") as f:
        for line in f:
            for w in window_line(line, WindowSettings(), False, counts):
                expected[seeds.shard_index(str(w.example_id), 3)] += 1
    with TestPipeline() as p:
        out = (p | beam.Create(chunks)
               | beam.ParDo(job._WindowFn(staging, {"dev": [TINY_DEV]}, WindowSettings(), frozenset(), {"dev": 3}))
               .with_outputs("counts", main="refs"))
        counts = (out.counts | beam.CombinePerKey(job._sum)
                  | beam.MapTuple(lambda role, c: (role, c["examples", "read"], c["windows", "UNKNOWN"])))
        assert_that(counts, equal_to([("dev", 11, 186)]), label="Counts")
        rows = out.refs | beam.MapTuple(lambda key, ref: (key, ref.rows)) | "PerShard" >> beam.CombinePerKey(sum)
        assert_that(rows, equal_to([(("dev", s), n) for s, n in expected.items()]), label="Rows")
    assert sorted(expected) == [0, 1, 2] and sum(expected.values()) == 200
    written = [str(p) for p in (tmp_path / "windows" / "dev").glob("*" + spill.SUFFIX)]
    assert sum(t.num_rows for p in written for t in spill.read_whole(p)) == 200


def test_a_line_that_is_not_json_stops_the_run_naming_it(tmp_path):
    """In-process (1 worker) the InputError comes as itself; from worker processes as a RuntimeError
    holding it, which pipeline/run.py's _input_error_in unwraps (its own tests: 2 workers took 20 s
    here, the runner tearing its workers down)."""
    bad = tmp_path / "bad.jsonl"
    with gzip.open(TINY_DEV, "rt", encoding="utf-8") as f:
        bad.write_text(f.readline() + "{not json\n", encoding="utf-8")
    from pipeline.sources import InputError

    with pytest.raises(InputError, match=rf"^{bad}:2: not JSON"):
        prepare({"dev": [str(bad)]}, str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path / "out")) == []  # no staging, no lock, no role
