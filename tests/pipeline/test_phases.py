"""Every step of the job says where its time went when CANINE_PREPROCESS_PHASES asks
(pipeline/beam/phases.py; benchmarks/phases.py reads it), and nothing when it does not."""

import glob

from pipeline.beam import phases
from pipeline.preprocess_config import PreprocessConfig
from pipeline.run import preprocess

SAMPLE = sorted(glob.glob("pipeline/sample/*.xml"))[:2]


def test_every_phase_records_its_units(tmp_path, monkeypatch):
    marks = tmp_path / "phases"
    marks.mkdir()
    monkeypatch.setenv(phases.ENV, str(marks))
    preprocess(PreprocessConfig(inputs=tuple(SAMPLE), output=str(tmp_path / "out"), seq_len=256, vocab_size=200),
               progress=False)
    units = phases.read(str(marks))
    assert {u["phase"] for u in units} == set(phases.PHASES)
    for u in units:
        assert u["end"] >= u["start"] and u["cpu"] >= 0 and u["process_cpu"] >= 0
    assert sum(u["phase"] == "read+clean" for u in units) == len(SAMPLE)  # a unit a work item


def test_unset_it_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(phases.ENV, raising=False)
    with phases.timed("packing"):
        pass
    assert phases.read(str(tmp_path)) == []
