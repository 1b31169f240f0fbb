"""pipeline/sources/compressed.py: cut and stale compressed input named by byte, and memory that
stays flat as the dump grows and whatever the compression ratio."""

import bz2
import gzip
import tracemalloc

import pytest

from pipeline.sources import InputError, WorkItem, plan_work_items, read_pages
from pipeline.sources.compressed import _OUT_BYTES, decoded_chunks


def test_cut_input_is_named_by_the_reader_too(bad_inputs, read_all):
    """A file cut or an index changed after planning (or a gzip file: it has no end marker)."""
    bz2_path, xml_path = bad_inputs["truncated_bz2"], bad_inputs["truncated_xml"]
    with pytest.raises(InputError, match=rf"{bz2_path}: truncated bz2 data: input ends at byte {bz2_path.stat().st_size} inside the stream starting at byte \d+"):
        read_all([WorkItem(str(bz2_path), "xml", lang="en")])
    with pytest.raises(InputError, match=rf"{xml_path}: malformed XML at line \d+, column \d+, in the <page> at line \d+ \('.*'\) .*: (no element found|unclosed token)"):
        read_all([WorkItem(str(xml_path), "xml", lang="en")])
    stale = bad_inputs["stale_index"]
    with pytest.raises(InputError, match=rf"{stale}: not bz2 data at byte 99 \(a stale multistream index\?\): it starts with b'.*', a bz2 stream with b'BZh'"):
        read_all([WorkItem(str(stale), "xml", 99, 400, lang="en")])
    with pytest.raises(InputError, match=rf"{stale}: the work item ends at byte 400, inside the bz2 stream starting at byte 0 \(a stale multistream index\?\)"):
        read_all([WorkItem(str(stale), "xml", 0, 400, lang="en")])


def peak_bytes(path) -> tuple[int, int]:
    """(pages, peak traced bytes) of streaming through a dump without keeping its pages."""
    tracemalloc.start()
    try:
        pages = sum(1 for item in plan_work_items([str(path)]) for _ in read_pages(item))
        return pages, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_as_the_dump_grows(tmp_path, make_synthetic_dump):
    # gzip, not bz2: bz2 takes seconds to compress these repetitive pages (the reader is the same).
    small = make_synthetic_dump(tmp_path / "small-pages-articles.xml.gz", 600)
    large = make_synthetic_dump(tmp_path / "large-pages-articles.xml.gz", 2400)
    (n_small, peak_small), (n_large, peak_large) = peak_bytes(small), peak_bytes(large)
    assert (n_small, n_large) == (600, 2400)
    assert large.stat().st_size > 3.5 * small.stat().st_size
    # Streaming: the peak is a read block, its decompressed piece and its pages, not the dump
    # (measured: about 2.1 MB for both; 11 MB of XML in the large one).
    assert peak_large < 1.25 * peak_small + 256 * 1024, (peak_small, peak_large)


@pytest.mark.parametrize("codec", ["bz2", "gzip"])
def test_decompressed_pieces_are_bounded_whatever_the_ratio(codec, tmp_path):
    data = b"<page>" + b"a" * (12 << 20) + b"</page>"  # compresses ~1000x
    path = tmp_path / f"zeros.{'bz2' if codec == 'bz2' else 'gz'}"
    path.write_bytes(bz2.compress(data) if codec == "bz2" else gzip.compress(data))
    pieces = list(decoded_chunks(str(path), codec))
    assert b"".join(pieces) == data and max(map(len, pieces)) <= _OUT_BYTES
