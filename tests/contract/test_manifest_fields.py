"""The manifest's typed fields that both sides read: seq_len (kept as the config's key, where it always
was) and what the training side's one Dataset carries of it (training/train/data.py open_dataset)."""

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contract import schema
from contract.manifest import (CONFIG_SEQ_LEN, FileRef, Language, Manifest, ManifestError, Split, config_sha256,
                               read_manifest)
from pipeline.preprocess_config import PreprocessConfig
from training.train import data

SAMPLE_EN = Path(__file__).resolve().parents[2] / "pipeline" / "sample" / "enwiki-20261101-pages-articles.xml"


def small_manifest() -> Manifest:
    config = PreprocessConfig(inputs=("/dumps/dewiki.xml",), seq_len=512).fingerprint()
    de = Language(pages_read=5, redirects=1, non_article=0, parse_errors=1, empty=0, kept=3, examples=3,
                  sampling_weight=1.0, replaced_characters=2, dropped=dict.fromkeys(schema.CONSTRUCT_DROPS, 0))
    empty = Split(rows=0, codepoints=0, shards=())
    return Manifest(schema_version=schema.SCHEMA_VERSION, config=config, config_sha256=config_sha256(config),
                    splits={"train": empty, "validation": empty}, languages={"de": de},
                    tokenizer=FileRef(schema.TOKENIZER, "b" * 64), rejects=())


def test_the_contract_names_the_config_key_the_pipeline_writes_seq_len_under():
    # Renaming PreprocessConfig.seq_len would move the number out of the key the trainer reads.
    assert CONFIG_SEQ_LEN == "seq_len"
    assert PreprocessConfig(inputs=("a.xml",), seq_len=777).fingerprint()[CONFIG_SEQ_LEN] == 777
    (field,) = [f for f in dataclasses.fields(Manifest) if f.name == "seq_len"]
    assert field.type == int | None  # None only until __post_init__ reads the config


def test_seq_len_is_written_as_the_configs_key_and_the_bytes_are_what_they_were():
    m = small_manifest()
    assert m.seq_len == 512
    raw = json.loads(m.to_json())
    # The keys a schema 2 manifest of a whole run has always had: no seq_len of its own.
    assert set(raw) == {"schema_version", "config", "config_sha256", "splits", "languages", "tokenizer", "rejects"}
    assert raw["config"][CONFIG_SEQ_LEN] == 512
    assert Manifest.from_dict(raw).seq_len == 512 and Manifest.from_dict(raw) == m


def test_a_writer_gives_the_configs_seq_len_or_none():
    m = small_manifest()
    assert dataclasses.replace(m, seq_len=512) == m  # the pipeline's writer gives it (pipeline/output/output.py finalize)
    with pytest.raises(ValueError, match=r"seq_len 1024, but config\['seq_len'\] is 512"):
        dataclasses.replace(m, seq_len=1024)
    no_key = {k: v for k, v in m.config.items() if k != CONFIG_SEQ_LEN}
    assert dataclasses.replace(m, config=no_key, seq_len=None).seq_len == 0  # "the config does not say"
    with pytest.raises(ValueError, match="is not a non-negative integer"):
        dataclasses.replace(m, config={**m.config, CONFIG_SEQ_LEN: "512"}, seq_len=None)


def test_an_older_manifest_reads_and_a_bad_seq_len_names_the_field():
    raw = json.loads(small_manifest().to_json())
    del raw["config"][CONFIG_SEQ_LEN]  # a config without it (the synthetic fixtures' kind of manifest)
    assert Manifest.from_dict(raw).seq_len == 0
    for bad in ("512", -1, True, None):
        raw["config"][CONFIG_SEQ_LEN] = bad
        with pytest.raises(ManifestError, match=rf"^{schema.MANIFEST}: config\.seq_len: .* is not a non-negative"):
            Manifest.from_dict(raw)


def canine(*args, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_what_the_pipeline_writes_the_trainer_and_report_read_from_one_dataset(tmp_path):
    """`canine preprocess --seq-len 128 --max-pages 12` run from another working directory into a
    relative output: the manifest keeps seq_len in its config, and the training side's Dataset
    carries seq_len, the languages, the manifest's sha256 and the trial slice; `canine report`
    of a run on it, by a relative and an absolute data path, prints them."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "en.xml").write_bytes(SAMPLE_EN.read_bytes())
    proc = canine("preprocess", "en.xml", "--output", "out", "--seq-len", 128, "--vocab-size", 600,
                  "--max-pages", 12, cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = work / "out"
    raw = json.loads((out / schema.MANIFEST).read_bytes())
    assert raw["config"][CONFIG_SEQ_LEN] == 128 and "seq_len" not in raw
    assert read_manifest(str(out)).seq_len == 128
    assert canine("inspect", "out", cwd=work).stdout.splitlines()[0].endswith("seq_len 128")

    ds = data.open_dataset(str(out))
    m = read_manifest(str(out))
    assert ds.seq_len == 128
    assert ds.manifest_sha256 == hashlib.sha256((out / schema.MANIFEST).read_bytes()).hexdigest()
    assert ds.languages == {"en": m.languages["en"].examples} and ds.languages["en"] > 0
    assert ds.trial_slice == m.trial_slice
    assert ds.trial_slice == "the first 12 pages of each input file (--max-pages 12); not the whole dump"
    assert ds.split_rows() == {name: split.rows for name, split in m.splits.items()}

    for data_path, cwd in (("out", work), (str(out), tmp_path)):
        run = tmp_path / f"run-{cwd.name}"
        run.mkdir()
        (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 5.0, "accuracy": 0.1}) + "\n")
        (run / "config.yaml").write_text(yaml.safe_dump({"train": {"objective": "char"}, "data": {"path": data_path}}))
        rel = os.path.relpath(run, cwd)
        report = canine("report", rel, cwd=cwd)
        assert report.returncode == 0, report.stderr
        lines = report.stdout.splitlines()
        assert f"data           {data_path}: train {ds.split_rows()['train']}" in lines[1]
        assert lines[1].endswith("examples, 1 languages (en)")
        assert lines[2] == f"trial slice    {ds.trial_slice}"
    summary = json.loads(canine("report", rel, "--json", cwd=cwd).stdout)
    assert summary["trial_slice"] == ds.trial_slice and summary["languages"] == ["en"]


def test_a_whole_runs_report_has_no_trial_slice(tmp_path, contract_shards):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 5.0, "accuracy": 0.1}) + "\n")
    (run / "config.yaml").write_text(yaml.safe_dump({"train": {"objective": "char"},
                                                     "data": {"path": contract_shards}}))
    proc = canine("report", "run", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert "trial_slice" not in summary and summary["examples"] == data.open_dataset(contract_shards).split_rows()
    ds = data.open_dataset(contract_shards)
    assert ds.trial_slice is None and ds.seq_len == 256 and all(n > 0 for n in ds.languages.values())
