"""Run configuration: shipped YAMLs, overrides, validation messages, resume conflicts, the CLI."""

import contextlib
import dataclasses
import re

import pytest
import torch
import yaml

from jobs import cli
from training.train import config
from training.train.schema import OptimConfig, PretrainConfig


@pytest.mark.parametrize("name", ["tiny", "small", "base"])
def test_shipped_configs_load_and_validate(name):
    cfg = config.load_config(name)
    assert cfg.model.size == name
    assert cfg.optim.warmup_fraction == 0.025  # paper §4.1.3


def test_base_is_the_paper_recipe():
    cfg = config.load_config("base")
    assert (cfg.data.seq_len, cfg.train.global_batch, cfg.train.max_steps) == (2048, 4096, 124_000)
    assert (cfg.optim.name, cfg.optim.lr, cfg.parallel.zero_stage) == ("lamb", 0.018, 0)


def test_overrides_are_typed_and_model_fields_go_to_the_preset():
    cfg = config.load_config("tiny", {"optim.lr": "1e-3", "train.max_steps": "7", "log.tensorboard": "false",
                                      "model.hidden_dropout_prob": "0", "model.ngram_orders": "2,3"})
    assert cfg.optim.lr == 1e-3 and cfg.train.max_steps == 7 and cfg.log.tensorboard is False
    model = config.model_config(cfg)
    assert model.hidden_dropout_prob == 0.0 and model.ngram_orders == (2, 3)
    assert model.hidden_size == 64  # the rest of the tiny size is kept


@pytest.mark.parametrize("key, value, needle", [
    ("optim.lrr", "1", "optim.lrr"),
    ("train.max_steps", "ten", "train.max_steps"),
    ("train.max_steps", "2.5", "train.max_steps"),
    ("model.no_such_field", "1", "--set model.no_such_field: unknown key(s) ['no_such_field']"),
])
def test_bad_overrides_name_the_field(key, value, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        cfg = config.load_config("tiny", {key: value})
        config.model_config(cfg)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_lamb_is_refused_under_zero_partitioning(precision):
    for stage in (1, 2, 3):
        with pytest.raises(ValueError, match=r"lamb needs parallel\.zero_stage=0.*trust ratio"):
            config.load_config("tiny", {"optim.name": "lamb", "parallel.zero_stage": stage,
                                        "parallel.precision": precision})
    cfg = config.load_config("tiny", {"optim.name": "lamb", "parallel.zero_stage": 0, "parallel.precision": precision})
    assert cfg.optim.name == "lamb"


def test_bf16_is_autocast_on_any_device_and_never_deepspeeds_bf16_mode():
    """Precision bf16 is torch.autocast over the fp32 weights (engine.py), which the engine's
    forward enters itself (DeepSpeed's torch_autocast section) and which runs on CPU too; DeepSpeed's bf16 section (bf16 weights, its optimizer wrappers) stays off at
    every stage, with no bf16-only settings left."""
    from training.train import engine

    for device in ("cpu", "cuda"):
        for stage in (0, 1, 2, 3):
            cfg = config.load_config("tiny", {"parallel.device": device, "parallel.precision": "bf16",
                                              "parallel.zero_stage": stage, "parallel.workers": 2})
            ds = engine.deepspeed_config(cfg, world=2)
            assert ds["bf16"] == {"enabled": False} and "fp16" not in ds and "data_types" not in ds
            assert ds["torch_autocast"] == {"enabled": True, "dtype": "bfloat16", "lower_precision_safe_modules": []}
            fp32 = engine.deepspeed_config(dataclasses.replace(
                cfg, parallel=dataclasses.replace(cfg.parallel, precision="fp32")), world=2)
            assert fp32 == {**ds, "torch_autocast": {**ds["torch_autocast"], "enabled": False}}
    cpu = config.load_config("tiny", {"parallel.device": "cpu", "parallel.precision": "bf16", "parallel.workers": 2})
    assert engine.autocast(cpu).fast_dtype == torch.bfloat16 and engine.autocast(cpu).device == "cpu"
    assert isinstance(engine.autocast(dataclasses.replace(cpu, parallel=dataclasses.replace(
        cpu.parallel, precision="fp32"))), contextlib.nullcontext)


def test_global_batch_must_split_into_micro_batches():
    with pytest.raises(ValueError, match="global_batch 18 is not a multiple"):
        config.load_config("tiny", {"train.global_batch": 18})


def test_unknown_yaml_key_names_the_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("train:\n  max_step: 3\n")
    with pytest.raises(ValueError, match=r"mine\.yaml\.train: unknown key\(s\) \['max_step'\]"):
        config.load_config(str(path))
    with pytest.raises(FileNotFoundError, match="neither a shipped config"):
        config.load_config("no-such-config")


def test_resume_conflicts_ignore_harmless_changes():
    saved = config.to_dict(config.load_config("tiny"))
    same_run = config.to_dict(config.load_config("tiny", {"checkpoint.every": 5, "train.stop_at_step": 3}))
    other_run = config.to_dict(config.load_config("tiny", {"optim.lr": 0.5, "model.hidden_size": 128}))
    assert config.resume_conflicts(saved, same_run) == []
    conflicts = config.resume_conflicts(saved, other_run)
    assert any(c.startswith("optim.lr") for c in conflicts) and any(c.startswith("model.overrides") for c in conflicts)


def test_cli_dry_run_prints_the_resolved_config(capsys):
    assert cli.main(["pretrain", "--config", "base", "--dry-run", "--workers", "8", "--set", "optim.lr=0.01"]) == 0
    text = capsys.readouterr().out
    loaded = config.from_dict(__import__("yaml").safe_load(text))
    assert loaded.optim.lr == 0.01 and loaded.parallel.workers == 8 and loaded.model.size == "base"


def test_cli_reports_config_errors(capsys):
    assert cli.main(["pretrain", "--config", "tiny", "--optimizer", "lamb", "--dry-run"]) == 2
    assert "lamb needs parallel.zero_stage=0" in capsys.readouterr().err


def test_cli_names_missing_data_before_starting_anything(tmp_path, capsys):
    argv = ["pretrain", "--data", str(tmp_path / "nowhere"), "--output", str(tmp_path / "run")]
    assert cli.main(argv) == 2
    assert "no manifest; --data must be a directory written by `canine preprocess`" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key, value, needle", [
    ("optim.lr", "nan", "--set optim.lr: expected a finite number, got 'nan'"),
    ("optim.lr", "inf", "--set optim.lr: expected a finite number, got 'inf'"),
    ("optim.lr", "-1e-3", "optim.lr must be > 0, got -0.001"),
    ("optim.beta2", "1", "optim.beta2 must be in [0, 1), got 1.0"),
    ("optim.weight_decay", "-0.1", "optim.weight_decay must be >= 0, got -0.1"),
    ("model.hidden_dropout_prob", "nan", "--set model.hidden_dropout_prob: expected a finite number"),
])
def test_cli_refuses_a_bad_value_before_creating_the_output(contract_shards, tmp_path, capsys, key, value, needle):
    output = tmp_path / "run"
    assert cli.main(["pretrain", "--data", contract_shards, "--output", str(output), "--set", f"{key}={value}"]) == 2
    assert needle in capsys.readouterr().err
    assert not output.exists()


