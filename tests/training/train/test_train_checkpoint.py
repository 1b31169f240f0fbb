"""Checkpoint files: shape checks with clear messages, weights_only loading (DeepSpeed's files
too, a planted pickle is refused), RNG round trip."""

import json
import os
import random

import numpy as np
import pytest
import torch

from canine_fixtures import CPU, one_thread  # noqa: F401 (autouse: one torch thread)
from planted import PlantedPickle
from training.batch import build_batch
from training.canine_config import SIZES
from training.heads import CaninePretrainingModel
from training.train import checkpoint, config, data, engine


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
    tiny = CaninePretrainingModel(SIZES["tiny"], "char")
    url = str(tmp_path / "final" / "model_fp32.pt")
    checkpoint.save_consolidated(tiny.state_dict(), url)
    again = CaninePretrainingModel(SIZES["tiny"], "char")
    checkpoint.load_consolidated(again, url)
    assert all(torch.equal(a, b) for a, b in zip(tiny.state_dict().values(), again.state_dict().values()))
    wider = CaninePretrainingModel(SIZES["tiny"].replace(hidden_size=128), "char")
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


def _engine(stage: int, precision: str = "fp32"):
    """A tiny model under DeepSpeed ZeRO `stage` in this process (world 1), and its shapes."""
    cfg = config.load_config("tiny", {**CPU, "parallel.zero_stage": stage, "parallel.precision": precision,
                                      "parallel.workers": 1, "train.global_batch": 4, "train.micro_batch": 4,
                                      "train.max_steps": 10})
    torch.manual_seed(0)
    model = CaninePretrainingModel(config.model_config(cfg), "char")
    wrapped = engine.wrap(model, cfg, world=1)
    wrapped.forward_context = lambda: engine.autocast(cfg)  # for _step: the loop's forward
    return wrapped, checkpoint.model_shapes(model)


def _step(wrapped, batch) -> float:
    with wrapped.forward_context():
        out = wrapped(batch)
    wrapped.backward(out.loss)
    wrapped.step()
    return out.loss.item()


@pytest.fixture(scope="module")
def batch(contract_shards):
    shard = data.open_dataset(contract_shards).splits["train"][0]
    return build_batch(data.read_unit(shard.url, shard.sha256, 0, 4), 256, "char", seed=0, num_hash_buckets=2048)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_deepspeed_checkpoints_restore_under_weights_only(one_process_group, batch, tmp_path, stage):
    """Every class DeepSpeed pickles at this stage is on the allowlist: a fresh engine restored
    from a checkpoint takes the next step exactly as the engine that wrote it."""
    state = {"step": 2, "epoch": 0, "rows": 8, "world": 1, "data_sha256": ""}
    saver, shapes = _engine(stage)
    _step(saver, batch), _step(saver, batch)
    checkpoint.save(saver, str(tmp_path), state, shapes, rank=0)
    expected = _step(saver, batch)
    restored, _ = _engine(stage)
    assert checkpoint.restore(restored, str(tmp_path), shapes, rank=0, world=1, data_sha256="") == state
    assert _step(restored, batch) == expected  # weights, optimizer moments, schedule, RNG all restored
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in os.environ  # the guard ends with the load



def test_a_planted_pickle_in_a_deepspeed_file_is_refused_and_never_runs(one_process_group, batch, tmp_path):
    """Fails if DeepSpeed stops loading through TorchCheckpointEngine's torch.load, or torch stops
    honouring TORCH_FORCE_WEIGHTS_ONLY_LOAD (checkpoint._weights_only_loads relies on both)."""
    saver, shapes = _engine(0)
    _step(saver, batch)
    directory = tmp_path / "ckpt"
    checkpoint.save(saver, str(directory), {"step": 1, "epoch": 0, "rows": 4, "world": 1, "data_sha256": ""},
                    shapes, rank=0)
    target = directory / checkpoint.DS_DIR / checkpoint.tag(1) / "mp_rank_00_model_states.pt"
    marker = tmp_path / "payload_ran"
    states = torch.load(target, weights_only=False)  # our own file, just written
    torch.save({**states, "extra": PlantedPickle(marker)}, target)  # everything resume needs, plus the payload

    restored, _ = _engine(0)
    with pytest.raises(ValueError) as info:
        checkpoint.restore(restored, str(directory), shapes, rank=0, world=1, data_sha256="")
    assert f"checkpoint {directory}: refused to load mp_rank_00_model_states.pt (posix.system)" in str(info.value)
    assert "nothing in them was run" in str(info.value)
    assert not marker.exists()
    torch.load(target, weights_only=False)  # the plant is live: an unguarded load runs it
    assert marker.exists()


@pytest.mark.parametrize("stage", [0, 2])
def test_a_bf16_run_checkpoints_and_gathers_like_an_fp32_run(one_process_group, batch, tmp_path, stage):
    """bf16 is autocast over the fp32 weights and optimizer (engine.py): the same checkpoint files
    as fp32 (no DeepSpeed bf16 optimizer's partitions), an exact restore, fp32 weights gathered,
    and at ZeRO-0 no resharding on another worker count."""
    state = {"step": 1, "epoch": 0, "rows": 4, "world": 1, "data_sha256": ""}
    files = {}
    for precision in ("fp32", "bf16"):
        saver, shapes = _engine(stage, precision)
        _step(saver, batch)
        directory = tmp_path / precision
        checkpoint.save(saver, str(directory), state, shapes, rank=0)
        files[precision] = sorted(os.listdir(directory / checkpoint.DS_DIR / checkpoint.tag(1)))
        expected = _step(saver, batch)
        restored, _ = _engine(stage, precision)
        checkpoint.restore(restored, str(directory), shapes, rank=0, world=1, data_sha256="")
        assert _step(restored, batch) == expected
        gathered = checkpoint.gather_fp32(restored, shapes, rank=0)
        assert all(v.dtype == torch.float32 for v in gathered.values())
        if stage == 0:  # the module's own weights are the fp32 master weights
            for name, p in restored.module.named_parameters():
                assert p.dtype == torch.float32 and torch.equal(gathered[name], p.detach())
    assert files["bf16"] == files["fp32"]
    cfg = config.load_config("tiny", {**CPU, "parallel.zero_stage": stage, "parallel.precision": "bf16"})
    assert checkpoint.resharded(cfg) == (stage >= 1)
