"""`canine preprocess --max-pages N`: a trial slice, the first N pages of each input file in file
order, planned so that nothing after them is read, and recorded so that it is never taken for
the whole dump.

Reading nothing after the slice is shown by inputs whose bytes after it are damaged: a
multistream dump with a corrupt stream past its slice (and garbage at the end of its index), a
single-stream .bz2 and a .gz with corrupt data near their ends, an XML file malformed right after
its Nth page. A reader that went on would fail; each gives exactly N pages.
"""

import bz2
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contract import schema
from contract.manifest import read_manifest
from pipeline.output import output
from pipeline.preprocess_config import PreprocessConfig
from pipeline.sources import InputError, WorkItem, plan_work_items, read_pages, work_item_key

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "pipeline" / "sample"
N = 36  # the English sample's first 36 pages hold 6 of other namespaces and a redirect (below)
FAST = ["--seq-len", "512", "--vocab-size", "600", "--json"]


def _canine(*args, cwd, env=None, timeout=300):
    """`canine ARGS` as a user runs it, from the working directory `cwd`."""
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=timeout)


def _damage(path: Path, at: int, n: int = 64) -> None:
    """Overwrite `n` bytes at byte `at` of the file with other bytes."""
    data = bytearray(path.read_bytes())
    data[at : at + n] = bytes(b ^ 0x55 for b in data[at : at + n])
    path.write_bytes(bytes(data))


