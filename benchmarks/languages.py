"""Per-language quality of the cleaner and the CANINE-C mask plan, one row per language.

    python benchmarks/languages.py                          # tests/data/wiki + pipeline/sample
    python benchmarks/languages.py --no-synthetic           # the real pages only
    python benchmarks/languages.py --input 'dumps/*wiki-*.xml.bz2' --show residue

Input: the real Wikipedia excerpts of tests/data/wiki (tests/data/wiki/README.md says where each
comes from) and, marked "synthetic", the made-up bundled sample (pipeline/sample, generated from
pipeline/sample/source/*.yaml); `--input` adds any dump. Pages are read as a run reads them
(`pipeline.sources.plan_work_items` / `read_pages`), cleaned with `clean_page` and the default
PreprocessConfig, packed with `pack_pages` at the default sequence length, and planned with
`plan_examples` (CANINE-C only, default MaskPlanConfig, seed 0, copy 0).

Columns (one row per language and origin):
- pages read / kept: every page of the input / pages whose outcome is "kept" (redirects and
  other namespaces are read but not kept).
- residue per 100k characters of kept text, one column per construct: `{{ }} [[ ]]` (templates
  and links left whole or half), `-{ }-` (language-variant markup, zh / sr / kk / ...), `<ref`,
  `|-` (table rows), `thumb` (image options: `thumb|` and each wiki's own word, THUMB_WORDS),
  `&nbsp;`. 0 is the goal for every column.
- end matter: the section titles the end-matter rule dropped (top few, with counts), and the
  last top-level heading kept on each page (top few): a references / links heading there is
  end matter the rule's table does not know for that language.
- masked share p10 / p50: per example, predicted characters / codepoints (the paper's 15% of
  whitespace spans, capped at 320 characters a 2,048-codepoint example: 15.6% at most).
- span p90 / max: lengths in characters of the spans the plan chose, as MaskPlanConfig's
  rule cuts the text (`spans`): a script written without spaces (zh, ja, th) makes one "word"
  of a whole clause under the paper's whitespace rule; the default rule bounds such spans.
"""

import argparse
import collections
import glob
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contract import schema  # noqa: E402
from pipeline import sources  # noqa: E402
from pipeline.rows.examples import pack_pages  # noqa: E402
from pipeline.rows.masks import MaskPlanConfig, plan_examples  # noqa: E402
from pipeline.preprocess_config import PreprocessConfig  # noqa: E402
from pipeline.wikitext.clean import CleanOptions, clean_page  # noqa: E402

REAL_INPUT = str(ROOT / "tests" / "data" / "wiki" / "*.xml.bz2")
SYNTHETIC_INPUT = str(ROOT / "pipeline" / "sample" / "*.xml")

# The image option "thumb" as each wiki writes it (found in the files above, and in each wiki's
# MessagesXx.php magic word `img_thumbnail`): English "thumb" works on every wiki, so it is counted
# everywhere; a language's own word only where that wiki defines it.
THUMB_WORDS = {
    "": ("thumb|", "thumbnail|"),
    "ar": ("تصغير|", "مصغر|"),
    "de": ("mini|", "miniatur|"),
    "hi": ("अंगूठाकार|",),
    "ja": ("サムネイル|", "サムネ|"),
    "kk": ("нобай|",),
    "ko": ("섬네일|", "썸네일|"),
    "ru": ("мини|", "миниатюра|"),
    "sr": ("мини|", "умањено|"),
    "th": ("ภาพย่อ|", "ภาพขนาดย่อ|"),
    "uk": ("мініатюра|", "міні|"),
    "zh": ("缩略图|", "縮圖|"),
}
RESIDUE = ("{{", "}}", "[[", "]]", "-{", "}-", "<ref", "|-", "thumb", "&nbsp;")
TOP = 3  # end-matter titles shown per row


def thumb_count(text: str, lang: str) -> int:
    words = THUMB_WORDS[""] + THUMB_WORDS.get(lang, ())
    return sum(text.count(w) for w in words)


def residue(text: str, lang: str) -> dict:
    counts = {key: text.count(key) for key in RESIDUE if key != "thumb"}
    counts["thumb"] = thumb_count(text, lang)
    return counts


