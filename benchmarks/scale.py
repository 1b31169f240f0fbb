"""Memory, disk and speed of `canine preprocess` against the input's size, on every local runner.

    python benchmarks/scale.py                                   # 32, 100, 320, 1000 MB of XML; both runners; 1 and 2 workers
    python benchmarks/scale.py --sizes 8,32 --runners DirectRunner --workers 2    # a quick look
    python benchmarks/scale.py --json out.json                   # the figures, for README's measured table

Each size is the bundled sample (pipeline/sample/*.xml, 7 languages) repeated with fresh page ids
(benchmarks/preprocess.py make_input), one plain .xml a language. The real command runs in a
session of its own; every second the RSS of each of its processes (the launcher, the DirectRunner's
SDK workers, Dask's scheduler, nannies and workers) and the size of the output folder (staging
included) are sampled. Printed per run: wall time, MB of XML per second per worker, the peak
RSS of the largest process and of all together (the peak of the per-sample sums), the staging
disk's peak; then per runner and worker count the slope of the largest process's peak and of
the sum against the input (a least-squares line, MB of memory per MB of XML; the goal
< 0.5, 38 at b86d9bd) and the throughput of the largest input over the smallest (goal >= 0.9).

Memory grows with the input only until the job's own units are full: a work item (at most
pipeline/sources/plan.py ITEM_BYTES of input), a pack group (--pack-group-codepoints, per split
and language), a shard (--shard-codepoints). The sample has 7 languages, so a pack group is full
from about 7 x 16M codepoints of text, roughly 250 MB of this XML; below that a larger input
fills the units more (docs/scale.md).
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from preprocess import make_input  # noqa: E402

SAMPLE_MB = sum(p.stat().st_size for p in (ROOT / "pipeline" / "sample").glob("*.xml")) / 1e6


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            flags = Path("/proc/cpuinfo").read_text()
            return line.split(":", 1)[1].strip() + (" (AVX-512)" if " avx512f" in flags else " (AVX2)")
    return platform.processor() or platform.machine()


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # a temp file renamed between the listing and the stat
                pass
    return total


class Sampler(threading.Thread):
    """Every `every` s: the RSS of a process and all its descendants, and a folder's size."""

    def __init__(self, pid: int, folder: Path, every: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.folder, self.every = pid, folder, every
        self.peak_by_process = {}  # pid -> (peak RSS, name)
        self.peak_sum = self.peak_disk = 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            total = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    name = " ".join(p.cmdline()[1:4])[:60] or p.name()
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                total += rss
                if rss > self.peak_by_process.get(p.pid, (0, ""))[0]:
                    self.peak_by_process[p.pid] = (rss, name)
            self.peak_sum = max(self.peak_sum, total)
            self.peak_disk = max(self.peak_disk, folder_bytes(self.folder))
            self.done.wait(self.every)


def run_once(inputs: list, out: Path, runner: str, workers: int, seq_len: int) -> dict:
    cmd = [sys.executable, "-m", "jobs.cli", "preprocess", *map(str, inputs), "--output", str(out),
           "--workers", str(workers), "--seq-len", str(seq_len), "--runner", runner]
    env = dict(os.environ, CI="1", DS_ACCELERATOR="cpu", PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    sampler = Sampler(proc.pid, out)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    largest = max(sampler.peak_by_process.values())
    return {"wall_s": wall, "peak_process_mb": largest[0] / 1e6, "peak_process": largest[1],
            "peak_sum_mb": sampler.peak_sum / 1e6, "processes": len(sampler.peak_by_process),
            "staging_peak_mb": sampler.peak_disk / 1e6, "output_mb": folder_bytes(out) / 1e6,
            "each_mb": sorted((round(rss / 1e6), name) for rss, name in sampler.peak_by_process.values())[::-1]}


def slope(xs, ys) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="32,100,320,1000", help="MB of XML, comma-separated (default: %(default)s)")
    ap.add_argument("--runners", default="DirectRunner,DaskRunner")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--work-dir", help="where inputs and outputs go (default: a temporary folder, removed)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--verbose", action="store_true", help="every process's peak")
    args = ap.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",")]
    runners, workers = args.runners.split(","), [int(w) for w in args.workers.split(",")]
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="canine-scale-"))
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; sample {SAMPLE_MB:.2f} MB of XML repeated", flush=True)
    results = []
    for size in sizes:
        folder = work / f"in-{size:g}"
        repeat = max(1, round(size / SAMPLE_MB))
        if not folder.exists():
            folder.mkdir(parents=True)
            make_input(folder, repeat)
        inputs = sorted(folder.glob("*.xml"))
        mb = sum(p.stat().st_size for p in inputs) / 1e6
        for runner in runners:
            for w in workers:
                out = work / f"out-{size:g}-{runner}-{w}"
                shutil.rmtree(out, ignore_errors=True)
                r = run_once(inputs, out, runner, w, args.seq_len)
                shutil.rmtree(out, ignore_errors=True)
                r.update(input_mb=mb, runner=runner, workers=w, mb_s_per_core=mb / r["wall_s"] / w)
                results.append(r)
                print(f"{mb:8.1f} MB  {runner:12s} {w} worker(s): {r['wall_s']:7.1f} s  "
                      f"{r['mb_s_per_core']:5.2f} MB/s/core  peak RSS largest {r['peak_process_mb']:6.0f} MB "
                      f"({r['peak_process']}), all {r['peak_sum_mb']:6.0f} MB over {r['processes']} processes; "
                      f"staging peak {r['staging_peak_mb']:7.1f} MB, output {r['output_mb']:.1f} MB", flush=True)
                if args.verbose:
                    print("    each process's peak (MB):", "; ".join(f"{mb} {name}" for mb, name in r["each_mb"]))
        if not args.work_dir:
            shutil.rmtree(folder)
    print()
    for runner in runners:
        for w in workers:
            rows = sorted((r for r in results if r["runner"] == runner and r["workers"] == w), key=lambda r: r["input_mb"])
            if len(rows) < 2:
                continue
            xs = [r["input_mb"] for r in rows]
            s_proc = slope(xs, [r["peak_process_mb"] for r in rows])
            s_sum = slope(xs, [r["peak_sum_mb"] for r in rows])
            s_disk = slope(xs, [r["staging_peak_mb"] for r in rows])
            ratio = rows[-1]["mb_s_per_core"] / rows[0]["mb_s_per_core"]
            print(f"{runner} {w} worker(s), {xs[0]:.0f}-{xs[-1]:.0f} MB ({xs[-1] / xs[0]:.0f}x): memory slope "
                  f"{s_proc:.3f} MB/MB (largest process), {s_sum:.3f} MB/MB (all; goal < 0.5, 38 at b86d9bd); "
                  f"staging {s_disk:.2f} MB/MB; throughput largest/smallest {ratio:.2f} (goal >= 0.9)")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_name(), "results": results}, indent=1))
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
