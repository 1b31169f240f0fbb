"""The pretraining run configuration: one dataclass per concern, loaded from YAML, overridable.

A run is described by `PretrainConfig`, whose sections mirror the YAML files in
`training/configs/` (`tiny` for tests and smoke runs, `small`, `base` = the CANINE-base recipe of
paper §4.1.3). Any field can be changed with a dotted key, e.g. `optim.lr=1e-3` or
`model.hidden_dropout_prob=0` (model fields go to the preset's overrides). The resolved config is
saved with the run (`OUTPUT/config.yaml`); resuming refuses changes that would alter the
trajectory (see `RESUMABLE_CHANGES`).
"""

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
OBJECTIVES = ("char", "subword")  # CANINE-C, CANINE-S (paper §3.2)
OPTIMIZERS = ("adamw", "lamb")
PLACEMENTS = ("PACK", "SPREAD", "STRICT_SPREAD")


@dataclass
class ModelSpec:
    preset: str = "tiny"  # a name in training.config.PRESETS
    # CanineConfig fields changed from the preset (e.g. hidden_dropout_prob: 0.0 for exact tests).
    overrides: dict = field(default_factory=dict)


@dataclass
class DataConfig:
    path: str = ""  # shard directory or fsspec URL holding the pipeline's manifest (its output)
    # Characters per example (paper: n = 2048); 0 = the length the shards were built with
    # (manifest config.seq_len). Shorter examples are padded; longer ones are an error.
    seq_len: int = 2048
    # Rows per shuffle unit. The epoch order is a seeded shuffle of units (and of the rows inside
    # each unit); units are dealt to workers. 1024 = the pipeline's Parquet row group, so a unit
    # decodes exactly one group.
    unit_rows: int = 1024
    # Rows one input-pipeline Ray task reads and turns into batches (rounded up to a multiple of the micro
    # batch): fewer, larger tasks amortize Ray's per-task cost; smaller ones start faster.
    chunk_rows: int = 256
    prefetch_batches: int = 4  # micro batches built (or being built) ahead of the step
    cpus_per_task: float = 1.0  # CPU reserved by each read/build Ray task
    eval_examples: int = 1024  # validation examples per evaluation (the first ones of the split, fixed)
    # Streams the epoch's units are dealt to; each global batch takes global_batch / streams rows
    # from every stream, and each worker a contiguous block of the batch (data.py). The order of
    # the examples therefore does not depend on the worker count, so a run can resume on another
    # one (elastic). 0 = the worker count at the run's first start, then saved with the run.
    streams: int = 0
    # CharBERT's noisy language modeling (training/noise.py): typos (insert / delete / swap / substitute)
    # in the training input at this rate per word character, targets clean; validation stays clean.
    # 0 = off. Per character: CharBERT's ~10% of words is ~0.02 for 5-character words.
    noise_rate: float = 0.0


@dataclass
class TrainConfig:
    objective: str = "char"  # "char" (CANINE-C) or "subword" (CANINE-S)
    global_batch: int = 4096  # examples per optimizer step over all workers (paper: 4096)
    micro_batch: int = 32  # examples per worker per forward/backward; the rest is gradient accumulation
    max_steps: int = 124_000  # optimizer steps; also the length of the LR schedule (paper: 124k)
    seed: int = 0  # model init, data order, dropout (drawn per micro batch of the global batch)
    eval_every: int = 1000  # steps between validation passes; 0 = only at the end
    # 0 = run to max_steps. Otherwise checkpoint and exit cleanly once this step is reached, so a
    # time-sliced or preemptible job (or the resume test) stops mid-schedule and resumes later.
    stop_at_step: int = 0


@dataclass
class OptimConfig:
    name: str = "adamw"  # "adamw" or "lamb" (the paper's; needs ZeRO stage 0, see validate())
    lr: float = 1e-4  # peak learning rate (paper's LAMB: 0.018 at batch 4096)
    weight_decay: float = 0.01  # not applied to biases and LayerNorm weights (BERT)
    beta1: float = 0.9  # first-moment decay (Adam / LAMB, BERT's value)
    beta2: float = 0.999  # second-moment decay (BERT's value)
    eps: float = 1e-6  # added to the second-moment root (BERT's value)
    warmup_fraction: float = 0.025  # linear warm-up over this share of max_steps (paper: 2.5%), then linear decay to 0
    grad_clip: float = 1.0  # global gradient-norm clipping; 0 = off


