"""pipeline/sources/multistream.py: a dump split by its index into ranges of whole bz2 streams
that cover every page once, each readable on its own; a malformed index named by its line."""

import bz2
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.sources import InputError, plan_work_items, read_pages


@pytest.mark.parametrize("per_item", [1, 3])
def test_multistream_ranges_cover_every_page_once(per_item, input_variants, sample_pages, fields):
    dump = input_variants["multistream"]
    items = plan_work_items([str(dump)], streams_per_item=per_item)
    n_streams = -(-len(sample_pages["en"]) // 5)  # the fixture puts 5 pages in a stream
    assert len(items) == -(-n_streams // per_item)
    assert items[0].start == 0 and items[-1].end is None
    assert all(a.end == b.start for a, b in zip(items, items[1:]))  # contiguous, no overlap
    # Parallel-safe: each range decodes on its own, in any order, on any thread.
    with ThreadPoolExecutor(4) as pool:
        per_range = list(pool.map(lambda it: list(read_pages(it)), reversed(items)))[::-1]
    assert all(per_range) and [fields(p) for r in per_range for p in r] == [fields(p) for p in sample_pages["en"]]
    assert all(p.source.startswith(f"{dump}@{it.start}:") for it, r in zip(items[1:], per_range[1:]) for p in r)


def test_range_boundaries_are_the_index_offsets(input_variants):
    dump = input_variants["multistream"]
    index = dump.with_name(dump.name.replace("multistream.xml", "multistream-index.txt"))
    offsets = sorted({int(line.split(":")[0]) for line in bz2.decompress(index.read_bytes()).decode().splitlines()})
    items = plan_work_items([str(dump)])
    assert [it.start for it in items[1:]] == offsets[1:]
    for start in offsets:  # each is a real bz2 stream start
        with open(dump, "rb") as f:
            f.seek(start)
            assert f.read(3) == b"BZh"


def test_malformed_index_line_is_named(input_variants, tmp_path, make_multistream, sample_xml):
    dump, index = make_multistream(sample_xml["ko"], tmp_path)
    index.write_bytes(bz2.compress(bz2.decompress(index.read_bytes()) + b"garbage line\n"))
    n = bz2.decompress(index.read_bytes()).count(b"\n")
    with pytest.raises(InputError, match=rf"{index}:{n}: expected 'offset:page_id:title'"):
        plan_work_items([str(dump)])
