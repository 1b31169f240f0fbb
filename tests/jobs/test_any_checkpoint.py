"""Any saved checkpoint, not only the final weights, is evaluated and exported:
`canine evaluate/export RUN --step N` or `--checkpoint PATH`. Its fp32 weights are consolidated
offline by DeepSpeed's own zero_to_fp32 (training/train/checkpoint.py `consolidate`), equal tensor
for tensor to what training gathers (`gather_fp32`, final/model_fp32.pt at the last step).

A real tiny run (`canine pretrain`, a local Ray cluster, 2 workers under DeepSpeed ZeRO-2, so each
checkpoint holds two optimizer partitions): 6 steps, a checkpoint every 2, the last 2 kept, so
steps 4 and 6 are saved and step 2's was deleted (tests/jobs/conftest.py `tracked_run`, shared with
test_json_stdout.py). ZeRO stages 0, 2 and 3 are also checked in one process of their own
(`_write_checkpoints`, this file run as a script: DeepSpeed keeps the process group it is given,
which a test session's other DeepSpeed tests set up themselves)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS, EVERY, KEEP = 6, 2, 2  # tracked_run's: saved 4 and 6 (Ray Train deleted step 2's)
EARLIER = 4
STAGES = (0, 2, 3)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "DS_ACCELERATOR": "cpu", "RAY_USAGE_STATS_ENABLED": "0"}


def _checkpoint(run: Path, step: int) -> Path:
    return run / "ray_train" / f"checkpoint_step{step:08d}"


@pytest.fixture(scope="module")
def run(tracked_run) -> Path:
    """tests/jobs/conftest.py's run (shared with test_json_stdout.py, which reads it in a clean
    environment): STEPS steps, a checkpoint every EVERY, the last KEEP kept."""
    out, done = tracked_run
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["steps"] == STEPS
    assert sorted(p.name for p in (out / "ray_train").glob("checkpoint_step*")) == [
        _checkpoint(out, s).name for s in (4, 6)]
    return out


def _safetensors(directory: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(directory / "model.safetensors")


def _hf_of_checkpoint(url: str) -> dict:
    """The Hugging Face tensors of a checkpoint's consolidated weights, as an export holds them."""
    from training.train import rundir
    from training.heads import CaninePretrainingModel
    from training.hf import to_hf_state_dict
    from training.train import config
    from training.train.checkpoint import load_checkpoint_weights

    cfg = rundir.read_config(str(Path(url).parents[1]))
    model = CaninePretrainingModel(config.model_config(cfg), cfg.train.objective)
    load_checkpoint_weights(model, url)
    return to_hf_state_dict(model.encoder)


@pytest.mark.slow
def test_the_last_checkpoint_consolidates_to_the_final_weights_tensor_for_tensor(run):
    import torch

    from training.train.checkpoint import consolidate

    final = torch.load(run / "final" / "model_fp32.pt", weights_only=True)
    step, last = consolidate(str(_checkpoint(run, STEPS)))
    assert step == STEPS and list(last) == list(final)  # the same entries, in the same order
    for name, tensor in final.items():
        assert last[name].dtype == tensor.dtype and torch.equal(last[name], tensor), name
    step, earlier = consolidate(str(_checkpoint(run, EARLIER)))
    assert step == EARLIER and any(not torch.equal(earlier[k], final[k]) for k in final)


