"""Work items: fsspec URLs and globs expanded into input files, each file's kind told by its
name, each file planned by its format's module into one or more work items, and each item
read back by the same module (`read_pages`).

Whatever is cheap to see is seen here, before anything is written (the package docstring,
"Bad input"): a pattern that matches nothing, an unknown kind, a 0-byte file, a name that is
not UTF-8, and a cut download seen from the file's last bytes.

A trial slice (`max_pages`, --max-pages N): the first N pages of each input file in file order
(every <page>, whatever its namespace; JSON Lines / Parquet: the first N rows), the same for any
worker count, runner or resume, and planned so that nothing after it is read: a multistream
dump's index says which streams hold them (multistream.py), any other file is one work item
read from its start that stops after its Nth page (a single-stream .bz2 / .gz is not split:
where page N is is not known before reading, and a small N is read quickly from the start).

How big an item is (`item_size`): every worker busy on a small input, items of a useful size on a
big one. A run of `workers` aims at ITEMS_PER_WORKER items a worker, from the text its inputs
hold (their stored sizes times TEXT_PER_STORED_BYTE), between MIN_ITEM_BYTES and
seekable.ITEM_BYTES of text: a 28.8 MB .xml.bz2 with --workers 2 (~130 MB of XML) makes items of
~16 MB, about 8, where one size for all made 2. A multistream dump takes fewer than
`streams_per_item` streams an item the same way (never more: the config's value is the upper
bound, and stays what the manifest's fingerprint records). The output never depends on where
items are cut (pages are hashed into groups); the rejects' `source` positions of a split dump
(`path@start:line`) do, and a rerun with another worker count on a small input plans other items
and reads them again rather than reusing the cached ones. A big input (ITEM_BYTES x
ITEMS_PER_WORKER x workers of text and more, 256 MB a worker) is cut at ITEM_BYTES whatever the
worker count. A trial slice is planned by its pages (above), never by the worker count.
"""

import hashlib
import json
import posixpath
import re
import time
from collections.abc import Iterator
from contextlib import closing

import fsspec
import fsspec.core

from contract.files import atomic_write
from pipeline.sources import dumps, jsonl, mediawiki, network, parquet, seekable
from pipeline.sources.common import LANG_RE, SURROGATE_RE, InputError, RawPage, WorkItem
from pipeline.sources.compressed import METER, codec_of

_XML_RE = re.compile(r"\.xml(?:-p\d+p\d+)?(?:\.(?:bz2|gz))?$")
_JSONL_RE = re.compile(r"\.jsonl?(?:\.(?:bz2|gz))?$")
_PARQUET_RE = re.compile(r"\.parquet$")
_KINDS = "expected .xml[.bz2|.gz], .jsonl/.json[.gz|.bz2] or .parquet"
# Every bzip2 stream ends with this 48-bit marker (BCD of sqrt(pi)), a 32-bit CRC and 0-7 bits
# of padding to a whole byte; the marker is not byte-aligned, so each padding is tried.
_BZ2_END = 0x177245385090

# Items a worker gets at least, on an input big enough: more than one, so that the last items
# of a run (one big, one small) do not leave a worker idle for long, and the progress line moves.
ITEMS_PER_WORKER = 4
# The smallest item planned for a worker count: ~1.5 s of one core's cleaning (~3 MB/s of XML,
# benchmarks/preprocess.py), against a per-item cost of ~10-50 ms (a bz2 cut's 256 kB read, a
# Beam element, one cache file).
MIN_ITEM_BYTES = 4 << 20
# XML text per stored byte of an input, by how it is stored: the planner's and the disk
# estimate's (pipeline/output/disk.py) guess of a file's text before reading it. bz2: enwiki's
# pages-articles (~22 GB -> ~100 GB) 4.5; the real pages of tests/data/wiki 3.8, the made-up
# sample 10. gzip: 3.1 on those real pages (gzip -6). JSON Lines and Parquet hold cleaned text
# already (about half the XML of the same pages); Parquet's is compressed, ~2.5x with zstd/snappy.
TEXT_PER_STORED_BYTE = {"bz2": 4.5, "gzip": 3.5, None: 1.0}


