"""Preprocessing to object stores through real protocol servers on 127.0.0.1 (docs/cluster.md, "Object storage")."""

import json

import pytest

from contract import schema
from jobs import cli
from pipeline.output.validate import validate

SAMPLE_XML = __import__("pathlib").Path(__file__).resolve().parents[2] / "pipeline" / "sample" / "kowiki-20261101-pages-articles.xml"
FAST = ["--seq-len", "512", "--vocab-size", "600", "--validation-fraction", "0.3"]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("store", ["s3_store", "gcs_store"])
def test_preprocess_inspect_validate_on_a_store(store, request, capsys):
    store = request.getfixturevalue(store)
    out = store.url("shards")
    assert cli.main(["preprocess", str(SAMPLE_XML), "--output", out, *FAST, "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    fs = store.fs()
    root = out.split("://", 1)[1]
    names = sorted(n.rsplit("/", 1)[-1] for n in fs.ls(root, detail=False))
    assert names == sorted([schema.MANIFEST, schema.REJECTS, schema.TOKENIZER, *schema.SPLITS])
    assert validate(out)[1] == 0
    assert cli.main(["inspect", out, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config_sha256"] == manifest["config_sha256"]
    assert cli.main(["validate", out]) == 0
    assert cli.main(["preprocess", str(SAMPLE_XML), "--output", out, *FAST]) == 0  # rerun: a no-op
    assert "nothing to do" in capsys.readouterr().out
