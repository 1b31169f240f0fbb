"""End to end on a local Ray cluster (127.0.0.1): CPU workers, DeepSpeed ZeRO-2 over gloo, the
tiny model on shards the pipeline made from the bundled sample. One uninterrupted 2-worker
reference run is compared with a run started on 4 workers whose rank 1 is killed mid-run, then
stopped, then resumed on 4 and on 1 workers, and with a run started on 1 worker and resumed on 2:
fresh runs on 1, 2 and 4 workers read the same data (the order depends on the seed, the
data and the global batch, data.py) and train the same losses, dropout on."""

import json
import os

import pytest
import torch

from training.heads import CaninePretrainingModel
from training.train import rundir
from training.train import checkpoint, config
from training.train.run import pretrain

from reference_settings import REFERENCE_STEPS as STEPS
from reference_settings import assert_same_losses as _assert_same_losses
from reference_settings import reference_config as _cfg

pytestmark = pytest.mark.slow


def test_loss_falls_and_the_export_loads_in_transformers(reference_run):
    from transformers import CanineModel as HFCanine

    output, summary, records = reference_run
    assert summary["finished"] and summary["steps"] == STEPS and len(records) == STEPS
    for key in ("loss", "lr", "grad_norm", "examples_per_s", "chars_per_s", "data_wait_fraction", "peak_rss_mb"):
        assert all(isinstance(r[key], float) for r in records), key
    first, last = sum(r["loss"] for r in records[:3]) / 3, sum(r["loss"] for r in records[-3:]) / 3
    assert last < first - 1.0, (first, last)
    evals = [r for r in records if "eval_loss" in r]
    assert [r["step"] for r in evals] == [15, 30] and evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    assert 0 < summary["eval_accuracy"] <= 1 and summary["peak_rss_mb_per_worker"] < 2048
    # SOP end to end (docs/pretraining.md, "Sentence order"): the shards are packed with --sentence-order, the tiny preset has the
    # head on, so every step and evaluation reports sentence-order loss and accuracy over real pairs.
    assert all(r["sop_loss"] > 0 and 0 <= r["sop_accuracy"] <= 1 for r in records)
    assert all(0 <= r["eval_sop_accuracy"] <= 1 and r["eval_sop_loss"] > 0 for r in evals)

    kept = sorted(os.listdir(os.path.join(output, "ray_train")))
    assert [k for k in kept if k.startswith("checkpoint_step")] == ["checkpoint_step00000020", "checkpoint_step00000030"]
    assert os.listdir(os.path.join(output, "tensorboard"))
    profile = open(os.path.join(output, "profile.txt")).read()  # log.profile_steps: 2, after 3 warm-up steps
    assert profile.startswith("steps 4-5, ops by self_cpu_time_total") and "aten::" in profile
    saved = config.from_dict(__import__("yaml").safe_load(open(os.path.join(output, "config.yaml"))))
    assert saved.data.seq_len == 256 and saved.parallel.workers == 2 and saved.parallel.precision == "fp32"

    # The consolidated fp32 weights, loaded into our model, and the HF export agree.
    ours = CaninePretrainingModel(config.model_config(saved), "char")
    checkpoint.load_consolidated(ours, summary["consolidated"])
    hf = HFCanine.from_pretrained(summary["hf_export"]).eval()
    ids = torch.randint(32, 3000, (2, 37))
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    with torch.no_grad():
        expected = ours.encoder.eval()(ids, mask).sequence_output
        got = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    assert (got - expected).abs().max() <= 1e-5


# Fresh runs on another worker count and resumes on another count than the checkpoint's: the same
# examples, initial weights and dropout masks (drawn per micro batch of the global batch, loop.py);
# only the order of float sums differs (gradient all-reduce, accumulation). Measured on 1, 2 and 4
# workers over the 30 steps: at most 7e-8 relative.
ELASTIC_REL = 1e-5
# 4 workers of 1 CPU would fill ray_local's 4 CPUs, leaving none for the input pipeline's tasks.
FOUR_WORKERS = {"parallel.workers": 4, "parallel.cpus_per_worker": 0.5}