@dataclass
class ParallelConfig:
    # Ray Train workers; 0 = the run's saved count when resuming, else one per GPU in the cluster
    # (2 on a CPU-only cluster). Another count on resume continues the run elastically.
    workers: int = 0
    device: str = "auto"  # "auto" (cuda if the cluster has GPUs), "cuda" or "cpu"
    zero_stage: int = 2  # DeepSpeed ZeRO stage 0-3
    precision: str = "auto"  # "auto" (bf16 on GPU, fp32 on CPU), "bf16" or "fp32"
    cpus_per_worker: float = 1.0  # CPUs a training worker reserves (the rest feed the input pipeline)
    # How Ray places the workers (a placement group strategy): PACK fills nodes first (fast
    # collectives inside a node); SPREAD spreads where it can; STRICT_SPREAD puts each worker on
    # a node of its own (one worker per GPU node, or a test of training across nodes).
    placement: str = "PACK"
    threads_per_worker: int = 0  # torch intra-op threads per worker; 0 = cpus_per_worker
    # torch.compile the model inside DeepSpeed (engine.compile, any ZeRO stage): fewer, fused kernels on
    # GPUs, at a one-off compile cost per worker (measured figures: benchmarks/train_throughput.py).
    compile: bool = False
    max_failures: int = 0  # worker failures Ray Train recovers from (restart from the last checkpoint)
    ray_address: str = ""  # "" = RAY_ADDRESS or a new local cluster on 127.0.0.1
    # Seconds the driver waits, before starting the trainer, for an autoscaler to add the nodes
    # the run needs or for other jobs to free them (resources.py); then it gives up. A cluster
    # without an autoscaler that is too small fails at once. 15 min: a cloud GPU node takes minutes.
    resource_wait_s: float = 900.0


@dataclass
class CheckpointConfig:
    every: int = 1000  # steps between checkpoints (one is always written at the last step)
    keep: int = 3  # checkpoints kept in the run's storage (Ray Train num_to_keep)


@dataclass
class LogConfig:
    console_every: int = 10  # steps between progress lines (metrics.jsonl gets every step)
    tensorboard: bool = True  # also write OUTPUT/tensorboard
    # Peak dense bf16 TFLOP/s of one accelerator, for MFU; 0 = look up the device name (metrics.py).
    peak_tflops: float = 0.0
    # > 0: rank 0 runs torch.profiler over this many steps after 3 warm-up steps and writes the
    # ops with the most self time (device time on a GPU) to OUTPUT/profile.txt: where MFU goes.
    profile_steps: int = 0


@dataclass
class PretrainConfig:
    output: str = ""  # run directory or fsspec URL: checkpoints, metrics, exports
    model: ModelSpec = field(default_factory=ModelSpec)  # which CANINE (issue 3's presets)
    data: DataConfig = field(default_factory=DataConfig)  # shards, length, input pipeline
    train: TrainConfig = field(default_factory=TrainConfig)  # objective, batch, schedule length
    optim: OptimConfig = field(default_factory=OptimConfig)  # optimizer and learning rate
    parallel: ParallelConfig = field(default_factory=ParallelConfig)  # Ray workers, DeepSpeed
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)  # when / how many
    log: LogConfig = field(default_factory=LogConfig)  # console, TensorBoard, MFU

    def accumulation_steps(self, workers: int | None = None) -> int:
        """Micro batches per worker per optimizer step, so that global_batch is reached."""
        w = workers or self.parallel.workers
        return self.train.global_batch // (self.train.micro_batch * w)

    def rows_per_step(self) -> int:
        """Examples one worker consumes per optimizer step."""
        return self.train.micro_batch * self.accumulation_steps()


# Fields that may differ between a run and its resumption: they do not change which examples are
# seen, in which order, nor the arithmetic of a step beyond float summation order. The worker count
# is one: the example order is the data streams' (data.py) and the optimizer state is resharded
# on resume (checkpoint.py), so a run continues elastically on another count.
RESUMABLE_CHANGES = {
    "output", "data.path", "data.chunk_rows", "parallel.workers", "data.prefetch_batches", "data.cpus_per_task",
    "data.eval_examples", "train.eval_every", "train.stop_at_step", "parallel.max_failures",
    "parallel.ray_address", "parallel.resource_wait_s", "parallel.placement", "parallel.cpus_per_worker", "parallel.threads_per_worker",
    "parallel.compile", "checkpoint.every", "checkpoint.keep", "log.console_every", "log.tensorboard", "log.peak_tflops",
    "log.profile_steps",
}


