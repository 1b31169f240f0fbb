"""`--micro-batch auto` (autobatch.py): the search over micro batches with an injected "fits"
predicate, the CPU default without a probe, the probe's batch and its forward/backward, the GPU
branch with the GPU faked (agreement, the message when nothing fits), the choice saved with the
run and taken back by the driver, and the flag."""

import dataclasses

import pytest
import torch
import yaml

from jobs import cli
from training.train import rundir
from training.train import autobatch, config, run


def _auto(cfg, **train):
    """`cfg` with train.micro_batch 0 (auto), built past config.validate as the driver hands it on."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, micro_batch=0, **train))


def test_candidates_are_the_divisors_that_keep_the_global_batch_largest_first():
    assert autobatch.candidates(4096, 8) == [512, 256, 128, 64, 32, 16, 8, 4, 2, 1]
    assert autobatch.candidates(48, 2) == [24, 12, 8, 6, 4, 3, 2, 1]
    with pytest.raises(ValueError, match="global_batch 18 is not a multiple of the 4 workers"):
        autobatch.candidates(18, 4)


def test_the_search_takes_the_largest_size_that_neither_runs_out_of_memory_nor_exceeds_the_budget():
    tried = []

    def peak_bytes(size):  # an 80-unit GPU: above 24 the forward runs out of memory; 24 peaks at 96
        tried.append(size)
        if size > 24:
            raise torch.OutOfMemoryError("CUDA out of memory (test)")
        return 4 * size

    sizes = autobatch.candidates(4096, 64)  # 64, 32, 16, ...
    assert autobatch.largest_fitting(sizes, peak_bytes, budget=1000) == 16
    assert tried == [64, 32, 16]  # largest first, stops at the first fit
    tried.clear()
    assert autobatch.largest_fitting(autobatch.candidates(48, 1), peak_bytes, budget=80) == 16  # 24 fits, over budget
    assert tried == [48, 24, 16]
    assert autobatch.largest_fitting([8, 4], lambda size: 10**12, budget=100) is None


def test_on_cpu_auto_takes_the_largest_divisor_up_to_32_without_probing(tmp_path, monkeypatch):
    monkeypatch.setattr(autobatch, "gpu_probe", lambda *a: pytest.fail("no probe on CPU"))
    cfg = config.load_config("tiny", {"parallel.device": "cpu", "parallel.precision": "fp32", "output": str(tmp_path),
                                      "train.global_batch": 96, "train.micro_batch": 4})
    (tmp_path / rundir.CONFIG).write_text(config.to_yaml(_auto(cfg)))  # as the driver wrote it
    chosen = autobatch.choose_micro_batch(_auto(cfg), model=None, model_cfg=None, world=2, rank=0, device="cpu")
    assert chosen.train.micro_batch == 24 and chosen.accumulation_steps(2) == 2  # 96 / 2 workers = 48: 24 x 2
    saved = yaml.safe_load((tmp_path / rundir.CONFIG).read_text())
    assert saved["train"]["micro_batch"] == 24  # recorded with the run by rank 0
    assert autobatch.cpu_choice(16, 2) == 8 and autobatch.cpu_choice(4096, 2) == 32


def test_the_driver_takes_a_saved_choice_and_keeps_an_explicit_micro_batch():
    cfg = config.load_config("tiny", {"parallel.workers": 2})
    saved = {"train": {"micro_batch": 2}}
    assert run._saved_micro_batch(_auto(cfg), saved).train.micro_batch == 2
    assert run._saved_micro_batch(cfg, saved).train.micro_batch == 4  # not auto: the run's own value
    assert run._saved_micro_batch(_auto(cfg), {"train": {"micro_batch": 0}}).train.micro_batch == 0  # not chosen yet
    with pytest.raises(ValueError, match="not a multiple"):  # the saved choice must still split the batch
        run._saved_micro_batch(_auto(cfg), {"train": {"micro_batch": 3}})


@pytest.mark.parametrize("objective", ["char", "subword"])
def test_the_probe_batch_is_full_length_examples_of_the_requested_size(objective):
    model_cfg = config.model_config(config.load_config("tiny"))
    batch = autobatch.probe_batch(model_cfg, objective, 256, 20)  # rows the batch builder accepts for either
    assert {len(v) for v in batch.values()} == {20}
    assert bool((batch["attention_mask"].sum(1) == 256).all())  # every example as long as the run's
    assert torch.equal(batch["input_ids"][8:16], batch["input_ids"][:8])  # 8 distinct ones, tiled


def test_the_flag_takes_auto():
    parser = cli.build_parser("pretrain")
    args = parser.parse_args(["pretrain", "--micro-batch", "auto"])
    assert args.micro_batch == 0
    assert parser.parse_args(["pretrain", "--micro-batch", "8"]).micro_batch == 8
    with pytest.raises(SystemExit):
        parser.parse_args(["pretrain", "--micro-batch", "big"])


def test_the_probe_runs_a_forward_and_backward_of_a_copy():
    from training.heads import CaninePretrainingModel

    cfg = config.load_config("tiny", {"parallel.device": "cpu", "parallel.precision": "fp32", "data.seq_len": 256})
    model_cfg = config.model_config(cfg)
    model = CaninePretrainingModel(model_cfg, "char")
    assert autobatch.gpu_probe(model, cfg, model_cfg, "cpu")(3) == 0  # no peak to read on a CPU
    assert all(p.grad is None for p in model.parameters())  # the run's own model is left as it was


def test_on_a_gpu_the_ranks_agree_on_a_fitting_size_or_stop_with_what_to_set(one_process_group, tmp_path, monkeypatch):
    """The GPU branch with the GPU faked: 10 GiB, a forward that runs out of memory above 8
    examples; the agreement is a real all-reduce (one process, gloo)."""
    from types import SimpleNamespace

    from training.train import failures

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=10 * 2**30))
    fits = {"limit": 8}

    def probe(model, cfg, model_cfg, device):
        def peak_bytes(size):
            if size > fits["limit"]:
                raise torch.OutOfMemoryError("CUDA out of memory (test)")
            return size * 2**30
        return peak_bytes

    monkeypatch.setattr(autobatch, "gpu_probe", probe)
    cfg = config.load_config("tiny", {"parallel.device": "cpu", "parallel.precision": "fp32", "output": str(tmp_path),
                                      "train.global_batch": 64, "data.seq_len": 256})
    gpu = dataclasses.replace(_auto(cfg), parallel=dataclasses.replace(cfg.parallel, device="cuda", precision="bf16"))
    model = torch.nn.Linear(1000, 1000)  # 1e6 parameters: 16 MB of optimizer state
    (tmp_path / rundir.CONFIG).write_text(config.to_yaml(gpu))
    chosen = autobatch.choose_micro_batch(gpu, model, None, world=1, rank=0, device="cpu")
    assert chosen.train.micro_batch == 8 and chosen.accumulation_steps(1) == 8  # 64 examples: 8 x 8
    assert yaml.safe_load((tmp_path / rundir.CONFIG).read_text())["train"]["micro_batch"] == 8

    fits["limit"] = 0
    with pytest.raises(failures.OutOfMemory, match=r"^rank 0, before the first step: --micro-batch auto found no micro "
                                                    r"batch that fits: even 1 example of data.seq_len 256 .*within 90% "
                                                    r"of 10.0 GiB.*gradient_checkpointing=true"):
        autobatch.choose_micro_batch(gpu, model, None, world=1, rank=0, device="cpu")
