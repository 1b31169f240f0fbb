"""Loading, checking and resolving a fine-tuning run's config (schema.py's fields).

    cfg = load_config({"task.train": ["swa=data/swa/train.txt"], "output": "runs/ner", "init.path": "runs/tiny"})
    cfg = resolve(cfg, model_cfg, train_windows=2300, cluster_gpus=0)   # the driver, once

A YAML file (`--config FILE`) holds only what differs from the defaults, as pretraining's do;
`--set section.field=value` changes any field. The architecture is not chosen here: with
init.path it is the init's (`architecture_overrides`), without it model.size's.
"""

import dataclasses

import yaml

from contract import options
from training.canine_config import CanineConfig, of_size
from training.finetune import data
from training.finetune.schema import CONFIGS, FinetuneConfig


def config_class(kind: str):
    """The config dataclass of a task (schema.CONFIGS): ner's or tydiqa's."""
    if kind not in CONFIGS:
        raise ValueError(f"unknown fine-tuning task {kind!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[kind]


def to_dict(cfg: FinetuneConfig) -> dict:
    return options.as_plain(cfg)


def to_yaml(cfg: FinetuneConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def _set(values: dict, key: str, value, where: str, cls=FinetuneConfig) -> None:
    parts = key.split(".")
    if parts[0] == "model" and len(parts) == 2 and parts[1] not in ("size", "overrides"):
        parts = ["model", "overrides", parts[1]]
        kinds = options.hints(CanineConfig)
        if parts[2] not in kinds:
            raise ValueError(options.unknown_keys(where, [key], options.keys(cls)))
        value = options.coerce(value, kinds[parts[2]], f"{where} {key}")
    elif not options.settable(cls, key):
        raise ValueError(options.unknown_keys(where, [key], options.keys(cls)))
    node = values
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def from_dict(values: dict, where: str = "config", kind: str | None = None) -> FinetuneConfig:
    """A config from a mapping: of the task its `kind` names (a saved run's), else `kind`'s, else ner's."""
    values = dict(values or {})
    kind = values.get("kind") or kind or "ner"
    if values.get("kind") not in (None, kind):
        raise ValueError(f"{where}: kind {values['kind']!r}, but this is canine finetune {kind}")
    return options.build(config_class(kind), values, where)


def load_config(overrides: dict | None = None, config_file: str = "", kind: str = "ner") -> FinetuneConfig:
    """Defaults of the task `kind`, then a YAML file's values, then dotted-key overrides; built
    once, validated."""
    values, where = {}, "defaults"
    if config_file:
        with open(config_file, encoding="utf-8") as f:
            values, where = yaml.safe_load(f) or {}, config_file
        if not isinstance(values, dict):
            raise ValueError(f"{config_file}: expected a mapping of sections, got {values!r}")
    if values.get("kind", kind) != kind:
        raise ValueError(f"{where}: kind {values['kind']!r}, but this is canine finetune {kind}")
    for key, value in (overrides or {}).items():
        _set(values, key, value, "--set", config_class(kind))
    cfg = from_dict({**values, "kind": kind}, where)
    from training.train import tracking  # MLflow itself is imported only when a run tracks

    # log.mlflow unset takes MLFLOW_TRACKING_URI, as MLflow's clients do; `off` is off (as pretraining's).
    cfg = dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, mlflow=tracking.setting(cfg.log.mlflow)))
    validate(cfg)
    return cfg


def model_config(cfg: FinetuneConfig) -> CanineConfig:
    return of_size(cfg.model.size, **cfg.model.overrides)


def architecture_overrides(source) -> dict:
    """model.overrides that make model.size's config the init's architecture (init.Source): every
    CanineConfig field the source records, its position table cut to the rows it trained."""
    known = {f.name for f in dataclasses.fields(CanineConfig)}
    out = {k: (tuple(v) if isinstance(v, list) else v) for k, v in source.architecture.items() if k in known}
    out["max_position_embeddings"] = source.positions
    return out