def to_dict(cfg: PretrainConfig) -> dict:
    return dataclasses.asdict(cfg)


def to_yaml(cfg: PretrainConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def _coerce(value, kind, where: str):
    """A YAML or command-line value as the field's type; strings from the command line are parsed."""
    if kind is bool:
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        if isinstance(value, bool):
            return value
    elif kind in (int, float):
        try:
            number = kind(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is not None and not math.isfinite(number):  # "nan", "inf": float() takes them
            raise ValueError(f"{where}: expected a finite number, got {value!r}")
        if number is not None and (kind is float or float(value) == number):
            return number
    elif kind is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    elif kind is dict and isinstance(value, dict):
        return dict(value)
    raise ValueError(f"{where}: expected {kind.__name__}, got {value!r}")


def _section_from_dict(cls, values, where: str):
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    kwargs = {}
    for name, value in values.items():
        kind = hints[name]
        if dataclasses.is_dataclass(kind):
            kwargs[name] = _section_from_dict(kind, value, f"{where}.{name}")
        else:
            kwargs[name] = _coerce(value, kind, f"{where}.{name}")
    return cls(**kwargs)


def from_dict(values: dict, where: str = "config") -> PretrainConfig:
    """Build a config from nested dicts (a YAML file); every key is checked against the dataclasses."""
    return _section_from_dict(PretrainConfig, values or {}, where)


def config_path(name_or_file: str) -> Path:
    """A shipped config name (`tiny`, `small`, `base`) or a path to a YAML file."""
    shipped = CONFIG_DIR / f"{name_or_file}.yaml"
    if shipped.is_file():
        return shipped
    path = Path(name_or_file)
    if path.is_file():
        return path
    names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"config {name_or_file!r} is neither a shipped config {names} nor a YAML file")


def apply_overrides(cfg: PretrainConfig, overrides: dict, where: str = "override") -> PretrainConfig:
    """Set dotted keys (`optim.lr`, `model.hidden_size`); model fields go to `model.overrides`."""
    values = to_dict(cfg)
    for key, value in overrides.items():
        parts = key.split(".")
        if parts[0] == "model" and len(parts) == 2 and parts[1] not in ("preset", "overrides"):
            parts = ["model", "overrides", parts[1]]
        node = values
        for part in parts[:-1]:
            if not isinstance(node, dict) or part not in node:
                raise ValueError(f"{where}: unknown key {key!r}")
            node = node[part]
        if not isinstance(node, dict) or (parts[-1] not in node and parts[:2] != ["model", "overrides"]):
            raise ValueError(f"{where}: unknown key {key!r}")
        node[parts[-1]] = value
    return from_dict(values, where)


def load_config(name_or_file: str = "tiny", overrides: dict | None = None) -> PretrainConfig:
    """Read a shipped or user YAML config, then apply dotted-key overrides, then validate."""
    path = config_path(name_or_file)
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from e
    cfg = from_dict(values, where=str(path))
    if overrides:
        cfg = apply_overrides(cfg, overrides)
    validate(cfg)
    return cfg


def model_config(cfg: PretrainConfig, num_subword_vocab: int = 0):
    """The CanineConfig of the run: the preset, its overrides, the subword vocabulary size."""
    from training.config import CanineConfig, preset

    hints = typing.get_type_hints(CanineConfig)
    overrides = {}
    for name, value in cfg.model.overrides.items():
        where = f"model.overrides.{name}"
        if name not in hints:
            raise ValueError(f"{where}: not a CanineConfig field; known: {sorted(hints)}")
        kind = hints[name]
        if typing.get_origin(kind) is tuple:  # e.g. ngram_orders: "2,3" on the command line
            items = value.split(",") if isinstance(value, str) else list(value)
            overrides[name] = tuple(_coerce(v, int, where) for v in items if str(v).strip())
        else:
            overrides[name] = _coerce(value, kind, where)
    if num_subword_vocab:
        overrides["num_subword_vocab"] = num_subword_vocab
    return preset(cfg.model.preset, **overrides)


def validate(cfg: PretrainConfig) -> None:
    """Reject a config that cannot run, naming every problem at once."""
    t, p, o = cfg.train, cfg.parallel, cfg.optim
    problems = []
    if t.objective not in OBJECTIVES:
        problems.append(f"train.objective must be one of {OBJECTIVES}, got {t.objective!r}")
    if o.name not in OPTIMIZERS:
        problems.append(f"optim.name must be one of {OPTIMIZERS}, got {o.name!r}")
    if o.name == "lamb" and p.zero_stage >= 1:
        # DeepSpeed ZeRO flattens parameters before partitioning, so a per-tensor trust ratio
        # would be taken over arbitrary flat slices (DeepSpeed issues #490, #1217).
        problems.append(
            f"optim.name=lamb needs parallel.zero_stage=0, got {p.zero_stage}: ZeRO stages >= 1 flatten "
            "parameters into partitions, so LAMB's per-tensor trust ratio would be wrong "
            "(DeepSpeed #490, #1217); use --zero-stage 0 or --optimizer adamw")
    if p.zero_stage not in (0, 1, 2, 3):
        problems.append(f"parallel.zero_stage must be 0, 1, 2 or 3, got {p.zero_stage}")
    if p.device not in ("auto", "cpu", "cuda"):
        problems.append(f"parallel.device must be auto, cpu or cuda, got {p.device!r}")
    if p.placement not in PLACEMENTS:
        problems.append(f"parallel.placement must be one of {', '.join(PLACEMENTS)}, got {p.placement!r}")
    if p.precision not in ("auto", "bf16", "fp32"):
        problems.append(f"parallel.precision must be auto, bf16 or fp32, got {p.precision!r}")
    if p.device == "cpu" and p.precision == "bf16":
        problems.append("parallel.precision=bf16 is for GPUs; CPU runs train in fp32")
    for name, value in (("train.global_batch", t.global_batch), ("train.micro_batch", t.micro_batch),
                        ("train.max_steps", t.max_steps), ("data.unit_rows", cfg.data.unit_rows), ("data.chunk_rows", cfg.data.chunk_rows),
                        ("checkpoint.every", cfg.checkpoint.every), ("checkpoint.keep", cfg.checkpoint.keep)):
        if value < 1:
            problems.append(f"{name} must be at least 1, got {value}")
    if p.workers < 0 or p.max_failures < -1:
        problems.append("parallel.workers must be >= 0 and parallel.max_failures >= -1")
    if p.workers and t.micro_batch >= 1 and t.global_batch % (t.micro_batch * p.workers):
        problems.append(
            f"train.global_batch {t.global_batch} is not a multiple of train.micro_batch {t.micro_batch} x "
            f"parallel.workers {p.workers}: gradient accumulation needs a whole number of micro batches")
    streams = cfg.data.streams
    if streams < 0 or (streams and t.global_batch % streams):
        problems.append(f"data.streams must be >= 0 and divide train.global_batch {t.global_batch} (every stream "
                        f"gives each global batch the same number of examples), got {streams}")
    if not 0.0 <= o.warmup_fraction < 1.0:
        problems.append(f"optim.warmup_fraction must be in [0, 1), got {o.warmup_fraction}")
    d, log = cfg.data, cfg.log
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
            if not (math.isfinite(value) and holds(value)):  # also for a config built in code (no _coerce)
                problems.append(f"{name} must be {rule}, got {value}")
    if t.stop_at_step < 0 or t.eval_every < 0 or cfg.data.seq_len < 0:
        problems.append("train.stop_at_step, train.eval_every and data.seq_len must be >= 0")
    try:
        model = model_config(cfg)
        if cfg.data.seq_len > model.max_position_embeddings:
            problems.append(f"data.seq_len {cfg.data.seq_len} exceeds the model's max_position_embeddings "
                            f"{model.max_position_embeddings} (preset {cfg.model.preset!r})")
    except (KeyError, ValueError, TypeError) as e:
        problems.append(f"model: {e}")
    if problems:
        raise ValueError("invalid pretraining config: " + "; ".join(problems))


def resume_conflicts(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between a run's saved config and the new one, except the
    ones a resumption may change."""
    out = []
    for key in sorted(set(saved) | set(current)):
        dotted = f"{prefix}{key}"
        a, b = saved.get(key), current.get(key)
        if isinstance(a, dict) and isinstance(b, dict) and dotted != "model.overrides":
            out += resume_conflicts(a, b, dotted + ".")
        elif a != b and dotted not in RESUMABLE_CHANGES:
            out.append(f"{dotted}: {a!r} -> {b!r}")
    return out