def _relang(text: str, lang: str) -> str:
    return text.replace('xml:lang="en"', f'xml:lang="{lang}"', 1)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, make_synthetic_dump, make_multistream, compress, write_rows, sample_pages, pages_as_rows):
    """{lang: input file}, one language per input so that the manifest counts each input's pages:
    en the bundled sample as is; the others a 3000-page dump (~12 MB of XML), damaged past its
    slice: de multistream (10 pages a stream), fr single-stream .bz2, es .gz, it plain .xml, sv
    JSON Lines and da Parquet rows."""
    root = tmp_path_factory.mktemp("trial")
    src = root / "src"
    src.mkdir()
    text = make_synthetic_dump(src / "synthetic.xml", 3000).read_text(encoding="utf-8")
    found = {"en": SAMPLE / "enwiki-20261101-pages-articles.xml"}

    (src / "dewiki-20261101-pages-articles.xml").write_text(_relang(text, "de"), encoding="utf-8")
    dump, index = make_multistream(src / "dewiki-20261101-pages-articles.xml", root / "in", pages_per_stream=10)
    offsets = sorted({int(line.split(b":")[0]) for line in bz2.decompress(index.read_bytes()).splitlines()})
    _damage(dump, (offsets[20] + offsets[21]) // 2)  # in the 21st stream: pages 201-210
    index.write_bytes(bz2.compress(bz2.decompress(index.read_bytes()) + b"not an index line\n"))
    found["de"] = dump

    for lang, suffix in (("fr", ".xml.bz2"), ("es", ".xml.gz")):
        plain = src / f"{lang}.xml"
        plain.write_text(_relang(text, lang), encoding="utf-8")
        packed = compress(plain, root / "in" / f"{lang}wiki-20261101-pages-articles{suffix}")
        _damage(packed, packed.stat().st_size * 9 // 10)
        found[lang] = packed

    # Malformed right after the Nth page's end: in the bytes the reader decompresses with it.
    pages = text.split("</page>")
    cut = len("</page>".join(pages[:N])) + len("</page>")
    broken = text[:cut] + text[cut:].replace("</title>", "</titel>", 1)
    found["it"] = root / "in" / "itwiki-20261101-pages-articles.xml"
    found["it"].write_text(_relang(broken, "it"), encoding="utf-8")

    rows = [dict(r, id=i + 1) for i, r in enumerate(pages_as_rows(sample_pages["en"]) * 40)]
    found["sv"] = write_rows([dict(r, lang="sv") for r in rows], root / "in" / "sv-rows.jsonl")
    found["da"] = write_rows([dict(r, lang="da") for r in rows], root / "in" / "da-rows.parquet")
    return found


@pytest.fixture(scope="module")
def first_ids(inputs) -> list[int]:
    """The page ids of the 3000-page dump's first N pages, read whole (-1 for one whose id is bad)."""
    synthetic = WorkItem(str(inputs["de"].parents[1] / "src" / "synthetic.xml"), "xml")
    return [p.page_id for _, p in zip(range(N), read_pages(synthetic))]


# --- planning and reading ------------------------------------------------------------------------


def test_a_multistream_slice_is_the_streams_of_its_first_pages_and_the_index_is_read_no_further(inputs, first_ids):
    dump = str(inputs["de"])
    with pytest.raises(InputError, match="expected 'offset:page_id:title'"):  # the garbage past the slice
        plan_work_items([dump])
    items = plan_work_items([dump], streams_per_item=1, max_pages=N)
    assert len(items) == 4  # 10 pages a stream: the 4th holds pages 31-36
    assert [it.max_pages for it in items] == [None, None, None, 6]
    assert all(a.end == b.start for a, b in zip(items, items[1:])) and items[-1].end is not None
    pages = [p for it in items for p in read_pages(it)]
    assert [p.page_id for p in pages] == first_ids and len(first_ids) == N
    # streams_per_item 10: one range of 4 streams, its cap the whole slice
    (whole,) = plan_work_items([dump], streams_per_item=10, max_pages=N)
    assert (whole.start, whole.end, whole.max_pages) == (0, items[-1].end, N)
    assert [p.page_id for p in read_pages(whole)] == first_ids
    # What the slice never reads: the damaged stream fails when read.
    damaged = plan_work_items([dump], streams_per_item=1, max_pages=210)[-1]
    with pytest.raises(InputError, match="bz2"):
        list(read_pages(damaged))


@pytest.mark.parametrize("lang", ["fr", "es", "it"])
def test_a_single_stream_dump_is_one_item_read_from_its_start_to_its_nth_page(inputs, lang, first_ids):
    path = str(inputs[lang])
    # Small items: without --max-pages the file would be split (and a .gz decompressed whole to plan)
    (item,) = plan_work_items([path], item_bytes=1 << 16, max_pages=N)
    assert (item.start, item.end, item.seek, item.max_pages) == (0, None, None, N)
    assert [p.page_id for p in read_pages(item)] == first_ids
    with pytest.raises(InputError):  # the damage after the slice, which the slice never reaches
        list(read_pages(WorkItem(path, "xml", lang=lang)))


def test_every_page_counts_whatever_its_namespace(inputs, sample_pages):
    (item,) = plan_work_items([str(inputs["en"])], max_pages=N)
    pages = list(read_pages(item))
    expected = sample_pages["en"][:N]
    assert [(p.page_id, p.ns, p.redirect) for p in pages] == [(p.page_id, p.ns, p.redirect) for p in expected]
    assert sum(p.ns != 0 for p in pages) == 6 and sum(p.redirect for p in pages) == 1


def test_a_malformed_page_inside_the_slice_still_fails(bad_inputs):
    malformed = str(bad_inputs["malformed_xml"])  # its 5th page's </title> is misspelt
    assert len(list(read_pages(plan_work_items([malformed], max_pages=4)[0]))) == 4
    with pytest.raises(InputError, match="malformed XML"):
        list(read_pages(plan_work_items([malformed], max_pages=5)[0]))


@pytest.mark.parametrize("lang", ["sv", "da"])
def test_rows_stop_after_the_nth_row_bad_rows_counted(inputs, lang, tmp_path):
    (item,) = plan_work_items([str(inputs[lang])], max_pages=N)
    assert [p.page_id for p in read_pages(item)] == list(range(1, N + 1))
    if lang == "sv":  # a line that is not JSON is a row (a parse error), a blank line none
        lines = inputs[lang].read_text(encoding="utf-8").splitlines(keepends=True)
        path = tmp_path / "rows.jsonl"
        path.write_text("".join(lines[:2]) + "\n{not json\n" + "".join(lines[2:]), encoding="utf-8")
        pages = list(read_pages(plan_work_items([str(path)], max_pages=4)[0]))
        assert [p.page_id for p in pages] == [1, 2, -1, 3] and pages[2].error.startswith("invalid JSON")


def test_the_slice_is_part_of_the_items_identity_and_the_configs():
    item = WorkItem("a.xml", "xml")
    assert work_item_key(item) != work_item_key(WorkItem("a.xml", "xml", max_pages=5))
    full, trial = PreprocessConfig(inputs=("a.xml",)), PreprocessConfig(inputs=("a.xml",), max_pages=5)
    assert "max_pages" not in full.fingerprint()  # a whole run's config_sha256 is what it was before the option
    assert trial.fingerprint()["max_pages"] == 5 and trial.sha256() != full.sha256()
    assert output.describe_change(trial.fingerprint(), full.fingerprint()) == "max_pages: 5 -> None"


def test_the_manifest_says_so_in_words_and_a_whole_runs_json_has_no_such_key(tmp_path):
    from contract.manifest import FileRef, Manifest, ManifestError, Split, write_manifest

    empty = Split(rows=0, codepoints=0, shards=())
    whole = Manifest(schema_version=schema.SCHEMA_VERSION, config={"seq_len": 512}, config_sha256="c" * 64,
                     splits={"train": empty, "validation": empty}, languages={},
                     tokenizer=FileRef(schema.TOKENIZER, "b" * 64), rejects=())
    assert "trial_slice" not in json.loads(whole.to_json()) and whole.trial_slice is None
    trial = Manifest(**{**whole.__dict__, "trial_slice": output.trial_slice(7)})
    write_manifest(str(tmp_path), trial)
    assert read_manifest(str(tmp_path)) == trial
    assert trial.trial_slice == "the first 7 pages of each input file (--max-pages 7); not the whole dump"
    raw = json.loads(trial.to_json()) | {"trial_slice": 7}
    with pytest.raises(ManifestError, match="trial_slice: 7 is not a string"):
        Manifest.from_dict(raw)


# --- through the CLI -----------------------------------------------------------------------------


def _shards(out: Path, manifest: dict) -> dict[str, str]:
    """{shard path: sha256 of the file's bytes as read now}."""
    paths = [s["path"] for split in manifest["splits"].values() for s in split["shards"]]
    return {p: hashlib.sha256((out / p).read_bytes()).hexdigest() for p in paths}


@pytest.mark.slow  # the Beam job end to end, twice
def test_a_trial_slice_reads_n_pages_of_each_input_on_any_worker_count_and_says_so(inputs, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Absolute paths, one worker
    one = _canine("preprocess", *inputs.values(), "--output", tmp_path / "one", "--max-pages", N, *FAST,
                  cwd=ROOT)
    assert one.returncode == 0, one.stderr[-3000:]
    first = json.loads(one.stdout)
    # Relative paths from another working directory, two workers, the same slice by --set
    rel = [os.path.relpath(p, elsewhere) for p in inputs.values()]
    two = _canine("preprocess", *rel, "--output", "../two", "--set", f"max_pages={N}", "--workers", "2", *FAST,
                  cwd=elsewhere)
    assert two.returncode == 0, two.stderr[-3000:]
    second = json.loads(two.stdout)

    for m in (first, second):
        assert {lang: c["pages_read"] for lang, c in m["languages"].items()} == dict.fromkeys(inputs, N)
        assert m["config"]["max_pages"] == N
        assert m["trial_slice"] == f"the first {N} pages of each input file (--max-pages {N}); not the whole dump"
    en = first["languages"]["en"]
    assert (en["non_article"], en["redirects"]) == (6, 1)
    # The same bytes: the slice depends on neither the worker count nor how the inputs are named.
    assert _shards(tmp_path / "one", first) == _shards(tmp_path / "two", second)
    assert _shards(tmp_path / "one", first) == {s["path"]: s["sha256"] for split in first["splits"].values()
                                                for s in split["shards"]}
    for done in (one, two):
        # Only de's streams have a size before they are read; the other six files' slices, pages.
        assert re.search(rf"preprocess: \d+ work items from 7 input files \(\d+\.\d MB, and the first {N} pages "
                         r"of 6 files\)\n", done.stderr), done.stderr[-3000:]
        assert done.stderr.strip().splitlines()[-1] == (
            f"canine preprocess: note: trial slice: {first['trial_slice']}; leave out --max-pages, with another "
            "--output, to preprocess all of it")

    # canine inspect and canine validate, the output named relative to another directory
    shown = _canine("inspect", "../one", cwd=elsewhere)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1] == f"trial slice: {first['trial_slice']}"
    assert read_manifest(str(tmp_path / "two")).trial_slice == first["trial_slice"]
    checked = _canine("validate", tmp_path / "one", cwd=elsewhere)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # The whole dumps into the trial's output: another config, refused before anything is read. (Not
    # the multistream dump: planning all of it reaches the garbage at the end of its index; and the
    # .gz as one work item: planning splits a .gz of several items by indexing all of it, which
    # reaches its damage first.)
    full = _canine("preprocess", *rel[:1], *rel[2:], "--output", "../one", *FAST, cwd=elsewhere,
                   env={"CANINE_PREPROCESS_ITEM_BYTES": str(1 << 30)})
    assert full.returncode == 2
    assert "different config" in full.stderr and "max_pages: 36 -> None" in full.stderr
    assert json.loads(full.stdout)["error"] == full.stderr.strip().removeprefix("canine preprocess: ")
    assert read_manifest(str(tmp_path / "one")).config_sha256 == first["config_sha256"]


@pytest.mark.slow  # the Beam job end to end, three times
def test_a_killed_trial_resumes_to_the_same_bytes(inputs, tmp_path):
    from pipeline import faults

    args = [inputs["de"], "--max-pages", N, "--streams-per-item", "1", *FAST]
    whole = _canine("preprocess", *args, "--output", tmp_path / "whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-3000:]
    # SIGKILL to the job's process group once the first work item is cached: a session of its own.
    env = {k: v for k, v in os.environ.items() if k != faults.FAULT_ENV}
    killed = subprocess.run([sys.executable, "-m", "jobs.cli", "preprocess", *map(str, args), "--output", "out",
                             "--workers", "2"], cwd=tmp_path, capture_output=True, text=True, start_new_session=True,
                            env={**env, "PYTHONPATH": str(ROOT), faults.FAULT_ENV: "item"}, timeout=300)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert not (tmp_path / "out" / schema.MANIFEST).exists()
    resumed = _canine("preprocess", *args, "--output", "out", "--workers", "2", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    again, first = json.loads(resumed.stdout), json.loads(whole.stdout)
    assert again["run"]["items_reused"] >= 1 and again["run"]["work_items"] == 4
    assert again["languages"]["de"]["pages_read"] == N
    assert _shards(tmp_path / "out", again) == _shards(tmp_path / "whole", first)


# --- refused values --------------------------------------------------------------------------------


@pytest.mark.parametrize("given, line", [
    (["--max-pages", "0"], "--max-pages 0: must be at least 1 (pages read from the start of each input)"),
    (["--max-pages=-3"], "--max-pages -3: must be at least 1 (pages read from the start of each input)"),
    (["--set", "max_pages=0"], "--max-pages 0: must be at least 1 (pages read from the start of each input)"),
    (["--set", "max_pages=2.5"], "--set max_pages: expected int, got '2.5'"),
    (["--set", "max_pages=lots"], "--set max_pages: expected int, got 'lots'"),
])
def test_a_bad_value_is_one_line_before_any_work(given, line, tmp_path):
    # A --dump on a mirror that cannot be reached: refused before the dump is looked for.
    done = _canine("preprocess", "--dump", "en:latest", "--mirror", "http://127.0.0.1:9/dumps", "--output", "out",
                   *given, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"canine preprocess: {line}"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["1.5", "x"])
def test_a_non_integer_flag_is_argparses_usage_error(value, tmp_path):
    done = _canine("preprocess", SAMPLE / "kowiki-20261101-pages-articles.xml", "--output", "out",
                   "--max-pages", value, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"canine preprocess: error: argument --max-pages: invalid int value: '{value}'")
    assert not (tmp_path / "out").exists()
