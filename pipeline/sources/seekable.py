"""Single-stream `.xml.bz2` and `.xml.gz` dumps (and plain `.xml`) split into work items, so that
one big file is read by many workers, resumed item by item and shown with a rate and an ETA, as
a multistream dump with its index is (multistream.py).

Where an item may start:
- plain XML: at any byte.
- bz2: a bzip2 stream is a run of blocks of at most 900 kB of text, each compressed on its own,
  each starting with a 48-bit magic number (BCD pi) at any bit offset, not byte-aligned. The
  planner reads one 256 kB range at each cut and takes the first block magic after it; a worker
  decodes its blocks one by one, each made into a one-block stream for Python's bz2 (its CRC
  checked). Planning reads O(items) small ranges and decompresses nothing but the first MiB (for
  the compression ratio). Either magic can also occur inside a block's data (by chance, once in
  ~18 TB): a block that does not decode up to such a false magic is decoded on to the next one,
  and a false cut is told apart by the block header that must follow a real magic.
  (indexed_bzip2 decodes the same blocks in C, but seeks only with a block map of the whole
  file, which costs a full decompression when planning: `set_block_offsets` refuses a partial map.)
- gzip: deflate blocks have no marker, and copy from up to 32 KiB of the text before them. So the
  planner decompresses the whole file once, with rapidgzip (in parallel, checking the CRC: a
  corrupt or cut .gz fails when planning), and takes its seek points: a block's bit offset, its
  offset in the text and the 32 KiB window before it, carried by the item (SeekPoint). A worker
  inflates from there with zlib, the window as its preset dictionary. That pass costs about as
  much as decompressing the file (~300 MB of XML a second a core, rapidgzip using every core of
  the launcher), on every run, a resume too; `python benchmarks/preprocess.py --single-stream gz`
  measures it.

Which pages an item holds: those whose `<page>` tag starts in the text of its own blocks (bz2)
or between its seek point and the next item's (gzip), as a multistream range holds the pages of
its streams. The reader (mediawiki.py) skips the text before its first `<page>` (the end of the
previous item's last page), and reads past its end only until its last page is closed. Every
page is read exactly once whatever the item size, and the pages, in order, are those of reading
the file whole (tests/pipeline/sources/test_sources_split_compressed.py).

Only a UTF-8 dump is split (every MediaWiki dump is): the `<page>` tag is found by its bytes.
"""

import bz2
import io
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import closing

import fsspec

from pipeline.sources.common import InputError, SeekPoint
from pipeline.sources.compressed import MAGIC, _OUT_BYTES, _raw_chunks, decoded_chunks

# Text per work item: about 20 s of one core's cleaning (~3 MB/s, benchmarks/preprocess.py), so
# a Ctrl-C loses at most that per worker and the progress line moves every few seconds, while a
# multi-GB dump still makes hundreds of items (enwiki's 100 GB: ~1500) and a small wiki's
# 20 MB .bz2 one or two. The staging cache holds one file per item; a gzip item carries 32 KiB.
# The largest item: a smaller input is cut finer to keep every worker busy (plan.py `item_size`).
ITEM_BYTES = 64 << 20
# The size for a run (tests force small items with it); the output does not depend on it, only
# the rejects' `source` positions do.
ITEM_ENV = "CANINE_PREPROCESS_ITEM_BYTES"

_BLOCK, _EOS = 0x314159265359, 0x177245385090  # bzip2's block and end-of-stream magics (48 bits)
_MAX_BLOCK_BITS = 8 * (1 << 20)  # a bzip2 block holds at most 900 kB, so compresses to less than 1 MiB
_WINDOW = 1 << 15


def item_bytes_set() -> bool:
    """Whether ITEM_ENV fixes the item size (then the planner does not adapt it to the run)."""
    return bool(os.environ.get(ITEM_ENV))


