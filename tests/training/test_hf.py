"""Hugging Face interoperability: export loads in transformers and matches; import round-trips exactly."""

import json

import pytest
import torch
from transformers import CanineConfig as HFConfig
from transformers import CanineModel as HFModel

from training.config import preset
from training.heads import CaninePretrainingModel
from training.hf import export_hf, hf_config_dict, import_hf, to_hf_state_dict
from training.model import CanineModel

from canine_fixtures import one_thread, padded_inputs  # noqa: F401 (autouse fixture)


def _max_diff(ours: CanineModel, theirs, L, lengths):
    ids, mask, types = padded_inputs(L, lengths)
    with torch.no_grad():
        a = ours.eval()(ids, mask, types)
        b = theirs.eval()(input_ids=ids, attention_mask=mask, token_type_ids=types)
    valid = mask.bool()
    sequence = (a.sequence_output - b.last_hidden_state).abs()[valid].max().item()
    pooled = (a.pooled_output - b.pooler_output).abs().max().item()
    return max(sequence, pooled)


@pytest.mark.parametrize("act", ["gelu", "gelu_new"])
def test_tiny_export_loads_in_transformers_and_matches(tmp_path, act):
    torch.manual_seed(0)
    model = CanineModel(preset("tiny", hidden_act=act))
    export_hf(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["hidden_act"] == act
    theirs = HFModel.from_pretrained(tmp_path)
    # 133: not a multiple of 4 and a partial last local block; the second row is padding from 61
    # on, a third row ends right at a block edge (64) so a whole block is padding.
    assert _max_diff(model, theirs, 133, [133, 61, 64]) <= 1e-5
    assert _max_diff(model, theirs, 37, [37, 37]) <= 1e-5


def test_canine_base_shape_export_matches(tmp_path):
    torch.manual_seed(0)
    model = CanineModel(preset("base"))
    export_hf(model, tmp_path)
    theirs = HFModel.from_pretrained(tmp_path)
    assert sum(p.numel() for p in theirs.parameters()) == sum(p.numel() for p in model.parameters())
    assert _max_diff(model, theirs, 263, [263, 150]) <= 1e-5


def test_import_is_exact_and_round_trips(tmp_path):
    torch.manual_seed(1)
    hf_config = HFConfig(**hf_config_dict(preset("tiny", hidden_act="gelu")))
    theirs = HFModel(hf_config)  # HF's own init, saved the HF way
    theirs.save_pretrained(tmp_path / "hf")
    ours = import_hf(tmp_path / "hf", hidden_dropout_prob=0.0)
    assert ours.config.hidden_act == "gelu" and ours.config.hidden_dropout_prob == 0.0
    assert _max_diff(ours, theirs, 70, [70, 9]) <= 1e-5
    export_hf(ours, tmp_path / "again")
    again = HFModel.from_pretrained(tmp_path / "again").state_dict()
    for key, tensor in theirs.state_dict().items():
        assert torch.equal(again[key], tensor), key
    twice = import_hf(tmp_path / "again")
    for key, tensor in ours.state_dict().items():
        assert torch.equal(twice.state_dict()[key], tensor), key


def test_pretraining_model_exports_its_encoder_only(tmp_path):
    model = CaninePretrainingModel(preset("tiny", num_subword_vocab=100), "subword")
    export_hf(model, tmp_path)
    theirs = HFModel.from_pretrained(tmp_path)
    assert set(theirs.state_dict()) >= set(to_hf_state_dict(model.encoder))
    assert _max_diff(model.encoder, theirs, 40, [40, 20]) <= 1e-5


def test_what_cannot_be_exported_is_refused(tmp_path):
    with pytest.raises(ValueError, match="ngram_orders"):
        export_hf(CanineModel(preset("tiny", ngram_orders=(2,))), tmp_path)
    with pytest.raises(TypeError, match="CanineModel"):
        export_hf(torch.nn.Linear(2, 2), tmp_path)
    assert not any(tmp_path.iterdir())  # nothing half-written
