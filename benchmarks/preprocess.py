"""Preprocessing speed against its own floor, in one run on the same input.

    python benchmarks/preprocess.py                 # ~30 MB of wikitext made from the sample
    python benchmarks/preprocess.py --repeat 60 --workers 2
    python benchmarks/preprocess.py --real --repeat 20   # the real pages of tests/data/wiki instead
    python benchmarks/preprocess.py --single-stream bz2  # one single-stream .xml.bz2: 2 workers against 1

Prints raw-wikitext MB/s per core of
  (a) mwparserfromhell parse + strip_code alone (the floor any cleaner pays),
  (b) the whole Beam job end to end (DirectRunner, read -> clean -> tokenizer -> pack -> masks -> Parquet),
  (b') the same with the vocabulary given instead of trained,
  (c) the codepoint + packing + masking stage alone (MB of cleaned text per second),
and the ratio (b)/(a). Goals: (b)/(a) >= 0.8; (c) >= 20 MB/s per core. A second run
on 1/5 of the input separates the fixed per-run cost from the per-MB cost ("marginal"), which is
what a multi-GB dump sees.
The input is the bundled sample (or, with --real, the real Wikipedia pages of tests/data/wiki)
repeated with fresh page ids, so every page is parsed anew. The sample is made-up wikitext and
cheap for strip_code; real pages, with their nested templates and tables, are much slower for
it (benchmarks/text_quality.py compares the cleaners' output on them).
Module imports happen before any timing, for every figure alike.

--baseline TREE: the whole job (as `canine preprocess` in a process of its own, both trees
alike) on the same input by this checkout and by TREE (another checkout, e.g. `git worktree add
/tmp/base b86d9bd`), alternating, twice each; prints both times and the ratio (docs/scale.md: the
bounded-memory job may not be more than 10% slower on small inputs).

--single-stream bz2|gz: every page in one dump, as a single-stream .xml.bz2 (or .xml.gz), split
into about 8 work items (pipeline/sources/seekable.py; ITEM_ENV sets their size), and prints
what each container costs to plan and to read (decompress + parse, one process: .xml,
multistream with its index, .bz2, .gz), then the whole job with 1 and with 2 workers on the
single-stream file and the speed-up (ideal 2.0 on 2 free cores).
"""

import argparse
import bz2
import glob
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import mwparserfromhell

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# `job` (and Beam with it) is imported here, before any timing, as mwparserfromhell is for (a):
# a process's one-off imports (~1.2 s for Beam) are not throughput.
from contract import schema  # noqa: E402,F401
from pipeline import sources  # noqa: E402,F401
from pipeline.output import output  # noqa: E402,F401
from pipeline.beam import job  # noqa: E402,F401
from pipeline.rows import examples, masks  # noqa: E402,F401
from pipeline.run import preprocess  # noqa: E402
from pipeline.wikitext import clean  # noqa: E402,F401
from pipeline.preprocess_config import PreprocessConfig  # noqa: E402
from pipeline.rows.tokenizer import WordPieceTokenizer  # noqa: E402

PAGE = re.compile(rb"<page>.*?</page>", re.S)
PAGE_ID = re.compile(rb"(<page>.*?<id>)(\d+)(</id>)", re.S)


SAMPLE = str(ROOT / "pipeline" / "sample" / "*.xml")
REAL = str(ROOT / "tests" / "data" / "wiki" / "*.xml.bz2")


def make_input(folder: Path, repeat: int, pattern: str = SAMPLE) -> list[Path]:
    """Each dump repeated `repeat` times, page ids shifted so no two pages share one."""
    made = []
    for src in sorted(glob.glob(pattern)):
        data = bz2.decompress(Path(src).read_bytes()) if src.endswith(".bz2") else Path(src).read_bytes()
        head, pages = data[: data.index(b"<page>")], PAGE.findall(data)
        dst = folder / Path(src).name.removesuffix(".bz2")
        with open(dst, "wb") as f:
            f.write(head)
            for r in range(repeat):
                shift = (r + 1) * 10_000_000
                for page in pages:
                    f.write(PAGE_ID.sub(lambda m: m.group(1) + str(int(m.group(2)) + shift).encode() + m.group(3)
                                        if m.group(2).isdigit() else m.group(0), page, count=1))
                    f.write(b"\n")
            f.write(b"</mediawiki>\n")
        made.append(dst)
    return made