def item_bytes() -> int:
    value = os.environ.get(ITEM_ENV)
    if not value:
        return ITEM_BYTES
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{ITEM_ENV}={value!r}: expected a number of bytes of text per work item, e.g. {ITEM_BYTES}")
    return int(value)


def plan(path: str, codec: str | None, size: int, target: int) -> list[SeekPoint]:
    """Where the file's work items start, about `target` bytes of text apart; one point (the
    whole file) when it holds less than two items' worth."""
    if size * 64 < 2 * target:  # not two items' worth even at 64x (bzip2 compresses wikitext ~5x)
        return [SeekPoint(0)]
    if codec is None:  # plain XML: any byte will do; items of 64 KiB at least (bz2 blocks are ~100-900 kB)
        target = max(target, 1 << 16)
        starts = list(range(0, size - target // 2, target)) if size >= 2 * target else [0]
        return [SeekPoint(8 * a, None if b is None else 8 * b) for a, b in zip(starts, starts[1:] + [None])]
    if codec == "bz2":
        return _bz2_plan(path, size, target)
    return _gzip_plan(path, size, target)


def chunks(path: str, seek: SeekPoint) -> Iterator[tuple[bytes, bool]]:
    """(text, owned) pieces of at most _OUT_BYTES, decompressed from `seek` to the end of the
    file: `owned` while the text is the item's own (module docstring), False after. The reader
    stops as soon as it has what it needs."""
    if not path.endswith((".bz2", ".gz")):
        end = None if seek.end_bit is None else seek.end_bit // 8
        for pos, data in _raw_chunks(path, seek.bit // 8, None):
            cut = len(data) if end is None else min(max(end - pos, 0), len(data))
            if cut:
                yield data[:cut], True
            if cut < len(data):
                yield data[cut:], False
        return
    if path.endswith(".bz2"):
        for bit, text in _bz2_blocks(path, seek.bit):
            owned = seek.end_bit is None or bit < seek.end_bit
            for i in range(0, len(text), _OUT_BYTES):
                yield text[i : i + _OUT_BYTES], owned
        return
    out = seek.out
    for text in (decoded_chunks(path, "gzip") if seek.bit == 0 else _inflate_from(path, seek)):
        cut = len(text) if seek.end_out is None else min(max(seek.end_out - out, 0), len(text))
        if cut:
            yield text[:cut], True
        if cut < len(text):
            yield text[cut:], False
        out += len(text)


# --- bzip2 blocks -------------------------------------------------------------------------------


def _patterns(magic: int, is_block: bool) -> list[tuple]:
    """The 48-bit `magic` at bit s (0-7, from the most significant) of a 7-byte window: its 5
    whole middle bytes to search for, and the masked first and last bytes to check."""
    out = []
    for s in range(8):
        v = (magic << (8 - s)).to_bytes(7, "big")
        first, last = 0xFF >> s, (0xFF << (8 - s)) & 0xFF
        out.append((is_block, s, v[1:6], v[0] & first, first, v[6] & last, last))
    return out


_PATTERNS = _patterns(_BLOCK, True) + _patterns(_EOS, False)


def _magics(buf: bytes, base: int, lo: int, hi: int) -> list[tuple[int, bool]]:
    """(bit, is_block) of each magic wholly inside `buf` (file bytes from `base`) that starts in
    byte buf[j], lo <= j <= hi, in file order."""
    found = []
    for is_block, s, middle, first, first_mask, last, last_mask in _PATTERNS:
        i = buf.find(middle, max(lo, 0) + 1, hi + 1 + 5)
        while i != -1:
            j = i - 1
            if j + 7 <= len(buf) and buf[j] & first_mask == first and buf[j + 6] & last_mask == last:
                found.append((8 * (base + j) + s, is_block))
            i = buf.find(middle, i + 1, hi + 1 + 5)
    return sorted(found)


def _bits(buf: bytes, base: int, b0: int, b1: int) -> int:
    """The file's bits [b0, b1) as an integer, from `buf` (file bytes from `base`)."""
    v = int.from_bytes(buf[b0 // 8 - base : (b1 + 7) // 8 - base], "big") >> (-b1 % 8)
    return v & ((1 << (b1 - b0)) - 1)


def _decode_block(buf: bytes, base: int, b0: int, b1: int) -> bytes:
    """The text of the block at bits [b0, b1): the block alone, with a stream header and an
    end-of-stream marker around it, is a stream whose CRC is the block's (bzip2's stream CRC
    is rotl(crc, 1) ^ block CRC over its blocks, from 0). Raises what bz2 raises for bad data."""
    n = b1 - b0
    v = _bits(buf, base, b0, b1)
    crc = (v >> (n - 80)) & 0xFFFFFFFF  # the 32 bits after the magic
    v = ((v << 80) | (_EOS << 32) | crc) << (-(n + 80) % 8)
    return bz2.decompress(b"BZh9" + v.to_bytes((n + 80 + 7) // 8, "big"))


def _is_block_header(buf: bytes, base: int, bit: int) -> bool:
    """What follows a real block magic: the CRC, a `randomised` bit bzip2 has not set since
    0.9.5, a 24-bit origin pointer below the 900k block length, a non-empty map of used bytes."""
    v = _bits(buf, base, bit + 48, bit + 48 + 32 + 1 + 24 + 16)
    return not (v >> 40) & 1 and (v >> 16) & 0xFFFFFF < 900_000 and v & 0xFFFF != 0


class _Bz2Reader:
    """The file's bytes from a byte offset on, with the magics found in them."""

    def __init__(self, path: str, start: int):
        self.path, self.base, self.buf = path, start, b""
        self._raw, self._scanned, self.magics, self.eof = _raw_chunks(path, start, None), 0, [], False

    def more(self) -> bool:
        """Read the next block of the file and find its magics; False at the end of the file."""
        for _, data in self._raw:
            self.buf += data
            self.magics += _magics(self.buf, self.base, self._scanned - 6, len(self.buf) - 7)
            self.magics = sorted(set(self.magics))
            self._scanned = len(self.buf) - 6
            return True
        self.eof = True
        return False

    def drop_before(self, bit: int) -> None:
        """Forget the bytes and magics before `bit`: what was decoded."""
        cut = bit // 8 - self.base
        if cut > 0:
            self.buf, self.base, self._scanned = self.buf[cut:], self.base + cut, max(self._scanned - cut, 0)
        self.magics = [m for m in self.magics if m[0] >= bit]

    def next_block(self, after: int, check: bool = False) -> int | None:
        """The first block magic at bit >= `after` (`check`: with a block header behind it)."""
        while True:
            for bit, is_block in self.magics:
                if is_block and bit >= after and 8 * (self.base + len(self.buf)) >= bit + 48 + 73:
                    if not check or _is_block_header(self.buf, self.base, bit):
                        return bit
            if not self.more():
                return None


def _bz2_blocks(path: str, bit: int) -> Iterator[tuple[int, bytes]]:
    """(bit, text) of each block from the one at `bit` to the end of the file (over stream ends:
    pbzip2 and lbzip2 write several streams)."""
    r = _Bz2Reader(path, bit // 8)
    if r.next_block(bit) != bit:
        raise InputError(f"{path}: no bz2 block starts at bit {bit} (byte {bit // 8}): the file changed after "
                         "planning? Run the same command again")
    while bit is not None:
        text, end, error = None, bit + 48, None
        while text is None:  # the block ends at the next magic, unless that one is inside its data
            nxt = next((b for b, _ in r.magics if b >= end), None)
            if nxt is None and r.more():
                continue
            if error is not None and (nxt is None or nxt - bit > _MAX_BLOCK_BITS):
                raise InputError(f"{path}: corrupt bz2 data in the block starting at byte {bit // 8}: {error}")
            if nxt is None:
                raise InputError(f"{path}: truncated bz2 data: input ends at byte {r.base + len(r.buf)} inside the "
                                 f"block starting at byte {bit // 8}")
            try:
                text = _decode_block(r.buf, r.base, bit, nxt)
            except (OSError, EOFError, ValueError) as err:
                error, end = error or err, nxt + 1
        end = nxt
        yield bit, text
        # the next block: right after this one, or in the next stream after an end-of-stream marker
        r.drop_before(end)
        bit = end if dict(r.magics).get(end) else r.next_block(end + 48)


def _bz2_plan(path: str, size: int, target: int) -> list[SeekPoint]:
    with fsspec.open(path, "rb") as f:
        head = f.read(4)
    if not head.startswith(MAGIC["bz2"]):
        return [SeekPoint(0)]  # the reader names what the file is
    first = _Bz2Reader(path, 0).next_block(0)
    if first is None:
        return [SeekPoint(0)]
    # The compression ratio of the first blocks, up to 1 MiB of them or 4 MiB of text (the first
    # block may hold little but the <siteinfo>)
    text_bytes, compressed = 0, None
    try:
        with closing(_bz2_blocks(path, first)) as blocks:
            for bit, text in blocks:
                if bit - first >= 8 << 20 or text_bytes >= 4 << 20:
                    compressed = (bit - first) // 8
                    break
                text_bytes += len(text)
    except InputError:  # a cut or corrupt file: one item, which the planner's end check or the reader names
        return [SeekPoint(0)]
    if compressed is None:  # all read: the whole file
        if text_bytes < 2 * target:
            return [SeekPoint(first)]
        compressed = size - first // 8
    spacing = max(1, target * compressed // max(text_bytes, 1))
    points, cut = [first], spacing
    while cut < size - spacing // 2:  # the last item at least half an item
        bit = _Bz2Reader(path, cut).next_block(8 * cut, check=True)
        if bit is None:
            break
        points.append(bit)
        cut = max(cut + spacing, bit // 8 + 1)  # blocks bigger than the spacing: one item each
    return [SeekPoint(b, e) for b, e in zip(points, points[1:] + [None])]


# --- gzip seek points ---------------------------------------------------------------------------


def _gzip_plan(path: str, size: int, target: int) -> list[SeekPoint]:
    """Decompress the whole file with rapidgzip and cut it at its seek points about `target`
    bytes of text apart. A file too small to make two items is not decompressed (gzip compresses
    XML less than 20 times)."""
    if size * 20 < 2 * target:
        return [SeekPoint(0)]
    import rapidgzip

    # Seek points every chunk_size compressed bytes: 4 per item at gzip's ~4x on XML, at most
    # rapidgzip's default 4 MiB (its chunks are what it decodes in parallel).
    chunk = min(max(target // 16, 1 << 15), 4 << 20)
    try:
        with fsspec.open(path, "rb") as f, tempfile.TemporaryFile() as index:
            reader = rapidgzip.RapidgzipFile(f, parallelization=os.cpu_count() or 1, chunk_size=chunk)
            try:
                total = reader.seek(0, io.SEEK_END)
                reader.export_index(index, rapidgzip.IndexFormat.INDEXED_GZIP)
            finally:
                reader.close()
            points = _read_index(index, total, target)
    except InputError:
        raise
    except Exception as err:  # rapidgzip raises ValueError / RuntimeError / OSError for bad data
        raise InputError(f"{path}: corrupt or truncated gzip data (found while indexing it to split it into work "
                         f"items): {err}") from None
    return [SeekPoint(bit, end_bit, out, end_out, window)
            for (bit, out, window), (end_bit, end_out, _) in zip(points, points[1:] + [(None, None, b"")])]


def _read_index(index, total: int, target: int) -> list[tuple[int, int, bytes]]:
    """(bit, text offset, window) of the seek points of an indexed_gzip-format index (rapidgzip's
    IndexFileFormat.hpp) taken as item starts: the file's start, then every point at least
    `target` bytes of text after the last one taken and half that before the end. A point
    without a window is the start of a gzip member's deflate data (multi-member files: pigz -i,
    bgzip), which needs none."""
    index.seek(0)
    head = index.read(35)
    if head[:5] != b"GZIDX":
        raise InputError(f"unexpected rapidgzip index format {head[:6]!r}")
    _, _, _, window_size, count = struct.unpack_from("<QQIII", head, 7)
    taken, windows, last = [(0, 0, -1)], 0, 0  # (bit, out, window number)
    for _ in range(count):
        byte, out, bits, has_window = struct.unpack("<QQBB", index.read(18))
        if out - last >= target and total - out >= max(target // 2, 1):
            taken.append((8 * byte - bits, out, windows if has_window else -1))
            last = out
        windows += has_window
    points = []
    for bit, out, number in taken:
        window = b""
        if number >= 0:
            index.seek(35 + 18 * count + number * window_size)
            window = index.read(window_size)[-_WINDOW:]
        points.append((bit, out, window))
    return points


def _inflate_from(path: str, seek: SeekPoint) -> Iterator[bytes]:
    """The text from a deflate block in the middle of a gzip member to the end of the file. zlib
    starts only on a byte, so the bytes are shifted by the block's bit offset (deflate reads the
    bits of a byte from the least significant); after the member's end the rest is read as usual."""
    shift, fed = seek.bit % 8, 0  # fed: shifted bytes given to zlib
    dec = zlib.decompressobj(wbits=-15, zdict=seek.window) if seek.window else zlib.decompressobj(wbits=-15)
    carry, pos = b"", seek.bit // 8
    try:
        for pos, data in _raw_chunks(path, seek.bit // 8, None):
            buf = carry + data
            shifted = (int.from_bytes(buf, "little") >> shift).to_bytes(len(buf), "little")[:-1] if shift else buf
            carry = buf[-1:] if shift else b""
            yield from _pieces(dec, shifted)
            fed += len(shifted)
            if dec.eof:
                break
        if not dec.eof and carry:
            yield from _pieces(dec, bytes([carry[0] >> shift]))
            fed += 1
    except zlib.error as err:
        raise InputError(f"{path}: corrupt gzip data after byte {pos} (in the work item from byte {seek.bit // 8}): "
                         f"{err}") from None
    if not dec.eof:
        raise InputError(f"{path}: truncated gzip data: input ends inside the deflate stream (the work item from "
                         f"byte {seek.bit // 8})")
    # The deflate data ended in the shifted byte `used - 1`; its 8-byte trailer starts at the next
    # whole byte of the file, one of two, told by what follows: the file's end or a gzip header.
    used = fed - len(dec.unused_data)
    candidates = sorted({(seek.bit + 8 * (used - 1) + j + 7) // 8 for j in range(1, 9)})
    with fsspec.open(path, "rb") as f:
        size = f.seek(0, io.SEEK_END)
        for trailer in candidates:
            if trailer + 8 == size:
                return
            f.seek(trailer + 8)
            if f.read(2) == MAGIC["gzip"]:
                yield from decoded_chunks(path, "gzip", trailer + 8)
                return
    raise InputError(f"{path}: unexpected data after the gzip member that ends near byte {candidates[0]}")


def _pieces(dec, data: bytes) -> Iterator[bytes]:
    """zlib's output for `data` in pieces of at most _OUT_BYTES (compressed.py's _Inflater)."""
    out = dec.decompress(data, _OUT_BYTES)
    if out:
        yield out
    while not dec.eof and (dec.unconsumed_tail or len(out) == _OUT_BYTES):
        out = dec.decompress(dec.unconsumed_tail, _OUT_BYTES)
        if out:
            yield out