def plan_work_items(patterns: list[str], lang: str | None = None, streams_per_item: int = 1,
                    item_bytes: int | None = None, max_pages: int | None = None,
                    workers: int | None = None) -> list[WorkItem]:
    """Expand fsspec URLs / globs into work items, sorted by (path, start). A single-stream
    .bz2 / .gz dump is split about `item_bytes` of text apart (default: the ITEM_ENV setting,
    else `item_size` for `workers`, else seekable.ITEM_BYTES), a multistream dump in ranges of
    at most `streams_per_item` streams (fewer for `workers`: module docstring).
    `max_pages`: only the items of each file's first `max_pages` pages (module docstring).

    Fails with InputError before reading any page if a pattern matches nothing, a file's kind
    is unknown, a file has no language (its own xml:lang / `lang` column, else `lang`), or it
    is empty, cut or not what its name says, as far as its first and last bytes tell (package
    docstring, "Bad input").
    """
    if streams_per_item < 1:
        raise ValueError(f"streams_per_item must be >= 1, got {streams_per_item}")
    if max_pages is not None and max_pages < 1:
        raise ValueError(f"max_pages must be >= 1, got {max_pages}")
    if lang is not None and not LANG_RE.fullmatch(lang):
        raise InputError(f"--lang {lang!r}: not a language code (e.g. en, zh-min-nan)")
    files = [(path, fs, fs_path, _kind(path), _size(fs, fs_path, path)) for path, fs, fs_path in _expand(patterns)]
    for path, _, _, _, size in files:
        if size == 0:
            raise InputError(f"{path}: empty file (0 bytes)")
    min_items = 1
    if workers is not None and max_pages is None:  # a trial slice: by its pages, the same for any worker count
        min_items = ITEMS_PER_WORKER * workers
        if item_bytes is None and not seekable.item_bytes_set():
            item_bytes = item_size(sum(text_bytes(path, size or 0) for path, *_, size in files), workers)
    item_bytes = item_bytes or seekable.item_bytes()
    items = []
    for path, fs, fs_path, kind, size in files:
        if kind == "xml":
            items.extend(mediawiki.plan_items(path, fs, fs_path, lang, streams_per_item, size, item_bytes, max_pages,
                                              min_items))
        elif kind == "jsonl":
            items.append(WorkItem(path, kind, lang=jsonl.file_language(path, lang), max_pages=max_pages))
        else:
            items.append(WorkItem(path, kind, lang=parquet.file_language(path, lang), max_pages=max_pages))
        if size:  # None: the server did not say. After the header checks above, which name a wrong format better
            _check_end(path, kind, size)
    return sorted(items, key=lambda it: (it.path, it.start))


def text_bytes(path: str, stored: int) -> int:
    """About how many bytes of text a file of `stored` bytes holds (TEXT_PER_STORED_BYTE)."""
    return int(stored * TEXT_PER_STORED_BYTE.get(codec_of(path), 1.0))


