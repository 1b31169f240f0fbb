"""Wikimedia's multistream dumps (`X-multistream3.xml-p1p99.bz2`): bz2 streams of about 100
pages each, concatenated, with an index beside the dump (`X-multistream-index3.txt-p1p99.bz2`,
lines `offset:page_id:title`) that says where each stream starts. With the index, one big dump
becomes one work item per range of whole streams, parsed in parallel, at no cost when planning
but reading the index. A dump without its index is split at its bzip2 blocks instead, as any
single-stream .bz2 (seekable.py).
"""

import re

import fsspec

from pipeline.sources import network
from pipeline.sources.common import InputError, WorkItem
from pipeline.sources.compressed import MAGIC, decoded_chunks

INDEX_RE = re.compile(r"multistream-index\d*\.txt(?:-p\d+p\d+)?\.bz2$")
# `X-multistream3.xml-p1p99.bz2` -> `X-multistream-index3.txt-p1p99.bz2` (Wikimedia naming)
_MULTISTREAM_RE = re.compile(r"multistream(\d*)\.xml(-p\d+p\d+)?\.bz2$")
_INDEX_OFFSET_RE = re.compile(rb"(?m)^(\d+):")


def split(path: str, fs, fs_path: str, lang: str, streams_per_item: int) -> list[WorkItem]:
    """The dump's work items: ranges of `streams_per_item` streams if its index exists, else one."""
    index_name = r"multistream-index\1.txt\2.bz2"
    if not _MULTISTREAM_RE.search(fs_path):
        return [WorkItem(path, "xml", lang=lang)]
    index = _MULTISTREAM_RE.sub(index_name, path)
    if not network.exists(fs, _MULTISTREAM_RE.sub(index_name, fs_path), index, "looking for the index beside its dump"):
        return [WorkItem(path, "xml", lang=lang)]  # no index: bz2 can't be split, one item per file
    offsets = _stream_offsets(index, fs.size(fs_path))
    with fsspec.open(path, "rb") as f:  # an index of another dump, seen now rather than by a worker
        for offset in sorted({*offsets[:1], *offsets[-1:]}):
            try:
                f.seek(offset)
                head = f.read(3)
            except ValueError as err:  # each work item starts at a stream: reading it needs ranges
                if "range requests" not in str(err):
                    raise
                raise network.no_range_requests(path, offset) from None
            if head != MAGIC["bz2"]:
                raise InputError(f"{index}: offset {offset} is not the start of a bz2 stream of {path} (the index of another dump?)")
    # The first item starts at byte 0 so that it holds the <siteinfo> header stream, the last
    # runs to the end of the file so that it holds the </mediawiki> footer stream: together
    # the items cover every byte exactly once.
    starts = [0] + offsets[streams_per_item::streams_per_item]
    ends = starts[1:] + [None]
    return [WorkItem(path, "xml", s, e, lang) for s, e in zip(starts, ends)]


def _stream_offsets(index: str, dump_size: int) -> list[int]:
    """Distinct stream offsets of a multistream index (`offset:page_id:title` lines), ascending."""
    offsets, line_no, pending = [], 0, b""
    for chunk in decoded_chunks(index, "bz2"):
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        block, pending = data[:cut], data[cut:]
        found = _INDEX_OFFSET_RE.findall(block)
        if len(found) != block.count(b"\n"):  # a malformed line: find it to name it
            for i, line in enumerate(block.split(b"\n")[:-1]):
                if not _INDEX_OFFSET_RE.match(line):
                    raise InputError(f"{index}:{line_no + i + 1}: expected 'offset:page_id:title', got {line[:80]!r}")
        for off in map(int, found):
            line_no += 1
            if offsets and off <= offsets[-1]:
                if off < offsets[-1]:
                    raise InputError(f"{index}:{line_no}: offset {off} is before the previous offset {offsets[-1]}")
                continue
            offsets.append(off)
    if pending.strip():
        raise InputError(f"{index}:{line_no + 1}: truncated last line {pending[:80]!r}")
    if offsets and offsets[-1] >= dump_size:
        raise InputError(f"{index}: offset {offsets[-1]} is past the end of its dump ({dump_size} bytes)")
    return offsets
