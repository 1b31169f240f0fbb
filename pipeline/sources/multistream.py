"""Wikimedia's multistream dumps (`X-multistream3.xml-p1p99.bz2`): bz2 streams of about 100
pages each, concatenated, with an index beside the dump (`X-multistream-index3.txt-p1p99.bz2`,
lines `offset:page_id:title`) that says where each stream starts; the names are Wikimedia's,
known to dumps.py alone. With the index, one big dump becomes one work item per range of whole
streams, parsed in parallel, at no cost when planning but reading the index. A dump without its
index is split at its bzip2 blocks instead, as any single-stream .bz2 (seekable.py).
"""

import dataclasses
import re
from collections.abc import Iterator
from contextlib import closing

import fsspec

from pipeline.sources import network
from pipeline.sources.common import InputError, WorkItem
from pipeline.sources.compressed import MAGIC, decoded_chunks
from pipeline.sources.dumps import index_of

_INDEX_OFFSET_RE = re.compile(rb"(?m)^(\d+):")


def split(path: str, fs, fs_path: str, lang: str, streams_per_item: int,
          max_pages: int | None = None, min_items: int = 1) -> list[WorkItem]:
    """The dump's work items: ranges of `streams_per_item` streams if its index exists, else one;
    fewer streams a range where that makes fewer than `min_items` ranges (a small dump read by
    several workers: plan.py), one stream a range at least.
    `max_pages` (a trial slice): only the ranges of the streams that hold the dump's first
    `max_pages` pages, the index's lines counting each stream's pages; the last range ends at the
    next stream and stops at its page (WorkItem.max_pages: what the ranges before it leave).
    Without an index the one item it returns has no max_pages, for the caller to set."""
    if index_of(fs_path) is None:
        return [WorkItem(path, "xml", lang=lang)]
    index = index_of(path)
    if not network.exists(fs, index_of(fs_path), index, "looking for the index beside its dump"):
        return [WorkItem(path, "xml", lang=lang)]  # no index: bz2 can't be split, one item per file
    offsets, pages, after = _streams(index, fs.size(fs_path), max_pages)
    streams_per_item = max(1, min(streams_per_item, -(-len(offsets) // max(1, min_items))))
    with fsspec.open(path, "rb") as f:  # an index of another dump, seen now rather than by a worker
        for offset in sorted({*offsets[:1], *offsets[-1:], *([] if after is None else [after])}):
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
    # the items cover every byte exactly once. A trial slice's last item ends where the stream
    # after its last one starts (the reader closes the document there).
    starts = [0] + offsets[streams_per_item::streams_per_item]
    ends = starts[1:] + [after]
    items = [WorkItem(path, "xml", s, e, lang) for s, e in zip(starts, ends)]
    if max_pages is not None:
        before = sum(pages[: (len(items) - 1) * streams_per_item])
        items[-1] = dataclasses.replace(items[-1], max_pages=max_pages - before)
    return items


def _streams(index: str, dump_size: int, max_pages: int | None = None) -> tuple[list[int], list[int], int | None]:
    """(stream offsets, distinct and ascending; the pages of each, a line of the index a page; `after`)
    of a multistream index (`offset:page_id:title` lines). `after` is None unless `max_pages` is
    given: then only the streams that hold the first `max_pages` pages are returned, the index is
    read no further than the first line of the stream after them, and `after` is its offset (None
    where no stream follows)."""
    offsets, pages, total, after = [], [], 0, None
    with closing(_index_offsets(index)) as lines:
        for line_no, off in lines:
            if offsets and off <= offsets[-1]:
                if off < offsets[-1]:
                    raise InputError(f"{index}:{line_no}: offset {off} is before the previous offset {offsets[-1]}")
                pages[-1] += 1
                total += 1
                continue
            if max_pages is not None and total >= max_pages:
                after = off
                break
            offsets.append(off)
            pages.append(1)
            total += 1
    highest = after if after is not None else offsets[-1] if offsets else None
    if highest is not None and highest >= dump_size:
        raise InputError(f"{index}: offset {highest} is past the end of its dump ({dump_size} bytes)")
    return offsets, pages, after


def _index_offsets(index: str) -> Iterator[tuple[int, int]]:
    """(line number, offset) of each line of a multistream index, in order; a malformed line is
    named when it is reached (a trial slice that stops before it never sees it)."""
    line_no, pending = 0, b""
    for chunk in decoded_chunks(index, "bz2"):
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        block, pending = data[:cut], data[cut:]
        found = _INDEX_OFFSET_RE.findall(block)
        if len(found) == block.count(b"\n"):
            for off in found:
                line_no += 1
                yield line_no, int(off)
            continue
        for line in block.split(b"\n")[:-1]:  # a malformed line: line by line, to name it
            line_no += 1
            match = _INDEX_OFFSET_RE.match(line)
            if not match:
                raise InputError(f"{index}:{line_no}: expected 'offset:page_id:title', got {line[:80]!r}")
            yield line_no, int(match.group(1))
    if pending.strip():
        raise InputError(f"{index}:{line_no + 1}: truncated last line {pending[:80]!r}")
