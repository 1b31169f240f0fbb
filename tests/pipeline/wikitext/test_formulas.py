"""Formulas and inline code stay in their sentence as their source (pipeline/wikitext/clean.py,
docs/text.md): `<math>`, `<chem>`, `<ce>`, `<syntaxhighlight inline>`; code blocks, scores and
the like are still dropped."""

import html
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from contract import schema
from contract.manifest import read_manifest
from pipeline.wikitext.clean import CleanOptions, clean_page, wikitext_to_text

ROOT = Path(__file__).resolve().parents[3]

# Where a formula was a word of the sentence, what was left of it, and what is now.
RULES = {
    "inline TeX": ("where <math>A</math> is the albedo and <math>D</math> the diameter.",
                   "where A is the albedo and D the diameter."),
    "a displayed formula on its line": ("given as:\n:<math>{\\alpha}= (1-D) \\bar \\alpha.</math>\nwhere",
                                        "given as:\n{\\alpha}= (1-D) \\bar \\alpha.\nwhere"),
    "a list of symbols keeps its symbols": ("where:\n* <math>i</math> = index of origin zones\n"
                                            "* <math>j</math> = index of destination zones",
                                            "where:\ni = index of origin zones\nj = index of destination zones"),
    "whitespace collapsed": ("<math>\n  P(t) = I(t)\n  \\cdot V(t)\n</math>", "P(t) = I(t) \\cdot V(t)"),
    "spacing and style hints at the ends dropped": (
        "<math>P \\Rightarrow Q \\,</math>; <math>1, 2, 3\\,\\!</math>; <math>\\displaystyle x \\quad</math>; "
        "<math>1\\ </math>; <math>a\\,b</math>", "P \\Rightarrow Q; 1, 2, 3; x; 1; a\\,b"),
    "doubled braces spaced, the same TeX": ("<math>\\frac{1}{10^{-H/5}}</math> <math>[[a,b],c]</math>",
                                            "\\frac{1}{10^{-H/5} } [ [a,b],c]"),
    "mhchem": ("<chem>H2O</chem> and <ce>CO2 + C -> 2 CO</ce> and <math chem>\\ce{NaCl}</math>",
               "H2O and CO2 + C -> 2 CO and \\ce{NaCl}"),
    "case and attributes of the tag": ('<MATH display="block">x^2</MATH> and <math>y</Math>', "x^2 and y"),
    "an empty formula leaves no space": ("text <math> </math>. b <math>\\,</math>, c<math/>.", "text. b, c."),
    "markup inside a formula is TeX, not markup": (
        "<math>|x| = {{a}} + [[b]] + ''c'' + <b>d</b></math> end",
        "|x| = { {a} } + [ [b] ] + ''c'' + <b>d</b> end"),
    "inline code kept, code blocks dropped": (
        'Write <syntaxhighlight lang="python" inline>x = 1</syntaxhighlight> or <code>y = 2</code>.\n'
        '<syntaxhighlight lang="python">\ndef f():\n    pass\n</syntaxhighlight>\n'
        "<source lang=c>int x;</source><source inline>z</source> <pre>raw</pre>end",
        "Write x = 1 or y = 2.\nz end"),
    "scores and hieroglyphs dropped": ("a <score>\\relative c' { c d e }</score> b <hiero>ra</hiero> c", "a b c"),
    "a formula in a heading": ("== The <math>\\pi</math> digits ==\nMany.", "The \\pi digits\nMany."),
    "an unclosed formula is dropped to its paragraph's end, as before": ("a <math>x^2 y\n\nb", "a\nb"),
}


@pytest.mark.parametrize("name", RULES)
def test_formula_rule(name):
    wikitext, expected = RULES[name]
    assert wikitext_to_text(wikitext) == expected


