"""`canine inspect`: the per-language text and mask statistics under the accounting table."""

import dataclasses

from contract import schema
from contract.manifest import FileRef, Language, Manifest, Split
from jobs.inspect import format_manifest


def small_manifest() -> Manifest:
    de = Language(pages_read=5, redirects=1, non_article=0, parse_errors=1, empty=0, kept=3, examples=3,
                  sampling_weight=1.0, replaced_characters=2, dropped=dict.fromkeys(schema.CONSTRUCT_DROPS, 0))
    empty = Split(rows=0, codepoints=0, shards=())
    return Manifest(schema_version=schema.SCHEMA_VERSION, config={"seq_len": 512}, config_sha256="c" * 64,
                    splits={"train": empty, "validation": empty}, languages={"de": de},
                    tokenizer=FileRef(schema.TOKENIZER, "b" * 64), rejects=())


def test_inspect_shows_each_languages_masks_variants_and_headings():
    m = small_manifest()
    de = dataclasses.replace(
        m.languages["de"],
        text={"variant_pages": 2, "variant_constructs": 5, "end_matter_dropped": [["Literatur", 3], ["Weblinks", 2]],
              "last_headings_kept": [["Leben", 4]]},
        masks={"examples": 9, "masked_share_p10_pct": 12.4, "masked_share_median_pct": 15.0, "spans": 80,
               "span_median": 5, "span_p90": 8, "span_max": 8})
    zh = dataclasses.replace(m.languages["de"], text={}, masks={})  # an output made before the statistics
    text = format_manifest(dataclasses.replace(m, languages={"de": de, "zh": zh}))
    lines = text.splitlines()
    assert lines[-5].split() == ["lang", "masked%p10", "median", "span-med", "span-p90", "span-max"]
    assert lines[-4].split() == ["de", "12.4", "15.0", "5", "8", "8"]
    assert lines[-3:] == ["de: variant markup on 2 pages, 5 constructs rendered",
                          "de: end matter dropped: Literatur 3, Weblinks 2", "de: last headings kept: Leben 4"]
    assert "zh:" not in text


# --- canine inspect --examples: examples as text, their masking plans visible ---------------------

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402

from contract.manifest import read_manifest  # noqa: E402
from jobs.inspect import render_example  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _canine(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def sample_output(tmp_path_factory):
    """The bundled en and zh sample, preprocessed by the CLI with a relative --output."""
    work = tmp_path_factory.mktemp("inspect")
    r = _canine("preprocess", str(ROOT / "pipeline/sample/enwiki-20261101-pages-articles.xml"),
                str(ROOT / "pipeline/sample/zhwiki-20261101-pages-articles.xml"), "--output", "out", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


def _first_rows(directory):
    m = read_manifest(str(directory))
    return pq.read_table(os.path.join(directory, m.splits["train"].shards[0].path)).to_pylist()


def test_examples_print_each_split_and_language_with_the_char_plan_bracketed(sample_output):
    r = _canine("inspect", "out", "--examples", "2", "--chars", "0", cwd=sample_output)  # relative, as README
    assert r.returncode == 0, r.stderr
    blocks = [b for b in r.stdout.split("\n\n") if b.startswith(("train: ", "validation: "))]
    heads = [(b.split(":", 1)[0], b.split("[", 1)[1].split("]", 1)[0]) for b in blocks]
    assert sorted(set(heads)) == [("train", "en"), ("train", "zh"), ("validation", "en"), ("validation", "zh")]
    # N of each, or all there is (the sample's zh validation split holds one example)
    assert heads.count(("train", "en")) == heads.count(("train", "zh")) == heads.count(("validation", "en")) == 2
    m = read_manifest(str(sample_output / "out"))
    zh = sum(row["lang"] == "zh" for shard in m.splits["validation"].shards
             for row in pq.read_table(sample_output / "out" / shard.path, columns=["lang"]).to_pylist())
    assert heads.count(("validation", "zh")) == min(2, zh) >= 1
    # The bracketed characters are exactly the row's char_mask_positions, in order.
    rows = {row["example_id"]: row for row in _first_rows(sample_output / "out")}
    checked = 0
    for block in blocks:
        example_id = block.split(": ", 1)[1].split(" ", 1)[0]
        if example_id not in rows:
            continue
        row, text = rows[example_id], block.splitlines()[1][2:]
        inside, at, positions = False, 0, []
        for ch in text.replace("[CLS]", "\x00").replace("[SEP]", "\x00").replace("\u23ce", "\n"):
            if ch in "\u27e6\u27e7":
                inside = ch == "\u27e6"
                continue
            if inside:
                positions.append(at)
            at += 1
        assert positions == list(row["char_mask_positions"]) and at == len(row["codepoints"]), example_id
        checked += 1
    assert checked >= 2


def test_examples_filter_by_split_and_language_and_speak_json(sample_output):
    r = _canine("inspect", str(sample_output / "out"), "--examples", "1", "--split", "validation", "--lang", "zh",
                "--json", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["split"], x["lang"]) for x in rows] == [("validation", "zh")]
    assert set(rows[0]) == {"split", *schema.COLUMNS}
    bad = _canine("inspect", "out", "--examples", "1", "--lang", "xx", cwd=sample_output)
    assert bad.returncode == 2 and bad.stderr.strip() == "canine inspect: --lang xx: not in out (its languages: en, zh)"


def test_render_example_shows_the_subword_plan_with_replacements():
    cps = [schema.CLS, *map(ord, "ab cd\nef"), schema.SEP]
    row = {"example_id": "x-1", "lang": "en", "page_ids": [7], "codepoints": cps, "sop_label": schema.SOP_NO_PAIR,
           "char_mask_positions": [4, 5], "subword_starts": [1, 7], "subword_lengths": [2, 2],
           "subword_predict_offsets": [1, 0], "subword_actions": [schema.ACTION_RANDOM, schema.ACTION_KEEP],
           "subword_replacements": list(map(ord, "zz"))}
    text = render_example(row)
    assert text.splitlines()[1] == "  [CLS]ab \u27e6cd\u27e7\u23ceef[SEP]"
    assert text.splitlines()[2] == "  CANINE-S: 'ab' random -> zz, predicts 'b'; 'ef' keep, predicts 'e'"
    assert "one segment" in text.splitlines()[0] and "2 characters predicted" in text.splitlines()[0]
    assert render_example(row, chars=3).splitlines()[1] == "  [CLS]ab ... (+7 characters)"


def test_a_reader_that_stops_early_ends_inspect_quietly(sample_output):
    """`canine inspect out --examples 40 | head -1`: no traceback and no 'unexpected' line, only
    the SIGPIPE status a shell gives `yes | head` (141)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "jobs.cli", "inspect", "out", "--examples", "40", "--chars", "0"],
                         cwd=sample_output, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline()  # the first line, then the reader goes away with more than a pipe's buffer unread
    p.stdout.close()
    stderr = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and stderr == ""
