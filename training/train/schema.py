"""The pretraining run's configuration: one frozen dataclass per concern, every field with its
default, its choices and its help (contract/options.py `option`).

`PretrainConfig`'s sections are the YAML file's: the presets in training/configs/ hold only what
differs from these defaults, `--set section.field=value` changes any field, and `canine
pretrain`'s flags are made from these fields (jobs/flags.py). Loading, validation and the
resolution of "auto" / 0 live in config.py. Fields marked resumable may differ between a run and
its resumption: they change neither which examples are seen, in which order, nor the
arithmetic of a step beyond float summation order.
"""

from dataclasses import dataclass

from contract import schema
from contract.options import option
from training.canine_config import OBJECTIVES

OPTIMIZERS = ("adamw", "lamb")
PLACEMENTS = ("PACK", "SPREAD", "STRICT_SPREAD")


@dataclass(frozen=True)
class ModelSpec:
    size: str = option("base", "the model's shape, one of training.canine_config.SIZES: tiny, small, base")
    # CanineConfig fields changed from the size, typed by CanineConfig's fields when loaded
    # (training/canine_config.py), e.g. {hidden_dropout_prob: 0.0} for exact tests. Not to be mutated.
    overrides: dict = option(factory=dict, help="CanineConfig fields changed from the size (--set model.FIELD=...)")


@dataclass(frozen=True)
class DataConfig:
    path: str = option("", "shard directory or fsspec URL holding the pipeline's manifest (its output)", resumable=True)
    seq_len: int = option(schema.DEFAULT_SEQ_LEN, "characters per example (paper: n = 2048); 0: the length the "
                          "shards were built with (manifest config.seq_len); longer examples are an error")
    # 1024 = the pipeline's Parquet row group, so a unit decodes exactly one group.
    unit_rows: int = option(1024, "rows per shuffle unit: the epoch order is a seeded shuffle of units (and of the "
                            "rows inside each); units are dealt to data.streams")
    chunk_rows: int = option(256, "rows one input-pipeline Ray task reads and turns into batches (rounded up to a "
                             "multiple of the micro batch): fewer, larger tasks amortize Ray's per-task cost",
                             resumable=True)
    prefetch_batches: int = option(4, "micro batches built (or being built) ahead of the step", resumable=True)
    cpus_per_task: float = option(1.0, "CPU reserved by each read/build Ray task", resumable=True)
    eval_examples: int = option(1024, "validation examples per evaluation (the first ones of the split, fixed)",
                                resumable=True)
    # Each global batch takes global_batch / streams rows from every stream, and each worker a
    # contiguous block of the batch (data.py): the order of the examples depends on the seed, the
    # data, the global batch and the streams, not on the worker count, so fresh runs on any count
    # see the same batches and a run can resume on another one (elastic).
    streams: int = option(0, "streams of units read in parallel into each global batch (the read parallelism; "
                          "part of the data order, like the seed); 0: the largest divisor of train.global_batch up "
                          "to 16 (data.py MAX_CANONICAL_STREAMS) and to the train split's units, set at the run's "
                          "first start, whatever the worker count, and saved with the run")
    # Per character: CharBERT's ~10% of words is ~0.02 for 5-character words (training/noise.py).
    noise_rate: float = option(0.0, "CharBERT's typos (insert / delete / swap / substitute) in the training input "
                               "per word character, targets clean, validation clean; 0: off")


@dataclass(frozen=True)
class TrainConfig:
    objective: str = option("char", "char (CANINE-C, autoregressive characters) or subword (CANINE-S)",
                            choices=OBJECTIVES)
    global_batch: int = option(4096, "examples per optimizer step over all workers (paper: 4096)")
    micro_batch: int = option(32, "examples per worker per forward/backward; the rest is gradient accumulation; "
                              "0 (the flag: auto): the largest that fits the GPU, a divisor of global_batch / "
                              "workers found by each worker before training and saved with the run (CPU: up to 32)")
    max_steps: int = option(124_000, "optimizer steps, also the length of the LR schedule (paper: 124k)")
    seed: int = option(0, "model init, data order and dropout seed (dropout drawn per micro batch)")
    eval_every: int = option(1000, "steps between validation passes; 0: only at the end", resumable=True)
    # For a time-sliced or preemptible job (or the resume test).
    stop_at_step: int = option(0, "checkpoint and exit cleanly at this step, to resume later; 0: run to max_steps",
                               resumable=True)


@dataclass(frozen=True)
class OptimConfig:
    name: str = option("adamw", "optimizer: adamw, or lamb (the paper's; needs ZeRO stage 0)", choices=OPTIMIZERS)
    lr: float = option(1e-4, "peak learning rate (paper's LAMB: 0.018 at batch 4096)")
    weight_decay: float = option(0.01, "decoupled weight decay, not applied to biases and LayerNorm weights (BERT)")
    beta1: float = option(0.9, "first-moment decay (Adam / LAMB, BERT's value)")
    beta2: float = option(0.999, "second-moment decay (BERT's value)")
    eps: float = option(1e-6, "added to the second-moment root (BERT's value)")
    warmup_fraction: float = option(0.025, "linear warm-up over this share of max_steps (paper: 2.5%), then "
                                    "linear decay to 0")
    grad_clip: float = option(1.0, "global gradient-norm clipping; 0: off")