def all_pages(files):
    for item in sources.plan_work_items([str(f) for f in files]):
        yield from sources.read_pages(item)


def bench_parse_only(pages) -> tuple[float, float]:
    mb = sum(len(p.text.encode("utf-8")) for p in pages) / 1e6
    t = time.perf_counter()
    for p in pages:
        mwparserfromhell.parse(p.text).strip_code()
    return mb, time.perf_counter() - t


def bench_stage(pages, tokenizer, seq_len) -> tuple[float, float]:
    kept = [(p.lang, p.page_id, r.text) for p in pages if (r := clean.clean_page(p)).outcome == "kept"]
    by_lang = {}
    for lang, pid, text in kept:
        by_lang.setdefault(lang, []).append((pid, text))
    mb = sum(len(t.encode("utf-8")) for _, _, t in kept) / 1e6
    t = time.perf_counter()
    for lang, group in by_lang.items():
        packed = examples.pack_pages(sorted(group), seq_len)
        masks.plan_examples(packed, lang, 0, 0, tokenizer)  # as the job's shard writer: cut at masks._BATCH_CODEPOINTS
    return mb, time.perf_counter() - t


def time_job(folder: Path, args, tokenizer=None, out="out", inputs=None, workers=None) -> float:
    cfg = PreprocessConfig(inputs=(inputs or f"{folder}/*.xml",), output=f"{folder}/{out}", seq_len=args.seq_len,
                           vocab_size=args.vocab_size, tokenizer=tokenizer)
    t = time.perf_counter()
    preprocess(cfg, workers=workers or args.workers, progress=False)  # the command's driver: lock, plan, job, publish
    return time.perf_counter() - t


def make_single(folder: Path, files: list[Path]) -> Path:
    """Every page of `files` in one dump under the first one's header (ids are unique already)."""
    parts = [f.read_bytes() for f in files]
    dump = folder / "single" / "enwiki-20261101-pages-articles.xml"
    dump.parent.mkdir()
    with open(dump, "wb") as f:
        f.write(parts[0][: parts[0].index(b"<page>")])
        for data in parts:
            f.writelines(b"  " + page + b"\n" for page in PAGE.findall(data))  # as MediaWiki indents them
        f.write(b"</mediawiki>\n")
    return dump


def make_multistream(data: bytes, folder: Path, pages_per_stream: int = 100) -> Path:
    """Wikimedia's multistream layout: a header stream, 100 pages a stream, a footer stream, and
    the index of `offset:page_id:title` lines beside it."""
    folder.mkdir()
    dump = folder / "enwiki-20261101-pages-articles-multistream.xml.bz2"
    first, pages = data.index(b"  <page>"), PAGE.findall(data)
    lines, offset = [], 0
    with open(dump, "wb") as f:
        offset += f.write(bz2.compress(data[:first]))
        for i in range(0, len(pages), pages_per_stream):
            group = pages[i : i + pages_per_stream]
            lines += [b"%d:%s:x\n" % (offset, PAGE_ID.search(page).group(2)) for page in group]
            offset += f.write(bz2.compress(b"".join(b"  " + page + b"\n" for page in group)))
        f.write(bz2.compress(b"</mediawiki>\n"))
    (folder / "enwiki-20261101-pages-articles-multistream-index.txt.bz2").write_bytes(bz2.compress(b"".join(lines)))
    return dump


def _spin(_) -> None:
    x = 0
    for i in range(2_000_000):
        x += i * i


def parallel_capacity() -> float:
    """Speed-up of 2 processes over 1 on pure CPU work: below 2 where other work shares the cores."""
    from multiprocessing import Pool

    times = []
    for n in (1, 2):
        with Pool(n) as pool:
            pool.map(_spin, range(n))  # start-up
            t = time.perf_counter()
            pool.map(_spin, range(4), chunksize=1)
            times.append(time.perf_counter() - t)
    return times[0] / times[1]


