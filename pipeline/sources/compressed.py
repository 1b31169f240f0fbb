"""Bytes of an input file, plain or compressed (bz2 / gzip by its suffix), streamed: read in
`_READ_BYTES` blocks, decompressed in pieces of at most `_OUT_BYTES`, so memory stays flat
whatever the file size and compression ratio (tests/pipeline/sources/test_sources_compressed.py
measures it). Errors name the byte offset in the file and the stream it falls in.
"""

import bz2
import threading
import zlib
from collections.abc import Iterator

import fsspec

from pipeline.sources import network
from pipeline.sources.common import InputError

# Bytes read per block, and the most decompressed bytes handed on at once (one expat feed):
# big enough that per-call overhead vanishes, small enough to keep memory flat.
_READ_BYTES = 1 << 18
_OUT_BYTES = 1 << 18
MAGIC = {"bz2": b"BZh", "gzip": b"\x1f\x8b"}


class _ReadMeter(threading.local):
    """Input bytes `_raw_chunks` read in this thread while `counting`: how far a work item's
    reading got (plan.py reports it for the progress line), whichever reader reads the file."""

    counting = False
    bytes = 0


METER = _ReadMeter()


def codec_of(path: str) -> str | None:
    return "bz2" if path.endswith(".bz2") else "gzip" if path.endswith(".gz") else None


def _raw_chunks(path: str, start: int, end: int | None) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) blocks of [start, end) of a file; fails if the file ends before `end`."""
    pos = start
    try:
        with fsspec.open(path, "rb") as f:
            if start:
                f.seek(start)
            while end is None or pos < end:
                data = f.read(_READ_BYTES if end is None else min(_READ_BYTES, end - pos))
                if not data:
                    break
                if METER.counting:
                    METER.bytes += len(data)
                yield pos, data
                pos += len(data)
    except Exception as err:
        # The network first: fsspec's HTTP filesystem raises FileNotFoundError for a refused
        # connection too, and aiohttp's ServerDisconnectedError is no OSError.
        again = "run the same command again (finished work items are reused)"
        if (error := network.unreachable(path, err, f"reading it at byte {pos}", f"check the network, then {again}")):
            raise error from None
        if isinstance(err, FileNotFoundError):
            raise InputError(f"{path}: file not found while reading it (moved or deleted after the run started?); "
                             "restore it and run the same command again") from None
        if isinstance(err, OSError):
            raise InputError(f"{path}: read failed at byte {pos}: {err}; check the network and the credentials, then "
                             f"{again}") from None
        if isinstance(err, ValueError) and "range requests" in str(err):  # fsspec's words for such a server
            raise network.no_range_requests(path, pos) from None
        raise
    if end is not None and pos < end:
        raise InputError(f"{path}: file ends at byte {pos}, before byte {end} where its work item ends (truncated file or stale index)")


class _Inflater:
    """One bz2 stream or gzip member, decompressed in pieces of at most _OUT_BYTES, so that
    memory is bounded by the piece size whatever the compression ratio (a repetitive dump
    compresses 35x: one read block would otherwise inflate to ~9 MB)."""

    def __init__(self, codec: str):
        self.bz2 = codec == "bz2"
        self.dec = bz2.BZ2Decompressor() if self.bz2 else zlib.decompressobj(wbits=31)

    def pieces(self, data: bytes) -> Iterator[bytes]:
        dec = self.dec
        out = dec.decompress(data, _OUT_BYTES)
        yield out
        if self.bz2:
            while not dec.eof and not dec.needs_input:
                yield dec.decompress(b"", _OUT_BYTES)
        else:  # zlib keeps unread input in unconsumed_tail, and may hold output when `out` was full
            while not dec.eof and (dec.unconsumed_tail or len(out) == _OUT_BYTES):
                out = dec.decompress(dec.unconsumed_tail, _OUT_BYTES)
                yield out


def decoded_chunks(path: str, codec: str | None, start: int = 0, end: int | None = None) -> Iterator[bytes]:
    """Decompressed bytes of [start, end), which must hold whole, concatenated bz2 / gzip streams."""
    if codec is None:
        for _, data in _raw_chunks(path, start, end):
            yield data
        return
    inflater, stream_start, pos, inside = _Inflater(codec), start, start, False
    for pos, data in _raw_chunks(path, start, end):
        if pos == start and not data.startswith(MAGIC[codec]):
            stale = " (a stale multistream index?)" if start else ""
            raise InputError(f"{path}: not {codec} data at byte {start}{stale}: it starts with {data[:8]!r}, "
                             f"a {codec} stream with {MAGIC[codec]!r}")
        while data:
            try:
                for out in inflater.pieces(data):
                    if out:
                        yield out
            except (OSError, EOFError, ValueError, zlib.error) as err:
                raise InputError(
                    f"{path}: corrupt {codec} data in the stream starting at byte {stream_start} "
                    f"(within bytes {pos}-{pos + len(data)}): {err}"
                ) from None
            inside = True
            if inflater.dec.eof:  # concatenated streams (multistream bz2, multi-member gzip)
                rest = inflater.dec.unused_data
                pos += len(data) - len(rest)
                data, inflater, stream_start, inside = rest, _Inflater(codec), pos, False
            else:
                pos += len(data)
                data = b""
    if inside and end is not None:
        raise InputError(f"{path}: the work item ends at byte {end}, inside the {codec} stream starting at byte "
                         f"{stream_start} (a stale multistream index?)")
    if inside:
        raise InputError(f"{path}: truncated {codec} data: input ends at byte {pos} inside the stream starting at byte {stream_start}")
