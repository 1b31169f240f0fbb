"""pipeline/wikitext/convert.py: a whole page in one variant (--convert), what stays as written,
the per-language counts, and the run through the CLI: shards in simplified characters where the
default run keeps the traditional ones."""

import bz2
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from contract import schema
from pipeline.beam import stats, tally
from pipeline.preprocess_config import PreprocessConfig
from pipeline.sources import RawPage
from pipeline.wikitext.clean import CleanOptions, clean_page, clean_wikitext, wikitext_to_text
from pipeline.wikitext.convert import check_convert, convert_page, require
from pipeline.wikitext.variants import PROTECT_CLOSE, PROTECT_OPEN, render

ROOT = Path(__file__).resolve().parents[3]
ZH_PAGE = ROOT / "tests" / "data" / "wiki" / "zhwiki-201504-excerpt.xml.bz2"  # 数学, simplified and traditional mixed


def zh_wikitext() -> str:
    xml = bz2.open(ZH_PAGE).read().decode()
    return html.unescape(re.search(r"<text[^>]*>(.*)</text>", xml, re.S).group(1))


def to(variant: str, wikitext: str, lang: str = "zh") -> str:
    return wikitext_to_text(wikitext, lang, CleanOptions.of(PreprocessConfig(convert=(f"{lang}={variant}",))))


def test_a_real_page_in_one_script_each_way():
    wikitext = zh_wikitext()
    written = wikitext_to_text(wikitext, "zh")
    assert "数学" in written and "數學" in written and "一門学科" in written  # as its editors wrote it
    counts = {}
    hans = clean_wikitext(wikitext, "zh", CleanOptions.of(PreprocessConfig(convert=("zh=zh-hans",))), {}, None, counts)
    assert "數" not in hans and "門" not in hans and "一门学科" in hans
    # Everything outside the page's three `-{...}-` constructs converted, nothing else touched
    # (in the zh-hans view they show what the default view shows, zh-hans first).
    from zhconv_rs import zhconv

    assert hans == zhconv(written, "zh-hans")
    assert counts["converted"] == sum(a != b for a, b in zip(written, hans)) > 1000
    hant = to("zh-hant", wikitext)
    assert "数" not in hant and "學" in hant and "一門學科" in hant
    assert PROTECT_OPEN not in hans + hant and PROTECT_CLOSE not in hans + hant


def test_conversion_is_lossy_which_is_why_it_is_off_by_default():
    assert to("zh-hans", "頭髮和發展") == "头发和发展"  # 髮 (hair) and 發 (to issue) are one character, 发
    assert wikitext_to_text("頭髮和發展", "zh") == "頭髮和發展"
    assert to("zh-hant", "头发和发展") == "頭髮和發展"  # back by phrase: MediaWiki's tables know these words


def test_what_a_construct_shows_stays_as_written():
    # -{R|...}- and -{...}- are how editors stop a conversion; a rule shows the variant's own text.
    assert to("zh-hans", "頭髮-{R|頭髮}-，-{乾隆}-乾燥") == "头发頭髮，乾隆干燥"
    assert to("zh-hans", "-{zh-hans:信息; zh-hant:資訊;}-資訊") == "信息资讯"
    assert to("zh-hant", "-{zh-hans:信息; zh-hant:資訊;}-信息") == "資訊信息"
    # the text of -{zh-hans;zh-hant|...}- is converted when the variant or a fallback is named
    assert to("zh-hans", "-{zh-hans;zh-hant|頭髮}-") == "头发"
    assert to("zh-tw", "-{zh-hans|头发}-") == "头发"
    # a heading's text is converted whole: the end-matter rule reads it without marks
    assert to("zh-hans", "== -{R|歷史}-發展 ==\n正文") == "历史发展\n正文"
    assert render("== a -{R|b ==\nc}- d", "zh", "zh-hans", {})[0] == "== a b ==\nc d"
    # __NOCONTENTCONVERT__: every reader sees the page as written
    assert to("zh-hans", "__NOCC__頭髮") == "頭髮"


