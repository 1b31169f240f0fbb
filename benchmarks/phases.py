"""Where `canine preprocess` spends its CPU, phase by phase, on real pages, against the cleaner alone.

    python benchmarks/phases.py --mb 300                         # 2 workers, ~300 MB of XML
    python benchmarks/phases.py --mb 300 --workers 1,2           # and the speed-up of a second worker
    python benchmarks/phases.py --mb 100 --work-dir /tmp/ph --json /tmp/ph/phases.json

The input: the real pages of tests/data/wiki (14 languages: en, ja, ru, zh, uk, ar, vi, ko, el,
hy, bn, hi, mr, kn from their excerpts; README there), each page repeated with a fresh page id
(+ 10^7 per copy) and a fresh title (" ~N" appended from the second copy on) until its language
holds its share of the size asked, one plain .xml a language. The shares (SHARES) are those of a
real multilingual mix: each Wikipedia's pages-articles dump size, roughly as of 2024 (GB of
.xml.bz2, rounded; English about half of the whole), so the mix weighs the languages as a run of
every one of these dumps would.

One run per worker count: the real command (`python -m jobs.cli preprocess`, DirectRunner) in a
session of its own, with CANINE_PREPROCESS_PHASES set, so every step of the job records each
unit it runs (pipeline/beam/phases.py: wall span and thread CPU); every 0.5 s the CPU of each of
its processes (from /proc, via psutil) and the staging folder's size are sampled. Printed:
- per phase (read+clean, sizing, scatter, tokenizer, packing, sampling, shards+masks, rejects,
  publish): units, CPU seconds, CPU per GB of XML, its wall span, and what no step accounts for
  (Beam's data plane, the launcher, Arrow's threads): the processes' CPU less the steps';
- the whole job's CPU per GB against the cleaner alone's on the same pages in the same run
  (each language's unique pages parsed and cleaned in this process, times the copies the input
  holds; the median of BASELINE_PASSES passes before the runs and as many after), the ratio, and
  the same without the tokenizer (its cost is fixed: a bounded sample of tokenizer_pages pages);
- the longest stretch in which one worker ran a step and the others none (and which phase);
- each progress line's ETA against the real time left, from 10% of the run on;
- the staging folder's measured peak against the run's own estimate (pipeline/output/disk.py);
- the sha256 of every output file (--json), to compare two trees' outputs.
Each run starts with its input read once (`warm`), and says how long the launcher took before
the first work item.
"""

import argparse
import bz2
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import sources  # noqa: E402
from pipeline.beam import phases  # noqa: E402
from pipeline.output import disk  # noqa: E402
from pipeline.wikitext import clean  # noqa: E402

WIKI = ROOT / "tests" / "data" / "wiki"
BASELINE_PASSES = 3  # the cleaner alone, before the runs and again after
# GB of each LANGwiki-*-pages-articles.xml.bz2, roughly (Wikimedia's dump listings, 2024, rounded):
# the weight of each language in the mix.
SHARES = {"en": 22.0, "ru": 5.5, "ja": 4.0, "zh": 2.9, "uk": 2.3, "ar": 1.8, "vi": 1.6, "ko": 0.9, "el": 0.5,
          "hy": 0.35, "bn": 0.35, "hi": 0.25, "mr": 0.08, "kn": 0.06}
PAGE = re.compile(rb"<page>.*?</page>", re.S)
PAGE_ID = re.compile(rb"(<page>.*?<id>)(\d+)(</id>)", re.S)
TITLE = re.compile(rb"(<title>)(.*?)(</title>)", re.S)
ETA = re.compile(r"ETA (\d+(?::\d\d)+)")
DONE = "preprocess: done in "  # the launcher's line once the run is published


def real_pages() -> dict:
    """{lang: (the first file's header, [page bytes])} of tests/data/wiki."""
    found = {}
    for src in sorted(WIKI.glob("*.xml.bz2")):
        lang = src.name.split("wiki-", 1)[0]
        data = bz2.decompress(src.read_bytes())
        head = data[: data.index(b"<page>")]
        found.setdefault(lang, (head, []))[1].extend(PAGE.findall(data))
    return found


