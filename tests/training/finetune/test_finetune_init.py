"""`canine finetune ner --init` on what `canine pretrain --init` takes, checked by the driver before
Ray (training/finetune/run.py prepare_init / load_init): the encoder loads exactly, the classifier
is new, the architecture is the init's whatever --size says. The Hugging Face directory is
transformers' CanineModel with random weights (save_pretrained), as google/canine-c ships its files;
nothing comes from a hub."""

import dataclasses

import pytest
import torch

from training.canine_config import of_size
from training.downstream import CanineForTokenClassification
from training.finetune import config
from training.finetune.run import load_init, prepare_init
from training.hf import hf_config_dict


def _save_hf(directory, seed=3, **changes):
    from transformers import CanineConfig as HFConfig
    from transformers import CanineModel as HFModel

    torch.manual_seed(seed)
    model = HFModel(HFConfig(**{**hf_config_dict(of_size("tiny", **changes))}))
    model.save_pretrained(str(directory))
    return model


def test_a_hugging_face_canine_directory_gives_its_encoder_and_architecture(tmp_path):
    theirs = _save_hf(tmp_path / "canine", hidden_act="gelu_new")
    cfg = config.load_config({"output": str(tmp_path / "run"), "task.train": ["x"],
                              "init.path": str(tmp_path / "canine"), "model.size": "base"})  # the init's shape wins
    cfg = dataclasses.replace(cfg, labels=("O", "B-PER", "I-PER"))
    cfg, lines = prepare_init(cfg)
    model_cfg = config.model_config(cfg)
    assert (model_cfg.hidden_size, model_cfg.num_hidden_layers, model_cfg.hidden_act) == (64, 2, "gelu_new")
    assert len(cfg.init.sha256) == 64
    assert any("init: loaded" in line and "encoder.*" in line for line in lines)
    assert any("classifier.*" in line and "fine-tuning initialises it" in line for line in lines)
    model = CanineForTokenClassification(model_cfg, 3)
    load_init(model, cfg)
    ids = torch.tensor([[0xE000, *map(ord, "Amina alikwenda Dodoma."), 0xE001]])
    theirs.eval(), model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model.encoder(ids).sequence_output, theirs(input_ids=ids).last_hidden_state,
                                   atol=1e-5, rtol=1e-5)


def test_changed_init_weights_are_refused_by_the_workers(tmp_path):
    _save_hf(tmp_path / "canine")
    cfg = config.load_config({"output": str(tmp_path / "run"), "task.train": ["x"],
                              "init.path": str(tmp_path / "canine")})
    cfg, _ = prepare_init(dataclasses.replace(cfg, labels=("O", "B-PER", "I-PER")))
    _save_hf(tmp_path / "canine", seed=4)  # the same shape, other weights
    with pytest.raises(ValueError, match="its weights changed since the run started"):
        load_init(CanineForTokenClassification(config.model_config(cfg), 3), cfg)
