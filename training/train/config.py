"""Loading the pretraining config: a shipped preset or a YAML file, dotted-key overrides, one
validation, and the resolution of what "auto" / 0 leave open. The fields themselves, with their
defaults, choices and help, are in schema.py.

    cfg = load_config("tiny", {"optim.lr": "1e-3", "model.ngram_orders": "[2,3]"})
    cfg = resolve(cfg, manifest_seq_len=512, num_subword_vocab=0, cluster_gpus=0)   # the driver, once

The presets (`tiny` for tests and smoke runs, `small`, `base` = the CANINE-base recipe of paper
§4.1.3) hold only what differs from schema.py's defaults; each names a model size
(training/canine_config.py SIZES). Model fields given as `model.FIELD` go to model.overrides,
typed by CanineConfig's fields. The YAML and the overrides are merged as data and the frozen
config is built from them once; the resolved config is saved with the run (`OUTPUT/config.yaml`)
and a resumption may change only the fields marked resumable.
"""

import dataclasses
import math
from pathlib import Path

import yaml

from contract import options
from training.canine_config import CanineConfig, of_size
from training.train import tracking
from training.train.schema import PretrainConfig

__all__ = ["RESUMABLE_CHANGES", "from_dict", "load_config", "model_config", "resolve", "resolve_data",
           "resume_conflicts", "saved_run_config", "to_dict", "to_yaml", "validate"]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def resumable_keys(cls, prefix: str = "") -> set[str]:
    out = set()
    for f in dataclasses.fields(cls):
        kind = options.hints(cls)[f.name]
        if dataclasses.is_dataclass(kind):
            out |= resumable_keys(kind, f"{prefix}{f.name}.")
        elif f.metadata.get("resumable"):
            out.add(f"{prefix}{f.name}")
    return out


# Dotted keys a resumption may change (schema.py's resumable fields).
RESUMABLE_CHANGES = frozenset(resumable_keys(PretrainConfig))


def to_dict(cfg: PretrainConfig) -> dict:
    return options.as_plain(cfg)


def to_yaml(cfg: PretrainConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def _model_override(name: str, value, where: str):
    """A value for CanineConfig field `name`, typed by that field (e.g. ngram_orders '[2,3]' -> (2, 3))."""
    kinds = options.hints(CanineConfig)
    if name not in kinds:
        raise ValueError(options.unknown_keys(where, [name], sorted(kinds)))
    return options.coerce(value, kinds[name], where)


def from_dict(values: dict, where: str = "config") -> PretrainConfig:
    """The config of nested dicts (a YAML file, a saved run's config.yaml); every key is checked
    against the dataclasses and every value typed, errors naming `where.key`."""
    values = dict(values or {})
    model = values.get("model")
    if isinstance(model, dict) and "preset" in model:
        raise ValueError(f"{where}: model.preset is now model.size (the model's shape: tiny, small, base)")
    if isinstance(model, dict) and isinstance(model.get("overrides"), dict):
        typed = {k: _model_override(k, v, f"{where}.model.overrides.{k}") for k, v in model["overrides"].items()}
        values["model"] = {**model, "overrides": typed}
    return options.build(PretrainConfig, values, where)


def _set(values: dict, key: str, value, where: str) -> None:
    """Put one dotted-key override into nested dicts, typed by its field."""
    parts = key.split(".")
    if parts == ["model", "preset"]:
        raise ValueError(f"{where}: model.preset is now model.size (the model's shape: tiny, small, base)")
    if parts[0] == "model" and len(parts) == 2 and parts[1] not in ("size", "overrides"):
        parts = ["model", "overrides", parts[1]]
    if parts[:2] == ["model", "overrides"] and len(parts) == 3:
        value = _model_override(parts[2], value, f"{where} {key}")
    else:
        found = options.field_at(PretrainConfig, key)
        kind = found and options.hints(found[0])[found[1].name]
        if kind is None or dataclasses.is_dataclass(kind):  # not a field, or a whole section
            raise ValueError(f"{where}: unknown key {key!r}")
        value = options.coerce(value, kind, f"{where} {key}")
    node = values
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def config_path(name_or_file: str) -> Path:
    """A shipped config name (`tiny`, `small`, `base`) or a path to a YAML file."""
    shipped = CONFIG_DIR / f"{name_or_file}.yaml"
    if shipped.is_file():
        return shipped
    path = Path(name_or_file)
    if path.is_file():
        return path
    names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"config {name_or_file!r} is neither a shipped config {names} nor a YAML file; give one "
                            "of those names or the path of a config YAML")