def single_stream(args):
    """Plan and read costs per container, then 1 against 2 workers on one single-stream file."""
    import gzip
    from pipeline.sources import seekable

    with tempfile.TemporaryDirectory() as tmp:
        xml = make_single(Path(tmp), make_input(Path(tmp), args.repeat, REAL if args.real else SAMPLE))
        data = xml.read_bytes()
        containers = {"xml": xml, "bz2": xml.with_name(xml.name + ".bz2"), "gz": xml.with_name(xml.name + ".gz")}
        containers["bz2"].write_bytes(bz2.compress(data))  # single-stream, as `bzip2` writes it
        containers["gz"].write_bytes(gzip.compress(data))
        containers["multistream"] = make_multistream(data, Path(tmp) / "multistream")
        os.environ[seekable.ITEM_ENV] = str(len(data) // 8 + 1)  # ~8 items; a real dump: 64 MB each
        print(f"input: one dump of {len(data) / 1e6:.1f} MB of XML; work items of {len(data) // 8 / 1e6:.1f} MB of "
              f"text; {os.cpu_count()} cores")
        for kind, path in containers.items():
            t = time.perf_counter()
            items = sources.plan_work_items([str(path)], streams_per_item=10)
            t_plan = time.perf_counter() - t
            t = time.perf_counter()
            pages = sum(1 for item in items for _ in sources.read_pages(item))
            t_read = time.perf_counter() - t
            print(f"  {kind:12s} {path.stat().st_size / 1e6:6.1f} MB on disk, {len(items):4d} items, "
                  f"plan {t_plan:5.2f} s, read {len(data) / 1e6 / t_read:5.1f} MB/s of XML per core ({pages} pages)")
        path = containers[args.single_stream]
        print(f"this machine runs 2 processes of a pure-Python loop {parallel_capacity():.2f}x as fast as 1 "
              "(the most the job can gain here)")
        t1 = time_job(Path(tmp), args, inputs=str(path), out="out-1", workers=1)
        t2 = time_job(Path(tmp), args, inputs=str(path), out="out-2", workers=2)
        print(f"whole job on the single-stream .{args.single_stream}: 1 worker {t1:.1f} s, 2 workers {t2:.1f} s; "
              f"speed-up {t1 / t2:.2f}x (ideal 2.0 on 2 free cores)")


def marginal(args, big_mb, t_a_big, t_b_big, t_b2_big):
    """The same three timings on an input 1/5 the size: the difference is the cost per MB once
    the fixed per-run cost (Beam pipeline construction, worker start-up, first-use set-up) is
    paid, which is what a multi-GB dump sees."""
    with tempfile.TemporaryDirectory() as tmp:
        files = make_input(Path(tmp), max(1, args.repeat // 5), REAL if args.real else SAMPLE)
        pages = list(all_pages(files))
        mb, t_a = bench_parse_only(pages)
        t_b = time_job(Path(tmp), args)
        t_b2 = time_job(Path(tmp), args, tokenizer=f"{tmp}/out/{schema.TOKENIZER}", out="out-given")
    dm = big_mb - mb
    print(f"marginal (between {mb:.0f} and {big_mb:.0f} MB): (a) {dm / (t_a_big - t_a):.2f}, (b) "
          f"{dm / (t_b_big - t_b) / args.workers:.2f}, (b') {dm / (t_b2_big - t_b2) / args.workers:.2f} MB/s per core; "
          f"ratios (b)/(a) = {(t_a_big - t_a) / (t_b_big - t_b) / args.workers:.2f}, "
          f"(b')/(a) = {(t_a_big - t_a) / (t_b2_big - t_b2) / args.workers:.2f}; fixed cost per run ~"
          f"{t_b - mb * (t_b_big - t_b) / dm:.1f} s")


def time_command(tree: Path, inputs: str, out: Path, args) -> float:
    """`canine preprocess` of `tree`'s code, run as README shows it, in a process of its own."""
    import shutil
    import subprocess

    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "jobs.cli", "preprocess", inputs, "--output", str(out), "--workers", str(args.workers),
           "--seq-len", str(args.seq_len), "--vocab-size", str(args.vocab_size)]
    env = dict(os.environ, PYTHONPATH=str(tree), DS_ACCELERATOR="cpu", CI="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def against_baseline(args, folder: Path) -> None:
    """Wall time, and CPU time (user + system of the command and its workers), which other work
    on a shared machine moves far less than wall time."""
    base = Path(args.baseline).resolve()
    times = {"this": [], "baseline": []}
    for _ in range(2):
        for name, tree in (("this", ROOT), ("baseline", base)):
            times[name].append(time_command(tree, f"{folder}/*.xml", folder / f"cmd-{name}", args))
    (this, this_cpu), (baseline, base_cpu) = (min(times[n]) for n in ("this", "baseline"))
    this_cpu, base_cpu = min(c for _, c in times["this"]), min(c for _, c in times["baseline"])
    print(f"whole job as a command, best of 2 (alternating): this checkout {this:.1f} s wall, {this_cpu:.1f} s CPU; "
          f"{base} {baseline:.1f} s wall, {base_cpu:.1f} s CPU; ratio this/baseline {this / baseline:.2f} wall, "
          f"{this_cpu / base_cpu:.2f} CPU (goal <= 1.10)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--seq-len", type=int, default=PreprocessConfig.seq_len)
    ap.add_argument("--no-marginal", action="store_true", help="skip the second, 1/5-size run")
    ap.add_argument("--real", action="store_true", help="the real pages of tests/data/wiki instead of the sample")
    ap.add_argument("--baseline", help="another checkout: the whole job by it and by this one, alternating, ratio")
    ap.add_argument("--single-stream", choices=["bz2", "gz"],
                    help="only: one single-stream .xml.bz2 / .xml.gz, per-container costs, 2 workers against 1")
    args = ap.parse_args(argv)
    if args.single_stream:
        return single_stream(args)
    with tempfile.TemporaryDirectory() as tmp:
        files = make_input(Path(tmp), args.repeat, REAL if args.real else SAMPLE)
        pages = list(all_pages(files))
        raw_mb = sum(len(p.text.encode("utf-8")) for p in pages) / 1e6
        print(f"input: {len(files)} dumps, {len(pages)} pages, {raw_mb:.1f} MB of wikitext; {args.workers} worker(s)")

        mb_a, t_a = bench_parse_only(pages)
        rate_a = mb_a / t_a
        print(f"(a) mwparserfromhell parse + strip_code alone: {rate_a:6.2f} MB/s per core ({t_a:.1f} s)")

        t_b = time_job(Path(tmp), args)
        manifest = output.published_manifest(f"{tmp}/out")
        rate_b = raw_mb / t_b / args.workers
        rows = sum(s.rows for s in manifest.splits.values())
        cps = sum(s.codepoints for s in manifest.splits.values())
        print(f"(b) whole Beam job end to end:               {rate_b:6.2f} MB/s per core ({t_b:.1f} s, "
              f"{rows} examples, fill {cps / max(rows, 1) / args.seq_len:.3f})")

        # Again with that vocabulary given (--tokenizer): a scheduled run that reuses one, and the
        # steady state of a big dump, where the bounded tokenizer sample is a vanishing share.
        t_b2 = time_job(Path(tmp), args, tokenizer=f"{tmp}/out/{schema.TOKENIZER}", out="out-given")
        rate_b2 = raw_mb / t_b2 / args.workers
        print(f"(b') same, tokenizer given (--tokenizer):    {rate_b2:6.2f} MB/s per core ({t_b2:.1f} s)")

        tokenizer = WordPieceTokenizer.from_file(f"{tmp}/out/{schema.TOKENIZER}")
        mb_c, t_c = bench_stage(pages, tokenizer, args.seq_len)
        rate_c = mb_c / t_c
        print(f"(c) codepoints + packing + masking alone:    {rate_c:6.2f} MB/s per core ({mb_c:.1f} MB clean text)")
        print(f"ratio (b)/(a) = {rate_b / rate_a:.2f}, (b')/(a) = {rate_b2 / rate_a:.2f}  (goal >= 0.8);  "
              f"(c) goal >= 20 MB/s per core: "
              f"{'met' if rate_c >= 20 else 'NOT met'}")
        print(f"cores on this machine: {os.cpu_count()}")
        if args.baseline:
            against_baseline(args, Path(tmp))
    if not args.no_marginal:
        marginal(args, raw_mb, t_a, t_b, t_b2)


if __name__ == "__main__":
    main()
