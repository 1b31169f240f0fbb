"""Ctrl-C at every phase of `canine preprocess`, many tries: nothing may hang.

For each phase (pipeline/faults.py points: start, item, tokenizer, pack, shard) and worker
count, --tries times: the job runs in a session of its own and gets SIGINT on its whole process
group when one of its processes reaches the phase (what a terminal's Ctrl-C does), then must
exit 130 within --timeout seconds with exactly one `canine preprocess:` line and no traceback;
the same command then runs to the end (exit 0). A hang is what a tracker reported for a Ctrl-C
that reached a DirectRunner worker while Beam was still starting it. Prints one row per phase
and worker count and exits 1 if any try failed.

    python benchmarks/ctrl_c.py --tries 5 [--runner DirectRunner] [--workers 1 2]
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import faults  # noqa: E402

PHASES = ("start", "item", "tokenizer", "pack", "shard")


def one_try(phase: str, workers: int, runner: str, timeout: float, work: Path) -> str:
    """"ok", or what went wrong."""
    out = work / "out"
    args = [sys.executable, "-m", "jobs.cli", "preprocess", str(ROOT / "pipeline" / "sample"), "--output", str(out),
            "--runner", runner, "--workers", str(workers), "--seq-len", "512", "--vocab-size", "600"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), faults.FAULT_ENV: f"{phase}:1:INT"}
    p = subprocess.Popen(args, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return f"HANG (> {timeout:g} s)"
    ours = [line for line in err.splitlines() if line.startswith("canine preprocess:")]
    if p.returncode != 130 or len(ours) != 1 or "Traceback" in err:
        kept = Path(tempfile.mkstemp(prefix=f"ctrl_c-{phase}-{workers}-", suffix=".stderr")[1])
        kept.write_text(err)
        return f"exit {p.returncode}, {len(ours)} lines: {ours[-1:] or err.strip().splitlines()[-1:]} (stderr: {kept})"
    env.pop(faults.FAULT_ENV)
    again = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    return "ok" if again.returncode == 0 else f"rerun exit {again.returncode}: {again.stderr.strip()[-300:]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--phases", nargs="+", default=list(PHASES), choices=PHASES)
    ap.add_argument("--runner", default="DirectRunner")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args()
    failed = 0
    print(f"{'phase':>10} {'workers':>7} {'ok':>4} {'tries':>5} {'s/try':>6}  failures")
    for phase in args.phases:
        for workers in args.workers:
            results, start = [], time.monotonic()
            for _ in range(args.tries):
                with tempfile.TemporaryDirectory() as work:
                    results.append(one_try(phase, workers, args.runner, args.timeout, Path(work)))
            bad = [r for r in results if r != "ok"]
            failed += len(bad)
            took = (time.monotonic() - start) / args.tries
            print(f"{phase:>10} {workers:>7} {len(results) - len(bad):>4} {len(results):>5} {took:>6.1f}  "
                  f"{'; '.join(bad)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