def read_yaml(name_or_file: str) -> tuple[dict, str]:
    """The preset's or file's values (only what differs from the defaults) and where they came from."""
    path = config_path(name_or_file)
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of sections, got {values!r}")
    return values, str(path)


def load_config(name_or_file: str = "tiny", overrides: dict | None = None) -> PretrainConfig:
    """Read a shipped or user YAML config, apply dotted-key overrides (`optim.lr`, `model.hidden_size`),
    build the frozen config once and validate it."""
    values, where = read_yaml(name_or_file)  # freshly parsed: the overrides may go into it
    for key, value in (overrides or {}).items():
        _set(values, key, value, "--set")
    cfg = from_dict(values, where)
    # log.mlflow unset takes MLFLOW_TRACKING_URI, as MLflow's clients do; `off` is off (tracking.setting).
    cfg = dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, mlflow=tracking.setting(cfg.log.mlflow)))
    validate(cfg)
    return cfg


def model_config(cfg: PretrainConfig, num_subword_vocab: int = 0) -> CanineConfig:
    """The CanineConfig of the run: the model size, its (typed) overrides, the subword vocabulary size."""
    extra = {"num_subword_vocab": num_subword_vocab} if num_subword_vocab else {}
    return of_size(cfg.model.size, **{**cfg.model.overrides, **extra})


def resolve_data(cfg: PretrainConfig, *, manifest_seq_len: int, num_subword_vocab: int, saved: dict | None = None,
                 where: str = "data", train_units: int | None = None) -> PretrainConfig:
    """What the data decides, whatever the cluster: data.seq_len (the shards' length), the CANINE-S
    vocabulary size and data.streams; then validates (the model's positions hold the length). The
    driver calls it before Ray starts (run.check_data), so a config the data cannot serve fails
    there; `resolve` calls it first."""
    streams = cfg.data.streams or (saved or {}).get("data", {}).get("streams") or _canonical_streams(cfg, train_units)
    seq_len = cfg.data.seq_len or manifest_seq_len
    if not seq_len:
        raise ValueError(f"{where}: the manifest does not record config.seq_len; set data.seq_len (--seq-len)")
    if manifest_seq_len and manifest_seq_len > seq_len:
        raise ValueError(f"{where}: the shards hold examples of up to {manifest_seq_len} characters; "
                         f"data.seq_len {seq_len} is shorter")
    overrides = dict(cfg.model.overrides)
    if cfg.train.objective == "subword":
        overrides["num_subword_vocab"] = num_subword_vocab
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, overrides=overrides),
                              data=dataclasses.replace(cfg.data, seq_len=seq_len, streams=streams))
    validate(cfg)
    return cfg