def copy_of(page: bytes, r: int) -> bytes:
    """Copy r of a page: its id + (r + 1) x 10^7, its title with " ~r" from the second copy."""
    page = PAGE_ID.sub(lambda m: m.group(1) + str(int(m.group(2)) + (r + 1) * 10_000_000).encode() + m.group(3),
                       page, count=1)
    return page if r == 0 else TITLE.sub(lambda m: m.group(1) + m.group(2) + b" ~%d" % r + m.group(3), page, count=1)


def make_input(folder: Path, mb: float) -> dict:
    """One LANGwiki-20990101-pages-articles.xml a language of SHARES, `mb` MB in all -> {lang: (path,
    copies of its pages)}."""
    pages, total = real_pages(), sum(SHARES.values())
    made = {}
    for lang, share in SHARES.items():
        head, lang_pages = pages[lang]
        want, written, r = mb * 1e6 * share / total, 0, 0
        dst = folder / f"{lang}wiki-20990101-pages-articles.xml"
        with open(dst, "wb") as f:
            f.write(head)
            while written < want:
                for page in lang_pages:
                    data = copy_of(page, r) + b"\n"
                    f.write(data)
                    written += len(data)
                r += 1
            f.write(b"</mediawiki>\n")
        made[lang] = (dst, r)
    return made


def cleaner_alone(folder: Path, copies: dict, passes: int) -> list:
    """[(XML parse s, clean s)] of `passes` passes: each language's unique pages (one copy) read and
    cleaned in this process, CPU seconds, times the copies of them the input holds."""
    pages = real_pages()
    out = [[0.0, 0.0] for _ in range(passes)]
    for lang in SHARES:
        head, lang_pages = pages[lang]
        one = folder / f"{lang}wiki-20990102-pages-articles.xml"
        one.write_bytes(head + b"".join(copy_of(p, 0) + b"\n" for p in lang_pages) + b"</mediawiki>\n")
        for k in range(passes):
            t = time.process_time()
            raw = [p for item in sources.plan_work_items([str(one)]) for p in sources.read_pages(item)]
            out[k][0] += (time.process_time() - t) * copies[lang]
            t = time.process_time()
            for p in raw:
                clean.clean_page(p)
            out[k][1] += (time.process_time() - t) * copies[lang]
        one.unlink()
    return [tuple(x) for x in out]


