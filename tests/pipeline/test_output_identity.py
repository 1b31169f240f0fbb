"""pipeline/output/output.py: inputs identified by content (data_identity, describe_change), the note
of languages without validation pages, and the keys' coder the job's grouping steps use."""

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipeline.output import output
from pipeline.beam import elements, spill

A = ["/data/a.xml", 10, "sha256:aa"]
B = ["/data/b.xml", 20, "sha256:bb"]


def fingerprint(*files, **fields):
    return {"inputs": [f[0] for f in files], "input_fingerprints": [list(f) for f in files], "seq_len": 512,
            "tokenizer": None, **fields}


def test_the_same_bytes_under_other_names_are_the_same_data():
    moved = [["/elsewhere/copy-of-b.xml", *B[1:]], ["rel/../data/a.xml", *A[1:]]]
    assert output.data_identity(fingerprint(A, B)) == output.data_identity(fingerprint(*moved))
    assert output.describe_change(fingerprint(A, B), fingerprint(*moved)) == "the config hashes differ"


def test_changed_bytes_and_settings_are_named():
    grown = ["/data/a.xml", 11, "sha256:a2"]
    edited = ["/data/a.xml", 10, "sha256:a3"]
    assert output.data_identity(fingerprint(A)) != output.data_identity(fingerprint(grown))
    assert output.describe_change(fingerprint(A), fingerprint(grown)) == "input /data/a.xml changed size (10 -> 11 bytes)"
    assert output.describe_change(fingerprint(A), fingerprint(edited)) == (
        "input /data/a.xml changed content (sha256:aa -> sha256:a3)")
    other = ["/data/c.xml", *B[1:]]  # B's bytes under another name: no change; A is gone
    assert output.describe_change(fingerprint(A, B), fingerprint(other)) == "input /data/a.xml is no longer given"
    assert output.describe_change(fingerprint(A), fingerprint(A, seq_len=1024)) == "seq_len: 512 -> 1024"


def test_a_given_tokenizer_counts_by_its_text():
    old, new = fingerprint(A, tokenizer="/t/tok.json"), fingerprint(A, tokenizer="/u/copy.json")
    assert output.data_identity(old, "s1") == output.data_identity(new, "s1")
    assert output.data_identity(old, "s1") != output.data_identity(new, "s2")
    assert output.data_identity(old, "s1") != output.data_identity(fingerprint(A))  # trained vs given
    assert output.describe_change(old, new, tokenizer_changed=True) == "tokenizer /u/copy.json changed content"
    assert output.describe_change(fingerprint(A), new) == "tokenizer: None -> '/u/copy.json'"


def test_languages_without_validation_pages(tmp_path):
    from contract.manifest import Language
    from contract import schema

    def lang(kept):
        return Language(**({k: 0 for k in schema.LANGUAGE_KEYS} | {"pages_read": kept, "kept": kept, "sampling_weight": 1.0,
                                                                  "dropped": dict.fromkeys(schema.CONSTRUCT_DROPS, 0)}))

    languages = {"en": lang(40), "sw": lang(10), "xx": lang(0)}
    records = [["validation_pages", "en", 1]]
    assert output.without_validation(records, languages, 0.005) == {"sw": 10}
    assert output.without_validation(records, languages, 0.0) == {}  # no split asked for


def test_key_coder_is_deterministic_and_decodes_the_named_tuple():
    for key in (elements.SplitLang("train", "en"), elements.PackGroup("validation", "zh-min-nan", 3),
                elements.ShardKey("train", 2, 7), spill.Ref("/staging/pages/ab.parquet", 3, 120)):
        coder = beam.coders.registry.get_coder(type(key))
        assert isinstance(coder, elements.KeyCoder) and coder.is_deterministic()
        assert coder.as_deterministic_coder("step") is coder
        decoded = coder.decode(coder.encode(key))
        assert decoded == key and type(decoded) is type(key)
    with pytest.raises(TypeError, match="not str or int"):
        elements.KeyCoder(elements.MaskHistograms)  # histograms: dicts
    with TestPipeline() as p:
        sizes = (p | beam.Create([("train", "en", 3), ("train", "en", 4), ("validation", "en", 1)])
                 | beam.Map(lambda t: (elements.SplitLang(t[0], t[1]), t[2])).with_output_types(
                     tuple[elements.SplitLang, int])
                 | beam.CombinePerKey(sum)
                 | beam.MapTuple(lambda k, n: (type(k).__name__, k.split, n)))
        assert_that(sizes, equal_to([("SplitLang", "train", 7), ("SplitLang", "validation", 1)]))