def test_manual_rules_join_the_table_by_manual_level():
    rule = "-{H|zh-cn:计算机;zh-tw:電腦}-電腦"
    assert to("zh-cn", rule) == "计算机"  # bidirectional: the rule wins over the table's 电脑
    assert to("zh-hans", rule) == "电脑"  # zh-hans is unidirectional: only X=>zh-hans rules
    assert to("zh-hans", "-{H|電腦=>zh-hans:计算机}-電腦") == "计算机"
    assert to("zh-cn", "-{A|頭髮}-的頭髮") == "頭髮的頭髮"  # -{A|x}- keeps x as written everywhere
    table = {}
    render("-{H|zh-cn:计算机;zh-tw:電腦}-", "zh", "zh-cn", table)
    assert table == {"计算机": "计算机", "電腦": "计算机"}


def test_protection_marks_change_nothing_else():
    from tests.pipeline.wikitext.test_variants import CASES

    for wikitext, lang, variant, expected, count in CASES.values():
        marked, n = render(wikitext, lang, variant, {})
        assert (re.sub(f"[{PROTECT_OPEN}{PROTECT_CLOSE}]", "", marked), n) == (expected, count), wikitext
    assert render("a -{R|b c}- d", "zh", "zh", {})[0] == f"a {PROTECT_OPEN}b c{PROTECT_CLOSE} d"
    assert render("a-{R| b }-", "zh", "zh", {})[0] == f"a {PROTECT_OPEN}b{PROTECT_CLOSE} "  # blank ends outside
    assert convert_page(f"頭{PROTECT_CLOSE}髮{PROTECT_OPEN}", "zh", "zh-hans") == ("头发", 2)  # stray marks dropped


def test_serbian_is_transliterated_as_srconverter_does():
    assert to("sr-el", "Београд је главни град Србије, Љубљана и Џаковица.", "sr") == \
        "Beograd je glavni grad Srbije, Ljubljana i Džakovica."
    # Roman numerals stay Latin; `!` keeps d and ž apart (nadživeti would read наџивети)
    assert to("sr-ec", "Ljubljana, XIV vek, NJEGOŠ, nad!živeti", "sr") == "Љубљана, XIV век, ЊЕГОШ, надживети"
    assert to("sr-el", "-{R|Москва}- и Москва", "sr") == "Москва i Moskva"
    # a page already mostly in the target script is left as it is (SrConverter::guessVariant)
    assert to("sr-el", "Čačak, Šabac i Niš: Ниш", "sr") == "Čačak, Šabac i Niš: Ниш"
    assert to("sh-cyrl", "Zagreb i Ljubljana", "sh") == "Загреб и Љубљана"
    counts = {}
    clean_wikitext("Ниш", "sr", CleanOptions.of(PreprocessConfig(convert=("sr=sr-el",))), {}, None, counts)
    assert counts["converted"] == 3


def test_the_option_refuses_in_one_line_and_names_the_choices():
    assert check_convert(("zh=zh-Hans", "sr=sr-Latn", "sh=sh-cyrl")) == {"zh": "zh-hans", "sr": "sr-el", "sh": "sh-cyrl"}
    with pytest.raises(ValueError) as err:
        check_convert(("zh=zh", "kk=kk-latn", "fr=fr"))
    message = str(err.value)
    assert "\n" not in message and message.startswith("cannot convert to zh=zh, kk=kk-latn, fr=fr (offered: zh: zh-hans")
    assert "sr: sr-ec sr-el" in message
    base = dict(inputs=("x",), output="o")
    with pytest.raises(ValueError, match="--variant zh=zh-hant disagrees"):
        PreprocessConfig(**base, convert=("zh=zh-hans",), variants=("zh=zh-hant", "sr=sr-el")).validate()
    PreprocessConfig(**base, convert=("zh=zh-hans",), variants=("zh=zh-hans", "sr=sr-el")).validate()


def test_a_wrong_variant_is_named_once_under_the_flag_typed():
    for convert in ((), ("zh=zh-hans",)):
        with pytest.raises(ValueError) as err:
            PreprocessConfig(inputs=("x",), output="o", variants=("zh=zh-xx",), convert=convert).validate()
        message = str(err.value)
        assert message.startswith("invalid preprocessing config: --variant: unknown language variant(s): zh=zh-xx")
        assert "--convert" not in message and message.count("(known: ") == 1