def test_a_killed_worker_then_a_stop_then_resumes_on_4_and_1_workers_continue_the_losses(
        pipeline_shards, reference_run, tmp_path, monkeypatch):
    """One run through every way a run restarts, each leg checked against the uninterrupted
    2-worker reference (one chain: each leg is a whole Ray Train start, the suite's costliest
    thing), at ELASTIC_REL: a fresh run on 4 workers (the reference's data order) whose rank 1
    kills itself at step 12, and Ray Train restarts the group from the step-10 checkpoint; the run
    stops at 13 (train.stop_at_step); the same command resumes it on its 4 workers to 20; then
    `--workers 1` resumes the 4-worker checkpoint to the end (elastic)."""
    import yaml

    _, _, expected = reference_run
    monkeypatch.setenv("CANINE_FAULT_STEP", "12")  # after the step-10 checkpoint
    stopped = pretrain(_cfg(pipeline_shards, tmp_path, **FOUR_WORKERS,
                            **{"parallel.max_failures": 1, "train.stop_at_step": 13}))
    assert open(tmp_path / ".fault_injected").read().startswith("rank 1 killed itself at step 12")
    assert stopped["steps"] == 13 and stopped["workers"] == 4 and not stopped["finished"]
    assert "consolidated" not in stopped
    _assert_same_losses(rundir.read_metrics(str(tmp_path)), expected[:13], rel=ELASTIC_REL)
    monkeypatch.delenv("CANINE_FAULT_STEP")

    resumed = pretrain(_cfg(pipeline_shards, tmp_path, **FOUR_WORKERS, **{"train.stop_at_step": 20}))  # the same again
    assert resumed["steps"] == 20 and resumed["workers"] == 4
    _assert_same_losses(rundir.read_metrics(str(tmp_path)), expected[:20], rel=ELASTIC_REL)

    elastic = pretrain(_cfg(pipeline_shards, tmp_path, **{"parallel.workers": 1}))  # --workers 1
    assert elastic["finished"] and elastic["workers"] == 1
    records = rundir.read_metrics(str(tmp_path))
    _assert_same_losses(records, expected, rel=ELASTIC_REL)
    saved = yaml.safe_load(open(tmp_path / "config.yaml"))
    # A rerun keeps the new count; the streams are the 4-worker start's, the same as the reference's.
    reference_streams = yaml.safe_load(open(os.path.join(reference_run[0], "config.yaml")))["data"]["streams"]
    assert saved["parallel"]["workers"] == 1 and saved["data"]["streams"] == reference_streams == 16


def test_a_run_started_on_1_worker_continues_on_2_with_the_same_losses(pipeline_shards, reference_run, tmp_path):
    """A fresh run on 1 worker trains the losses of the 2-worker reference (data.streams 0 resolves
    to the same canonical streams, whatever the worker count); checkpointed, it resumes on 2 at the
    same global batch and continues them."""
    _, _, expected = reference_run
    stopped = pretrain(_cfg(pipeline_shards, tmp_path, **{"train.stop_at_step": 13, "parallel.workers": 1}))
    assert stopped["steps"] == 13 and stopped["workers"] == 1
    _assert_same_losses(rundir.read_metrics(str(tmp_path)), expected[:13], rel=ELASTIC_REL)
    resumed = pretrain(_cfg(pipeline_shards, tmp_path, **{"parallel.workers": 2}))
    assert resumed["finished"] and resumed["workers"] == 2
    _assert_same_losses(rundir.read_metrics(str(tmp_path)), expected, rel=ELASTIC_REL)


def test_a_finished_run_is_not_redone_and_a_changed_config_is_refused(pipeline_shards, reference_run):
    output, summary, _ = reference_run
    with pytest.raises(ValueError, match=r"optim\.lr: 0\.002 -> 0\.1"):
        pretrain(_cfg(pipeline_shards, output, **{"optim.lr": 0.1}))
    assert pretrain(_cfg(pipeline_shards, output)) == json.loads(json.dumps(summary))
    assert len(rundir.read_metrics(output)) == STEPS