def mask_stats(texts: list[tuple[int, str]], lang: str, seq_len: int) -> tuple[list[float], list[int]]:
    """(masked share per example, lengths of the spans the plan chose), spans as the config's
    rule cuts them (`MaskPlanConfig.spans`: whitespace runs, or bounded in unspaced scripts)."""
    config = MaskPlanConfig()
    examples = pack_pages(sorted(texts), seq_len)
    rows = plan_examples(examples, lang, copy=0, seed=0, tokenizer=None, config=config)
    shares, spans = [], []
    for row in rows:
        cps = np.asarray(row["codepoints"])
        masked = np.zeros(len(cps), bool)
        masked[np.asarray(row["char_mask_positions"], np.int64)] = True
        shares.append(masked.sum() / len(cps))
        starts, ends = config.spans(cps)
        spans.extend(e - s for s, e in zip(starts.tolist(), ends.tolist()) if masked[s:e].all())
    return shares, spans


class Row:
    """What one language (of one origin) adds up to."""

    def __init__(self):
        self.read = self.kept = self.chars = 0
        self.residue = collections.Counter()
        self.dropped, self.last = collections.Counter(), collections.Counter()
        self.texts = []  # (page_id, text) of kept pages, for packing
        self.shows = []  # (title, context) of residue, for --show


def collect(files: list[str], cfg: PreprocessConfig, show: bool) -> dict:
    rows = collections.defaultdict(Row)
    options = CleanOptions.of(cfg)
    for item in sources.plan_work_items(files):
        origin = "synthetic" if Path(item.path).resolve().parent == (ROOT / "pipeline" / "sample") else "real"
        for page in sources.read_pages(item):
            row = rows[(page.lang, origin)]
            row.read += 1
            r = clean_page(page, options)
            if r.outcome != "kept":
                continue
            row.kept += 1
            row.chars += len(r.text)
            row.residue.update(residue(r.text, page.lang))
            if r.headings is not None:
                row.dropped.update(r.headings.dropped)
                if r.headings.last_kept:
                    row.last[r.headings.last_kept] += 1
            row.texts.append((page.page_id, r.text))
            if show:
                pattern = "|".join(re.escape(k) for k in RESIDUE if k != "thumb")
                for m in re.finditer(pattern, r.text):
                    row.shows.append((page.title, r.text[max(0, m.start() - 40) : m.end() + 40].replace("\n", "⏎")))
    return rows


def top(counter: collections.Counter) -> str:
    return ", ".join(f"{title} {n}" for title, n in counter.most_common(TOP)) or "-"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", action="append", default=[], help="more dump globs (added to the defaults)")
    ap.add_argument("--no-synthetic", action="store_true", help="leave out the made-up pipeline/sample dumps")
    ap.add_argument("--show", choices=["residue"], help="print each residue with its page title and context")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    patterns = [REAL_INPUT] + ([] if args.no_synthetic else [SYNTHETIC_INPUT]) + args.input
    files = sorted({f for pattern in patterns for f in glob.glob(pattern)})
    cfg = PreprocessConfig()
    rows = collect(files, cfg, args.show == "residue")
    head = f"{'lang':<14} {'read':>5} {'kept':>5} {'kept chars':>10} " + " ".join(f"{k:>6}" for k in RESIDUE)
    head += f" {'share p10':>9} {'p50':>6} {'span p90':>8} {'max':>4}"
    print(f"residue per 100k characters of kept text; masks: CANINE-C, seq_len {cfg.seq_len}, "
          f"rate {schema.MASK_RATE}, at most {schema.MAX_CHAR_PREDICTIONS} characters an example")
    print(head)
    ends = []
    for (lang, origin), row in sorted(rows.items(), key=lambda kv: (kv[0][1] == "synthetic", kv[0][0])):
        name = lang + (" (synthetic)" if origin == "synthetic" else "")
        per = {k: row.residue[k] / max(row.chars, 1) * 1e5 for k in RESIDUE}
        shares, spans = mask_stats(row.texts, lang, cfg.seq_len)
        p10, p50 = (np.percentile(shares, [10, 50]) if shares else (0.0, 0.0))
        s90, smax = (np.percentile(spans, 90), max(spans)) if spans else (0, 0)
        print(f"{name:<14} {row.read:>5} {row.kept:>5} {row.chars:>10,} " + " ".join(f"{per[k]:>6.1f}" for k in RESIDUE)
              + f" {p10:>9.3f} {p50:>6.3f} {s90:>8.0f} {smax:>4}")
        ends.append((name, row))
    print("\nend matter: dropped titles / last heading kept (top few, with counts)")
    for name, row in ends:
        print(f"{name:<14} dropped: {top(row.dropped)} | last kept: {top(row.last)}")
    if args.show:
        for name, row in ends:
            for title, context in row.shows:
                print(f"  {name} [{title}] {context}")
    print(f"\n{len(files)} files in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
