"""The contract module is importable without Beam, and the CLI lists every command."""

import subprocess
import sys

from jobs import cli
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


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in text
    assert cli.main(["no-such-command"]) == 2
