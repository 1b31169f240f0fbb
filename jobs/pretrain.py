"""`canine pretrain`: Ray Train + DeepSpeed pretraining on the pipeline's shards.

    canine pretrain --data out/shards --output runs/tiny --config tiny
    canine pretrain --data out/shards --output runs/tiny --config tiny   # again: resumes, or no-op if done
    canine pretrain --data gs://bucket/shards --output gs://bucket/runs/base --config base --max-failures 10
    canine pretrain --data out/shards --output runs/x --config small --workers 2 --set optim.lr=3e-4 --set model.hidden_dropout_prob=0
    canine pretrain --config base --dry-run            # print the resolved config, start nothing
    canine pretrain --data out/shards --output runs/cont --config base --init /models/canine-c   # from weights
    canine pretrain --data out/shards --output runs/cont --config tiny --init runs/tiny --init-step 50

The config is a shipped name (tiny, small, base) or a YAML file; every field can be overridden with
`--set section.field=value`, the common ones also with their own flag. Local paths (--data,
--output, --config, and data.path / output in a config file) are relative to the working directory
of the command, and saved absolute. The resolved config is saved as OUTPUT/config.yaml. Without a
cluster address (--ray-address / RAY_ADDRESS) a local Ray cluster is started on 127.0.0.1.
`--micro-batch auto` takes the largest micro batch that fits the GPU (keeping the global batch by
accumulation; training/train/autobatch.py). `--stop-at-step K` checkpoints and ends at step K; the
same command without it (or with a later K) goes on. `--init PATH` starts a new run from weights: a
Hugging Face CANINE directory (google/canine-c's files, fetched beforehand), a canine export or
a canine run (`--init-step N`: its checkpoint of step N); training/train/init.py says what loads
and what is refused (docs/pretraining.md "Continuing from a released checkpoint"). CANINE_FAULT_STEP=k makes worker rank 1 kill
itself once at step k (CANINE_FAULT_KIND: other faults, for tests; training/train/failures.py).
Exit codes: 0 done, 1 training failed (after --max-failures restarts), 2 refused before training
(a bad config or data, a changed config on resume, another driver holding the output, a cluster
that cannot place the run or cannot be reached) or stopped by an error no restart can fix (out of
memory, a bad config or shard met by the workers, a run that trains nothing or diverged), 130
interrupted (Ctrl-C: the line says the last checkpointed step; the same command resumes from it);
every error is one line on stderr (jobs/errors.py).
"""

import json
import sys

from jobs import flags, quiet

# The common fields that have a flag of their own: flag dest -> dotted config key.
FLAGS = {
    "data": "data.path", "output": "output", "objective": "train.objective", "workers": "parallel.workers",
    "max_steps": "train.max_steps", "checkpoint_every": "checkpoint.every", "keep_checkpoints": "checkpoint.keep",
    "max_failures": "parallel.max_failures", "global_batch": "train.global_batch", "micro_batch": "train.micro_batch",
    "seq_len": "data.seq_len", "zero_stage": "parallel.zero_stage", "optimizer": "optim.name", "lr": "optim.lr",
    "eval_every": "train.eval_every", "seed": "train.seed", "stop_at_step": "train.stop_at_step",
    "device": "parallel.device", "precision": "parallel.precision", "ray_address": "parallel.ray_address",
    "resource_wait_s": "parallel.resource_wait_s", "init": "init.path", "init_step": "init.step",
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
    from contract.options import parse_settings

    return {**flags.values_of(args, FLAGS), **parse_settings(args.set)}


def objects(args, cfg=None) -> dict[str, str]:
    """What each path of this run is, for an error that names only a path (jobs/errors.py)."""
    found = {args.config: "the config file (--config)"}
    if cfg is not None:
        found.update({cfg.data.path: "the shard directory (--data)", cfg.output: "the run directory (--output)"})
        if cfg.init.path:
            found[cfg.init.path] = "the init weights (--init)"
    return found


def main(args) -> int:
    from jobs import errors
    from training.train.rundir import absolute_paths
    from training.train.config import load_config, to_yaml

    try:
        cfg = absolute_paths(load_config(args.config, overrides_from_args(args)))
    except Exception as e:
        return errors.report("pretrain", e, objects(args))
    if args.dry_run:
        print(to_yaml(cfg), end="", file=quiet.document())
        return 0
    for flag, what, key, value in (("--data", "the shard directory", "data.path", cfg.data.path),
                                   ("--output", "the run directory", "output", cfg.output)):
        if not value:
            print(f"canine pretrain: {flag} ({what}): required; give it, or {key} in the --config file", file=sys.stderr)
            return 2

    from ray.train import TrainingFailedError

    from training.train import failures
    from training.train.run import pretrain

    try:
        summary = pretrain(cfg)  # a Ctrl-C leaves as its Interrupted, which jobs/cli.py reports
    except TrainingFailedError as e:  # the workers' error, after --max-failures restarts
        limit = cfg.parallel.max_failures
        print(f"canine pretrain: training failed after {limit} restart(s) (--max-failures {limit}): "
              f"{failures.summary(e)}; the workers' tracebacks are in Ray's logs (/tmp/ray/session_latest/logs on "
              "each node); the same command resumes from the last checkpoint", file=sys.stderr)
        return 1
    except Exception as e:  # a bad config or data, a changed config on resume, another driver on the output,
        # a cluster too small or unreachable, a worker's error no restart can fix (failures.FatalError)
        return errors.report("pretrain", e, objects(args, cfg))
    print(json.dumps(summary, indent=1), file=quiet.document())  # stdout kept for it alone (jobs/cli.py)
    if not summary.get("steps"):
        print(f"canine pretrain: {errors.one_line(cfg.output)}: no training step was recorded (metrics.jsonl is empty); the workers' "
              "logs say why (Ray's logs, /tmp/ray/session_latest/logs)", file=sys.stderr)
        return 1
    return 0
