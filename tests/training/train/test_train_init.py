"""`canine pretrain --init`: a new run from a Hugging Face CanineModel directory, an export or a run
(training/train/init.py).

No hub: the Hugging Face directories are transformers' CanineModel with random weights, written
by save_pretrained. The end-to-end runs are real (a local Ray cluster, 2 workers, DeepSpeed ZeRO-2
over gloo) on the pipeline's shards of the bundled sample, one per objective, 3 steps each, dropout
off so that step 1's loss can be recomputed here from the saved weights and the fresh heads."""

import contextlib
import dataclasses
import hashlib
import json

import pytest
import torch

from training.canine_config import of_size
from training.hf import hf_config_dict

from canine_fixtures import padded_inputs

STEPS = 3
NO_DROPOUT = {"model.hidden_dropout_prob": "0", "model.attention_probs_dropout_prob": "0"}


def save_hf_canine(directory, seed: int = 7, **changes):
    """transformers' CanineModel of the tiny shape (random weights, HF's own initialisation),
    saved as google/canine-c is: config.json + model.safetensors. `changes`: HF config fields."""
    from transformers import CanineConfig as HFConfig
    from transformers import CanineModel as HFModel

    torch.manual_seed(seed)
    # "gelu" as google/canine-c's config.json says, not the tiny size's "gelu_new": taken from the source.
    model = HFModel(HFConfig(**{**hf_config_dict(of_size("tiny")), "hidden_act": "gelu", **changes}))
    model.save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    return save_hf_canine(tmp_path_factory.mktemp("hf_canine") / "canine-tiny")


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_encoder_loads_exactly_float64_equal_to_transformers(hf_dir):
    """Our forward on the loaded weights equals transformers' CanineModel on the same directory."""
    from transformers import CanineModel as HFModel

    from test_hf import FP64_TOL, _max_diff
    from training.heads import CaninePretrainingModel
    from training.train import config, init

    cfg = config.load_config("tiny", {"init.path": str(hf_dir), "data.seq_len": "256"})
    cfg, lines = init.prepare(cfg, config.model_config(cfg), None)
    assert cfg.model.overrides == {"hidden_act": "gelu"} and cfg.init.sha256 == _sha256(hf_dir / "model.safetensors")
    model = CaninePretrainingModel(config.model_config(cfg), "char")
    loaded, new = init.load_into(model, cfg, None)
    assert all(n.startswith("encoder.") for n in loaded) and len(loaded) == len(model.encoder.state_dict())
    assert sorted({n.split(".")[0] for n in new}) == ["head", "sop"]
    assert _max_diff(model.encoder, HFModel.from_pretrained(str(hf_dir)), 96, [96, 60],
                     dtype=torch.float64) < FP64_TOL
    assert lines[1] == f"init: loaded {len(loaded)} tensors: encoder.* ({len(loaded)})"
    assert "head.output.* (2): a CanineModel has no pretraining head" in lines[2]
    assert "hidden_act 'gelu' (the config has 'gelu_new')" in lines[3]


def test_an_architecture_that_differs_is_refused_naming_each_field_and_both_values(tmp_path):
    from training.train import config, init

    other = save_hf_canine(tmp_path / "other", hidden_size=32, num_hash_buckets=1024, downsampling_rate=2,
                           local_transformer_stride=16, num_hidden_layers=1, num_attention_heads=2,
                           max_position_embeddings=128)
    cfg = config.load_config("tiny", {"init.path": str(other), "data.seq_len": "256"})
    with pytest.raises(init.InitError) as e:
        init.prepare(cfg, config.model_config(cfg), None)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"--init {other}: its architecture differs from --config tiny: ")
    for part in ("hidden_size 32 (init) vs 64 (config)", "num_hidden_layers 1 (init) vs 2 (config)",
                 "num_attention_heads 2 (init) vs 4 (config)", "num_hash_buckets 1024 (init) vs 2048 (config)",
                 "downsampling_rate 2 (init) vs 4 (config)", "local_transformer_stride 16 (init) vs 32 (config)",
                 "position table 128 rows (init) vs data.seq_len 256 (the data)"):
        assert part in line, part


