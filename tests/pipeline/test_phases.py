"""Every step of the job says where its time went when CANINE_PREPROCESS_PHASES asks
(pipeline/beam/phases.py; benchmarks/phases.py reads it), and nothing when it does not."""

import glob

import pyarrow.parquet as pq
import pytest

from pipeline.beam import phases
from pipeline.preprocess_config import PreprocessConfig
from pipeline.run import preprocess

SAMPLE = sorted(glob.glob("pipeline/sample/*.xml"))[:2]


def test_every_phase_records_its_units_and_each_shard_its_rows_as_it_goes(tmp_path, monkeypatch):
    marks = tmp_path / "phases"
    marks.mkdir()
    monkeypatch.setenv(phases.ENV, str(marks))
    said = {}  # shard -> [(rows done, of)] as its worker reported them (1 worker: the job runs in this process)
    monkeypatch.setitem(phases.REPORT_EVERY_S, True, 0.0)
    write = phases.Reporter.__call__
    monkeypatch.setattr(phases.Reporter, "__call__", lambda self, done, of: (
        said.setdefault(self.url.rsplit("/", 1)[-1], []).append((done, of)), write(self, done, of)))
    totals, total = {}, phases.total
    monkeypatch.setattr(phases, "total", lambda staging, step, n, sizes=None: (
        totals.__setitem__(step, (n, sizes)), total(staging, step, n, sizes))[1])
    out = tmp_path / "out"
    # 64-codepoint rows, 100k codepoints a shard: 3 shards, the training ones of 2 row groups (1024 rows each)
    preprocess(PreprocessConfig(inputs=tuple(SAMPLE), output=str(out), seq_len=64, vocab_size=200,
                                shard_codepoints=100_000), progress=False)
    units = phases.read(str(marks))
    assert {u["phase"] for u in units} == set(phases.PHASES)
    for u in units:
        assert u["end"] >= u["start"] and u["cpu"] >= 0 and u["process_cpu"] >= 0
    assert sum(u["phase"] == "read+clean" for u in units) == len(SAMPLE)  # a unit a work item
    written = {f"{p.parent.name}-{p.name}": pq.ParquetFile(p).metadata for p in out.glob("*/part-*.parquet")}
    assert said.keys() == written.keys() and max(m.num_row_groups for m in written.values()) > 1
    n, shares = totals["shards"]  # and the shards' weights for the launcher's ETA: every shard's share
    assert n == len(written) and shares.keys() == written.keys() and sum(shares.values()) == pytest.approx(1)
    small = shares["validation-part-00000-of-00001.parquet"]  # the validation shard: 121 rows against ~1100
    assert all(small < share / 4 for name, share in shares.items() if name.startswith("train-"))
    for name, meta in written.items():  # from 0 to every row, a row group at a time
        assert said[name] == [(0, meta.num_rows)] + [
            (sum(meta.row_group(j).num_rows for j in range(i + 1)), meta.num_rows) for i in range(meta.num_row_groups)]


def test_unset_it_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(phases.ENV, raising=False)
    with phases.timed("packing"):
        pass
    assert phases.read(str(tmp_path)) == []
