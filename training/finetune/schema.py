"""The fine-tuning run's configuration: the task's section, and the pretraining run's sections
(training/train/schema.py) where they mean the same, with fine-tuning's defaults.

A fine-tuning run is a canine run: the same Ray Train workers, DeepSpeed engine (engine.py reads
train.global_batch / micro_batch / max_steps, optim and parallel, which these sections have),
checkpoints, metrics, MLflow and console. What differs is the data (CoNLL files read whole by
every worker: a NER corpus is megabytes) and the defaults, BERT's fine-tuning recipe (Devlin et
al. 2019 §A.3: AdamW, lr 5e-5, batch 32, a few epochs, 10% warm-up), which is also MasakhaNER's
baseline recipe (Adelani et al. 2021 §5: lr 5e-5, batch 32, max 200 subwords).
"""

from dataclasses import dataclass

from contract.options import option
from training.train.schema import CheckpointConfig, InitConfig, LogConfig, ModelSpec, OptimConfig, ParallelConfig


@dataclass(frozen=True)
class NerTaskConfig:
    # LANG=PATH, or PATH named by its folder (MasakhaNER's data/swa/train.txt: swa); training/conll.py.
    train: tuple[str, ...] = option((), "CoNLL training files (LANG=PATH or PATH, repeatable): one model for all")
    dev: tuple[str, ...] = option((), "CoNLL development files: the evaluations during training pick the kept "
                                  "weights (best dev F1)")
    test: tuple[str, ...] = option((), "CoNLL test files: scored at every evaluation; the figures of the best-dev "
                                   "evaluation are the run's", resumable=True)
    # 2048 is CANINE's pretraining length; a NER sentence is ~100-300 characters (MasakhaNER, CoNLL),
    # so 512 holds almost all of them whole at a quarter of the attention cost; longer ones are windowed.
    max_length: int = option(512, "characters per window, [CLS] and [SEP] included; a longer sentence is read in "
                             "overlapping windows (never truncated)")
    stride: int = option(0, "characters between the starts of a long sentence's windows; 0: half a window")


@dataclass(frozen=True)
class FinetuneTrainConfig:
    global_batch: int = option(32, "windows per optimizer step over all workers (BERT / MasakhaNER: 32)")
    micro_batch: int = option(16, "windows per worker per forward/backward; the rest is gradient accumulation")
    epochs: float = option(10.0, "passes over the training windows, when train.max_steps is 0")
    max_steps: int = option(0, "optimizer steps, also the length of the LR schedule; 0: train.epochs' worth, set "
                            "at the run's first start from the data and saved with the run")
    seed: int = option(0, "classifier init, data order and dropout seed")
    eval_every: int = option(0, "steps between evaluations on dev and test (the best dev F1 is kept); 0: once "
                             "an epoch (and always at the last step)", resumable=True)
    stop_at_step: int = option(0, "checkpoint and exit cleanly at this step, to resume later; 0: run to max_steps",
                               resumable=True)


@dataclass(frozen=True)
class FinetuneOptimConfig(OptimConfig):
    # 5e-5 suits a base-size encoder (google/canine-c, --config base runs); the tiny model learns
    # nothing at it in a few hundred steps (benchmarks/downstream_ner.py uses 3e-3 there).
    lr: float = option(5e-5, "peak learning rate (BERT fine-tuning of a base-size model: 5e-5; a tiny model needs "
                       "~1e-3 or more)")
    warmup_fraction: float = option(0.1, "linear warm-up over this share of max_steps (BERT: 10%), then linear "
                                    "decay to 0")


@dataclass(frozen=True)
class FinetuneModelSpec(ModelSpec):
    # Only without --init (the random-initialisation baseline); with it the shape is the init's.
    size: str = option("tiny", "the fresh encoder's shape without --init (tiny, small, base); with --init the "
                       "init's own shape is used")


@dataclass(frozen=True)
class FinetuneCheckpointConfig(CheckpointConfig):
    every: int = option(500, "steps between checkpoints (one is always written at the last step)", resumable=True)
    keep: int = option(2, "checkpoints kept in the run's storage (Ray Train num_to_keep)", resumable=True)


