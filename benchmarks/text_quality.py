"""Text quality of the cleaner against wikiextractor 3.1 and mwparserfromhell's strip_code.

    pip install -e '.[bench]'                 # wikiextractor 3.1
    python benchmarks/text_quality.py         # the real pages of tests/data/wiki
    python benchmarks/text_quality.py --input 'dumps/*.xml.bz2' --repeat 1 --show holes

Every tool gets the same articles (ns 0, not redirects) and its own best settings for plain
text: ours is `pipeline.wikitext.clean.clean_page` (the whole cleaner: NFC and the special-codepoint
escape included), once with the defaults and once with `keep_tables` and `keep_end_matter`, both
keeping disambiguation pages, which the others keep and a job drops (`keep_disambiguation`);
wikiextractor is `Extractor.clean_text` on the page's XML-escaped text, as its own dump reader
hands it over, with headings marked (`mark_headers`) so they can be found, without HTML
escaping and without template expansion (a dump's templates are not in an article excerpt);
strip_code is `mwparserfromhell.parse(text).strip_code()` with its defaults, the floor that
benchmarks/preprocess.py times.

Columns:
- chars: characters of text out (wikiextractor's "## " heading marks not counted).
- body sections: headings of the source kept as a line of their own (compared without
  markup, case, spaces or a trailing "."), of those not in pipeline/wikitext/endmatter.py's table;
  a section with no text under it (one that only held a table) may be dropped on purpose.
- end matter: the same for end-matter headings (References, See also, ...): 0 is the goal.
- residue/100k: markup left in the text per 100,000 characters: `[[ ]] {{ }} {| |}`, `''`,
  HTML tags, undecoded entities (`&nbsp;`, `&#160;`), `__MAGIC__` words, `thumb|` / `px|`,
  table attributes (`style=`, `class=`, `colspan=`, `rowspan=`, `align=`, `bgcolor=`, `width=`)
  and lines that start with a table's `|` or `!`.
- holes/100k: places where words were lost, per 100,000 characters. A hole is, strictly:
    empty_brackets  brackets with nothing but spaces or , ; : - – — inside: "()", "( ; )", "[]"
    open_punct      an opening bracket followed by , ; or : ("Apollo ( ; Greek")
    punct_close     , ; or : followed by a closing bracket ("Akhilleus, )")
    space_punct     a space left before a clause's , or . ("born in , the")
    double_punct    , or ; doubled, or followed by a single "." ("particularly,, and", "minutes,.")
    dangling_word   a word that cannot end a clause (of, the, an, at, than, approximately,
                    roughly, nearly, between) right before . ; ) or a , that is not followed
                    by and/or/but/nor ("has an area of.", "the area of , which", "at, with")
  each match counts one; fullwidth brackets and punctuation count as well. The patterns are
  written for English text (French puts a space before ; and :, so those are not counted).
  Some English prose matches them too ("disposed of.", "somewhere in between."): that floor
  is the same for every tool.
- MB/s per core: MB of source wikitext (UTF-8) per CPU second of this one process (CPU time,
  so that other work on a shared machine matters less), the best of --repeat runs.
Ratios printed below the table: ours / wikiextractor for holes (goal <= 0.25), ours /
strip_code for speed.
"""

import argparse
import collections
import glob
import html
import logging
import re
import sys
import time
from pathlib import Path

import mwparserfromhell

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import sources  # noqa: E402
from pipeline.wikitext.clean import CleanOptions, clean_page  # noqa: E402
from pipeline.preprocess_config import PreprocessConfig  # noqa: E402
from pipeline.wikitext.endmatter import is_end_matter  # noqa: E402
from pipeline.wikitext.sections import strip_quotes  # noqa: E402

DEFAULT_INPUT = str(ROOT / "tests" / "data" / "wiki" / "*.xml.bz2")

HOLES = {
    "empty_brackets": re.compile(r"\(\s*[,;:\-–—]*\s*\)|\[\s*\]|（\s*[，；：,;:]*\s*）"),
    "open_punct": re.compile(r"[(（]\s*[,;:，；：]"),
    "punct_close": re.compile(r"[,;:，；：]\s*[)）]"),
    "space_punct": re.compile(r"[^\s.] +[,.](?=\s|$)"),
    "double_punct": re.compile(r"[,;] *[,;]|[,;] *\.(?!\.)"),
    "dangling_word": re.compile(
        r"\b(?:of|the|an|at|than|approximately|roughly|nearly|between)[ \t]*"
        r"(?:[.;)]|,(?! (?:and|or|but|nor)\b))(?=\s|$)"
    ),
}
RESIDUE = re.compile(
    r"\[\[|\]\]|\{\{|\}\}|\{\||\|\}|''|</?[a-zA-Z][^<>\n]{0,60}>|&[a-zA-Z]+;|&#x?[0-9a-fA-F]+;|__[A-Z]+__|"
    r"\b(?:thumb|\d+px)\||\b(?:style|class|colspan|rowspan|align|bgcolor|width)\s*=|^[ \t]*[|!]",
    re.M,
)
_HEADING = re.compile(r"(?m)^(={1,6})(.+?)(={1,6})[ \t]*$")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_WX_HEADING_MARK = re.compile(r"(?m)^## ")