@pytest.mark.slow
def test_an_earlier_step_evaluates_and_exports_with_relative_paths_from_another_directory(run, tmp_path, monkeypatch,
                                                                                          capfd):
    """In this process, from another working directory; capfd: the JSON document goes to file
    descriptor 1 (jobs/quiet.py). The commands as fresh processes are tests/jobs/test_json_stdout.py's."""
    import torch

    from jobs import cli

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    rel = os.path.relpath(run, elsewhere)  # ../../tracked0/run
    final_export = {p.name: p.read_bytes() for p in (run / "hf").iterdir()}

    capfd.readouterr()
    code = cli.main(["evaluate", rel, "--step", str(EARLIER), "--examples", "8", "--train-examples", "32", "--json"])
    out, err = capfd.readouterr()
    assert code == 0, err[-3000:]
    result = json.loads(out)
    assert (result["step"], result["max_steps"], result["checkpoint"]) == (EARLIER, STEPS, True)
    assert result["weights"] == os.path.join(rel, "ray_train", f"checkpoint_step{EARLIER:08d}")
    assert result["masked"]["pretrained"] != result["masked"]["initial"]  # trained weights, not the start

    code = cli.main(["export", rel, "--step", str(EARLIER)])
    out, err = capfd.readouterr()
    assert code == 0, err[-3000:]
    target = f"{rel}/hf-step{EARLIER}"
    assert out.strip() == (f"canine export: Hugging Face CanineModel of {rel} at step {EARLIER} of {STEPS} "
                           f"(checkpoint {rel}/ray_train/checkpoint_step{EARLIER:08d}) written to {target}")
    # Its own folder: the final export is as it was.
    assert {p.name: p.read_bytes() for p in (run / "hf").iterdir()} == final_export
    card = (run / f"hf-step{EARLIER}" / "README.md").read_text()
    assert f"The weights of step {EARLIER} of {STEPS}: a checkpoint of the run, not its final weights." in card
    assert f"- steps: {EARLIER} of {STEPS}," in card and f"- weights: step {EARLIER} of {STEPS} (checkpoint " in card

    exported, final = _safetensors(run / f"hf-step{EARLIER}"), _safetensors(run / "hf")
    expected = _hf_of_checkpoint(str(_checkpoint(run, EARLIER)))
    for key, tensor in expected.items():
        assert torch.equal(exported[key], tensor), key
    assert any(not torch.equal(exported[k], final[k]) for k in expected)


@pytest.mark.slow
def test_a_checkpoint_directory_evaluates_and_exports_with_absolute_paths(run, tmp_path, monkeypatch, capsys):
    import torch

    from jobs import cli

    monkeypatch.chdir(tmp_path)
    ckpt, to = _checkpoint(run, EARLIER), tmp_path / "exports" / "early"
    assert cli.main(["export", str(run), "--checkpoint", str(ckpt), "--to", str(to)]) == 0
    assert capsys.readouterr().out.strip().endswith(f"at step {EARLIER} of {STEPS} (checkpoint {ckpt}) written to {to}")
    exported = _safetensors(to)
    for key, tensor in _hf_of_checkpoint(str(ckpt)).items():
        assert torch.equal(exported[key], tensor), key
    assert f"- weights: step {EARLIER} of {STEPS} (checkpoint {ckpt})" in (to / "README.md").read_text()

    assert cli.main(["evaluate", str(run), "--step", str(EARLIER), "--examples", "4", "--train-examples", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"weights        step {EARLIER} of {STEPS} (checkpoint {ckpt})"
    assert lines[1].startswith("held-out       4 validation examples")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "export"])