def validate(cfg: FinetuneConfig) -> None:
    """Reject a config that cannot run, naming every problem at once."""
    t, p, task = cfg.train, cfg.parallel, cfg.task
    problems = options.check_choices(cfg)
    if cfg.optim.name == "lamb" and p.zero_stage >= 1:
        problems.append("optim.name=lamb needs parallel.zero_stage=0 (ZeRO flattens the tensors LAMB's trust ratio "
                        "is taken over); fine-tuning uses adamw")
    for name, value in (("train.global_batch", t.global_batch), ("train.micro_batch", t.micro_batch),
                        ("checkpoint.every", cfg.checkpoint.every), ("checkpoint.keep", cfg.checkpoint.keep)):
        if value < 1:
            problems.append(f"{name} must be at least 1, got {value}")
    if t.max_steps < 0 or t.eval_every < 0 or t.stop_at_step < 0 or t.epochs <= 0:
        problems.append("train.max_steps, eval_every and stop_at_step must be >= 0 and train.epochs > 0")
    if p.workers and t.global_batch % (t.micro_batch * p.workers):
        problems.append(f"train.global_batch {t.global_batch} is not a multiple of train.micro_batch {t.micro_batch} "
                        f"x parallel.workers {p.workers}: gradient accumulation needs a whole number of micro batches")
    if cfg.kind == "tydiqa":
        problems += _tydi_problems(task)
    elif task.max_length < 8:
        problems.append(f"task.max_length must be at least 8 characters, got {task.max_length}")
    elif not 0 <= task.stride <= task.max_length - 2:
        problems.append(f"task.stride must be in [0, task.max_length - 2 = {task.max_length - 2}], got {task.stride}")
    if not 0.0 <= cfg.optim.warmup_fraction < 1.0 or cfg.optim.lr <= 0:
        problems.append("optim.lr must be > 0 and optim.warmup_fraction in [0, 1)")
    if p.workers < 0 or p.max_failures < -1:
        problems.append("parallel.workers must be >= 0 and parallel.max_failures >= -1")
    if problems:
        raise ValueError("; ".join(problems))


def _tydi_problems(task) -> list[str]:
    problems = []
    # A window holds [CLS] [Q] question [SEP] ... [SEP]: at least one document character must fit.
    if task.max_question < 1 or task.max_length < task.max_question + 5:
        problems.append(f"task.max_length {task.max_length} must exceed task.max_question {task.max_question} + 4 "
                        "([CLS], [Q] and two [SEP]), and task.max_question must be at least 1")
    if task.stride < 1:
        problems.append(f"task.stride must be at least 1, got {task.stride}")
    if not 0.0 <= task.include_unknowns <= 1.0:
        problems.append(f"task.include_unknowns must be in [0, 1], got {task.include_unknowns}")
    for name in ("max_passages", "max_answer_length", "candidate_beam"):
        if getattr(task, name) < 1:
            problems.append(f"task.{name} must be at least 1, got {getattr(task, name)}")
    return problems


def resolve(cfg: FinetuneConfig, *, train_windows: int, cluster_gpus: float, labels: tuple[str, ...],
            saved: dict | None = None) -> FinetuneConfig:
    """What "auto" / 0 leave open, from the data and the cluster at the first start and from the
    run's config.yaml (`saved`) on a resumption: device, workers, precision (train/config.py's
    rules), max_steps from train.epochs, the evaluation interval, the label set."""
    p, sp, st = cfg.parallel, (saved or {}).get("parallel", {}), (saved or {}).get("train", {})
    device = p.device if p.device != "auto" else sp.get("device") or ("cuda" if cluster_gpus > 0 else "cpu")
    workers = p.workers or sp.get("workers") or (int(cluster_gpus) if device == "cuda" else 2)
    precision = (p.precision if p.precision != "auto" else
                 sp.get("precision") or ("bf16" if device == "cuda" else "fp32"))
    t = cfg.train
    max_steps = t.max_steps or st.get("max_steps") or data.steps_for(t.epochs, train_windows, t.global_batch)
    per_epoch = max(1, round(train_windows / t.global_batch))
    cfg = dataclasses.replace(
        cfg, labels=tuple(labels),
        train=dataclasses.replace(t, max_steps=max_steps, eval_every=t.eval_every or min(per_epoch, max_steps)),
        parallel=dataclasses.replace(p, device=device, workers=workers, precision=precision))
    validate(cfg)
    return cfg


def require_resolved(cfg: FinetuneConfig) -> None:
    p = cfg.parallel
    if "auto" in (p.device, p.precision) or not p.workers or not cfg.train.max_steps or not cfg.labels:
        raise ValueError("the fine-tuning config is not resolved: call training.finetune.config.resolve first")


def resume_conflicts(saved: dict, current: dict) -> list[str]:
    """The fields a resumption changes that it may not (schema.py's resumable fields may change)."""
    from training.train import config

    cls = config_class(current.get("kind") or "ner")
    return config.resume_conflicts(saved, current, resumable=frozenset(config.resumable_keys(cls)))
