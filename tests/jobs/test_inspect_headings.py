"""`canine inspect`'s heading lines say what cleaning did: "last headings kept"
names only headings the text still has (a section left empty by cleaning, a gallery's or a
table's, is dropped, so it is not the page's last heading), and "end matter dropped" lists every
heading the manifest records, not the first 8 of them."""

import os
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from jobs import inspect
from pipeline.sources.common import RawPage
from pipeline.wikitext.clean import clean_page

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_ZH = ROOT / "pipeline" / "sample" / "zhwiki-20261101-pages-articles.xml"
# Ten of zh's end-matter titles (pipeline/wikitext/endmatter.py), one page each.
END = ["参考文献", "参考资料", "注释", "脚注", "外部链接", "参见", "延伸阅读", "相关条目", "书目", "參考來源"]
BODY = "数学是研究数量、结构以及空间等概念的一门学科。" * 3


def _text(end: str) -> str:
    """A page whose last sections are a gallery and a table (both empty once cleaned), then end matter."""
    return (f"{BODY}\n\n== 历史 ==\n{BODY}\n\n== 工业界 ==\n{{| class=\"wikitable\"\n|-\n| 甲 || 乙\n|}}\n\n"
            f"== 图集 ==\n<gallery>\nFile:A.jpg|甲\n</gallery>\n\n== {end} ==\n* 某书，2001年。\n")


def _page(i: int, end: str) -> str:
    """The page as a dump has it: the wikitext XML-escaped (`<gallery>` is `&lt;gallery&gt;` there)."""
    return (f"  <page>\n    <title>页面{i}</title>\n    <ns>0</ns>\n    <id>{100 + i}</id>\n    <revision>\n"
            f"      <id>{1000 + i}</id>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
            f"      <text xml:space=\"preserve\">{escape(_text(end))}</text>\n    </revision>\n  </page>\n")


def test_a_heading_left_empty_by_cleaning_is_not_the_last_kept():
    text = _text("参考文献")
    page = RawPage(page_id=1, title="页面", ns=0, redirect=False, text=text, lang="zh", source="test")
    result = clean_page(page)
    assert result.outcome == "kept"
    assert "工业界" not in result.text and "图集" not in result.text
    assert result.headings.last_kept == "历史"
    assert result.headings.dropped == ["参考文献"]


def test_the_manifests_heading_cap_is_the_pipelines():
    from pipeline.beam import stats

    assert inspect.TOP_HEADINGS == stats.TOP_HEADINGS


@pytest.mark.slow  # the Beam job end to end
def test_inspect_after_preprocess_names_the_headings_cleaning_kept_and_every_end_matter_heading(tmp_path):
    xml = SAMPLE_ZH.read_text(encoding="utf-8")
    header = xml[: xml.index("</siteinfo>") + len("</siteinfo>")]
    src = tmp_path / "zhwiki-20261101-pages-articles.xml"
    src.write_text(header + "\n" + "".join(_page(i, end) for i, end in enumerate(END)) + "</mediawiki>\n",
                   encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "jobs.cli", "preprocess", str(src), "--output", "out",
                           "--seq-len", "256", "--vocab-size", "300"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = subprocess.run([sys.executable, "-m", "jobs.cli", "inspect", "out"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "zh: last headings kept: 历史 10" in lines, lines[-4:]
    (end_line,) = [line for line in lines if line.startswith("zh: end matter dropped: ")]
    assert sorted(end_line.removeprefix("zh: end matter dropped: ").split(", ")) == sorted(f"{t} 1" for t in END)
