"""`canine pretrain`: Ray Train + DeepSpeed pretraining on the pipeline's shards.

    canine pretrain --data out/shards --output runs/tiny --config tiny
    canine pretrain --data out/shards --output runs/tiny --config tiny   # again: resumes, or no-op if done
    canine pretrain --data gs://bucket/shards --output gs://bucket/runs/base --config base --max-failures 10
    canine pretrain --data out/shards --output runs/x --config small --workers 2 --set optim.lr=3e-4 --set model.hidden_dropout_prob=0
    canine pretrain --config base --dry-run            # print the resolved config, start nothing

The config is a shipped name (tiny, small, base) or a YAML file; every field can be overridden with
`--set section.field=value`, the common ones also with their own flag. The resolved config is saved
as OUTPUT/config.yaml. Without a cluster address (--ray-address / RAY_ADDRESS) a local Ray cluster
is started on 127.0.0.1. CANINE_FAULT_STEP=k makes worker rank 1 kill itself once at step k.
Exit codes: 0 done, 1 training failed, 2 refused before training (a bad config or data, a changed
config on resume, another driver holding the output, a cluster that cannot place the run).
"""

import json
import sys

# flag -> dotted config key
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
    parser.add_argument("--config", default="tiny", help="shipped config name (tiny, small, base) or a YAML file")
    parser.add_argument("--data", help="shard directory or fsspec URL (the output of `canine preprocess`)")
    parser.add_argument("--output", help="run directory or fsspec URL; an existing run there is resumed")
    parser.add_argument("--objective", choices=("char", "subword"), help="CANINE-C or CANINE-S")
    parser.add_argument("--workers", type=int, help="Ray Train workers (0: one per GPU)")
    parser.add_argument("--max-steps", type=int, help="optimizer steps, also the length of the LR schedule")
    parser.add_argument("--checkpoint-every", type=int, help="steps between checkpoints")
    parser.add_argument("--keep-checkpoints", type=int, help="checkpoints kept in the run's storage")
    parser.add_argument("--max-failures", type=int, help="worker failures to recover from (-1: unlimited)")
    parser.add_argument("--global-batch", type=int, help="examples per optimizer step over all workers")
    parser.add_argument("--micro-batch", type=int, help="examples per worker per forward/backward")
    parser.add_argument("--seq-len", type=int, help="characters per example (0: as the shards were built)")
    parser.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage")
    parser.add_argument("--optimizer", choices=("adamw", "lamb"), help="optimizer (LAMB needs ZeRO stage 0)")
    parser.add_argument("--lr", type=float, help="peak learning rate")
    parser.add_argument("--eval-every", type=int, help="steps between validation passes (0: only at the end)")
    parser.add_argument("--seed", type=int, help="model init, data order and dropout seed")
    parser.add_argument("--stop-at-step", type=int, help="checkpoint and stop at this step (resume later)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), help="auto: cuda if the cluster has GPUs")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), help="auto: bf16 on GPU, fp32 on CPU")
    parser.add_argument("--ray-address", help="Ray cluster address (default: RAY_ADDRESS or a local cluster)")
    parser.add_argument("--resource-wait-s", type=float,
                        help="seconds to wait for an autoscaler or other jobs to free what the run needs "
                             "(a cluster too small without an autoscaler fails at once)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config field, e.g. optim.weight_decay=0.1 (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")
    # The flags of config fields default to the config's value (one fact, one place: the YAML files).
    for action in parser._actions:
        key = FLAGS.get(action.dest)
        if key and "default" not in (action.help or ""):
            action.help = f"{action.help} (default: the config's {key})"


def overrides_from_args(args) -> dict:
    """Flags, then --set pairs (which win), as dotted-key overrides."""
    out = {key: getattr(args, flag) for flag, key in FLAGS.items() if getattr(args, flag, None) is not None}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. optim.lr=1e-3")
        out[key.strip()] = value
    return out


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

    from jobs.lock import LockHeld, LockLost
    from pipeline.contract import redact
    from training.train.resources import ClusterTooSmall
    from training.train.run import pretrain

    try:
        summary = pretrain(cfg)
    # bad data, a changed config on resume, another driver on the output, a cluster too small
    except (ValueError, FileNotFoundError, LockHeld, LockLost, ClusterTooSmall) as e:
        print(f"canine pretrain: {redact(str(e))}", file=sys.stderr)
        return 2
    except TrainingFailedError as e:  # the workers' error, after --max-failures restarts
        print(f"canine pretrain: training failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=1))
    return 0 if summary.get("steps") else 1