def resolve(cfg: PretrainConfig, *, manifest_seq_len: int, num_subword_vocab: int, cluster_gpus: float,
            saved: dict | None = None, where: str = "data", train_units: int | None = None) -> PretrainConfig:
    """The one place that fills in what "auto" / 0 leave open; then validates again. A run's first
    start takes them from the data (`resolve_data`) and the cluster; a resumption (`saved`: the
    run's config.yaml) from the run, so a resized cluster never changes them silently. Another worker count on
    resume must be asked for (--workers M) and continues elastically; another device or precision
    is refused (resume_conflicts) and a saved GPU run on a cluster without GPUs fails the
    placement check, never falling back to CPU. data.streams 0 becomes data.canonical_streams of the
    global batch and the train split's `train_units` (None: counted from the manifest at data.path),
    never the worker count, so the order does not depend on it. `where` names the data in errors."""
    p, sp = cfg.parallel, (saved or {}).get("parallel", {})
    device = p.device if p.device != "auto" else sp.get("device") or ("cuda" if cluster_gpus > 0 else "cpu")
    workers = p.workers or sp.get("workers") or (int(cluster_gpus) if device == "cuda" else 2)
    precision = (p.precision if p.precision != "auto" else
                 sp.get("precision") or ("bf16" if device == "cuda" else "fp32"))
    if sp.get("workers") and workers != sp["workers"] and cfg.parallel.zero_stage == 3:
        # Measured with DeepSpeed 0.19.8: a ZeRO-3 universal-checkpoint resume on 1 of a 2-worker
        # run's checkpoint has the right weights (the first step's loss is exact) but not the
        # right optimizer moments: the losses drift apart (4.6e-3 relative 16 steps later; ZeRO 0
        # and 2 stay within 5e-8). Refused rather than silently continuing another run.
        raise ValueError(f"{cfg.output} was trained with {sp['workers']} workers under ZeRO-3; resuming it on "
                         f"{workers} is not exact (DeepSpeed's ZeRO-3 universal checkpoint loses optimizer state): "
                         f"resume with --workers {sp['workers']}, or train with ZeRO 0-2 to resize")
    cfg = resolve_data(cfg, manifest_seq_len=manifest_seq_len, num_subword_vocab=num_subword_vocab, saved=saved,
                       where=where, train_units=train_units)
    cfg = dataclasses.replace(cfg, parallel=dataclasses.replace(p, device=device, workers=workers, precision=precision))
    validate(cfg)
    return cfg


def _canonical_streams(cfg: PretrainConfig, train_units: int | None) -> int:
    """The default data.streams of a run's first start (data.py says why not the worker count)."""
    from training.train import data  # pyarrow and fsspec: not for `canine pretrain --dry-run`

    if train_units is None:
        train_units = len(data.make_units(data.open_dataset(cfg.data.path).splits["train"], cfg.data.unit_rows))
    return data.canonical_streams(cfg.train.global_batch, train_units)


def require_resolved(cfg: PretrainConfig) -> None:
    """What runs on the workers (engine.py, loop.py) takes the config as resolve() left it."""
    p = cfg.parallel
    if "auto" in (p.device, p.precision) or not p.workers or not cfg.data.streams:
        raise ValueError("the config is not resolved (parallel.device / precision 'auto', workers or data.streams 0): "
                         "call training.train.config.resolve first")


