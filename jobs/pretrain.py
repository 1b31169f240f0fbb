"""`canine pretrain`: Ray Train + DeepSpeed pretraining on the pipeline's shards.

    canine pretrain --data out/shards --output runs/tiny --config tiny
    canine pretrain --data out/shards --output runs/tiny --config tiny   # again: resumes, or no-op if done
    canine pretrain --data gs://bucket/shards --output gs://bucket/runs/base --config base --max-failures 10
    canine pretrain --data out/shards --output runs/x --config small --workers 2 --set optim.lr=3e-4 --set model.hidden_dropout_prob=0
    canine pretrain --config base --dry-run            # print the resolved config, start nothing

The config is a shipped name (tiny, small, base) or a YAML file; every field can be overridden with
`--set section.field=value`, the common ones also with their own flag. The resolved config is saved
as OUTPUT/config.yaml. Without a cluster address (--ray-address / RAY_ADDRESS) a local Ray cluster
is started on 127.0.0.1. `--micro-batch auto` takes the largest micro batch that fits the GPU
(keeping the global batch by accumulation; training/train/autobatch.py). CANINE_FAULT_STEP=k
makes worker rank 1 kill itself once at step k (CANINE_FAULT_KIND: other faults, for tests;
training/train/failures.py).
Exit codes: 0 done, 1 training failed (after --max-failures restarts), 2 refused before training
(a bad config or data, a changed config on resume, another driver holding the output, a cluster
that cannot place the run) or stopped by an error no restart can fix (out of memory, a bad config
or shard met by the workers, a run that trains nothing or diverged).
"""

import json
import sys

from jobs import flags

# The common fields that have a flag of their own: flag dest -> dotted config key.
FLAGS = {
    "data": "data.path", "output": "output", "objective": "train.objective", "workers": "parallel.workers",
    "max_steps": "train.max_steps", "checkpoint_every": "checkpoint.every", "keep_checkpoints": "checkpoint.keep",
    "max_failures": "parallel.max_failures", "global_batch": "train.global_batch", "micro_batch": "train.micro_batch",
    "seq_len": "data.seq_len", "zero_stage": "parallel.zero_stage", "optimizer": "optim.name", "lr": "optim.lr",
    "eval_every": "train.eval_every", "seed": "train.seed", "stop_at_step": "train.stop_at_step",
    "device": "parallel.device", "precision": "parallel.precision", "ray_address": "parallel.ray_address",
    "resource_wait_s": "parallel.resource_wait_s",
}


def add_arguments(parser) -> None:
    from training.train.schema import PretrainConfig

    parser.add_argument("--config", default="tiny", help="shipped config name (tiny, small, base) or a YAML file")
    # Help, types and choices come from the config's fields; their defaults from --config.
    flags.add_field_flags(parser, PretrainConfig, FLAGS, defaults=False, auto=("micro_batch",))
    flags.add_set_flag(parser, "model.ngram_orders=[2,3] or optim.weight_decay=0.1")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")


def overrides_from_args(args) -> dict:
    """Flags, then --set pairs (which win), as dotted-key overrides."""
    from pipeline.options import parse_settings

    return {**flags.values_of(args, FLAGS), **parse_settings(args.set)}


def main(args) -> int:
    from training.train.config import load_config, to_yaml

    try:
        cfg = load_config(args.config, overrides_from_args(args))
    except (ValueError, FileNotFoundError) as e:
        print(f"canine pretrain: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(to_yaml(cfg), end="")
        return 0
    if not cfg.output or not cfg.data.path:
        print("canine pretrain: --data and --output are required", file=sys.stderr)
        return 2

    from ray.train import TrainingFailedError

    from pipeline.lock import LockHeld, LockLost
    from pipeline.contract import redact
    from training.train.failures import FatalError
    from training.train.resources import ClusterTooSmall
    from training.train.run import pretrain

    try:
        summary = pretrain(cfg)
    # bad data, a changed config on resume, another driver on the output, a cluster too small
    except (ValueError, FileNotFoundError, LockHeld, LockLost, ClusterTooSmall) as e:
        print(f"canine pretrain: {redact(str(e))}", file=sys.stderr)
        return 2
    except FatalError as e:  # a worker's error that no restart can fix, at its first occurrence
        print(f"canine pretrain: {redact(str(e))}", file=sys.stderr)
        return 2
    except TrainingFailedError as e:  # the workers' error, after --max-failures restarts
        print(f"canine pretrain: training failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=1))
    return 0 if summary.get("steps") else 1