def ours(cfg):
    options = CleanOptions.of(cfg)
    return lambda page: clean_page(page, options).text or ""


def wikiextractor_text(page) -> str:
    from wikiextractor import extract

    raw = html.escape(page.text, quote=False)  # the dump's own escaping, as collect_pages hands it over
    extractor = extract.Extractor(str(page.page_id), "0", "", page.title, [raw])
    return "\n".join(extractor.clean_text(raw, mark_headers=True, html_safe=False))


def strip_code_text(page) -> str:
    return mwparserfromhell.parse(page.text).strip_code()


def source_headings(wikitext: str) -> list[str]:
    """Heading titles of the source, as plain text (markup stripped by mwparserfromhell)."""
    titles = []
    for m in _HEADING.finditer(_COMMENT.sub("", wikitext)):
        title = " ".join(mwparserfromhell.parse(strip_quotes(m.group(2))).strip_code().split()).strip("= ")
        if title:
            titles.append(title)
    return titles


def _line_key(line: str) -> str:
    return " ".join(line.strip().lstrip("#").split()).rstrip(".").strip().casefold()


def sections_kept(pages, texts) -> tuple[list, list]:
    """([kept, total] of body headings, [kept, total] of end-matter headings)."""
    body, end = [0, 0], [0, 0]
    for page, text in zip(pages, texts):
        lines = collections.Counter(_line_key(line) for line in text.split("\n"))
        for title in source_headings(page.text):
            slot = end if is_end_matter(title, page.lang) else body
            slot[1] += 1
            key = _line_key(title)
            if lines[key] > 0:
                lines[key] -= 1
                slot[0] += 1
    return body, end


def holes(text: str) -> collections.Counter:
    return collections.Counter({name: len(r.findall(text)) for name, r in HOLES.items()})


def measure(fn, pages, repeat: int) -> tuple[list[str], float]:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        texts = [fn(p) for p in pages]
        best = min(best, time.process_time() - start)
    return texts, best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", action="append", help=f"dump globs (default {DEFAULT_INPUT})")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool; the best counts")
    ap.add_argument("--show", choices=["holes", "residue"], help="print every hole or residue with its context")
    args = ap.parse_args(argv)
    logging.getLogger("wikiextractor").setLevel(logging.ERROR)
    files = sorted({f for pattern in args.input or [DEFAULT_INPUT] for f in glob.glob(pattern)})
    pages = [p for item in sources.plan_work_items(files) for p in sources.read_pages(item)
             if p.ns == 0 and not p.redirect and p.error is None and p.text]
    mb = sum(len(p.text.encode("utf-8")) for p in pages) / 1e6
    print(f"{len(pages)} articles, {mb:.2f} MB of wikitext, from {', '.join(Path(f).name for f in files)}")
    # Every tool cleans the same articles: ours keeps the disambiguation pages here, as the others do
    # (a job drops them by default, pipeline/wikitext/disambiguation.py; 4 of the 38 real ones).
    tools = {
        "ours": ours(PreprocessConfig(keep_disambiguation=True)),
        "ours, keep tables + end matter": ours(PreprocessConfig(keep_tables=True, keep_end_matter=True,
                                                                keep_disambiguation=True)),
        "wikiextractor 3.1": wikiextractor_text,
        "mwparserfromhell strip_code": strip_code_text,
    }
    print(f"{'':32} {'chars':>9} {'body sections':>15} {'end matter':>11} {'residue/100k':>13} {'holes/100k':>11} "
          f"{'MB/s/core':>10}")
    rows = {}
    for name, fn in tools.items():
        texts, seconds = measure(fn, pages, args.repeat)
        if name.startswith("wikiextractor"):
            texts = [_WX_HEADING_MARK.sub("", t) for t in texts]
        text = "\n".join(texts)
        chars = len(text)
        body, end = sections_kept(pages, texts)
        residue = len(RESIDUE.findall(text))
        found = holes(text)
        rows[name] = (chars, found, mb / seconds)
        print(f"{name:32} {chars:>9,} {f'{body[0]}/{body[1]}':>15} {f'{end[0]}/{end[1]}':>11} "
              f"{residue / chars * 1e5:>13.2f} {sum(found.values()) / chars * 1e5:>11.2f} {mb / seconds:>10.2f}")
        if args.show:
            pattern = RESIDUE if args.show == "residue" else re.compile("|".join(r.pattern for r in HOLES.values()))
            for m in pattern.finditer(text):
                print("    " + text[max(0, m.start() - 50) : m.end() + 20].replace("\n", "⏎"))
    print("holes by kind: " + "; ".join(f"{name}: " + ", ".join(f"{k} {v}" for k, v in found.items())
                                        for name, (_, found, _) in rows.items()))
    per = {name: sum(found.values()) / chars * 1e5 for name, (chars, found, _) in rows.items()}
    ratio = per["ours"] / per["wikiextractor 3.1"]
    print(f"holes ours / wikiextractor = {ratio:.3f} (goal <= 0.25: {'met' if ratio <= 0.25 else 'NOT met'}); "
          f"speed ours / strip_code = {rows['ours'][2] / rows['mwparserfromhell strip_code'][2]:.1f}x")


if __name__ == "__main__":
    main()