def validate(cfg: PretrainConfig) -> None:
    """Reject a config that cannot run, naming every problem at once."""
    t, p, o, d, log = cfg.train, cfg.parallel, cfg.optim, cfg.data, cfg.log
    problems = options.check_choices(cfg)
    # bf16 is autocast over fp32 weights on CPU and GPU alike (engine.py): any stage, any optimizer.
    if o.name == "lamb" and p.zero_stage >= 1:
        # DeepSpeed ZeRO flattens parameters before partitioning, so a per-tensor trust ratio
        # would be taken over arbitrary flat slices (DeepSpeed issues #490, #1217). At stage 0
        # LAMB steps the model's own tensors, in fp32 and bf16 alike (engine.py).
        problems.append(
            f"optim.name=lamb needs parallel.zero_stage=0, got {p.zero_stage}: ZeRO stages >= 1 flatten "
            "parameters into partitions, so LAMB's per-tensor trust ratio would be wrong "
            "(DeepSpeed #490, #1217); use --zero-stage 0 or --optimizer adamw")
    if t.micro_batch < 0:
        problems.append(f"train.micro_batch must be >= 1, or 0 for auto (--micro-batch auto), got {t.micro_batch}")
    for name, value in (("train.global_batch", t.global_batch),
                        ("train.max_steps", t.max_steps), ("data.unit_rows", d.unit_rows), ("data.chunk_rows", d.chunk_rows),
                        ("checkpoint.every", cfg.checkpoint.every), ("checkpoint.keep", cfg.checkpoint.keep)):
        if value < 1:
            problems.append(f"{name} must be at least 1, got {value}")
    if p.workers < 0 or p.max_failures < -1:
        problems.append("parallel.workers must be >= 0 and parallel.max_failures >= -1")
    if p.workers and t.micro_batch >= 1 and t.global_batch % (t.micro_batch * p.workers):
        problems.append(
            f"train.global_batch {t.global_batch} is not a multiple of train.micro_batch {t.micro_batch} x "
            f"parallel.workers {p.workers}: gradient accumulation needs a whole number of micro batches")
    if d.streams < 0 or (d.streams and t.global_batch % d.streams):
        problems.append(f"data.streams must be >= 0 and divide train.global_batch {t.global_batch} (every stream "
                        f"gives each global batch the same number of examples), got {d.streams}")
    if not 0.0 <= o.warmup_fraction < 1.0:
        problems.append(f"optim.warmup_fraction must be in [0, 1), got {o.warmup_fraction}")
    ranges = (
        ("> 0", lambda v: v > 0, {"optim.lr": o.lr, "optim.eps": o.eps, "parallel.cpus_per_worker": p.cpus_per_worker,
                                  "data.cpus_per_task": d.cpus_per_task}),
        (">= 0", lambda v: v >= 0, {"optim.weight_decay": o.weight_decay, "optim.grad_clip": o.grad_clip,
                                    "data.prefetch_batches": d.prefetch_batches, "data.eval_examples": d.eval_examples,
                                    "parallel.threads_per_worker": p.threads_per_worker,
                                    "parallel.resource_wait_s": p.resource_wait_s,
                                    "log.peak_tflops": log.peak_tflops, "log.profile_steps": log.profile_steps}),
        ("in [0, 1)", lambda v: 0 <= v < 1, {"optim.beta1": o.beta1, "optim.beta2": o.beta2,
                                             "data.noise_rate": d.noise_rate}),
    )
    for rule, holds, fields in ranges:
        for name, value in fields.items():
            if not (math.isfinite(value) and holds(value)):  # also for a config built in code (no coercion)
                problems.append(f"{name} must be {rule}, got {value}")
    if t.stop_at_step < 0 or t.eval_every < 0 or d.seq_len < 0:
        problems.append("train.stop_at_step, train.eval_every and data.seq_len must be >= 0")
    try:
        model = model_config(cfg)
        if d.seq_len > model.max_position_embeddings:
            problems.append(f"data.seq_len {d.seq_len} exceeds the model's max_position_embeddings "
                            f"{model.max_position_embeddings} (size {cfg.model.size!r})")
    except (KeyError, ValueError, TypeError) as e:
        problems.append(f"model: {e}")
    if problems:
        raise ValueError("invalid pretraining config: " + "; ".join(problems))


def saved_run_config(saved: dict, where: str) -> dict:
    """A run's saved config.yaml as today's plain data: fields added since it was written get the
    value the run trained with, and values are typed as now (an old '2,3' is [2, 3])."""
    saved = {k: dict(v) if isinstance(v, dict) else v for k, v in (saved or {}).items()}
    # Runs saved before data.streams existed dealt their units to their worker count.
    saved.setdefault("data", {}).setdefault("streams", saved.get("parallel", {}).get("workers"))
    saved["data"].setdefault("noise_rate", 0.0)  # runs saved before it existed trained without noise
    saved.setdefault("init", {})  # runs saved before --init existed started from a fresh initialisation
    model = saved.setdefault("model", {})
    if "preset" in model:  # runs saved when the model's shape was called its preset
        model.setdefault("size", model.pop("preset"))
    return to_dict(from_dict(saved, where))


def resume_conflicts(saved: dict, current: dict, prefix: str = "", resumable=RESUMABLE_CHANGES) -> list[str]:
    """Dotted keys whose values differ between a run's saved config and the new one, except the
    ones a resumption may change (`resumable`: the config class's, `resumable_keys`)."""
    out = []
    for key in sorted(set(saved) | set(current)):
        dotted = f"{prefix}{key}"
        a, b = saved.get(key), current.get(key)
        if isinstance(a, dict) and isinstance(b, dict) and dotted != "model.overrides":
            out += resume_conflicts(a, b, dotted + ".", resumable)
        elif a != b and dotted not in resumable:
            out.append(f"{dotted}: {a!r} -> {b!r}")
    return out
