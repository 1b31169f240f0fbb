"""pipeline/contract.py: the shard schema, the special codepoints, credentials masked; importable without Beam."""

import subprocess
import sys

from pipeline import contract


def test_schema_columns_match_contract_v2():
    assert contract.COLUMNS[:4] == ("example_id", "lang", "page_ids", "codepoints")
    assert set(contract.COLUMNS) >= {
        "segment_ids", "sop_label", "char_mask_positions", "subword_starts", "subword_lengths",
        "subword_ids", "subword_predict_offsets", "subword_actions", "subword_replacements",
    }
    assert contract.SCHEMA.metadata[b"canine.schema_version"] == b"2"


def test_aliasing_rule_covers_pad_and_private_specials():
    assert contract.is_aliased(0) and contract.is_aliased(contract.MASK) and contract.is_aliased(0xE0FF)
    assert not contract.is_aliased(0xE100) and not contract.is_aliased(ord("a"))


def test_contract_imports_only_pyarrow():
    code = "import sys, pipeline.contract; bad = [m for m in ('apache_beam', 'torch', 'ray') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_redact_masks_credentials_in_urls_only():
    text = ("https://alice:pw1@h.example/x.xml?X-Amz-Signature=sig1&X-Amz-Date=20261101&X-Amz-Credential=AKIA/x "
            "gs://b/o?x=1&sig=sig2 s3://bucket/plain/path")
    masked = contract.redact(text)
    for secret in ("alice", "pw1", "sig1", "AKIA", "sig2"):
        assert secret not in masked
    assert "X-Amz-Date=20261101" in masked and "s3://bucket/plain/path" in masked and "gs://b/o?x=1" in masked