def test_a_step_without_a_checkpoint_names_the_saved_steps_in_one_line(run, tmp_path, monkeypatch, capsys, command):
    from jobs import cli

    monkeypatch.chdir(run.parent)
    for step in (2, 5):  # deleted by checkpoint.keep; never saved
        assert cli.main([command, "run", "--step", str(step)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line == (f"canine {command}: run has no checkpoint at step {step}; saved steps: 4, 6 (the run keeps its "
                        f"last {KEEP}, checkpoint.keep); name a saved step, or leave out --step for the final weights")
    assert not list(run.glob("hf-step*[25]"))
    assert cli.main([command, "run", "--checkpoint", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"canine {command}: {tmp_path} has no train_state.json: not a checkpoint directory")
    with pytest.raises(SystemExit) as info:  # argparse: one or the other
        cli.main([command, "run", "--step", "4", "--checkpoint", str(_checkpoint(run, 4))])
    assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


# --- ZeRO stages 0, 2, 3, one process ----------------------------------------------------------


def _write_checkpoints(shards: str, out: str) -> None:
    """For each stage: a tiny model, two steps under DeepSpeed (world 1), its checkpoint in
    OUT/zeroS and what training consolidates (gather_fp32) in OUT/zeroS.pt, the initial weights in
    OUT/initial.pt. Run in a process of its own (module docstring)."""
    import socket

    import torch
    import torch.distributed as dist

    from training.batch import build_batch
    from training.heads import CaninePretrainingModel
    from training.train import checkpoint, config, data, engine

    torch.set_num_threads(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0",
                       "WORLD_SIZE": "1"})
    dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
    shard = data.open_dataset(shards).splits["train"][0]
    batch = build_batch(data.read_unit(shard.url, shard.sha256, 0, 4), 256, "char", seed=0, num_hash_buckets=2048)
    for stage in STAGES:
        cfg = config.load_config("tiny", {"parallel.device": "cpu", "parallel.precision": "fp32",
                                          "parallel.zero_stage": stage, "parallel.workers": 1,
                                          "train.global_batch": 4, "train.micro_batch": 4, "train.max_steps": 10})
        torch.manual_seed(0)
        model = CaninePretrainingModel(config.model_config(cfg), "char")
        torch.save(model.state_dict(), os.path.join(out, "initial.pt"))
        shapes = checkpoint.model_shapes(model)
        wrapped = engine.wrap(model, cfg, world=1)
        for _ in range(2):
            with engine.autocast(cfg):
                loss = wrapped(batch).loss
            wrapped.backward(loss)
            wrapped.step()
        checkpoint.save(wrapped, os.path.join(out, f"zero{stage}"),
                        {"step": 2, "epoch": 0, "rows": 8, "world": 1, "data_sha256": ""}, shapes, rank=0)
        torch.save(checkpoint.gather_fp32(wrapped, shapes, rank=0), os.path.join(out, f"zero{stage}.pt"))
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def stage_checkpoints(contract_shards, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zero_stages")
    done = subprocess.run([sys.executable, __file__, contract_shards, str(out)], env=_env(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("stage", STAGES)
def test_each_zero_stage_consolidates_offline_to_what_training_gathers(stage_checkpoints, stage):
    import torch

    from training.train.checkpoint import consolidate

    files = os.listdir(stage_checkpoints / f"zero{stage}" / "deepspeed" / "step00000002")
    assert any("optim_states" in f for f in files) == (stage > 0)  # stage 0: the module file alone
    gathered = torch.load(stage_checkpoints / f"zero{stage}.pt", weights_only=True)
    initial = torch.load(stage_checkpoints / "initial.pt", weights_only=True)
    step, got = consolidate(str(stage_checkpoints / f"zero{stage}"))
    assert step == 2 and list(got) == list(gathered)
    for name, tensor in gathered.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name
    assert any(not torch.equal(got[k], initial[k].float()) for k in initial)  # two steps moved the weights
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in os.environ  # the guard ends with the load



@pytest.mark.parametrize("stage", [0, 2])  # our own load of the module file; DeepSpeed's zero_to_fp32
def test_a_planted_pickle_is_refused_unrun_and_a_cut_file_named(stage_checkpoints, tmp_path, stage):
    import shutil

    import torch

    from planted import PlantedPickle  # tests/planted.py
    from training.train.checkpoint import consolidate

    planted, cut = tmp_path / "planted", tmp_path / "cut"
    for copy in (planted, cut):
        shutil.copytree(stage_checkpoints / f"zero{stage}", copy)
    module_file = planted / "deepspeed" / "step00000002" / "mp_rank_00_model_states.pt"
    states = torch.load(module_file, weights_only=False)  # our own file, just written
    marker = tmp_path / "payload_ran"
    torch.save({**states, "extra": PlantedPickle(marker)}, module_file)
    with pytest.raises(ValueError, match=rf"checkpoint {planted}: refused to load mp_rank_00_model_states\.pt "
                                         r"\(posix\.system\).*nothing in them was run"):
        consolidate(str(planted))
    assert not marker.exists()

    damaged = next((cut / "deepspeed" / "step00000002").glob("*_optim_states.pt" if stage else "mp_rank_*"))
    damaged.write_bytes(damaged.read_bytes()[:1000])
    with pytest.raises(ValueError, match=rf"checkpoint {cut}: unreadable DeepSpeed checkpoint .*copy it again"):
        consolidate(str(cut))


def test_a_checkpoint_on_an_object_store_consolidates_as_on_disk(stage_checkpoints, s3_store):
    import fsspec
    import torch

    from training.train.checkpoint import consolidate

    url = s3_store.url("checkpoint_step00000002")
    fs = fsspec.filesystem("s3")
    fs.put(str(stage_checkpoints / "zero2") + "/", url + "/", recursive=True)
    step, remote = consolidate(url)
    _, local = consolidate(str(stage_checkpoints / "zero2"))
    assert step == 2 and list(remote) == list(local)
    assert all(torch.equal(remote[k], local[k]) for k in local)


if __name__ == "__main__":  # _write_checkpoints in a process of its own: SHARDS OUT
    sys.path.insert(0, str(ROOT))
    _write_checkpoints(*sys.argv[1:3])
