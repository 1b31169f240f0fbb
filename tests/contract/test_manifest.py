"""The manifest's record (contract/manifest.py): round trip, the exact bytes, errors naming file and field."""

import dataclasses
import json

import pytest

from contract import schema
from contract.manifest import (FileRef, Language, Manifest, ManifestError, Shard, Split, config_sha256, read_manifest,
                               write_manifest)
from pipeline.output import output
from pipeline.preprocess_config import PreprocessConfig


def small_manifest() -> Manifest:
    config = PreprocessConfig(inputs=("/dumps/dewiki-Überblick.xml",), seq_len=512).fingerprint()
    shard = Shard("train/part-00000-of-00001.parquet", rows=3, codepoints=1200, sha256="a" * 64)
    empty = Split(rows=0, codepoints=0, shards=())
    de = Language(pages_read=5, redirects=1, non_article=0, parse_errors=1, empty=0, kept=3, examples=3,
                  sampling_weight=1.0, replaced_characters=2, dropped=dict.fromkeys(schema.CONSTRUCT_DROPS, 0))
    return Manifest(schema_version=schema.SCHEMA_VERSION, config=config, config_sha256=config_sha256(config),
                    splits={"train": Split(3, 1200, (shard,)), "validation": empty}, languages={"de": de},
                    tokenizer=FileRef(schema.TOKENIZER, "b" * 64), rejects=(f"{schema.REJECTS}/de.jsonl",))


def test_round_trip_keeps_the_record_and_the_bytes(tmp_path):
    m = small_manifest()
    write_manifest(str(tmp_path), m)
    data = (tmp_path / schema.MANIFEST).read_bytes()
    # The pipeline's format, which shards published before this record existed also have.
    assert data == json.dumps(m.to_dict(), indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")
    assert "Überblick".encode() in data
    back = read_manifest(str(tmp_path))
    assert back == m and back.to_json() == data
    assert back.seq_len == 512 and back.splits["train"].shards[0].rows == 3 and back.languages["de"].kept == 3
    assert not back.languages["de"].accounting_error()
    assert dataclasses.replace(back.languages["de"], kept=2).accounting_error() == (
        "pages_read 5 != redirects + non_article + disambiguation + parse_errors + empty + kept = 4")


def test_language_fields_are_the_contracts_keys():
    # disambiguation has a default (outputs made before it read as 0), so it comes after the
    # fields without one: the same names, not the same order.
    assert {f.name for f in dataclasses.fields(Language)} == {*schema.LANGUAGE_KEYS, "dropped", "text", "masks"}


def test_a_manifest_made_before_the_disambiguation_outcome_reads_it_as_zero(tmp_path):
    """Outputs made before it counted disambiguation pages as kept: their identity still holds."""
    raw = small_manifest().to_dict()
    del raw["languages"]["de"]["disambiguation"]
    (tmp_path / schema.MANIFEST).write_text(json.dumps(raw), encoding="utf-8")
    de = read_manifest(str(tmp_path)).languages["de"]
    assert de.disambiguation == 0 and not de.accounting_error()


def test_config_sha256_is_the_pipeline_configs_own():
    cfg = PreprocessConfig(inputs=("a.xml",), seed=3)
    assert config_sha256(cfg.fingerprint()) == cfg.sha256()


def _broken(edit):
    raw = small_manifest().to_dict()
    edit(raw)
    return raw


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(schema_version=1), "schema_version 1, this version reads 2"),
    (lambda m: m.pop("config_sha256"), "config_sha256 is missing"),
    (lambda m: m["splits"]["train"]["shards"][0].pop("rows"), r"splits\.train\.shards\[0\]\.rows is missing"),
    (lambda m: m["splits"]["train"]["shards"][0].update(rows="3"), r"splits\.train\.shards\[0\]\.rows: '3' is not a"),
    (lambda m: m["splits"]["train"].update(codepoints=-1), r"splits\.train\.codepoints: -1 is not a non-negative"),
    (lambda m: m["splits"].pop("validation"), r"splits\.validation\.shards is missing"),
    (lambda m: m["splits"].update(test={}), r"splits\.test: not a field of schema 2"),
    (lambda m: m["languages"]["de"].update(kept=True), r"languages\.de\.kept: True is not a"),
    (lambda m: m["languages"]["de"]["dropped"].update(tables=None), r"languages\.de\.dropped\.tables: None"),
    (lambda m: m["tokenizer"].pop("sha256"), r"tokenizer\.sha256 is missing"),
    (lambda m: m.update(rejects=[1]), "rejects: not a list of paths"),
    (lambda m: m.update(run={}), "run: not a field of schema 2"),
])
def test_a_broken_manifest_names_the_file_and_the_field(tmp_path, edit, message):
    (tmp_path / schema.MANIFEST).write_text(json.dumps(_broken(edit)))
    with pytest.raises(ManifestError, match=message) as info:
        read_manifest(str(tmp_path))
    assert str(info.value).startswith(f"{tmp_path}/{schema.MANIFEST}: ")


def test_missing_and_unreadable_manifests(tmp_path):
    with pytest.raises(FileNotFoundError, match="no manifest"):
        read_manifest(str(tmp_path))
    assert output.published_manifest(str(tmp_path)) is None  # the pipeline: nothing published yet
    (tmp_path / schema.MANIFEST).write_text("{")
    with pytest.raises(ManifestError, match="not valid JSON"):
        read_manifest(str(tmp_path))
    legacy = tmp_path / "old"
    legacy.mkdir()
    (legacy / schema.LEGACY_MANIFEST).write_text("{}")
    with pytest.raises(output.OutputExistsError, match="schema 1"):
        output.published_manifest(str(legacy))


def test_run_result_reads_as_the_printed_json():
    stats = output.RunStats(elapsed_s=1.5, work_items=7, items_parsed=6, items_reused=1)
    result = output.RunResult(small_manifest(), run=stats)
    d = result.to_dict()
    assert d["run"] == {"elapsed_s": 1.5, "work_items": 7, "items_parsed": 6, "items_reused": 1}
    assert "up_to_date" not in d and output.RunResult(small_manifest(), up_to_date=True).to_dict()["up_to_date"]
    assert result.manifest.splits["train"].rows == 3 and result.up_to_date is False


def test_a_language_reads_its_text_and_mask_statistics_and_an_older_output_without_them(tmp_path):
    m = small_manifest()
    text = {"variant_pages": 1, "variant_constructs": 3, "end_matter_dropped": [["参考书目", 2]],
            "last_headings_kept": [["生平", 4]]}
    masks = {"examples": 9, "masked_share_p10_pct": 13.2, "masked_share_median_pct": 15.0, "spans": 80,
             "span_median": 6, "span_p90": 8, "span_max": 8}
    with_stats = dataclasses.replace(m, languages={"de": dataclasses.replace(m.languages["de"], text=text, masks=masks)})
    write_manifest(str(tmp_path), with_stats)
    assert read_manifest(str(tmp_path)).languages["de"].text["end_matter_dropped"] == [["参考书目", 2]]
    raw = json.loads(with_stats.to_json())
    del raw["languages"]["de"]["text"], raw["languages"]["de"]["masks"]  # written before they existed
    older = Manifest.from_dict(raw)
    assert older.languages["de"].text == {} and older.languages["de"].masks == {}
    raw["languages"]["de"]["masks"] = [1, 2]
    with pytest.raises(ManifestError, match=r"languages.de.masks: \[1, 2\] is not an object"):
        Manifest.from_dict(raw)