def median_pass(passes: list) -> tuple:
    """The pass of the median total (the lower of the middle two): its parse and clean seconds."""
    ranked = sorted(passes, key=sum)
    return ranked[(len(ranked) - 1) // 2]


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


class Sampler(threading.Thread):
    """Every 0.5 s: each descendant process's CPU seconds (user + system), and the output folder's size."""

    def __init__(self, pid: int, folder: Path):
        super().__init__(daemon=True)
        self.pid, self.folder = pid, folder
        self.cpu = {}  # pid -> (last CPU seconds, command line)
        self.timeline = []  # (time, {pid: CPU seconds})
        self.peak_disk = 0
        self.peak_folders = {}
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            now = {}
            for p in procs:
                try:
                    t = p.cpu_times()
                    now[p.pid] = t.user + t.system
                    if p.pid not in self.cpu:
                        self.cpu[p.pid] = (0.0, " ".join(p.cmdline()[1:4])[:70])
                    self.cpu[p.pid] = (now[p.pid], self.cpu[p.pid][1])
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self.timeline.append((time.time(), now))
            staged = folder_bytes(self.folder)
            if staged > self.peak_disk:  # what each of staging's folders held at the peak
                self.peak_disk = staged
                self.peak_folders = {p.name: folder_bytes(p) if p.is_dir() else p.stat().st_size
                                     for p in self.folder.glob(".staging-*/*")}
            self.done.wait(0.5)


def sha256s(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def run_job(inputs: list, out: Path, workers: int, extra: list) -> dict:
    """The real command, timed; its progress lines kept with the time each arrived."""
    marks = out.parent / f"{out.name}.phases"
    shutil.rmtree(marks, ignore_errors=True)
    marks.mkdir(parents=True)
    cmd = [sys.executable, "-m", "jobs.cli", "preprocess", *map(str, inputs), "--output", str(out),
           "--workers", str(workers), *extra]
    env = dict(os.environ, CI="1", DS_ACCELERATOR="cpu", PYTHONPATH=str(ROOT), **{phases.ENV: str(marks)},
               CANINE_PREPROCESS_LINE_EVERY_S="5")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    sampler = Sampler(proc.pid, out)
    sampler.start()
    lines = [(time.time(), line.rstrip("\n")) for line in proc.stderr]
    proc.wait()
    ended = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n" + "\n".join(l for _, l in lines[-40:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"started": started, "ended": ended, "wall_s": ended - started, "cpu_s": cpu,
            "sampled_cpu_s": sum(c for c, _ in sampler.cpu.values()),
            "processes": {pid: [round(c, 1), name] for pid, (c, name) in sampler.cpu.items()},
            "staging_peak": sampler.peak_disk, "staging_folders": sampler.peak_folders, "lines": lines, "timeline": sampler.timeline, "units": phases.read(str(marks)),
            "sha256": sha256s(out)}


def warm(inputs: list) -> None:
    """Read every input once. The launcher hashes each local input (sha256, a whole read) before
    the pipeline starts; on this machine's disk a cold 1 GB took 80-99 s (10-12 MB/s), a cached
    one about 1 s, and the page cache drops files read minutes ago: so each run starts with its
    input cached, and compares the job, not the disk."""
    for path in inputs:
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass


def each_page_once(work: Path) -> dict:
    """The staging peak of a run on tests/data/wiki as it is (each page once, bz2), and the estimate's.
    Measured in this process just before publishing, when every file staged is there (docs/scale.md):
    a 2 MB run is too short for the 0.5 s sampler."""
    from pipeline.preprocess_config import PreprocessConfig
    from pipeline.run import run_job

    files = sorted(WIKI.glob("*.xml.bz2"))
    out = work / "out-once"
    shutil.rmtree(out, ignore_errors=True)
    staged = {}

    def measure():
        for p in out.glob(".staging-*/*"):
            staged[p.name] = folder_bytes(p) if p.is_dir() else p.stat().st_size

    run_job(PreprocessConfig(inputs=tuple(map(str, files)), output=str(out)), workers=2, before_publish=measure)
    shutil.rmtree(out, ignore_errors=True)
    xml = sum(len(bz2.decompress(f.read_bytes())) for f in files)
    peak = sum(staged.values())
    fixed = sum(n for name, n in staged.items() if name.endswith(".json"))
    inputs = [(str(f), "xml", f.stat().st_size) for f in files]
    estimate = disk.staging_peak_bytes(inputs, 50_000)
    sample = estimate - disk.staging_peak_bytes(inputs, 0)
    return {"xml": xml, "peak": peak, "fixed": fixed, "variable": peak - fixed, "estimate": estimate,
            "estimated_variable": estimate - disk.STAGED_FIXED_BYTES - sample}


def phase_table(units: list) -> dict:
    """{phase: {units, cpu_s, busy_s, first, last}} from the units the steps recorded."""
    table = {}
    for u in units:
        row = table.setdefault(u["phase"], {"units": 0, "cpu_s": 0.0, "busy_s": 0.0, "first": u["start"],
                                            "last": u["end"]})
        row["units"] += 1
        row["cpu_s"] += u.get("process_cpu", u["cpu"])
        row["thread_cpu_s"] = row.get("thread_cpu_s", 0.0) + u["cpu"]
        row["busy_s"] += u["end"] - u["start"]
        row["first"], row["last"] = min(row["first"], u["start"]), max(row["last"], u["end"])
    return table


def cores_busy(timeline: list, start: float, end: float) -> float:
    """CPU seconds of all the run's processes between two times (the nearest samples), per second."""
    at = [t for t, _ in timeline]
    if len(at) < 2 or end - start < 1.0:
        return float("nan")
    i = min(range(len(at)), key=lambda k: abs(at[k] - start))
    j = min(range(len(at)), key=lambda k: abs(at[k] - end))
    if j <= i:
        return float("nan")
    now, then = timeline[j][1], timeline[i][1]
    return sum(now[pid] - then.get(pid, 0.0) for pid in now) / (at[j] - at[i])


def lone_stretches(units: list, started: float, ended: float, step: float = 0.25) -> tuple:
    """(the longest stretch, in s, in which exactly one of the processes that ran steps was in a
    step, its start, and the phases met in it): a worker working while the others wait."""
    workers = sorted({u["pid"] for u in units if u["phase"] != "publish"})
    if len(workers) < 2:
        return 0.0, None, []
    by_pid = {pid: [(u["start"], u["end"], u["phase"]) for u in units if u["pid"] == pid] for pid in workers}
    best, best_at, run_start, seen, best_seen = 0.0, None, None, set(), set()
    t = started
    while t < ended:
        active = [(pid, next((ph for s, e, ph in by_pid[pid] if s <= t < e), None)) for pid in workers]
        busy = [ph for _, ph in active if ph]
        if len(busy) == 1:
            if run_start is None:
                run_start, seen = t, set()
            seen.add(busy[0])
            if t + step - run_start > best:
                best, best_at, best_seen = t + step - run_start, run_start, set(seen)
        else:
            run_start = None
        t += step
    return best, best_at, sorted(best_seen)


def eta_check(lines: list, started: float, ended: float) -> list:
    """[(fraction of the run elapsed, ETA said, real time left)] of the progress lines with an ETA.
    The ETA is to publish: the real end is when the launcher says it is done (its "done in" line,
    as this process read it), not the process's exit after it (its workers and Beam stopping:
    about a second, which is most of the time left at the last lines)."""
    done = [at for at, line in lines if DONE in line]
    ended = done[-1] if done else ended
    out = []
    for at, line in lines:
        m = ETA.search(line)
        if m:
            parts = [int(x) for x in m.group(1).split(":")]
            said = sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
            out.append(((at - started) / (ended - started), said, ended - at))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=300, help="MB of XML (default: %(default)s)")
    ap.add_argument("--workers", default="2", help="worker counts, comma-separated (default: %(default)s)")
    ap.add_argument("--work-dir", help="where inputs and outputs go (default: a temporary folder, removed)")
    ap.add_argument("--json", help="write the figures (and every output file's sha256) here")
    ap.add_argument("--keep-output", action="store_true", help="leave the outputs in --work-dir")
    ap.add_argument("extra", nargs="*", help="after --: more flags for canine preprocess (e.g. --seq-len 512)")
    args = ap.parse_args(argv)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="canine-phases-"))
    folder = work / f"real-{args.mb:g}"
    if not folder.exists():
        folder.mkdir(parents=True)
        made = make_input(folder, args.mb)
        (folder / "copies.json").write_text(json.dumps({lang: r for lang, (_, r) in made.items()}))
    copies = json.loads((folder / "copies.json").read_text())
    inputs = sorted(folder.glob("*.xml"))
    xml = sum(p.stat().st_size for p in inputs)
    gb = xml / 1e9
    load = os.getloadavg()
    print(f"input: {xml / 1e6:.1f} MB of XML, real pages of {len(inputs)} languages (tests/data/wiki), shares "
          + ", ".join(f"{lang} {100 * s / sum(SHARES.values()):.1f}%" for lang, s in SHARES.items())
          + f"; {os.cpu_count()} cores, load {load[0]:.2f} at the start", flush=True)

    # The baseline's CPU for the same work varied by 1.5x between runs on an idle machine (1.97 to
    # 2.95 core-min/GB, best of two passes before the runs): several passes, half before the runs
    # and half after, and their median, see the machine as the runs saw it.
    before = cleaner_alone(work, copies, BASELINE_PASSES)
    per_gb = lambda ps: ", ".join(f"{sum(x) / gb / 60:.2f}" for x in ps)
    print(f"cleaner alone on the same pages (this process, CPU), {BASELINE_PASSES} passes before the runs: "
          f"{per_gb(before)} core-min/GB of XML", flush=True)

    inputs_list = [(str(p), "xml", p.stat().st_size) for p in inputs]
    results = {}
    for w in [int(x) for x in args.workers.split(",")]:
        out = work / f"out-{w}"
        shutil.rmtree(out, ignore_errors=True)
        warm(inputs)
        r = run_job(inputs, out, w, args.extra)
        table = phase_table(r["units"])
        steps = sum(row["cpu_s"] for row in table.values())
        tok = table.get("tokenizer", {}).get("cpu_s", 0.0)
        print(f"\n--workers {w}: wall {r['wall_s']:.0f} s, CPU {r['cpu_s']:.0f} s (all processes; sampled "
              f"{r['sampled_cpu_s']:.0f}), {r['cpu_s'] / gb / 60:.2f} core-min/GB, {xml / 1e6 / r['wall_s']:.2f} MB/s; "
              f"load {os.getloadavg()[0]:.2f} at the end")
        print(f"  {'phase':14s} {'units':>6s} {'CPU s':>8s} {'core-min/GB':>12s} {'thread s':>8s} {'busy s':>8s} "
              f"{'span s':>8s} {'cores':>6s}")
        for name in phases.PHASES:
            row = table.get(name)
            if row:
                print(f"  {name:14s} {row['units']:6d} {row['cpu_s']:8.1f} {row['cpu_s'] / gb / 60:12.2f} "
                      f"{row['thread_cpu_s']:8.1f} {row['busy_s']:8.1f} {row['last'] - row['first']:8.1f} "
                      f"{cores_busy(r['timeline'], row['first'], row['last']):6.2f}  "
                      f"({row['first'] - r['started']:.0f}-{row['last'] - r['started']:.0f} s)")
        rest = r["cpu_s"] - steps
        print(f"  {'not in a step':14s} {'':6s} {rest:8.1f} {rest / gb / 60:12.2f}   (Beam's data plane, the "
              "launcher, the workers' start)")
        first = min(u["start"] for u in r["units"]) - r["started"]
        print(f"  before the first work item: {first:.1f} s (the launcher: plan, the inputs' sha256, Beam's start)")
        per_proc = sorted(r["processes"].values(), key=lambda v: -v[0])
        print("  CPU per process: " + "; ".join(f"{c:.0f} s {name}" for c, name in per_proc if c >= 1))
        r["tokenizer_cpu_s"] = tok
        lone, at, met = lone_stretches(r["units"], r["started"], r["ended"])
        if lone:
            print(f"  longest stretch with one worker in a step, the others in none: {lone:.0f} s "
                  f"({100 * lone / r['wall_s']:.0f}% of the wall; goal <= 10%) from {at - r['started']:.0f} s: "
                  + ", ".join(met) + f"; cores busy in it {cores_busy(r['timeline'], at, at + lone):.2f} "
                  "(the tokenizers library trains in threads of its own)")
        etas = [e for e in eta_check(r["lines"], r["started"], r["ended"]) if e[0] >= 0.1]
        for frac, said, real in etas:
            ratio = said / real if real else float("nan")
            # the line says whole seconds: in the last seconds 30% is less than its rounding
            verdict = "" if 0.7 <= ratio <= 1.3 else "  (within the line's whole second)" if abs(said - real) < 1 \
                else "  (off by more than 30%)"
            print(f"  ETA at {frac:4.0%} of the run: said {said:5.0f} s, real {real:5.1f} s left to publish "
                  f"({ratio:.2f}x){verdict}")
        if etas:
            within = sum(0.7 <= said / real <= 1.3 or abs(said - real) < 1 for _, said, real in etas if real)
            print(f"  ETA within 30% of the time left to publish (or its whole second) from 10% of the run: "
                  f"{within} of {len(etas)} lines (goal: all)")
        estimate = disk.staging_peak_bytes(inputs_list, 50_000)
        print(f"  staging: peak {r['staging_peak'] / 1e6:.0f} MB measured ({r['staging_peak'] / xml:.2f}x the XML), "
              f"estimated {estimate / 1e6:.0f} MB ({estimate / max(1, r['staging_peak']):.2f}x the peak; goal <= 1.3)")
        print("  staging at its peak, x the XML: " + ", ".join(
            f"{name} {n / xml:.3f}" for name, n in sorted(r["staging_folders"].items(), key=lambda kv: -kv[1])
            if n / xml >= 0.001))
        print("  last lines: " + " | ".join(line for _, line in r["lines"][-3:]))
        r.update(phases=table, xml_bytes=xml, estimate=estimate, lone_s=lone)
        del r["timeline"]
        results[w] = r
        if not args.keep_output:
            shutil.rmtree(out, ignore_errors=True)
    after = cleaner_alone(work, copies, BASELINE_PASSES)
    read_s, clean_s = median_pass(before + after)
    print(f"\ncleaner alone on the same pages, {BASELINE_PASSES} passes after the runs: {per_gb(after)} core-min/GB; "
          f"the median of all {2 * BASELINE_PASSES}: XML parse {read_s:.1f} s + clean {clean_s:.1f} s = "
          f"{(read_s + clean_s) / gb / 60:.2f} core-min/GB of XML (clean alone {clean_s / gb / 60:.2f})")
    for w, r in results.items():
        tok = r["tokenizer_cpu_s"]
        print(f"  --workers {w}: job / (XML parse + cleaner alone) {r['cpu_s'] / (read_s + clean_s):.2f}x; without "
              f"the tokenizer's fixed {tok:.0f} s: {(r['cpu_s'] - tok) / (read_s + clean_s):.2f}x (goal <= 2); "
              f"against the cleaner alone: {r['cpu_s'] / clean_s:.2f}x; without the tokenizer against the job's "
              f"own read+clean: {(r['cpu_s'] - tok) / r['phases']['read+clean']['cpu_s']:.2f}x")
    once = each_page_once(work)
    print(f"\nstaging, each page of tests/data/wiki once ({once['xml'] / 1e6:.1f} MB of XML, no copies for Parquet or "
          f"zstd to share): peak {once['peak'] / 1e6:.1f} MB, {once['peak'] / once['xml']:.2f}x the XML; less the files "
          f"of a fixed size ({once['fixed'] / 1e6:.2f} MB: vocabulary, stats, lists) {once['variable'] / once['xml']:.2f}x, "
          f"against the estimate's {once['estimated_variable'] / once['xml']:.2f}x (pipeline/output/disk.py; whole "
          f"estimate {once['estimate'] / 1e6:.1f} MB)")
    if len(results) > 1:
        ws = sorted(results)
        one, many = results[ws[0]], results[ws[-1]]
        print(f"\nthroughput {ws[-1]} workers / {ws[0]}: {one['wall_s'] / many['wall_s']:.2f}x "
              "(goal >= 1.8 on two free cores)")
        # The ceiling on these cores: the many-worker run cannot end before its CPU is spread over
        # every core, and the one-worker run already keeps more than one core busy (the vocabulary's
        # threads, Arrow's), so its wall is not "one core's worth" of the job.
        cores = os.cpu_count() or 1
        print(f"  {ws[0]} worker kept {one['cpu_s'] / one['wall_s']:.2f} cores busy on average; "
              f"{ws[-1]} workers used {many['cpu_s']:.0f} CPU-s, so on {cores} cores they cannot beat "
              f"{one['wall_s'] / (many['cpu_s'] / cores):.2f}x; measured {one['wall_s'] / many['wall_s']:.2f}x "
              f"is {many['cpu_s'] / cores / many['wall_s']:.0%} of that ceiling")
    if args.json:
        Path(args.json).write_text(json.dumps({"xml_bytes": xml, "copies": copies, "cleaner": before + after,
                                               "results": results}, indent=1, default=str))
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
