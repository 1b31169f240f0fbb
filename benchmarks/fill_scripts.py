"""How often the export's fill-in answers a masked character in its own script, against training steps.

    python benchmarks/fill_scripts.py                                  # tiny, 1500 steps, read every 300
    python benchmarks/fill_scripts.py --config small --steps 3000 --every 500 --work-dir W

What tests/jobs/test_fill_scripts.py asserts after its 300 steps (it imports the data and the
measure from here), on runs as long as you like. The data: the bundled sample's zh and en pages
(28 k and 80 k characters) and the real Japanese pages of tests/data/wiki (six articles, 48 k
characters, cut at paragraphs into pieces of 40 characters or more, each a page of its own, so
that the validation split holds some of every article), as JSONL rows through
`canine preprocess` (seq_len 256, a quarter held out); `canine pretrain` (a local Ray cluster,
--workers, ZeRO-2) trains on them for --steps, a checkpoint every --every, each exported (`canine
export --step N`) and read through AutoModelForMaskedLM. A judged character is one of a
validation example's Han, kana or Latin characters (pages the run never trained on), masked alone;
its script is judged from its Unicode name. Printed per checkpoint and language, the shares whose
best answer is of their script (Han or kana for Han or kana, Latin for Latin: "script"), of their
script family (CJK punctuation counted: "family"), whose top 3 hold one of their script ("top3"),
and whose best answer is exact. The learning rate's schedule spans the whole run, so a checkpoint
of a long run is not a short run's end.

Measured (tiny, 2 workers, 1500 steps read every 500, AMD EPYC AVX2, 2026-11-29), "script" /
"family" / "top3":
    step  500  zh 0.367 / 0.875 / 0.950   ja 0.508 / 0.708 / 0.883   en 0.975 / 0.975 / 0.983
    step 1000  zh 0.792 / 0.950 / 0.992   ja 0.767 / 0.817 / 0.917   en 0.950 / 0.950 / 0.983
    step 1500  zh 0.767 / 0.933 / 0.958   ja 0.808 / 0.858 / 0.942   en 0.933 / 0.933 / 0.975
Before the five 2023 jawiki articles (one page of 457 characters of Japanese), "script" at 1500
steps was zh 0.88 and ja 0.37: the Japanese share was limited by its data, not by the model.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JA_PAGES = sorted((ROOT / "tests" / "data" / "wiki").glob("jawiki-*.xml.bz2"))  # six real articles, 48 k characters
PER_LANGUAGE = 120  # judged characters per language, spread over the validation split


def script(c: str) -> str:
    """han, kana, cjk-punct (CJK symbols and punctuation, fullwidth forms: 、。，「」), latin or
    other: what a masked character and its answer are judged by."""
    name = unicodedata.name(c, "")
    if name.startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH")):
        return "han"
    if name.startswith(("HIRAGANA", "KATAKANA")) or c == "ー":
        return "kana"
    if 0x3000 <= ord(c) <= 0x303F or 0xFF00 <= ord(c) <= 0xFFEF:
        return "cjk-punct"
    if "LATIN" in name:
        return "latin"
    return "other"


# The answers that are characters of the masked one's script.
ACCEPT = {"han": {"han", "kana"}, "kana": {"han", "kana"}, "latin": {"latin"}}
# Han or kana, or the punctuation written with them: the script family of a CJK answer.
CJK = {"han", "kana", "cjk-punct"}


def rows(en_pages: int | None = None) -> list[dict]:
    """The zh, ja and en rows; with en_pages, the first en_pages English pages only."""
    from pipeline.sources import WorkItem, read_pages
    from pipeline.wikitext.clean import clean_page

    sample = ROOT / "pipeline" / "sample"
    rows = []
    for lang in ("zh", "en"):
        for page in read_pages(WorkItem(str(sample / f"{lang}wiki-20261101-pages-articles.xml"), "xml", lang=lang)):
            kept = clean_page(page) if page.error is None else None
            if kept is not None and kept.outcome == "kept":
                rows.append({"id": page.page_id, "title": page.title, "text": kept.text, "lang": lang})
    if en_pages is not None:
        rows = [r for r in rows if r["lang"] != "en"] + [r for r in rows if r["lang"] == "en"][:en_pages]
    n = 0
    for path in JA_PAGES:
        for page in read_pages(WorkItem(str(path), "xml", lang="ja")):
            kept, piece = clean_page(page) if page.error is None else None, ""
            for line in kept.text.split("\n") if kept is not None and kept.outcome == "kept" else []:  # pieces of >= 40 characters, each a page of its own
                piece += line + "\n"
                if len(piece) >= 40:
                    n += 1
                    rows.append({"id": 10_000 + n, "title": f"{page.title} {n}", "text": piece.strip(), "lang": "ja"})
                    piece = ""
    return rows


def canine(args, cwd, timeout=2400) -> subprocess.CompletedProcess:
    """`canine ARGS` from `cwd`; 300 tiny steps took 13 min on a loaded 2-core machine (0.4 steps/s)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=str(ROOT), DS_ACCELERATOR="cpu", RAY_USAGE_STATS_ENABLED="0")
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def preprocess(work: Path, en_pages: int | None = None) -> subprocess.CompletedProcess:
    """WORK/pages.jsonl (rows(en_pages)) -> WORK/shards, a quarter of the pages held out."""
    with open(work / "pages.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows(en_pages))
    return canine(["preprocess", "pages.jsonl", "--output", "shards", "--seq-len", "256", "--validation-fraction",
                   "0.25", "--workers", "1"], cwd=work)


def held_out(export: Path) -> dict[str, list]:
    """{lang: [(codepoints, position)]}: each character of a judged script in the validation
    split (pages the run never trained on), at most PER_LANGUAGE of them spread over the split."""
    import pyarrow.parquet as pq

    from training.train import data

    out = {}
    for shard in data.open_dataset(str(export.parent.parent / "shards")).splits["validation"]:
        for row in pq.read_table(shard.url, columns=["lang", "codepoints"]).to_pylist():
            cps = row["codepoints"]
            out.setdefault(row["lang"], []).extend((cps, p) for p in range(len(cps)) if script(chr(cps[p])) in ACCEPT)
    return {lang: cases[:: max(1, len(cases) // PER_LANGUAGE)][:PER_LANGUAGE] for lang, cases in out.items()}


def measure(model, cases) -> dict:
    """Shares of the held-out characters, each masked alone, whose best answer is of their script
    ("script"), of their script family (CJK: Han, kana or CJK punctuation; "family"), whose top 3
    hold one of their script ("top3"), and whose best answer is exact."""
    import torch

    from contract import schema

    counts = dict.fromkeys(("script", "family", "top3", "exact"), 0)
    for codepoints, position in cases:
        ids = torch.tensor(codepoints)
        ids[position] = schema.MASK
        top, gold = [a[0] for a in model.candidates(ids, top_k=3)[1][0]], chr(codepoints[position])
        accept = ACCEPT[script(gold)]
        counts["script"] += script(top[0]) in accept
        counts["family"] += script(top[0]) in (CJK if accept <= CJK else accept)
        counts["top3"] += any(script(a) in accept for a in top)
        counts["exact"] += top[0] == gold
    return {"judged": len(cases), **{k: round(v / max(len(cases), 1), 3) for k, v in counts.items()}}


def _ok(done: subprocess.CompletedProcess) -> None:
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, done.args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--every", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work-dir", help="where the shards, the run and its exports go (default: a temporary folder)")
    args = ap.parse_args(argv)
    from transformers import AutoModelForMaskedLM

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        if not (work / "shards").exists():
            _ok(preprocess(work))
        _ok(canine(["pretrain", "--data", "shards", "--output", "run", "--config", args.config, "--workers",
                    args.workers, "--max-steps", args.steps, "--set", "train.eval_every=0", "--set",
                    f"checkpoint.every={args.every}", "--set", f"checkpoint.keep={args.steps // args.every + 1}"],
                   cwd=work, timeout=24 * 3600))
        cases = held_out(work / "run" / "hf")
        print(f"{args.config}, {args.workers} workers; judged: { {k: len(v) for k, v in cases.items()} }")
        for step in range(args.every, args.steps + 1, args.every):
            export = work / "run" / ("hf" if step == args.steps else f"hf-step{step}")
            if not export.exists():
                _ok(canine(["export", "run", "--step", step], cwd=work))
            model = AutoModelForMaskedLM.from_pretrained(str(export), trust_remote_code=True).eval()
            shares = {lang: measure(model, cases[lang]) for lang in ("zh", "ja", "en")}
            print(f"step {step:5d}  " + "  ".join(
                f"{lang}: script {m['script']:.3f} family {m['family']:.3f} top3 {m['top3']:.3f} exact {m['exact']:.3f}"
                for lang, m in shares.items()), flush=True)


if __name__ == "__main__":
    main()