def test_a_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "zhconv_rs", None)  # what `import` meets when it is not installed
    with pytest.raises(ValueError, match=r"^--convert zh=zh-hant: needs the zhconv-rs package; "
                                         r"pip install 'zhconv-rs==0\.4\.2'$"):
        require({"zh": "zh-hant", "sr": "sr-el"})
    require({"sr": "sr-el"})  # Serbian needs no package
    with pytest.raises(ValueError, match="invalid preprocessing config: --convert zh=zh-hant: needs the zhconv-rs"):
        PreprocessConfig(inputs=("x",), output="o", convert=("zh=zh-hant",)).validate()


def test_the_recorded_headings_are_converted_with_the_text():
    """The run's summary and `canine inspect` list headings dropped as end matter and the last kept:
    shown in the script the text is converted to, not as the editors wrote them."""
    body = "數學是研究數量、結構以及空間等概念的一門學科。" * 3
    text = f"{body}\n\n== 歷史 ==\n{body}\n\n== 參考來源 ==\n* 某書，2001年。\n\n== 外部連結 ==\n* 某站\n"
    page = RawPage(page_id=1, title="數學", ns=0, redirect=False, text=text, lang="zh", source="test")
    hans = clean_page(page, CleanOptions.of(PreprocessConfig(convert=("zh=zh-hans",))))
    assert "历史" in hans.text and "歷史" not in hans.text
    assert (hans.headings.dropped, hans.headings.last_kept) == (["参考来源", "外部连结"], "历史")  # zh-hans maps characters; 链接 is zh-cn's word
    written = clean_page(page)
    assert (written.headings.dropped, written.headings.last_kept) == (["參考來源", "外部連結"], "歷史")
    sr = "Ово је чланак о граду.\n\n== Историја ==\nГрад је стар.\n\n== Референце ==\n* Књига\n"
    page = RawPage(page_id=2, title="Град", ns=0, redirect=False, text=sr, lang="sr", source="test")
    latin = clean_page(page, CleanOptions.of(PreprocessConfig(convert=("sr=sr-el",))))
    assert (latin.headings.dropped, latin.headings.last_kept) == (["Reference"], "Istorija")


def test_a_page_counts_what_changed_and_the_option_is_in_the_fingerprint():
    page = RawPage(1, "T", 0, False, "頭髮-{R|頭髮}-", "zh", "test:1", None, "wikitext")
    assert (clean_page(page).text, clean_page(page).converted) == ("頭髮頭髮", 0)
    hans = clean_page(page, CleanOptions.of(PreprocessConfig(convert=("zh=zh-hans",))))
    assert (hans.text, hans.converted, hans.variants) == ("头发頭髮", 2, 1)
    assert "convert" not in PreprocessConfig().fingerprint()  # other runs keep their config_sha256
    assert PreprocessConfig(convert=("zh=zh-hans",)).fingerprint()["convert"] == ["zh=zh-hans"]
    assert PreprocessConfig(convert=("zh=zh-hans",)).sha256() != PreprocessConfig().sha256()


def test_stats_count_pages_and_characters_converted():
    one, other = tally.Headings(), tally.Headings()
    for h, (variants, converted) in ((one, (1, 120)), (one, (0, 0)), (other, (0, 30))):
        h.add(variants, (), "", converted)
    out = stats.text_summary(one.merge(other.values()).values())
    assert (out["converted_pages"], out["converted_characters"], out["variant_pages"]) == (2, 150, 1)
    plain = tally.Headings()
    plain.add(1, (), "", 0)
    assert "converted_pages" not in stats.text_summary(plain.values())


def test_the_flag_is_repeatable_and_set_wins():
    from jobs import cli, preprocess

    parser = cli.build_parser("preprocess")
    args = parser.parse_args(["preprocess", "a.xml", "--output", "o", "--convert", "zh=zh-hans", "--convert", "sr=sr-el"])
    assert preprocess.config_from_args(args).convert == ("zh=zh-hans", "sr=sr-el")
    args = parser.parse_args(["preprocess", "a.xml", "--output", "o", "--convert", "zh=zh-hans", "--set", "convert=[zh=zh-tw]"])
    assert preprocess.config_from_args(args).convert == ("zh=zh-tw",)


# Through the CLI, as a user runs it: a real zhwiki page, relative paths from another working directory.

