"""pipeline/sources/plan.py `item_size`: a small input still makes work items for every worker,
a big one keeps items of seekable.ITEM_BYTES, and a trial slice is planned as before. The items,
however cut, hold exactly the pages of the whole file, and `canine preprocess` publishes the same
bytes from one item or many."""

import bz2
import json
import os
import random
from pathlib import Path

import pytest

from contract import schema
from jobs import cli
from pipeline.sources import plan, plan_work_items, seekable

SAMPLE = Path(__file__).resolve().parents[3] / "pipeline" / "sample"
MB = 1 << 20


@pytest.fixture(autouse=True)
def no_item_env(monkeypatch):
    monkeypatch.delenv(seekable.ITEM_ENV, raising=False)


def test_item_size_follows_the_input_and_the_workers():
    assert plan.item_size(130 * MB, 2) == 130 * MB // 8  # ~16 MB: 8 items for 2 workers
    assert plan.item_size(130 * MB, 1) == 130 * MB // 4
    assert plan.item_size(3 * MB, 2) == plan.MIN_ITEM_BYTES  # never below: overhead would dominate
    assert plan.item_size(100_000 * MB, 16) == seekable.ITEM_BYTES  # enwiki: the same items for any count
    assert plan.text_bytes("x.xml.bz2", 1000) == 4500 and plan.text_bytes("x.xml", 1000) == 1000


def random_pages_dump(path: Path, stored_mb: float, seed: int = 0) -> Path:
    """A single-stream-like .xml.bz2 of about `stored_mb` MB that compresses as wikitext does
    (~4x): pages of random words, ~3 MB of XML compressed once and its middle stream repeated
    (concatenated bz2 streams, as pbzip2 writes; split at blocks like any .bz2 without an index)."""
    rng = random.Random(seed)
    words = ["".join(rng.choices("etaoinshrdlucmfwyp", k=rng.randint(2, 9))) for _ in range(20000)]
    head = (SAMPLE / "enwiki-20261101-pages-articles.xml").read_text(encoding="utf-8")
    head = head[: head.index("  <page>")]
    pages = "".join(f"  <page>\n    <title>P{i}</title>\n    <ns>0</ns>\n    <id>{i + 1}</id>\n    <revision><text>"
                    + " ".join(rng.choices(words, k=500)) + "</text></revision>\n  </page>\n" for i in range(1000))
    first, middle = bz2.compress((head + pages).encode()), bz2.compress(pages.encode())
    last = bz2.compress((pages + "</mediawiki>\n").encode())
    copies = max(0, round((stored_mb * 1e6 - len(first) - len(last)) / len(middle)))
    with open(path, "wb") as f:
        f.write(first)
        for _ in range(copies):
            f.write(middle)
        f.write(last)
    return path


@pytest.fixture(scope="module")
def dump_29mb(tmp_path_factory):
    return random_pages_dump(tmp_path_factory.mktemp("plan") / "enwiki-20261101-pages-articles.xml.bz2", 28.8)


def test_a_29_mb_bz2_makes_items_for_every_worker(dump_29mb):
    assert 28e6 < dump_29mb.stat().st_size < 30e6
    whole = plan_work_items([str(dump_29mb)])  # no worker count: ITEM_BYTES, as before
    two = plan_work_items([str(dump_29mb)], workers=2)
    four = plan_work_items([str(dump_29mb)], workers=4)
    # one item for the whole file before (this dump compresses ~2.8x: ~80 MB of XML); at least
    # 2 a worker now (the planner guesses 4.5x before it reads a block, so 16 MB items: 5)
    assert len(whole) == 1 and len(two) >= 2 * 2, (len(whole), len(two))
    assert len(four) > len(two)
    for items in (two, four):  # they cover the file: each starts where the one before it ends
        assert items[0].start == 0 and items[-1].end is None
        assert all(a.seek.end_bit == b.seek.bit for a, b in zip(items, items[1:]))


def test_items_of_any_size_hold_the_pages_of_the_whole_file(tmp_path, monkeypatch, read_all, fields):
    dump = random_pages_dump(tmp_path / "enwiki-20261101-pages-articles.xml.bz2", 1.2, seed=1)
    monkeypatch.setattr(plan, "MIN_ITEM_BYTES", 64 << 10)
    one, split = plan_work_items([str(dump)], workers=1), plan_work_items([str(dump)], workers=3)
    assert len(split) > len(one) >= 1
    assert [fields(p) for p in read_all(split)] == [fields(p) for p in read_all(one)]


def test_a_set_item_size_and_a_trial_slice_are_not_adapted(dump_29mb, monkeypatch):
    assert len(plan_work_items([str(dump_29mb)], workers=2, max_pages=10)) == 1
    monkeypatch.setenv(seekable.ITEM_ENV, str(10**9))
    assert len(plan_work_items([str(dump_29mb)], workers=2)) == 1


def test_a_small_multistream_dump_gets_ranges_for_every_worker(input_variants):
    dump = str(input_variants["multistream"])  # the English sample, 5 pages a stream
    default = plan_work_items([dump], streams_per_item=10)
    two = plan_work_items([dump], streams_per_item=10, workers=2)
    assert len(two) >= 2 * plan.ITEMS_PER_WORKER > len(default)
    # never more streams an item than the config says: its fingerprint's value is the upper bound
    assert len(plan_work_items([dump], streams_per_item=1, workers=2)) == len(plan_work_items([dump], streams_per_item=1))


def published(out: Path) -> dict:
    """Every published file's bytes (staging is gone after publishing)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.slow  # the Beam job twice, 2 worker processes each
def test_one_item_or_many_publish_the_same_bytes(tmp_path, monkeypatch, capsys, make_synthetic_dump):
    """`canine preprocess` as the README shows it, from another folder with relative paths: the
    dump read as one work item (ITEM_ENV) and as the items planned for 2 workers (the smallest
    item made small, as a big dump's are) publishes byte-identical shards, tokenizer, manifest
    (the rejects differ only in their pages' `source` positions)."""
    (tmp_path / "in").mkdir()
    make_synthetic_dump(tmp_path / "in" / "enwiki-20261101-pages-articles.xml", 400)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(plan, "MIN_ITEM_BYTES", 64 << 10)
    runs = {}
    for name, item_env in (("one", str(10**9)), ("many", None)):
        if item_env:
            monkeypatch.setenv(seekable.ITEM_ENV, item_env)
        else:
            monkeypatch.delenv(seekable.ITEM_ENV, raising=False)
        code = cli.main(["preprocess", "../in/enwiki-20261101-pages-articles.xml", "--output", f"../{name}",
                         "--workers", "2", "--seq-len", "512", "--vocab-size", "600", "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err[-3000:]
        runs[name] = json.loads(out.out)["run"]["work_items"], published(tmp_path / name)
    (one, files), (many, again) = runs["one"], runs["many"]
    assert one == 1 and many >= 2 * plan.ITEMS_PER_WORKER - 1, (one, many)
    assert schema.MANIFEST in files and any(name.startswith("train/") for name in files)
    assert files.keys() == again.keys()
    rejects = [name for name in files if name.startswith(f"{schema.REJECTS}/")]
    assert {k: v for k, v in files.items() if k not in rejects} == {k: v for k, v in again.items() if k not in rejects}
    # The rejects hold the same pages; their `source` names the line from the item's start
    # (path@byte:line), which depends on where items are cut (plan.py's docstring).
    def sans_source(data):
        return [{k: v for k, v in json.loads(line).items() if k != "source"} for line in data.splitlines()]
    assert rejects and all(sans_source(files[r]) == sans_source(again[r]) for r in rejects)