def test_a_formula_is_not_read_as_variant_markup_or_a_table_cell():
    assert wikitext_to_text("x <math>e^{-{a}}-1</math> y", "zh") == "x e^{-{a} }-1 y"  # `-{` is not a conversion
    kept = wikitext_to_text('{| class="wikitable"\n|-\n| <math>|x|</math> || b\n|}', options=CleanOptions(keep_tables=True))
    assert kept == "|x| | b"


def test_a_formula_is_no_drop_and_one_in_dropped_end_matter_goes_with_it():
    from pipeline.wikitext.clean import clean_wikitext

    page = ("Intro.\n== A ==\n<math>x</math> is {{convert|5|km}}<ref>r <math>r</math></ref>.\n{|\n| <math>t</math>\n|}\n"
            "== References ==\n<math>z</math> {{reflist}}")
    dropped = {}
    assert clean_wikitext(page, "en", CleanOptions(), dropped) == "Intro.\nA\nx is 5 kilometres."
    assert dropped == {"references": 1, "tables": 1, "end_matter": 1}


def test_the_albedo_page_keeps_its_formulas_in_its_sentences(real_pages):
    """enwiki 2016's Albedo (tests/data/wiki): its sentences had holes where the formulas were
    ("at that solar zenith angle,, and", "where is the astronomical albedo, is the diameter")."""
    page = next(p for p in real_pages["enwiki-201605-excerpt.xml.bz2"] if p.title == "Albedo")
    result = clean_page(page)
    lines = result.text.split("\n")
    assert ("the directional-hemispherical reflectance at that solar zenith angle, {\\bar \\alpha(\\theta_i)}, and the "
            "bi-hemispherical reflectance, \\bar{ \\bar \\alpha} the proportion concerned") in result.text
    i = lines.index("Albedo {\\alpha} can then be given as:")
    assert lines[i + 1] == "{\\alpha}= (1-D) \\bar \\alpha(\\theta_i) + D \\bar{ \\bar \\alpha}."
    i = lines.index("where A is the astronomical albedo, D is the diameter in kilometers, and H is the absolute magnitude.")
    assert lines[i - 1] == "A =\\left ( \\frac{1329\\times10^{-H/5} }{D} \\right ) ^2,"
    assert ",," not in result.text and "\nwhere is" not in result.text


def test_the_shards_hold_the_formulas(tmp_path):
    """`canine preprocess` on a page whose symbols were holes (`where:\\n= index of origin zones`),
    run as a user would, with relative paths from the run's folder."""
    header = (ROOT / "pipeline" / "sample" / "enwiki-20261101-pages-articles.xml").read_text(encoding="utf-8")
    header = header[: header.index("  <page>")]
    wikitext = ("The '''gravity model''' estimates the trips between zones:\n"
                ":<math>T_{ij} = K \\frac{O_i D_j}{d_{ij}^2}</math>\nwhere:\n"
                "* <math>i</math> = index of origin zones\n* <chem>H2O</chem> is water.\n")
    page = (f"  <page>\n    <title>Gravity model</title>\n    <ns>0</ns>\n    <id>77</id>\n    <revision>\n"
            f"      <id>1</id>\n      <text xml:space=\"preserve\">{html.escape(wikitext, quote=False)}</text>\n"
            f"    </revision>\n  </page>\n")
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "enwiki-20261101-pages-articles.xml").write_text(header + page + "</mediawiki>\n",
                                                                          encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "jobs.cli", "preprocess", "dumps/enwiki-20261101-pages-articles.xml",
                           "--output", "out", "--validation-fraction", "0"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = read_manifest(str(tmp_path / "out"))
    (shard,) = manifest.splits["train"].shards
    (row,) = pq.read_table(tmp_path / "out" / shard.path, columns=["codepoints"]).to_pylist()
    text = "".join(chr(cp) for cp in row["codepoints"] if cp not in (schema.CLS, schema.SEP))
    assert text == ("The gravity model estimates the trips between zones:\nT_{ij} = K \\frac{O_i D_j}{d_{ij}^2}\n"
                    "where:\ni = index of origin zones\nH2O is water.")
