"""Preprocessing speed against its own floor, in one run on the same input.

    python benchmarks/preprocess.py                 # ~30 MB of wikitext made from the sample
    python benchmarks/preprocess.py --repeat 60 --workers 2
    python benchmarks/preprocess.py --real --repeat 20   # the real pages of tests/data/wiki instead

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
"""

import argparse
import bz2
import glob
import os
import re
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
from pipeline import examples, job, masks, output, sources  # noqa: E402,F401
from pipeline.wikitext import clean  # noqa: E402,F401
from pipeline.preprocess_config import PreprocessConfig  # noqa: E402
from pipeline.tokenizer import WordPieceTokenizer  # noqa: E402

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


def time_job(folder: Path, args, tokenizer=None, out="out") -> float:
    cfg = PreprocessConfig(inputs=(f"{folder}/*.xml",), output=f"{folder}/{out}", seq_len=args.seq_len,
                           vocab_size=args.vocab_size, tokenizer=tokenizer)
    t = time.perf_counter()
    output.run(cfg, workers=args.workers)
    return time.perf_counter() - t


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--seq-len", type=int, default=PreprocessConfig.seq_len)
    ap.add_argument("--no-marginal", action="store_true", help="skip the second, 1/5-size run")
    ap.add_argument("--real", action="store_true", help="the real pages of tests/data/wiki instead of the sample")
    args = ap.parse_args(argv)
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
    if not args.no_marginal:
        marginal(args, raw_mb, t_a, t_b, t_b2)


if __name__ == "__main__":
    main()
