"""The whole preprocessing job on the bundled sample: real DirectRunner, real Parquet, real files."""

import bz2
import json
import os
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pytest

from contract import schema
from pipeline import sources
from pipeline.output import output
from pipeline.beam import phases, split
from pipeline.preprocess_config import PreprocessConfig
from pipeline.run import _input_error_in, run_job
from pipeline.rows.shards import read_table
from pipeline.output.validate import check_row, validate

SAMPLE = Path(__file__).resolve().parents[2] / "pipeline" / "sample"
SAMPLE_GLOB = str(SAMPLE / "*.xml")

pytestmark = pytest.mark.slow


def small_config(out, **kw):
    # Short sequences and a small vocabulary keep the suite fast; several shards per split
    # exercise the hash assignment.
    base = dict(inputs=(SAMPLE_GLOB,), output=str(out), seq_len=512, vocab_size=800, validation_fraction=0.05,
                shard_codepoints=40_000, seed=3)
    return PreprocessConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("shards") / "out"
    return out, run_job(small_config(out), workers=1).manifest


def shard_hashes(manifest):
    return {s.path: s.sha256 for split in manifest.splits.values() for s in split.shards}


def test_sample_output_obeys_the_contract(sample_run):
    out, manifest = sample_run
    problems, count, summary = validate(str(out))
    assert count == 0, problems
    assert summary["examples"] == sum(s.rows for s in manifest.splits.values()) > 0
    assert summary["validation_pages"] == dict.fromkeys(manifest.languages, 1)  # checked against the rule too
    assert len(manifest.splits["train"].shards) >= 2
    assert manifest.splits["validation"].rows > 0
    assert not any(name.startswith(".staging") for name in os.listdir(out))


def test_every_sample_language_holds_out_its_share_of_pages(sample_run):
    """The split is drawn per language, so each of the sample's languages (27 or 28
    kept pages, its disambiguation page apart: 5% is 1.4, one page) has validation pages; a global page-hash split gave en and
    hi two each and the five others none, and `canine evaluate` could score only those two."""
    out, manifest = sample_run
    held = {}
    for shard in manifest.splits["validation"].shards:
        table = read_table(str(out / shard.path), columns=["lang", "page_ids"])
        for lang, page_ids in zip(table.column("lang").to_pylist(), table.column("page_ids").to_pylist()):
            held.setdefault(lang, set()).update(page_ids)
    assert {lang: len(pages) for lang, pages in held.items()} == dict.fromkeys(manifest.languages, 1)
    assert all(split.validation_pages(c.kept, 0.05) == 1 for c in manifest.languages.values())
    assert sorted(held) == ["ar", "de", "en", "hi", "ko", "ru", "zh"]


def manifest_rows(manifest):
    return {name: split.rows for name, split in manifest.splits.items()}


def test_output_root_reads_as_exactly_the_manifests_rows(sample_run):
    """Dataset readers pointed at the root see the shards and nothing else: no cache, no temp
    file, no side file that is not Parquet."""
    import pyarrow.dataset as ds

    out, manifest = sample_run
    total = sum(manifest_rows(manifest).values())
    table = ds.dataset(str(out), format="parquet").to_table(columns=["example_id"])
    assert table.num_rows == total
    assert len(set(table.column("example_id").to_pylist())) == total
    assert sorted(os.listdir(out)) == sorted([schema.MANIFEST, schema.REJECTS, schema.TOKENIZER, *schema.SPLITS])


def test_pandas_reads_exactly_the_manifests_rows(sample_run):
    import pandas as pd

    out, manifest = sample_run
    frame = pd.read_parquet(out, columns=["example_id", "lang"])
    assert len(frame) == sum(manifest_rows(manifest).values()) == frame["example_id"].nunique()