def test_a_float_flag_and_a_config_built_in_code_are_checked_too(capsys):
    # The flag as typed, the value quoted as --set's is (a user's report: `--set optim.lr: ... got nan`).
    for value in ("nan", "inf"):
        assert cli.main(["pretrain", "--lr", value, "--dry-run"]) == 2
        assert capsys.readouterr().err == f"canine pretrain: --lr: expected a finite number, got '{value}'\n"
    assert cli.main(["preprocess", "x.xml", "--output", "o", "--alpha", "nan"]) == 2
    assert capsys.readouterr().err == "canine preprocess: --alpha: expected a finite number, got 'nan'\n"
    cfg = config.load_config("tiny")
    with pytest.raises(dataclasses.FrozenInstanceError):  # resolved and validated once, then frozen
        cfg.optim.lr = float("inf")
    cfg = dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim, lr=float("inf")))
    with pytest.raises(ValueError, match=r"optim\.lr must be > 0, got inf"):
        config.validate(cfg)


def test_a_config_error_found_against_the_data_leaves_no_output(contract_shards, tmp_path, capsys, monkeypatch):
    """data.seq_len is only checked against the manifest, after Ray is up: still before the output exists."""
    import ray

    from training.train import run

    monkeypatch.setattr(run, "connect", lambda cfg: False)  # no cluster needed to get that far
    monkeypatch.setattr(ray, "cluster_resources", lambda: {})
    output = tmp_path / "run"
    assert cli.main(["pretrain", "--data", contract_shards, "--output", str(output), "--seq-len", "128"]) == 2
    assert "data.seq_len 128 is shorter" in capsys.readouterr().err
    assert not output.exists()


