"""Throughput of the real training loop: Ray Train workers, DeepSpeed, the input pipeline's Ray tasks.

    python benchmarks/train_throughput.py --config tiny --workers 1,2            # CPU, ~2 minutes
    python benchmarks/train_throughput.py --config small --workers 1,2 --micro-batch 2 --steps 12
    python benchmarks/train_throughput.py --config base --workers 1 --micro-batch 128 --steps 30 --warmup 8  # one GPU

For each worker count it runs `training.train.run.pretrain` (the same code as `canine pretrain`)
for --steps steps on --data (default: synthetic multilingual shards at --seq-len, written by
pipeline/synthetic.py like the tests' shards) and reports, over the steps after --warmup: examples/s, characters/s,
data-wait fraction, peak memory per worker (RSS; on GPU also peak allocated), MFU on GPUs (the
model's exact matmul FLOP count, training/flops.py, against the device's dense bf16 peak), and the
scaling efficiency against one worker (weak scaling: the micro batch per worker is fixed, the
global batch grows with the workers).

Measured 2026-11-22 (CPU figures on the shared 2-core machine, load average about 3):
    tiny  (d 64, length 256, micro 4)   1 worker 39.0 ex/s, 2 workers 53.9 ex/s (69%), 0.3% data wait, 0.7 GB/worker
    small (d 256, length 2048, micro 2) 1 worker 1.43 ex/s, 2 workers 2.31 ex/s (81%), 0.1% data wait, 1.6 GB/worker
    tiny at length 2048, 2 workers (the smoke shape): 14.4 ex/s, 1.0 GB/worker
    CANINE-base, length 2048, bf16, one H200 (a lent machine; MFU against 989 TFLOP/s dense bf16),
    eager: LAMB ZeRO-0 micro 32 11.5% (per-tensor LAMB loop; 18.6% at 128), multi-tensor LAMB micro
      128 21.4%; AdamW ZeRO-2 micro 128 24.2%; data wait 0.1-0.4% throughout. The model alone
      (benchmarks/model_speed.py, batch 64, eager) ran at 25.5%.
    One H100 80GB, 2026-11-24, eager runs that learn: base preset (LAMB, ZeRO-0, micro 64) 17.0%,
      AdamW ZeRO-2 micro 128 20.8% (415 ex/s). The compiled figures measured then (up to 31.7%)
      are withdrawn: those steps had every gradient zero (docs/compile.md). All of these predate
      bf16 as autocast over fp32 weights.
    One H100 80GB, 2026-11-27 (benchmarks/gpu_session.sh): preset 9.8% eager (195 ex/s), 10.7%
      compiled, AdamW ZeRO-2 micro 128 9.9%, data wait 0.5-0.7%, all learning; but in fp32/TF32:
      DeepSpeed had switched the bf16 autocast off inside its forward (docs/compile.md,
      "Precision on GPUs"; fixed since, not measured on a GPU yet). CANINE-S eager: 9.6%.
Every run prints its losses and gradient norms in the JSON: a figure counts only from a run whose
loss falls (benchmarks/gpu_check.py checks that).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed on CPU needs telling

from contract import schema  # noqa: E402
from contract.options import parse_settings  # noqa: E402
from training.train import rundir  # noqa: E402
from training.train import config  # noqa: E402
from training.train.run import pretrain  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="tiny", help="shipped config name or YAML file")
    p.add_argument("--workers", default="1,2", help="comma list of worker counts")
    p.add_argument("--steps", type=int, default=20, help="optimizer steps per run")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the figures (start-up, caches)")
    p.add_argument("--micro-batch", type=int, default=0, help="per worker (0: the config's)")
    p.add_argument("--accumulation", type=int, default=1, help="micro batches per worker per step")
    p.add_argument("--seq-len", type=int, default=0, help="example length (0: the paper's 2048, or 256 for tiny)")
    p.add_argument("--objective", default="char", choices=("char", "subword"))
    p.add_argument("--zero-stage", type=int, default=-1, help="-1: the config's")
    p.add_argument("--data", help="shard directory (default: synthetic shards in a temp dir)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config override")
    p.add_argument("--json", help="also write the results to this file")
    return p.parse_args(argv)


def synthetic_data(root: str, seq_len: int, rows: int) -> str:
    from pipeline.synthetic import write_contract_shards

    per_shard = max(64, -(-rows // 4))  # one epoch covers the run: no epoch-start stall in the figures
    return write_contract_shards(root, seq_len=seq_len, train_rows=[per_shard] * 4, validation_rows=64)


def run_one(args, workers: int, data: str, output: str) -> dict:
    base = config.load_config(args.config)
    micro = args.micro_batch or base.train.micro_batch
    overrides = {
        "data.path": data, "output": output, "parallel.workers": workers, "train.micro_batch": micro,
        "train.global_batch": micro * workers * args.accumulation, "train.objective": args.objective,
        # Stop (with a checkpoint) before the end: no final evaluation, consolidation or export.
        "train.max_steps": args.steps * 100, "train.stop_at_step": args.steps, "train.eval_every": 0,
        "checkpoint.every": args.steps, "log.console_every": max(1, args.steps // 4), "log.tensorboard": False,
    }
    if args.zero_stage >= 0:
        overrides["parallel.zero_stage"] = args.zero_stage
    if args.seq_len:
        overrides["data.seq_len"] = args.seq_len  # else: the config's (0 = the shards' length)
    overrides.update(parse_settings(args.set))  # as canine pretrain --set: lists too
    cfg = config.load_config(args.config, overrides)
    pretrain(cfg)
    profile = rundir.join(output, rundir.PROFILE)  # --set log.profile_steps=N: printed before the temp dir goes
    if os.path.exists(profile):
        print(open(profile).read(), flush=True)
    every = rundir.read_metrics(output)
    records = every[args.warmup:]
    if not records:
        raise SystemExit(f"no steps after --warmup {args.warmup}: raise --steps")
    out = {
        "workers": workers, "global_batch": cfg.train.global_batch, "micro_batch": micro,
        "examples_per_s": statistics.median(r["examples_per_s"] for r in records),
        "chars_per_s": statistics.median(r["chars_per_s"] for r in records),
        "data_wait_fraction": statistics.mean(r["data_wait_fraction"] for r in records),
        "step_s": statistics.median(r["step_s"] for r in records),
        "peak_rss_mb_per_worker": max(r["peak_rss_mb"] for r in every),
        "losses": [r["loss"] for r in every], "grad_norms": [r.get("grad_norm") for r in every],
    }
    if "mfu" in records[-1]:
        out["mfu"] = statistics.median(r["mfu"] for r in records)
    if "gpu_peak_mb" in records[-1]:
        out["gpu_peak_mb_per_worker"] = max(r["gpu_peak_mb"] for r in records)
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    if not args.data:  # synthetic data is written at this length
        args.seq_len = args.seq_len or (256 if args.config == "tiny" else schema.DEFAULT_SEQ_LEN)
    seq_len = args.seq_len or "as in --data"
    base = config.load_config(args.config)
    micro = args.micro_batch or base.train.micro_batch
    with tempfile.TemporaryDirectory(prefix="canine-bench-") as tmp:
        data = args.data or synthetic_data(os.path.join(tmp, "shards"), seq_len,
                                           rows=max(counts) * micro * args.accumulation * (args.steps + 4))
        results = []
        for workers in counts:
            results.append(run_one(args, workers, data, os.path.join(tmp, f"run-{workers}")))
            r = results[-1]
            line = (f"{args.config} x{workers}: {r['examples_per_s']:.2f} ex/s, {r['chars_per_s']:.0f} chars/s, "
                    f"data wait {r['data_wait_fraction']:.1%}, step {r['step_s']:.3f} s, "
                    f"peak RSS {r['peak_rss_mb_per_worker']:.0f} MB/worker")
            if "mfu" in r:
                line += f", MFU {r['mfu']:.1%}"
            if len(results) > 1 and results[0]["workers"] == 1:
                r["scaling_efficiency"] = r["examples_per_s"] / (workers * results[0]["examples_per_s"])
                line += f", scaling efficiency {r['scaling_efficiency']:.0%}"
            print(line, flush=True)
    summary = {"config": args.config, "seq_len": seq_len, "objective": args.objective, "steps": args.steps,
               "warmup": args.warmup, "results": results}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
