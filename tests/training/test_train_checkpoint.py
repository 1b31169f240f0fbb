"""Checkpoint files: shape checks with clear messages, weights_only loading, RNG round trip."""

import json
import os
import random

import numpy as np
import pytest
import torch

from training.config import PRESETS
from training.heads import CaninePretrainingModel
from training.train import checkpoint


def test_shape_mismatch_names_every_tensor():
    saved = {"a.weight": [4, 3], "b.bias": [2], "old": [1]}
    expected = {"a.weight": [4, 5], "b.bias": [2], "new": [7]}
    with pytest.raises(ValueError) as info:
        checkpoint.check_shapes(saved, expected, "checkpoint X")
    text = str(info.value)
    assert "checkpoint X does not match the model" in text
    assert "a.weight: [4, 3] in the checkpoint, the model has [4, 5]" in text
    assert "missing from the checkpoint: ['new']" in text and "not in the model: ['old']" in text
    checkpoint.check_shapes(expected, expected, "same")  # no error


def test_consolidated_weights_load_with_weights_only_and_check_shapes(tmp_path):
    torch.manual_seed(0)
    tiny = CaninePretrainingModel(PRESETS["tiny"], "char")
    url = str(tmp_path / "final" / "model_fp32.pt")
    checkpoint.save_consolidated(tiny.state_dict(), url)
    again = CaninePretrainingModel(PRESETS["tiny"], "char")
    checkpoint.load_consolidated(again, url)
    assert all(torch.equal(a, b) for a, b in zip(tiny.state_dict().values(), again.state_dict().values()))
    wider = CaninePretrainingModel(PRESETS["tiny"].replace(hidden_size=128), "char")
    with pytest.raises(ValueError, match=r"consolidated weights .*model_fp32\.pt does not match the model.*\[128"):
        checkpoint.load_consolidated(wider, url)


def test_restore_checks_shapes_before_deepspeed_loads(tmp_path):
    directory = str(tmp_path)
    with open(os.path.join(directory, checkpoint.STATE_FILE), "w") as f:
        json.dump({"step": 5, "epoch": 0, "rows": 40, "world": 2, "data_sha256": "abc"}, f)
    with open(os.path.join(directory, checkpoint.SHAPES_FILE), "w") as f:
        json.dump({"w": [3, 3]}, f)
    with pytest.raises(ValueError, match=r"w: \[3, 3\] in the checkpoint, the model has \[4, 4\]"):
        checkpoint.restore(None, directory, {"w": [4, 4]}, rank=0, world=2, data_sha256="abc")
    with pytest.raises(ValueError, match="written by 2 workers, this run has 3"):
        checkpoint.restore(None, directory, {"w": [3, 3]}, rank=0, world=3, data_sha256="abc")
    with pytest.raises(ValueError, match="config_sha256 abc, --data has xyz"):
        checkpoint.restore(None, directory, {"w": [3, 3]}, rank=0, world=2, data_sha256="xyz")


def test_rng_state_round_trips_through_a_weights_only_file(tmp_path):
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    path = tmp_path / "rng.pt"
    torch.save(checkpoint._rng_state(), path)
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(9), np.random.seed(9), random.seed(9)
    checkpoint._set_rng_state(torch.load(path, weights_only=True))
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]) and got[2] == expected[2]