def canine(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def shard_text(output: Path) -> str:
    """The text of every example of the output, special codepoints left out."""
    special = range(schema.ALIASED_RANGE[0], schema.ALIASED_RANGE[1] + 1)
    texts = []
    for shard in sorted(output.glob("*/*.parquet")):
        for cps in pq.read_table(shard, columns=["codepoints"]).column("codepoints").to_pylist():
            texts.append("".join(chr(c) for c in cps if c not in special))
    return "".join(texts)


BLOCK_ZHCONV = """
import sys

class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "zhconv_rs":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, _NotInstalled())
"""


def test_the_cli_refuses_in_one_line_before_any_work(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCK_ZHCONV)  # zhconv-rs not installed
    (tmp_path / "work").mkdir()
    (tmp_path / "page.xml.bz2").write_bytes(ZH_PAGE.read_bytes())
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{ROOT}"}
    for flags, line in (
            (["--convert", "zh=zh-hans"], "canine preprocess: invalid preprocessing config: --convert zh=zh-hans: "
                                          "needs the zhconv-rs package; pip install 'zhconv-rs==0.4.2'"),
            (["--convert", "zh=klingon"], "canine preprocess: invalid preprocessing config: --convert: cannot convert "
                                          "to zh=klingon (offered: zh: zh-hans zh-hant zh-cn zh-tw zh-hk zh-mo zh-sg "
                                          "zh-my; gan: gan-hans gan-hant; wuu: wuu-hans wuu-hant; sr: sr-ec sr-el; "
                                          "sh: sh-cyrl)")):
        proc = subprocess.run([sys.executable, "-m", "jobs.cli", "preprocess", "../page.xml.bz2", "--output", "out",
                               *flags], cwd=tmp_path / "work", env=env, capture_output=True, text=True, timeout=300)
        assert (proc.returncode, proc.stderr.splitlines()) == (2, [line])
        assert not (tmp_path / "work" / "out").exists()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The page preprocessed twice: --convert zh=zh-hans (relative paths, from another folder) and the default."""
    root = tmp_path_factory.mktemp("convert")
    (root / "data").mkdir()
    (root / "data" / ZH_PAGE.name).write_bytes(ZH_PAGE.read_bytes())
    (root / "work").mkdir()
    fast = ["--seq-len", "512", "--vocab-size", "600"]
    hans = canine("preprocess", f"../data/{ZH_PAGE.name}", "--output", "out-hans", "--convert", "zh=zh-hans", *fast,
                  cwd=root / "work")
    written = canine("preprocess", root / "data" / ZH_PAGE.name, "--output", root / "out", *fast, cwd=root / "work")
    return root, hans, written


def test_the_shards_are_simplified_where_the_default_keeps_traditional(runs):
    root, hans, written = runs
    assert hans.returncode == 0 and written.returncode == 0, hans.stderr[-2000:] + written.stderr[-2000:]
    converted, kept = shard_text(root / "work" / "out-hans"), shard_text(root / "out")
    assert "數學" in kept and "一門学科" in kept
    assert "數" not in converted and "學" not in converted and "一门学科" in converted
    assert len(converted) == len(kept) > 5000
    manifest = json.loads((root / "work" / "out-hans" / schema.MANIFEST).read_text())
    assert manifest["config"]["convert"] == ["zh=zh-hans"]
    assert "convert" not in json.loads((root / "out" / schema.MANIFEST).read_text())["config"]


def test_the_manifest_counts_the_conversion(runs):
    root, hans, written = runs
    text = json.loads((root / "work" / "out-hans" / schema.MANIFEST).read_text())["languages"]["zh"]["text"]
    assert text["converted_pages"] == 1 and text["converted_characters"] > 1000
    assert "characters changed" in hans.stdout  # canine inspect's line, printed at the end of the run
    # The page's end matter 註記 (traditional) is listed as its text would show it.
    as_written = json.loads((root / "out" / schema.MANIFEST).read_text())["languages"]["zh"]["text"]
    assert ["註記", 1] in as_written["end_matter_dropped"]
    assert ["注记", 1] in text["end_matter_dropped"] and "註記" not in str(text["end_matter_dropped"])
    (line,) = [line for line in hans.stdout.splitlines() if line.startswith("zh: end matter dropped: ")]
    assert "注记 1" in line and "註記" not in line
