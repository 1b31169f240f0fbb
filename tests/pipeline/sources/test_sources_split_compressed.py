"""pipeline/sources/seekable.py: a single-stream .xml.bz2 / .xml.gz (or a plain .xml) split into
work items at bz2 blocks / gzip seek points (any byte) gives, item by item, exactly the pages of
reading the file whole; and `canine preprocess` on such a file runs them as several items, on
any number of workers, with the shards of the plain .xml, resuming a killed run item by item.

The dump is every page of the bundled samples with fresh ids, a few times over, under the English
header (about 1.2 MB of XML a copy). The item size is forced small (seekable.ITEM_ENV) so that a
few MB make several items.
"""

import bz2
import gzip
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape

import fsspec
import pytest

from contract import schema
from pipeline import faults, progress
from pipeline.sources import InputError, plan_work_items, read_pages, seekable

SAMPLE = Path(__file__).resolve().parents[3] / "pipeline" / "sample"
PAGE = re.compile(rb"  <page>\n.*?</page>\n", re.S)


def make_dump(path: Path, copies: int, big_page: int = 0) -> Path:
    """Every sample page `copies` times with ids 1..n under the English header; `big_page`: a
    page of that many bytes of text in the middle."""
    files = sorted(SAMPLE.glob("*wiki-*-pages-articles.xml"))
    head = (SAMPLE / "enwiki-20261101-pages-articles.xml").read_bytes()
    pages = [p for f in files for p in PAGE.findall(f.read_bytes())] * copies
    if big_page:  # random words: compressed, it still spans several blocks
        rng = random.Random(0)
        letters = "abcdefghijklmnopqrstuvwxyz"
        words = " ".join("".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(big_page // 6))
        pages.insert(len(pages) // 2, pages[0].replace(b"</text>", words.encode()[:big_page] + b"</text>"))
    with open(path, "wb") as f:
        f.write(head[: head.index(b"  <page>")])
        for i, page in enumerate(pages):
            f.write(re.sub(rb"<id>\d+</id>", f"<id>{i + 1}</id>".encode(), page, count=1))
        f.write(b"</mediawiki>\n")
    return path


def cuts(data: bytes, n: int) -> list[bytes]:
    """`data` in n pieces cut anywhere (mid-page, mid-tag), as pbzip2 / pigz -i cut their input."""
    step = len(data) // n
    return [data[i * step : None if i == n - 1 else (i + 1) * step] for i in range(n)]


def containers(xml: Path) -> dict[str, Path]:
    """The same dump as single-stream bz2 (bzip2's 900k blocks, and 100k ones), several bz2
    streams and several gzip members cut mid-page, and plain gzip."""
    data, stem = xml.read_bytes(), xml.name.removesuffix(".xml")
    out = {"bz2": bz2.compress(data), "bz2-100k": bz2.compress(data, 1), "gz": gzip.compress(data),
           "bz2-streams": b"".join(bz2.compress(part, 2) for part in cuts(data, 5)),
           "gz-members": b"".join(gzip.compress(part) for part in cuts(data, 5))}
    made = {"xml": xml}  # plain XML is split anywhere: its bytes are their own offsets
    for name, payload in out.items():
        path = xml.with_name(f"{stem}-{name}.xml.{'bz2' if 'bz2' in name else 'gz'}")
        path.write_bytes(payload)
        made[name] = path
    return made


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    xml = make_dump(tmp_path_factory.mktemp("split") / "enwiki-20261101-pages-articles.xml", 2)
    return xml, containers(xml)


def fields(page):
    return (page.page_id, page.title, page.ns, page.redirect, page.text, page.lang, page.error, page.markup)


def title(page) -> bytes:
    return b"<title>" + escape(page.title, {'"': "&quot;"}).encode() + b"</title>"


def pages_of(items):
    return [page for item in items for page in read_pages(item)]


@pytest.mark.parametrize("name", ["bz2", "bz2-100k", "bz2-streams", "gz", "gz-members", "xml"])
@pytest.mark.parametrize("item_bytes", [1, 100_000, 500_000])
def test_items_hold_exactly_the_pages_of_the_whole_file(dump, name, item_bytes):
    xml, made = dump
    whole = [fields(p) for p in pages_of(plan_work_items([str(xml)]))]
    assert len(plan_work_items([str(xml)])) == 1  # 2.4 MB: under one item of the default size
    items = plan_work_items([str(made[name])], item_bytes=item_bytes)
    # 1 byte: an item per block / seek point, most of them holding no <page> start at all
    assert len(items) >= (3 if name != "bz2" else 2), [(i.start, i.end) for i in items]
    assert [i.start for i in items] == sorted({i.start for i in items}) and items[0].start == 0
    assert [i.end for i in items] == [i.start for i in items[1:]] + [None]  # every byte once
    pages = pages_of(items)
    assert [fields(p) for p in pages] == whole and len(whole) > 500
    assert len({p.source for p in pages}) == len(pages)


def test_the_progress_line_counts_each_items_compressed_bytes(dump, tmp_path):
    """pipeline/progress.py's rate and ETA weigh each item by its bytes in the file."""
    _, made = dump
    for name in ("bz2-100k", "gz"):
        items = plan_work_items([str(made[name])], item_bytes=300_000)
        watch = progress.ItemProgress(items, {str(made[name]): made[name].stat().st_size}, str(tmp_path / name))
        assert len(watch.sizes) == len(items) >= 4 and min(watch.sizes.values()) > 0
        assert watch.total_bytes == made[name].stat().st_size


def test_a_page_longer_than_several_items_is_read_once(tmp_path):
    xml = make_dump(tmp_path / "enwiki-20261101-pages-articles.xml", 1, big_page=700_000)
    whole = [fields(p) for p in pages_of(plan_work_items([str(xml)]))]
    for name, path in containers(xml).items():
        items = plan_work_items([str(path)], item_bytes=60_000)
        counts = [sum(1 for _ in read_pages(item)) for item in items]
        assert name == "bz2" or 0 in counts, (name, counts)  # items inside the long page hold none
        assert [fields(p) for p in pages_of(items)] == whole, name


def test_a_page_is_named_from_its_items_first_page(dump):
    xml, made = dump
    text = xml.read_bytes()
    for name in ("bz2-100k", "gz"):
        items = plan_work_items([str(made[name])], item_bytes=300_000)
        for item in items:
            pages = list(read_pages(item))
            first = f"{made[name]}@{item.start}:1" if item.start else None
            assert first is None or pages[0].source == first
            # path@start:line: the line counted from the item's first <page>, whose own line is 1
            # (the pages of the second copy have the same lines from their item's first page)
            start = text.rindex(b"  <page>", 0, text.index(title(pages[0])))
            lines = text[start:].split(b"\n")
            for page in pages[1:6]:
                line = int(page.source.rsplit(":", 1)[1]) - (0 if item.start else text[:start].count(b"\n"))
                assert lines[line - 1 : line + 1] == [b"  <page>", b"    " + title(page)], (name, page.source)


def test_small_files_and_other_encodings_stay_one_item(tmp_path, sample_xml, compress):
    en = sample_xml["en"]
    for suffix in ("bz2", "gz"):
        items = plan_work_items([str(compress(en, tmp_path / f"enwiki-20261101-pages-articles.xml.{suffix}"))])
        assert [(i.start, i.end, i.seek) for i in items] == [(0, None, None)]  # 148 kB: under one item
    assert not en.read_bytes().startswith(b"<?xml")
    latin = b'<?xml version="1.0" encoding="ISO-8859-1"?>\n' + en.read_bytes()
    path = tmp_path / "latin.xml.bz2"
    path.write_bytes(bz2.compress(latin, 1))
    assert len(plan_work_items([str(path)], item_bytes=1)) == 1  # its <page> tags are not searched for as bytes


def test_fsspec_file_objects_are_split_too(dump):
    """An object store's file objects have no file descriptor: rapidgzip reads through Python."""
    xml, made = dump
    whole = [fields(p) for p in pages_of(plan_work_items([str(xml)]))]
    for name in ("bz2-100k", "gz"):
        url = f"memory://split/{made[name].name}"
        with fsspec.open(url, "wb") as f:
            f.write(made[name].read_bytes())
        items = plan_work_items([url], item_bytes=300_000)
        assert len(items) >= 3 and {i.path for i in items} == {f"memory:///split/{made[name].name}"}
        assert [fields(p) for p in pages_of(items)] == whole


def test_corrupt_blocks_are_named_by_their_byte(dump, tmp_path):
    xml, made = dump
    # bz2: planning decodes the first MiB only (a corrupt block there: one item, as before); one
    # further on is found by the item that reads it
    bad = tmp_path / "enwiki-20261101-pages-articles.xml.bz2"
    data = bytearray(made["bz2-100k"].read_bytes())
    bad.write_bytes(bytes(data))
    items = plan_work_items([str(bad)], item_bytes=300_000)
    middle = items[len(items) // 2]
    data[middle.start + 2000 : middle.start + 2040] = bytes(40)
    bad.write_bytes(bytes(data))
    assert [len(list(read_pages(item))) for item in items[: len(items) // 2 - 1]]  # the items before it are read
    with pytest.raises(InputError, match=rf"{bad}: corrupt bz2 data in the block starting at byte {middle.start}: "):
        list(read_pages(middle))
    # gzip: rapidgzip's pass when planning checks the deflate data and each member's CRC
    data = bytearray(made["gz"].read_bytes())
    data[-8] ^= 0xFF  # the CRC
    bad = tmp_path / "enwiki-20261101-pages-articles.xml.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError, match=rf"{bad}: corrupt or truncated gzip data \(found while indexing it .*CRC32"):
        plan_work_items([str(bad)], item_bytes=300_000)


def test_the_item_size_setting_is_checked(monkeypatch):
    monkeypatch.setenv(seekable.ITEM_ENV, "64MB")
    with pytest.raises(ValueError, match=rf"{seekable.ITEM_ENV}='64MB': expected a number of bytes"):
        seekable.item_bytes()
    monkeypatch.setenv(seekable.ITEM_ENV, "1000")
    assert seekable.item_bytes() == 1000
    monkeypatch.delenv(seekable.ITEM_ENV)
    assert seekable.item_bytes() == seekable.ITEM_BYTES == 64 << 20


# --- `canine preprocess` on a single-stream file ------------------------------------------------

FLAGS = ["--seq-len", "512", "--vocab-size", "800", "--validation-fraction", "0.05", "--shard-codepoints", "300000",
         "--json"]
ITEM_BYTES = "400000"  # ~6 items of the 2.4 MB dump


def start(inputs, out, workers, cwd=None, fault=None):
    env = {k: v for k, v in os.environ.items() if k != faults.FAULT_ENV}
    env[seekable.ITEM_ENV] = ITEM_BYTES
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH", "")])
    if fault:
        env[faults.FAULT_ENV] = fault
    cmd = [sys.executable, "-m", "jobs.cli", "preprocess", str(inputs), "--output", str(out), "--workers", str(workers),
           *FLAGS]
    # A session of its own: a fault kills the process group, which must not be pytest's.
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True)


def run(inputs, out, workers, cwd=None):
    proc = start(inputs, out, workers, cwd)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout), stderr


def shards_of(manifest):
    return {s["path"]: s["sha256"] for split in manifest["splits"].values() for s in split["shards"]}


def published(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def baseline(dump, tmp_path_factory):
    """The plain .xml, one worker: the shards every split run must publish."""
    xml, _ = dump
    manifest, _ = run(xml, tmp_path_factory.mktemp("baseline") / "out", 1)
    assert len(shards_of(manifest)) >= 3
    return manifest


@pytest.fixture(scope="module")
def gz_two_workers(dump, tmp_path_factory):
    """(manifest, stderr, output) of the single-stream .xml.gz on 2 workers, absolute paths: a job
    both tests below check (each ran it: ~1 min on the shared 2-core machine)."""
    _, made = dump
    out = tmp_path_factory.mktemp("gz_two_workers") / "out"
    manifest, stderr = run(made["gz"], out, 2)
    return manifest, stderr, out


@pytest.mark.slow  # two Beam jobs (~15 s each)
def test_split_bz2_and_gz_give_the_shards_of_the_plain_xml(dump, baseline, gz_two_workers, tmp_path):
    _, made = dump
    for name in ("bz2", "gz"):
        # relative input and output paths from another working directory for one, absolute for the other
        cwd = made[name].parent if name == "bz2" else None
        inputs = made[name].name if cwd else made[name]
        if name == "gz":
            manifest, stderr, _ = gz_two_workers
        else:
            manifest, stderr = run(inputs, os.path.relpath(tmp_path / name, cwd), 2, cwd)
        # bzip2's 900k blocks: 3 blocks of text, an item each; gzip: a seek point every ~100 kB
        assert manifest["run"]["work_items"] >= {"bz2": 3, "gz": 4}[name]
        assert manifest["run"]["items_parsed"] == manifest["run"]["work_items"]
        assert re.search(rf"preprocess: {manifest['run']['work_items']} work items from 1 input file", stderr)
        assert re.search(r"done in [\d:]+: \d+ items read \(\d+ pages, [\d.]+ MB, [\d.]+ MB/s\)", stderr)
        assert shards_of(manifest) == shards_of(baseline), name
        assert manifest["languages"] == baseline["languages"]


@pytest.mark.slow  # six Beam jobs (gz on 2 workers: gz_two_workers's)
@pytest.mark.parametrize("name", ["bz2-100k", "gz"])
def test_one_two_and_four_workers_publish_the_same_bytes(dump, baseline, gz_two_workers, tmp_path, name):
    _, made = dump
    outputs = {}
    for workers in (1, 2, 4):
        if name == "gz" and workers == 2:
            manifest, _, out = gz_two_workers
        else:
            out = tmp_path / f"w{workers}"
            manifest, _ = run(made[name], out, workers)
        assert manifest["run"]["work_items"] >= 4
        assert shards_of(manifest) == shards_of(baseline)
        outputs[workers] = published(out)
    assert sorted(outputs[2]) == sorted(outputs[1]) == sorted(outputs[4])
    assert [n for n in outputs[1] if not outputs[2][n] == outputs[4][n] == outputs[1][n]] == []


@pytest.mark.slow  # a killed Beam job and its rerun
def test_a_killed_run_resumes_from_its_finished_items(dump, baseline, tmp_path):
    _, made = dump
    out = tmp_path / "out"
    proc = start(made["bz2-100k"], out, 2, fault="item:3")
    info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    assert info.si_code == os.CLD_KILLED, proc.stderr.read()[-3000:]
    staging = [n for n in os.listdir(out) if n.startswith(schema.STAGING_PREFIX)]
    assert len(os.listdir(out / staging[0] / "items")) >= 3
    manifest, _ = run(made["bz2-100k"], out, 2)
    proc.wait()
    items = manifest["run"]
    assert items["items_reused"] >= 3 and items["items_parsed"] + items["items_reused"] == items["work_items"] >= 5
    assert shards_of(manifest) == shards_of(baseline)