def test_a_resumed_run_keeps_its_workers_device_and_precision_whatever_the_cluster(contract_shards):
    """The first start resolves 'auto' / 0 from the cluster; a rerun takes them from the run's saved
    config, so a cluster that lost its GPUs (or grew) changes nothing silently."""
    from training.train import data
    from training.train.run import resolve_with_data

    dataset = data.open_dataset(contract_shards)
    tiny = lambda **extra: config.load_config("tiny", {"data.path": contract_shards, **extra})  # noqa: E731
    first = resolve_with_data(tiny(**{"parallel.workers": 0}), dataset, cluster_gpus=4)
    assert (first.parallel.workers, first.parallel.device, first.parallel.precision, first.data.streams) == \
        (4, "cuda", "bf16", 8)  # 8 streams: the 8 units of 64 rows (data.canonical_streams), not the 4 workers
    saved = config.to_dict(first)
    again = resolve_with_data(tiny(**{"parallel.workers": 0}), dataset, cluster_gpus=0, saved=saved)
    assert (again.parallel.workers, again.parallel.device, again.parallel.precision, again.data.streams) == \
        (4, "cuda", "bf16", 8)  # not 2 CPU workers: the placement check then says what is missing
    elastic = resolve_with_data(tiny(**{"parallel.workers": 2}), dataset, cluster_gpus=2, saved=saved)
    assert (elastic.parallel.workers, elastic.data.streams) == (2, 8)  # asked for: the same data order
    assert config.resume_conflicts(saved, config.to_dict(elastic)) == []
    assert config.resume_conflicts(saved, config.to_dict(config.load_config("tiny", {"parallel.device": "cpu"})))
    zero3 = config.to_dict(resolve_with_data(tiny(**{"parallel.zero_stage": 3, "parallel.workers": 0}), dataset,
                                             cluster_gpus=4))
    with pytest.raises(ValueError, match="trained with 4 workers under ZeRO-3; resuming it on 2 is not exact"):
        resolve_with_data(tiny(**{"parallel.zero_stage": 3, "parallel.workers": 2}), dataset, 4, zero3)


def test_the_default_streams_follow_the_global_batch_and_the_data_not_the_workers(contract_shards):
    """data.streams 0 resolves at a run's first start to data.canonical_streams, the same on 1, 2
    and 4 workers (the order of a run does not depend on its worker count); explicit
    streams and a saved run's stay as they are (old runs resume exactly)."""
    from training.train import data

    def streams(workers, train_units=None, saved=None, **extra):
        cfg = config.load_config("tiny", {"parallel.workers": workers, **extra})
        return config.resolve(cfg, manifest_seq_len=256, num_subword_vocab=0, cluster_gpus=0,
                              train_units=train_units, saved=saved).data.streams

    assert {streams(w, train_units=1000) for w in (1, 2, 4)} == {16}
    assert streams(2, train_units=1000, **{"train.global_batch": 24}) == 12
    assert streams(1, train_units=3) == 2  # tiny data: a stream needs a unit
    assert {streams(w, **{"data.path": contract_shards}) for w in (1, 2, 4)} == {8}  # its 8 units of 64 rows
    assert streams(2, **{"data.path": contract_shards, "data.unit_rows": 100}) == 4  # 5 units
    assert streams(4, train_units=1000, **{"data.streams": 2}) == 2
    assert streams(4, train_units=1000, saved={"data": {"streams": 4}}) == 4
    assert len(data.make_units(data.open_dataset(contract_shards).splits["train"], 64)) == 8
    with pytest.raises(ValueError, match="data.streams must be >= 0 and divide train.global_batch 16"):
        streams(2, train_units=1000, **{"data.streams": 3})


# --- one config source (contract/options.py) -----------------------------------------------------


@pytest.mark.parametrize("name", ["tiny", "small", "base"])
def test_presets_hold_only_what_differs_from_the_defaults(name):
    values, _ = config.read_yaml(name)
    defaults = config.to_dict(PretrainConfig())
    for section, fields in values.items():
        for key, value in fields.items():
            assert defaults[section][key] != value, f"{name}.yaml restates the default {section}.{key}: {value!r}"


