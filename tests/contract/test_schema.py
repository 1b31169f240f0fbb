"""contract/schema.py: the shard schema and the special codepoints; the contract layer imports no Beam,
torch or Ray, nor the layers that use it."""

import subprocess
import sys

from contract import schema


def test_schema_columns_match_contract_v2():
    assert schema.COLUMNS[:4] == ("example_id", "lang", "page_ids", "codepoints")
    assert set(schema.COLUMNS) >= {
        "segment_ids", "sop_label", "char_mask_positions", "subword_starts", "subword_lengths",
        "subword_ids", "subword_predict_offsets", "subword_actions", "subword_replacements",
    }
    assert schema.SCHEMA.metadata[b"canine.schema_version"] == b"2"


def test_aliasing_rule_covers_pad_and_private_specials():
    assert schema.is_aliased(0) and schema.is_aliased(schema.MASK) and schema.is_aliased(0xE0FF)
    assert not schema.is_aliased(0xE100) and not schema.is_aliased(ord("a"))


def test_the_contract_imports_no_framework_and_no_layer_above_it():
    """Every module of the package, so the base install (no torch, DeepSpeed or Ray) carries it whole."""
    code = ("import importlib, pkgutil, sys, contract\n"
            "for m in pkgutil.iter_modules(contract.__path__, 'contract.'):\n"
            "    importlib.import_module(m.name)\n"
            "print([m for m in ('apache_beam', 'torch', 'ray', 'deepspeed', 'pipeline', 'training', 'jobs') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_package_alone_imports_none_of_its_modules():
    """The command-line flags come from contract/options.py (jobs/flags.py): the package itself
    loads nothing more."""
    code = "import sys, contract, contract.options; print([m for m in ('pyarrow', 'numpy', 'fsspec') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