@dataclass(frozen=True)
class FinetuneConfig:
    # Which task's run this is: the command's word (canine finetune ner / tydiqa), saved with the
    # run so that --predict, evaluate and a resumption read it with the right task (tasks.py).
    kind: str = option("ner", "the downstream task", choices=("ner", "tydiqa"), internal=True)
    output: str = option("", "run directory or fsspec URL: checkpoints, metrics, scores, the export; an existing "
                         "run there is resumed", resumable=True)
    task: NerTaskConfig = option(factory=NerTaskConfig, help="the task's files and windows")
    # With init.path the architecture is the init's (model.size is ignored); without, a fresh
    # encoder of model.size: the random-initialisation baseline.
    model: FinetuneModelSpec = option(factory=FinetuneModelSpec, help="the encoder's shape without --init")
    init: InitConfig = option(factory=InitConfig, help="the pretrained encoder fine-tuning starts from")
    train: FinetuneTrainConfig = option(factory=FinetuneTrainConfig, help="batch, schedule length, evaluations")
    optim: FinetuneOptimConfig = option(factory=FinetuneOptimConfig, help="optimizer and learning rate")
    parallel: ParallelConfig = option(factory=ParallelConfig, help="Ray workers, DeepSpeed")
    checkpoint: FinetuneCheckpointConfig = option(factory=FinetuneCheckpointConfig, help="when, how many")
    log: LogConfig = option(factory=LogConfig, help="console, TensorBoard, MLflow")
    # Set by the driver at the first start from the training files (training/conll.py label_list),
    # saved with the run: the classifier's rows mean these labels.
    labels: tuple[str, ...] = option((), "the label set, set by the driver from the training files", internal=True)

    def accumulation_steps(self, workers: int | None = None) -> int:
        """Micro batches per worker per optimizer step, so that global_batch is reached."""
        w = workers or self.parallel.workers
        return self.train.global_batch // (self.train.micro_batch * w)


# --- TyDi QA's primary tasks --------------------------------------------------------------------
# Google's CANINE recipe (google-research/language, language/canine/tydiqa/README.md): windows of
# 2048 characters, doc_stride 512, the question's last 256 characters, 10% of the training windows
# without the answer kept, answers up to 100 characters, the best of 30 starts x 30 ends.


@dataclass(frozen=True)
class TydiTaskConfig:
    train: tuple[str, ...] = option((), "official primary-task training files (tydiqa-v1.0-train.jsonl.gz; "
                                    "repeatable)")
    dev: tuple[str, ...] = option((), "official files scored at every evaluation (tydiqa-v1.0-dev.jsonl.gz): "
                                  "the best macro F1 picks the kept weights")
    max_length: int = option(2048, "characters per window: [CLS] [Q] question [SEP] document [SEP] (Google: 2048)")
    stride: int = option(512, "characters between the starts of a document's windows (Google's doc_stride: 512)")
    max_question: int = option(256, "a longer question keeps its last this many characters (Google: 256)")
    include_unknowns: float = option(0.1, "share of the training windows without the answer that are kept "
                                     "(Google: 0.1); the evaluation reads every window")
    max_passages: int = option(45, "passage candidates read per document, each after its marker character "
                               "(Google's max_passages: 45)")
    max_answer_length: int = option(100, "longest minimal answer predicted, in characters (the paper: 100)",
                                    resumable=True)
    candidate_beam: int = option(30, "best starts x best ends searched per window (Google: 30)", resumable=True)
    # Set by the command: where the windows of the files above were written (pipeline/downstream).
    windows: str = option("", "the prepared windows' folder (set by canine finetune tydiqa)", internal=True)


@dataclass(frozen=True)
class TydiTrainConfig(FinetuneTrainConfig):
    # Google's CANINE TyDi QA run: batch 512, 10 epochs, lr 5e-5, 10% warm-up (README, run_tydi).
    global_batch: int = option(512, "windows per optimizer step over all workers (Google's CANINE TyDi QA: 512)")
    micro_batch: int = option(8, "windows per worker per forward/backward (2048 characters each); the rest is "
                              "gradient accumulation")


@dataclass(frozen=True)
class TydiFinetuneConfig(FinetuneConfig):
    kind: str = option("tydiqa", "the downstream task", choices=("ner", "tydiqa"), internal=True)
    task: TydiTaskConfig = option(factory=TydiTaskConfig, help="the official files and the windows")
    train: TydiTrainConfig = option(factory=TydiTrainConfig, help="batch, schedule length, evaluations")


# The config class of each task (config.py builds a saved or given config with its kind's).
CONFIGS = {"ner": FinetuneConfig, "tydiqa": TydiFinetuneConfig}