def test_every_field_has_help_and_its_choices_are_checked():
    from contract import options
    from pipeline.preprocess_config import PreprocessConfig

    for cls in (PreprocessConfig, PretrainConfig, *[f.type for f in dataclasses.fields(PretrainConfig)
                                                    if dataclasses.is_dataclass(f.type)]):
        for f in dataclasses.fields(cls):
            assert options.help_of(f), f"{cls.__name__}.{f.name} has no help"
    cfg = config.load_config("tiny")
    bad = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, objective="words"))
    with pytest.raises(ValueError, match=r"train\.objective must be one of char, subword, got 'words'"):
        config.validate(bad)
    assert PretrainConfig.__dataclass_fields__["train"].default_factory().objective == "char"


def test_resumable_fields_are_the_ones_that_do_not_change_the_trajectory():
    assert {"output", "data.path", "parallel.workers", "parallel.compile", "log.profile_steps"} <= config.RESUMABLE_CHANGES
    assert not {"train.seed", "optim.lr", "data.seq_len", "data.streams", "parallel.zero_stage", "parallel.precision",
                "model.overrides", "data.noise_rate"} & config.RESUMABLE_CHANGES


@pytest.mark.parametrize("value", ["[2,3]", "[2, 3]", "2,3", "(2,3)"])
def test_set_takes_lists_on_pretrain(value, capsys):
    assert cli.main(["pretrain", "--config", "tiny", "--dry-run", "--set", f"model.ngram_orders={value}"]) == 0
    saved = yaml.safe_load(capsys.readouterr().out)
    assert saved["model"]["overrides"] == {"ngram_orders": [2, 3]}  # typed once, when loaded
    assert config.model_config(config.from_dict(saved)).ngram_orders == (2, 3)
    assert cli.main(["pretrain", "--dry-run", "--set", "model.ngram_orders=[2,x]"]) == 2
    assert "canine pretrain: --set model.ngram_orders[1]: expected int, got 'x'" in capsys.readouterr().err


def test_a_run_saved_with_an_older_spelling_resumes_without_conflicts():
    """config.yaml of runs saved before the typing at load time held '2,3' for ngram_orders,
    lacked data.streams / noise_rate and called the model's size its preset: today's config of the
    same run has no conflicts with it."""
    current = config.to_dict(config.load_config("tiny", {"model.ngram_orders": "2,3", "data.streams": 2}))
    old = config.to_dict(config.load_config("tiny", {"data.streams": 2}))
    old["model"]["overrides"] = {"ngram_orders": "2,3"}
    old["model"]["preset"] = old["model"].pop("size")
    del old["data"]["streams"], old["data"]["noise_rate"]
    assert config.resume_conflicts(config.saved_run_config(old, "config.yaml"), current) == []


def test_the_old_name_of_the_model_size_is_refused_with_the_new_one(tmp_path):
    """model.preset was renamed model.size (a training preset is a YAML recipe, a size a shape)."""
    with pytest.raises(ValueError, match=r"model\.preset is now model\.size"):
        config.load_config("tiny", {"model.preset": "small"})
    path = tmp_path / "mine.yaml"
    path.write_text("model:\n  preset: small\n")
    with pytest.raises(ValueError, match=r"mine\.yaml: model\.preset is now model\.size"):
        config.load_config(str(path))


def test_the_config_goes_to_the_workers_resolved_and_the_engine_refuses_auto():
    from training.train import data, engine
    from training.train.run import resolve_with_data

    cfg = config.load_config("tiny")
    with pytest.raises(ValueError, match="call training.train.config.resolve first"):
        config.require_resolved(cfg)
    with pytest.raises(ValueError, match="resolve the config first"):
        engine.deepspeed_config(cfg, world=2)
    dataset = data.Dataset("mem://d", {"train": ()}, 256, "abc", "mem://d/_tokenizer.json")
    explicit = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, streams=2))  # no rows to count units of
    resolved = resolve_with_data(explicit, dataset, cluster_gpus=0)
    config.require_resolved(resolved)
    assert engine.deepspeed_config(resolved, world=2)["bf16"] == {"enabled": False}


def test_pretrain_flags_come_from_the_fields():
    import argparse

    from jobs import pretrain

    parser = argparse.ArgumentParser()
    pretrain.add_arguments(parser)
    actions = {a.dest: a for a in parser._actions}
    assert actions["optimizer"].choices == OptimConfig.__dataclass_fields__["name"].metadata["choices"]
    assert actions["zero_stage"].type is int and actions["lr"].type is float and actions["lr"].default is None
    assert "peak learning rate" in actions["lr"].help and "optim.lr" in actions["lr"].help
