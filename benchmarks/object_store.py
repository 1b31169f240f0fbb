"""Object storage against local disk, side by side in one run.

    python benchmarks/object_store.py                  # ~10 MB of wikitext, S3 (moto) and GCS (emulator)
    python benchmarks/object_store.py --repeat 20 --stores s3
    python benchmarks/object_store.py --train-steps 0  # preprocessing only

Training: the tiny model (2 CPU workers, ZeRO-2) on the local shards, its output (checkpoints,
metrics, TensorBoard, summary, HF export) on local disk and on each store: the median steps/s
once running, the wall time of a run stopped at half its steps, and of the same command again,
which resumes from the store (restore, the remaining steps, the export).

Starts each store's real protocol server as a process on 127.0.0.1 (loopback/stores.py), then
runs the same preprocessing job (inputs on local disk, DirectRunner) with its output on local
disk and on each store, and prints the wall times and their ratio to local. Both servers keep
objects in memory on this machine, so the figure is the cost of the object-store path (one
whole-object PUT per item and shard, server-side copies when publishing, HTTP per call), not
of a network.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import os  # noqa: E402

import fsspec  # noqa: E402

from loopback import stores  # noqa: E402
from preprocess import make_input  # noqa: E402
from pipeline.beam import job  # noqa: E402,F401  (Beam imported before any timing)
from pipeline.run import preprocess  # noqa: E402
from pipeline.preprocess_config import PreprocessConfig  # noqa: E402


def preprocess_s(inputs, out: str, workers: int) -> float:
    cfg = PreprocessConfig(inputs=tuple(map(str, inputs)), output=out, seq_len=2048, vocab_size=8000)
    t = time.perf_counter()
    preprocess(cfg, workers=workers, progress=False)  # the command's driver: lock, plan, job, publish
    return time.perf_counter() - t


def train(data: str, out: str, steps: int) -> dict:
    """A stopped-then-resumed tiny run; its steady steps/s and the two wall times."""
    from training.train import rundir
    from training.train import config
    from training.train.run import pretrain

    settings = {"data.path": data, "output": out, "train.max_steps": steps, "checkpoint.every": steps // 2,
                "train.eval_every": 0, "data.eval_examples": 32, "log.console_every": steps}
    t = time.perf_counter()
    pretrain(config.load_config("tiny", {**settings, "train.stop_at_step": steps // 2}))
    first = time.perf_counter() - t
    t = time.perf_counter()
    pretrain(config.load_config("tiny", settings))  # the same command again: resumes
    resumed = time.perf_counter() - t
    step_s = sorted(r["step_s"] for r in rundir.read_metrics(out)[2:])
    return {"steps_per_s": 1 / step_s[len(step_s) // 2], "first": first, "resumed": resumed}


def _train_line(where: str, r: dict, base: dict | None) -> str:
    ratio = "" if base is None else (f"   {r['steps_per_s'] / base['steps_per_s']:.2f} / {r['first'] / base['first']:.2f}"
                                     f" / {r['resumed'] / base['resumed']:.2f}")
    return (f"train -> {where:<18} {r['steps_per_s']:6.2f} steps/s  first half {r['first']:6.1f} s  "
            f"resume + second half {r['resumed']:6.1f} s{ratio}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=8, help="copies of the bundled sample (8: ~10 MB)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--stores", default="s3,gs")
    p.add_argument("--train-steps", type=int, default=40, help="tiny-model steps per training run (0: none)")
    args = p.parse_args(argv)
    trained = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "in").mkdir()
        servers = {}
        for protocol in args.stores.split(","):  # first: a Ray cluster started below inherits their env
            servers[protocol], env = stores.start(protocol, tmp / f"{protocol}.log")
            os.environ.update(env)
        try:
            if args.train_steps:
                from training.train.run import init_local

                init_local(4, log_to_driver=False)
            inputs = make_input(tmp / "in", args.repeat)
            mb = sum(f.stat().st_size for f in inputs) / 1e6
            local = preprocess_s(inputs, str(tmp / "local"), args.workers)
            print(f"input {mb:.1f} MB of wikitext, {args.workers} worker(s)")
            print(f"preprocess -> local disk      {local:7.2f} s   1.00")
            if args.train_steps:
                trained["local"] = train(str(tmp / "local"), str(tmp / "run"), args.train_steps)
            for protocol in servers:
                bucket = f"bench-{protocol}-store"
                fsspec.filesystem(protocol, skip_instance_cache=True).mkdir(bucket)
                took = preprocess_s(inputs, f"{protocol}://{bucket}/shards", args.workers)
                print(f"preprocess -> {protocol}:// server   {took:7.2f} s   {took / local:.2f}")
                if args.train_steps:
                    trained[f"{protocol}:// server"] = train(str(tmp / "local"), f"{protocol}://{bucket}/run",
                                                             args.train_steps)
        finally:
            for proc in servers.values():
                proc.terminate()
                proc.wait()
        if trained:
            print(f"training: tiny model, 2 CPU workers, {args.train_steps} steps (checkpoint at half), data on "
                  "local disk; ratios to local: steps/s / first half / resume")
            for where, r in trained.items():
                print(_train_line(where, r, None if where == "local" else trained["local"]))


if __name__ == "__main__":
    main()