def test_a_directory_on_an_object_store_loads_the_same_weights(hf_dir, s3_store):
    """An fsspec URL (moto's S3 server on 127.0.0.1): the same tensors and sha256 as on disk,
    pytorch_model.bin too (google/canine-c's file)."""
    import fsspec
    from transformers import CanineModel as HFModel

    from training.train import init

    url = s3_store.url("canine-tiny")
    fs, path = fsspec.core.url_to_fs(url)
    fs.put(str(hf_dir) + "/", path, recursive=True)
    local, remote = init.open_source(str(hf_dir)), init.open_source(url)
    (a, sha_a), (b, sha_b) = init.source_tensors(local), init.source_tensors(remote)
    assert remote.kind == "hf" and sha_a == sha_b and a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    bin_dir = hf_dir.parent / "bin"  # google/canine-c's layout: config.json + pytorch_model.bin (torch.save)
    bin_dir.mkdir()
    (bin_dir / "config.json").write_bytes((hf_dir / "config.json").read_bytes())
    torch.save(HFModel.from_pretrained(str(hf_dir)).state_dict(), bin_dir / "pytorch_model.bin")
    source = init.open_source(str(bin_dir))
    assert source.weights_url.endswith("pytorch_model.bin")
    c, _ = init.source_tensors(source)
    assert all(torch.equal(a[k], c[k]) for k in a)


def test_what_is_not_a_source_is_one_line(tmp_path):
    from training.train import init

    (tmp_path / "empty").mkdir()
    for path, words in ((tmp_path / "nope", "no such directory"), (tmp_path / "empty", "neither a Hugging Face")):
        with pytest.raises(init.InitError) as e:
            init.open_source(str(path))
        assert words in str(e.value) and "\n" not in str(e.value)


def _first_step_loss(run, hf_directory) -> float:
    """Step 1's loss computed here, without Ray or DeepSpeed: the model as a fresh run draws it
    (same seed), the Hugging Face encoder weights put in through transformers' own loading, and
    the first global batch built from the run's epoch order (each worker's block, its micro
    batches; the logged loss is their mean)."""
    from transformers import CanineModel as HFModel

    from training import seeds
    from training.batch import build_batch_numpy
    from training.heads import CaninePretrainingModel
    from training.hf import from_hf_state_dict
    from training.train import config, data, rundir

    cfg = rundir.read_config(str(run))
    model_cfg = config.model_config(cfg)
    seeds.seed_all(cfg.train.seed)
    model = CaninePretrainingModel(model_cfg, cfg.train.objective)
    model.encoder.load_state_dict(from_hf_state_dict(HFModel.from_pretrained(str(hf_directory)).state_dict(),
                                                     model_cfg), strict=True)
    shards = data.open_dataset(cfg.data.path).splits["train"]
    t, world = cfg.train, cfg.parallel.workers
    order = data.epoch_order(shards, cfg.data.unit_rows, t.seed, 0, cfg.data.streams, t.global_batch)
    losses = []
    with torch.no_grad():
        for rank in range(world):
            rows = data.read_segments(data.rank_segments(order, shards, 0, 1, rank, world, t.seed))
            built = build_batch_numpy(rows, cfg.data.seq_len, t.objective, seed=seeds.build_seed(t.seed, 0),
                                      num_hash_buckets=model_cfg.num_hash_buckets)
            for i in range(cfg.accumulation_steps()):
                lo, hi = i * t.micro_batch, (i + 1) * t.micro_batch
                losses.append(model({k: torch.from_numpy(v[lo:hi].copy()) for k, v in built.items()}).loss.item())
    return sum(losses) / len(losses)