def test_hf_datasets_reads_exactly_the_manifests_rows(sample_run, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets

    out, manifest = sample_run
    loaded = datasets.load_dataset("parquet", data_dir=str(out), cache_dir=str(tmp_path / "hf-cache"))
    assert {split: loaded[split].num_rows for split in loaded} == manifest_rows(manifest)


def test_validate_fails_on_files_the_manifest_does_not_list(sample_run, tmp_path):
    out, manifest = sample_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shard = manifest.splits["train"].shards[0].path
    shutil.copy(copy / shard, copy / "train" / "part-99999-of-99999.parquet")
    (copy / "items").mkdir()
    (copy / "items" / "0123.parquet").write_bytes(b"x")
    (copy / ".staging-0123456789abcdef" / "items").mkdir(parents=True)
    (copy / ".staging-0123456789abcdef" / "items" / "a.parquet").write_bytes(b"x")
    problems, count, _ = validate(str(copy))
    assert count == 3, problems
    assert any(p.startswith("train/part-99999-of-99999.parquet: not accounted for") for p in problems)
    assert any(p.startswith("items/0123.parquet: not accounted for") for p in problems)
    assert any(p.startswith(".staging-0123456789abcdef: staging of an unfinished run (1 files)") for p in problems)


def test_accounting_identity_and_drop_reasons(sample_run):
    out, manifest = sample_run
    langs = manifest.languages
    for lang, c in langs.items():
        assert c.pages_read == sum(getattr(c, k) for k in schema.PAGE_OUTCOMES) and not c.accounting_error(), lang
    total = {k: sum(getattr(c, k) for c in langs.values()) for k in schema.LANGUAGE_KEYS}
    assert total["redirects"] > 0 and total["non_article"] > 0 and total["parse_errors"] > 0
    # each language's disambiguation page, counted and not kept; like redirects, not in the rejects files
    assert {lang: c.disambiguation for lang, c in langs.items()} == dict.fromkeys(langs, 1)
    assert total["replaced_characters"] >= 1  # the sample's U+E003 was escaped
    # what cleaning dropped from kept pages, per reason: every sample language has infoboxes, tables
    # and See also / External links sections in its own words
    for lang, c in langs.items():
        assert set(c.dropped) == set(schema.CONSTRUCT_DROPS), lang
        assert min(c.dropped[r] for r in ("tables", "images", "references", "end_matter")) > 0, (lang, c.dropped)
    rejects = [json.loads(l) for f in manifest.rejects for l in (out / f).read_text().splitlines()]
    assert len([r for r in rejects if r["outcome"] == "parse_errors"]) == total["parse_errors"]
    assert all(r["reason"] for r in rejects)


def test_text_round_trips_through_codepoints(sample_run):
    out, manifest = sample_run
    table = read_table(str(out / manifest.splits["train"].shards[0].path))
    row = table.slice(0, 1).to_pylist()[0]
    cps = np.array(row["codepoints"])
    text = "".join(map(chr, cps[1:-1]))
    assert schema.MASK not in cps and "[[" not in text and "{{" not in text
    assert np.array_equal(np.array([ord(c) for c in text]), cps[1:-1])


def test_two_workers_give_byte_identical_shards(sample_run, tmp_path, monkeypatch):
    out, manifest = sample_run
    marks = tmp_path / "phases"
    marks.mkdir()
    monkeypatch.setenv(phases.ENV, str(marks))  # each worker process records the units it ran
    other = run_job(small_config(tmp_path / "two"), workers=2).manifest
    assert shard_hashes(other) == shard_hashes(manifest)
    assert other.languages == manifest.languages
    assert other.tokenizer.sha256 == manifest.tokenizer.sha256
    assert (tmp_path / "two" / schema.MANIFEST).read_bytes() == (out / schema.MANIFEST).read_bytes()
    # the vocabulary trained in one worker while the other sampled pack groups (job.deal), not
    # alone in a stage of its own; its worker sampled its share after it
    units = phases.read(str(marks))
    [training] = [u for u in units if u["phase"] == "tokenizer"]
    beside = [u for u in units if u["phase"] == "sampling" and u["pid"] != training["pid"]]
    after = [u for u in units if u["phase"] == "sampling" and u["pid"] == training["pid"]]
    assert beside and min(u["start"] for u in beside) < training["end"]
    assert all(u["start"] >= training["end"] for u in after)


def test_rerun_is_a_no_op_and_another_config_is_refused(sample_run):
    out, manifest = sample_run
    before = (out / schema.MANIFEST).stat().st_mtime_ns
    again = run_job(small_config(out), workers=1)
    assert again.up_to_date and again.manifest == manifest and (out / schema.MANIFEST).stat().st_mtime_ns == before
    with pytest.raises(output.OutputExistsError, match="different config"):
        run_job(small_config(out, seed=4), workers=1)
    assert (out / schema.MANIFEST).stat().st_mtime_ns == before


def test_missing_input_fails_before_any_work(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(sources.InputError, match="nothing-here"):
        run_job(small_config(out, inputs=(str(tmp_path / "nothing-here*.xml"),)))
    assert not out.exists()


def test_truncated_bz2_fails_naming_the_file_and_leaves_no_manifest(tmp_path):
    data = bz2.compress((SAMPLE / "enwiki-20261101-pages-articles.xml").read_bytes())
    bad = tmp_path / "enwiki-20261101-pages-articles.xml.bz2"
    bad.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    with pytest.raises(Exception, match="enwiki-20261101-pages-articles.xml.bz2"):
        run_job(small_config(out, inputs=(str(bad),)))
    assert not (out / schema.MANIFEST).exists()


def test_memory_filesystem_urls(tmp_path):
    src = SAMPLE / "enwiki-20261101-pages-articles.xml"
    with fsspec.open("memory://in/enwiki-20261101-pages-articles.xml", "wb") as f:
        f.write(src.read_bytes())
    manifest = run_job(small_config("memory://out", inputs=("memory://in/*.xml",)), workers=1).manifest
    assert manifest.splits["train"].rows > 0
    assert validate("memory://out")[1] == 0


def test_validator_rejects_partial_span_masks_and_bad_replacements(sample_run):
    out, manifest = sample_run
    table = read_table(str(out / manifest.splits["train"].shards[0].path))
    row = table.slice(0, 1).to_pylist()[0]

    def problems(r):
        from pipeline.output.validate import Problems

        p = Problems()
        check_row(r, 512, None, "x", p)
        return p.items

    assert problems(row) == []
    assert row["char_mask_positions"]
    cps = np.array(row["codepoints"])
    # a mask that covers only the first character of a multi-character span
    from pipeline.rows.masks import whitespace_spans

    starts, ends = whitespace_spans(cps)
    longest = int(np.argmax(ends - starts))
    bad = dict(row, char_mask_positions=[int(starts[longest])])
    assert any("whole spans" in p for p in problems(bad))
    bad = dict(row, codepoints=[schema.CLS, schema.MASK, schema.SEP], segment_ids=[0, 0, 0],
               char_mask_positions=[], subword_starts=[], subword_lengths=[], subword_ids=[],
               subword_predict_offsets=[], subword_actions=[], subword_replacements=[])
    assert any("special" in p for p in problems(bad))
    if row["subword_starts"]:
        bad = dict(row, subword_replacements=list(row["subword_replacements"]) + [65])
        assert any("subword_replacements" in p for p in problems(bad))


def test_validator_reports_a_tampered_shard(sample_run, tmp_path):
    out, manifest = sample_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shard = copy / manifest.splits["train"].shards[0].path
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    problems, count, _ = validate(str(copy))
    assert count >= 1 and any("sha256" in p or "Parquet" in p or "parquet" in p.lower() for p in problems)


def test_multistream_dump_is_split_and_reads_the_same_pages(tmp_path, make_multistream):
    xml = SAMPLE / "ruwiki-20261101-pages-articles.xml"
    dump, index = make_multistream(xml, tmp_path / "in", pages_per_stream=4)
    items = sources.plan_work_items([str(dump)], streams_per_item=2)
    assert len(items) > 3  # one work item per range of streams, not one per file
    whole = run_job(small_config(tmp_path / "whole", inputs=(str(xml),)), workers=1)
    split = run_job(small_config(tmp_path / "split", inputs=(str(dump),), streams_per_item=2), workers=2)
    assert split.run.work_items == len(items)
    assert split.manifest.languages == whole.manifest.languages
    assert validate(str(tmp_path / "split"))[1] == 0
    # the same pages, the same examples: only the container differs
    assert shard_hashes(split.manifest) == shard_hashes(whole.manifest)


def test_languages_are_mixed_inside_a_shard(sample_run):
    out, manifest = sample_run
    table = read_table(str(out / manifest.splits["train"].shards[0].path), columns=["lang"])
    langs = table.column("lang").to_pylist()
    first_64 = set(langs[:64])
    assert len(first_64) >= 4, first_64  # readers take contiguous ranges: each must mix languages


def test_a_worker_input_error_reaches_the_user_as_input_error():
    """Multi-process DirectRunner wraps a worker's exception in a RuntimeError holding its
    traceback; run_job unwraps it to the InputError's own message (file and position)."""
    wrapped = RuntimeError("Traceback (most recent call last):\n  File \"x.py\", line 5, in boom\n"
                           "pipeline.sources.InputError: /d/x.xml.bz2: truncated at byte 99 [while running 'ParseAndClean']\n")
    assert str(_input_error_in(wrapped)) == "/d/x.xml.bz2: truncated at byte 99"
    assert _input_error_in(RuntimeError("MemoryError")) is None
    in_process = sources.InputError("/d/x.gz: truncated gzip data [while running 'ReadAndClean/ParseAndClean']")
    assert str(_input_error_in(in_process)) == "/d/x.gz: truncated gzip data"