def item_size(text: int, workers: int) -> int:
    """Text per work item for `text` bytes of input read by `workers`: ITEMS_PER_WORKER items a
    worker, between MIN_ITEM_BYTES and seekable.ITEM_BYTES (module docstring)."""
    return max(MIN_ITEM_BYTES, min(seekable.ITEM_BYTES, text // (ITEMS_PER_WORKER * max(1, workers))))


def stored_bytes(item: WorkItem, file_sizes: dict) -> int:
    """The input bytes an item covers: its range, or to its file's end (`file_sizes`: {path: bytes})."""
    return max(0, (item.end if item.end is not None else file_sizes.get(item.path, item.start)) - item.start)


def work_item_key(item: WorkItem) -> str:
    """A stable id of the item's input bytes (language is config, not identity); a split dump's
    item by the bits it starts and ends at too (two deflate blocks may start in one byte)."""
    key = f"{item.path}@{item.start}:{'eof' if item.end is None else item.end}"
    if item.max_pages is not None:  # fewer pages than the same bytes read whole
        key += f"/first{item.max_pages}"
    return key if item.seek is None else f"{key}#{item.seek.bit}:{item.seek.end_bit}"


def read_pages(item: WorkItem) -> Iterator[RawPage]:
    """Stream the item's pages. Raises InputError on corrupt / truncated input or malformed XML.
    An item with a `progress` folder reports there how far it got (`_reported`)."""
    reader = {"xml": mediawiki.read_pages, "jsonl": jsonl.read_pages, "parquet": parquet.read_pages}.get(item.kind)
    if reader is None:
        raise InputError(f"{item.path}: unknown work item kind {item.kind!r}")
    pages = reader(item) if item.max_pages is None else _first(reader(item), item.max_pages)
    return pages if item.progress is None else _reported(pages, item)


# How often a worker rewrites an item's progress file: every 2 s on a local disk (the launcher
# looks every second), every 10 s on an object store (one small PUT each; it looks every 10 s).
REPORT_EVERY_S = {True: 2.0, False: 10.0}


def progress_name(item: WorkItem) -> str:
    """The name of an item's progress file in its `progress` folder (by its key: any folder)."""
    return hashlib.blake2b(work_item_key(item).encode("utf-8"), digest_size=8).hexdigest() + ".json"


def _reported(pages: Iterator[RawPage], item: WorkItem, clock=time.monotonic) -> Iterator[RawPage]:
    """`pages`, writing {"pages": n, "bytes": b} to the item's progress file as the item begins and
    every REPORT_EVERY_S: the pages read so far and the input bytes the readers read for them
    (compressed.METER, in this thread only while a page is being read). Parquet is read by
    Arrow, not by compressed.py: its bytes are its rows' share of the file. A failed write costs
    a report, never the item (a full disk fails the item's own cache file anyway)."""
    url = f"{item.progress.rstrip('/')}/{progress_name(item)}"
    every = REPORT_EVERY_S["://" not in url or url.startswith("file://")]
    rows = size = None
    if item.kind == "parquet":
        try:
            rows, size = _parquet_extent(item.path)
        except (OSError, ValueError):
            pass
    done = read = 0
    last = clock()
    try:  # at once, as the item begins: the launcher's clock of the reading starts here (progress.py)
        atomic_write(url, json.dumps({"pages": 0, "bytes": 0}).encode())
    except OSError:
        pass
    with closing(pages):
        while True:
            saved = METER.counting, METER.bytes
            METER.counting, METER.bytes = True, 0
            try:
                page = next(pages)
            except StopIteration:
                if item.max_pages is not None:  # a trial slice: its extent is known only now
                    try:
                        atomic_write(url, json.dumps({"pages": done, "bytes": read if not rows else
                                                      size * min(done, rows) // rows}).encode())
                    except OSError:
                        pass
                return
            finally:
                read += METER.bytes
                METER.counting, METER.bytes = saved
            done += 1
            if clock() - last >= every:
                last = clock()
                extent = read if not rows else size * min(done, rows) // rows
                try:
                    atomic_write(url, json.dumps({"pages": done, "bytes": extent}).encode())
                except OSError:
                    pass
            yield page


def _parquet_extent(path: str) -> tuple[int, int]:
    """(rows, bytes) of a Parquet file, from its footer."""
    import pyarrow.parquet as pq

    with fsspec.open(path, "rb") as f:
        return pq.ParquetFile(f).metadata.num_rows, f.size


def _first(pages: Iterator[RawPage], n: int) -> Iterator[RawPage]:
    """The first `n` pages, then the reader closed: nothing after them is read (the XML reader also
    stops parsing at its nth page, mediawiki.py, so that what follows it cannot fail the item)."""
    with closing(pages):
        for i, page in enumerate(pages, 1):
            yield page
            if i == n:
                return


def _expand(patterns: list[str]) -> list[tuple[str, fsspec.AbstractFileSystem, str]]:
    """Every input file as (URL, filesystem, path on it): globs expanded, directories listed,
    multistream index files skipped (they are read with their dump)."""
    found = {}
    for pattern in patterns:
        literal = not any(c in pattern for c in "*?[")
        try:
            fs, _, paths = fsspec.core.get_fs_token_paths(pattern)
            files = []
            for p in paths:
                # isdir only for names that are not input files: on https:// it may fetch the body
                if not (_kind(p) or dumps.INDEX_RE.search(p)) and fs.isdir(p):
                    files += sorted(f for f in fs.ls(p, detail=False) if _kind(f) and fs.isfile(f))
                elif not literal or network.exists(fs, p, pattern):
                    files.append(p)
                else:
                    raise InputError(f"{pattern}: input not found; check the path or URL, and that these "
                                     "credentials can see it")
        except OSError as err:
            if (error := network.unreachable(pattern, err, "listing the input", "check the network and the URL")):
                raise error from None
            raise InputError(f"{pattern}: cannot list input: {err}; check the URL, the network and the "
                             "credentials") from None
        remote = "://" in pattern or "::" in pattern
        matched = 0
        for p in files:
            if dumps.INDEX_RE.search(p):
                continue
            if not _kind(p):
                if literal:
                    raise InputError(f"{pattern}: unrecognized input kind ({_KINDS})")
                continue
            if SURROGATE_RE.search(p):  # undecodable bytes in the name: the page sources could not be written
                raise InputError(f"{ascii(p)}: the file name is not valid UTF-8; rename the file")
            found[fs.unstrip_protocol(p) if remote else p] = (fs, p)
            matched += 1
        if not matched:
            raise InputError(f"{pattern}: no input files match ({_KINDS})")
    return [(url, fs, p) for url, (fs, p) in sorted(found.items())]


def _size(fs, fs_path: str, url: str) -> int | None:
    try:
        return fs.size(fs_path)
    except OSError as err:  # fsspec's HTTP filesystem: FileNotFoundError for a refused connection too
        if (error := network.unreachable(url, err, "asking for its size", "check the network and the URL")):
            raise error from None
        raise


def _kind(path: str) -> str | None:
    name = posixpath.basename(path)
    if _XML_RE.search(name):
        return "xml"
    if _JSONL_RE.search(name):
        return "jsonl"
    if _PARQUET_RE.search(name):
        return "parquet"
    return None


def _check_end(path: str, kind: str, size: int) -> None:
    """A cut download, the commonest bad input, seen from the file's last bytes where its format
    has a fixed ending, instead of after parsing everything before the cut. (gzip ends with a CRC
    and a length, nothing fixed; Parquet's footer is read when planning.)"""
    codec = codec_of(path)
    if not (codec == "bz2" or (codec is None and kind == "xml")):
        return
    try:
        with fsspec.open(path, "rb") as f:
            f.seek(max(size - 64, 0))
            tail = f.read()
    except ValueError:  # a server that can't seek: the reader finds a cut just the same, later
        return
    except OSError as err:
        if (error := network.unreachable(path, err, "reading its last bytes", "check the network and the URL")):
            raise error from None
        raise InputError(f"{path}: cannot read its last bytes: {err}; check the network and the credentials") from None
    value = int.from_bytes(tail[-11:], "big")
    if codec == "bz2" and not any((value >> (32 + pad)) & (2**48 - 1) == _BZ2_END for pad in range(8)):
        raise InputError(f"{path}: truncated bz2 file: it does not end with a bz2 end-of-stream marker "
                         f"({size} bytes; an interrupted download?)")
    if codec is None and not _ends_xml(tail):
        raise InputError(f"{path}: truncated XML: it does not end with </mediawiki> ({size} bytes; an interrupted download?)")


def _ends_xml(tail: bytes) -> bool:
    """The last bytes of an XML export end with </mediawiki>, in UTF-8 or an encoding that writes
    ASCII as it does (ISO-8859-1, windows-1252), or in UTF-16 (its even length keeps `tail`,
    read from an offset of the size's parity, on whole code units)."""
    return any(tail.decode(codec, "ignore").rstrip().endswith("</mediawiki>") for codec in ("utf-8", "utf-16-le", "utf-16-be"))
