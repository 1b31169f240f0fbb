"""Object storage against local disk, side by side in one run (issue 11, "Measure and report").

    python benchmarks/object_store.py                  # ~10 MB of wikitext, S3 (moto) and GCS (emulator)
    python benchmarks/object_store.py --repeat 20 --stores s3

Starts each store's real protocol server as a process on 127.0.0.1 (tests/stores.py), then
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

import os  # noqa: E402

import fsspec  # noqa: E402

import stores  # noqa: E402
from preprocess import make_input  # noqa: E402
from pipeline import job, output  # noqa: E402,F401  (Beam imported before any timing)
from pipeline.config import PreprocessConfig  # noqa: E402


def preprocess_s(inputs, out: str, workers: int) -> float:
    cfg = PreprocessConfig(inputs=tuple(map(str, inputs)), output=out, seq_len=2048, vocab_size=8000)
    t = time.perf_counter()
    output.run(cfg, workers=workers)
    return time.perf_counter() - t


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=8, help="copies of the bundled sample (8: ~10 MB)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--stores", default="s3,gs")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "in").mkdir()
        inputs = make_input(tmp / "in", args.repeat)
        mb = sum(f.stat().st_size for f in inputs) / 1e6
        local = preprocess_s(inputs, str(tmp / "local"), args.workers)
        print(f"input {mb:.1f} MB of wikitext, {args.workers} worker(s)")
        print(f"preprocess -> local disk      {local:7.2f} s   1.00")
        for protocol in args.stores.split(","):
            proc, env = stores.start(protocol, tmp / f"{protocol}.log")
            os.environ.update(env)
            try:
                bucket = f"bench-{protocol}-store"
                fsspec.filesystem(protocol, skip_instance_cache=True).mkdir(bucket)
                took = preprocess_s(inputs, f"{protocol}://{bucket}/shards", args.workers)
                print(f"preprocess -> {protocol}:// server   {took:7.2f} s   {took / local:.2f}")
            finally:
                proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()