@dataclass(frozen=True)
class ParallelConfig:
    workers: int = option(0, "Ray Train workers; 0: the run's saved count when resuming, else one per GPU in the "
                          "cluster (2 on a CPU-only cluster); another count on resume continues elastically",
                          resumable=True)
    device: str = option("auto", "auto: cuda if the cluster has GPUs", choices=("auto", "cpu", "cuda"))
    zero_stage: int = option(2, "DeepSpeed ZeRO stage", choices=(0, 1, 2, 3))
    # bf16 is autocast over fp32 weights (engine.py); the exact-resume guarantee is stated for fp32 on CPU.
    precision: str = option("auto", "auto: bf16 on GPU, fp32 on CPU; bf16 = torch.autocast over the fp32 master "
                            "weights (any device, any ZeRO stage)", choices=("auto", "bf16", "fp32"))
    cpus_per_worker: float = option(1.0, "CPUs a training worker reserves (the rest feed the input pipeline)",
                                    resumable=True)
    # PACK fills nodes first (fast collectives inside a node); STRICT_SPREAD puts each worker on a
    # node of its own (one worker per GPU node, or a test of training across nodes).
    placement: str = option("PACK", "how Ray places the workers (a placement group strategy)", choices=PLACEMENTS,
                            resumable=True)
    threads_per_worker: int = option(0, "torch intra-op threads per worker; 0: cpus_per_worker", resumable=True)
    # Off in every preset until benchmarks/gpu_check.py shows compiled gradients equal to eager ones on a
    # GPU (docs/compile.md); throughput: benchmarks/train_throughput.py.
    compile: bool = option(False, "torch.compile the model inside DeepSpeed (any ZeRO stage): fused kernels on "
                           "GPUs, at a one-off compile cost per worker; check it on your GPU with "
                           "benchmarks/gpu_check.py first", resumable=True)
    compile_backend: str = option("inductor", "the torch.compile backend of parallel.compile: inductor generates fused "
                                  "kernels; aot_eager captures the same graphs and runs them unfused, which tells a "
                                  "code-generation fault from a capture fault (docs/compile.md)",
                                  choices=("inductor", "aot_eager"), resumable=True)
    max_failures: int = option(0, "worker failures Ray Train recovers from, restarting from the last checkpoint "
                               "(-1: unlimited)", resumable=True)
    ray_address: str = option("", "Ray cluster address; empty: RAY_ADDRESS or a new local cluster on 127.0.0.1",
                              resumable=True)
    # 15 min: a cloud GPU node takes minutes. A cluster without an autoscaler that is too small fails at once.
    resource_wait_s: float = option(900.0, "seconds to wait for an autoscaler or other jobs to free what the run "
                                    "needs before starting the trainer (resources.py)", resumable=True)


@dataclass(frozen=True)
class CheckpointConfig:
    every: int = option(1000, "steps between checkpoints (one is always written at the last step)", resumable=True)
    keep: int = option(3, "checkpoints kept in the run's storage (Ray Train num_to_keep)", resumable=True)


@dataclass(frozen=True)
class LogConfig:
    console_every: int = option(10, "steps between progress lines (metrics.jsonl gets every step)", resumable=True)
    tensorboard: bool = option(True, "also write OUTPUT/tensorboard", resumable=True)
    peak_tflops: float = option(0.0, "peak dense bf16 TFLOP/s of one accelerator, for MFU; 0: look the device "
                                "up (metrics.py)", resumable=True)
    # Where MFU goes.
    profile_steps: int = option(0, "> 0: rank 0 runs torch.profiler over this many steps after 3 warm-up steps "
                                "and writes the ops with the most self time to OUTPUT/profile.txt", resumable=True)
    mlflow: str = option("", "MLflow tracking (training/train/tracking.py): a tracking URI (http://HOST:PORT, "
                         "databricks, sqlite:///PATH) or 'on' for an SQLite store in OUTPUT/mlflow.db; '': "
                         "MLFLOW_TRACKING_URI where it is set, else off; 'off': off", resumable=True)
    mlflow_experiment: str = option("canine", "the MLflow experiment a new run goes in", resumable=True)


@dataclass(frozen=True)
class InitConfig:
    # training/train/init.py: what loads, what is refused, what is taken from the source.
    path: str = option("", "start a new run from these weights (canine pretrain --init): a Hugging Face CANINE "
                       "directory (config.json + model.safetensors or pytorch_model.bin, as google/canine-c ships), a "
                       "canine export or a canine run; a local path or fsspec URL, never a hub name; '': a fresh "
                       "initialisation")
    step: int = option(0, "with a run as init.path: the checkpoint saved at this step (--init-step); 0: the run's "
                       "final weights")
    # Recorded, not chosen: what the run started from, in config.yaml, MLflow's params and the model card.
    sha256: str = option("", "set by the driver at the run's first start: the sha256 of the init weights (the "
                         "file's bytes; a checkpoint's consolidated tensors)", internal=True)


@dataclass(frozen=True)
class PretrainConfig:
    output: str = option("", "run directory or fsspec URL: checkpoints, metrics, exports; an existing run there "
                         "is resumed", resumable=True)
    model: ModelSpec = option(factory=ModelSpec, help="which CANINE")
    init: InitConfig = option(factory=InitConfig, help="the weights a new run starts from")
    data: DataConfig = option(factory=DataConfig, help="shards, length, input pipeline")
    train: TrainConfig = option(factory=TrainConfig, help="objective, batch, schedule length")
    optim: OptimConfig = option(factory=OptimConfig, help="optimizer and learning rate")
    parallel: ParallelConfig = option(factory=ParallelConfig, help="Ray workers, DeepSpeed")
    checkpoint: CheckpointConfig = option(factory=CheckpointConfig, help="when, how many")
    log: LogConfig = option(factory=LogConfig, help="console, TensorBoard, MFU")

    def accumulation_steps(self, workers: int | None = None) -> int:
        """Micro batches per worker per optimizer step, so that global_batch is reached."""
        w = workers or self.parallel.workers
        return self.train.global_batch // (self.train.micro_batch * w)

    def rows_per_step(self) -> int:
        """Examples one worker consumes per optimizer step."""
        return self.train.micro_batch * self.accumulation_steps()