@pytest.fixture(scope="module")
def init_runs(pipeline_shards, ray_local, hf_dir, tmp_path_factory):
    """{objective: (output, summary, lines said)} of a 3-step run from `hf_dir`; the CANINE-C run
    stops at step 2, its init's weights are then replaced, and the same call resumes it to 3."""
    from training.train import config, run

    out = {}
    for objective in ("char", "subword"):
        output = tmp_path_factory.mktemp(f"init_{objective}") / "run"
        settings = {**NO_DROPOUT, "data.path": pipeline_shards, "output": str(output), "train.max_steps": STEPS,
                    "train.objective": objective, "init.path": str(hf_dir), "checkpoint.every": 1,
                    "train.eval_every": 0, "data.eval_examples": 16, "optim.warmup_fraction": "0.67"}  # 2 warm-up steps
        said = []
        with _said(said):
            if objective == "char":
                run.pretrain(config.load_config("tiny", {**settings, "train.stop_at_step": 2}))
                original = (hf_dir / "model.safetensors").read_bytes()
                other = save_hf_canine(hf_dir.parent / "other", seed=8)  # a resume that re-read the init would fail
                (hf_dir / "model.safetensors").write_bytes((other / "model.safetensors").read_bytes())
                try:
                    summary = run.pretrain(config.load_config("tiny", settings))
                finally:
                    (hf_dir / "model.safetensors").write_bytes(original)
            else:
                summary = run.pretrain(config.load_config("tiny", settings))
        out[objective] = (output, summary, said)
    return out


@contextlib.contextmanager
def _said(lines: list):
    from unittest import mock

    from training.train import run

    original = run._say
    with mock.patch.object(run, "_say", side_effect=lambda text: (lines.append(text), original(text))):
        yield


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["char", "subword"])
def test_step_one_loss_equals_the_saved_weights_plus_fresh_heads(init_runs, hf_dir, objective):
    from training.train import rundir

    output, summary, said = init_runs[objective]
    records = rundir.read_metrics(str(output))
    assert [r["step"] for r in records] == [1, 2, 3] and summary["finished"]
    expected = _first_step_loss(output, hf_dir)
    # Measured: equal to the last bit (8.299925565719604 char, 8.430806636810303 subword).
    assert abs(records[0]["loss"] - expected) <= 1e-6 * expected, (records[0]["loss"], expected)
    # Warm-up applies (the schedule starts fresh): half the peak at step 1 of 2 warm-up steps.
    assert records[0]["lr"] == pytest.approx(records[1]["lr"] / 2) and records[1]["lr"] == pytest.approx(2e-3)
    # Said before the weights are read (a user's report: an --init run was silent 52 s before its first line).
    assert said[0].startswith("init: reading the init weights (") and f" MB) from {hf_dir}/model.safetensors " in said[0]
    assert said[1].startswith(f"init from {hf_dir} (a Hugging Face CanineModel)")
    assert said[2].startswith("init: loaded 63 tensors: encoder.* (63)")
    assert "a CanineModel has no pretraining head" in said[3]


@pytest.mark.slow
def test_the_run_records_its_init_and_a_resume_does_not_reinit(init_runs, hf_dir):
    from training.train import rundir

    output, summary, said = init_runs["char"]
    sha = _sha256(hf_dir / "model.safetensors")
    assert summary["init"] == {"path": str(hf_dir), "step": 0, "sha256": sha}
    cfg = rundir.read_config(str(output))
    assert (cfg.init.path, cfg.init.sha256, cfg.model.overrides["hidden_act"]) == (str(hf_dir), sha, "gelu")
    from training.train import config
    from training.train.tracking import flatten

    params = flatten(config.to_dict(cfg))  # what the Tracker logs as MLflow params at the run's creation
    assert (params["init.path"], params["init.sha256"], params["init.step"]) == (str(hf_dir), sha, "0")
    card = (output / "hf" / "README.md").read_text()
    assert f"- initialised from `{hf_dir}`, weights sha256 `{sha}`" in card
    # The second start resumed from step 2's checkpoint; the init (replaced meanwhile) was not read.
    starts = [i for i, line in enumerate(said) if line.startswith("init from ")]
    assert len(starts) == 1 and any(line.startswith("resuming from step 2") for line in said)


@pytest.mark.slow
def test_the_export_loads_in_transformers_and_differs_from_the_init_by_the_training_only(init_runs, hf_dir):
    from safetensors.torch import load_file
    from transformers import AutoModel

    from training.train import rundir

    output, _, _ = init_runs["subword"]
    exported = AutoModel.from_pretrained(str(output / "hf"))
    start = load_file(str(hf_dir / "model.safetensors"))
    records = rundir.read_metrics(str(output))
    # AdamW moves a weight by at most about lr per step (|m/sqrt(v)| is 1 at step 1, near it after),
    # plus weight decay: the export is the init plus three small steps, never a fresh model.
    bound = 2.0 * sum(r["lr"] for r in records)
    moved = 0
    for name, tensor in exported.state_dict().items():
        delta = (tensor - start[name]).abs().max().item()
        assert delta <= bound, (name, delta, bound)
        moved += delta > 0
    assert moved > 40  # trained: most tensors moved


@pytest.mark.slow
def test_google_canine_c_architecture_loads_under_config_base_with_nothing_refused_or_resized(tmp_path):
    """transformers' CanineConfig() defaults are google/canine-c's (and -s's) architecture."""
    from transformers import CanineConfig as HFConfig
    from transformers import CanineModel as HFModel

    from training.model import CanineModel
    from training.train import config, init

    torch.manual_seed(0)
    HFModel(HFConfig()).save_pretrained(str(tmp_path / "canine-c"))
    cfg = config.load_config("base", {"init.path": str(tmp_path / "canine-c")})
    fitted, lines = init.prepare(cfg, config.model_config(cfg), None)
    assert fitted.model.overrides == {"hidden_act": "gelu"}  # HF's config says exact GELU; nothing resized
    encoder = len(CanineModel(config.model_config(fitted)).state_dict())  # 183 tensors
    assert lines[1] == f"init: loaded {encoder} tensors: encoder.* ({encoder})" and "encoder" not in lines[2]
    assert config.model_config(fitted).max_position_embeddings == 16384


@pytest.mark.slow
def test_a_run_its_checkpoint_or_its_export_is_a_source_and_its_heads_load(init_runs):
    """--init RUN: every tensor of its final weights; --init RUN --init-step N: its checkpoint;
    --init RUN/hf: the encoder and the head (an export holds no sentence-order layer)."""
    from training.heads import CaninePretrainingModel
    from training.train import config, init

    output, _, _ = init_runs["char"]
    final = torch.load(output / "final" / "model_fp32.pt", weights_only=True)
    settings = {"init.path": str(output), "data.seq_len": "256", **NO_DROPOUT}

    cfg = config.load_config("tiny", settings)
    fitted, lines = init.prepare(cfg, config.model_config(cfg), None)
    assert fitted.init.sha256 == _sha256(output / "final" / "model_fp32.pt")
    assert lines[0].startswith(f"init from {output} (step {STEPS} of a canine run)") and lines[2] == "init: new tensors: none"
    model = CaninePretrainingModel(config.model_config(fitted), "char")
    loaded, new = init.load_into(model, fitted, None)
    assert not new and all(torch.equal(model.state_dict()[k], final[k]) for k in final)

    cfg = config.load_config("tiny", {**settings, "init.step": "2"})
    fitted, lines = init.prepare(cfg, config.model_config(cfg), None)
    assert lines[0].startswith(f"init from {output} (step 2 of a canine run)") and lines[2] == "init: new tensors: none"
    with pytest.raises(init.InitError, match="no checkpoint at step 5; saved steps: 2, 3"):
        init.open_source(str(output), step=5)

    cfg = config.load_config("tiny", {**settings, "init.path": str(output / "hf")})
    fitted, lines = init.prepare(cfg, config.model_config(cfg), None)
    assert lines[0].startswith(f"init from {output / 'hf'} (a canine export)")
    assert lines[2].endswith("sop.* (2): an export holds no sentence-order layer")
    model = CaninePretrainingModel(config.model_config(fitted), "char")
    loaded, new = init.load_into(model, fitted, None)
    assert sorted(new) == ["sop.bias", "sop.weight"]
    assert all(torch.equal(model.state_dict()[k], final[k]) for k in final if not k.startswith("sop."))
    # The same export under the other objective: its CANINE-C head is not a CANINE-S head.
    cfg = config.load_config("tiny", {**settings, "init.path": str(output / "hf"), "train.objective": "subword"})
    _, lines = init.prepare(cfg, config.model_config(cfg, 300), None)
    assert "the source's head is the char objective's, this run trains subword" in lines[2]
