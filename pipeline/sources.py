"""Pipeline inputs: plan work items from fsspec globs, then stream pages out of each one.

Inputs (issue 2, "Inputs"):
- MediaWiki XML exports: `.xml`, `.xml.bz2`, `.xml.gz` (and Wikimedia's split names such as
  `...-multistream1.xml-p1p41242.bz2`). A `*multistream*.xml.bz2` whose sibling
  `*multistream-index*.txt.bz2` exists is split into one work item per range of bz2 streams,
  so one big dump is parsed in parallel; any other file is one work item.
- JSON Lines (`.jsonl`, `.json`, optionally `.gz` / `.bz2`) and Parquet (`.parquet`) with
  columns `id`, `text`, optional `title` and `lang`: already-cleaned corpora (RawPage.markup
  "plain", so the cleaner does not treat their text as wikitext).

Everything streams: bytes are read in `_READ_BYTES` blocks, decompressed in pieces of at most
`_OUT_BYTES`, and XML is parsed by expat callbacks that keep only the current page, so memory
does not grow with the input (tests/pipeline/test_sources.py measures it: about 2 MB peak for
3 MB and for 11 MB of XML).

Positions in messages: compressed input errors name the byte offset in the file; XML errors
name the line and column of the decompressed text. A page's `source` is `path:line` (line of
its `<page>` tag in the decompressed file, `bzcat path | sed -n LINEp`), `path@start:line` for
a multistream range (line counted from the data decompressed at byte `start`), `path:line`
for JSON Lines and `path#row` (1-based) for Parquet.

Bad input (issue 10), decided as datatrove decides between a failed task and a dropped document:
- Whole-input errors raise InputError naming the file, and `canine preprocess` exits 2. What is
  cheap to see is seen by `plan_work_items`, before anything is written: a 0-byte file, a
  missing bz2 / gzip header, a bz2 file that does not end with bzip2's end-of-stream marker
  (a cut download; pages before the cut are not used: a shorter corpus that looks complete is
  worse than a failed run), a plain XML file that does not end with </mediawiki>, a JSON Lines
  file without rows, a Parquet file without its `id` / `text` columns, a file name that is not
  UTF-8. The rest is found while reading, and fails the job naming the byte or line: corrupt or
  cut compressed data, and XML that is not well-formed (an unclosed last <page> included, named
  by its line and title). XML with a lone surrogate (`&#xD800;`) is one of those: expat refuses it,
  as XML 1.0 §4.1 "Legal Character" requires, and MediaWiki never writes it.
- Row-level rejects are pages with `error` set: the cleaner gives them outcome parse_errors and
  they go to rejects/ with their title. A JSON Lines line that is not JSON or not an object, a
  row with a bad id, text, title or language, and a lone surrogate in a row's title or text (a
  `\\ud800` JSON escape, or its UTF-8 bytes in a Parquet string column), which UTF-8, and so the
  cache Parquet and the rejects file, cannot encode: the reason names it and its character.
  A row that cannot say its language is counted under the language of the file's last good row.
"""

import bz2
import json
import posixpath
import re
import zlib
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pyexpat import ExpatError, ParserCreate

import fsspec
import fsspec.core
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import contract

# Bytes read per block, and the most decompressed bytes handed on at once (one expat feed):
# big enough that per-call overhead vanishes, small enough to keep memory flat.
_READ_BYTES = 1 << 18
_OUT_BYTES = 1 << 18
# expat hands character data in pieces of at most this size (buffer_text); wikitext pages
# are mostly under 64 KiB, so a page's text usually arrives in one piece.
_EXPAT_BUFFER = 1 << 16
# The <mediawiki> root must start within this many decompressed bytes of a dump.
_HEADER_LIMIT = 1 << 20
_PARQUET_BATCH = 1024  # rows per Arrow batch: bounds memory for corpora of long texts
_UNKNOWN_LANG = "und"  # BCP 47 "undetermined", only on malformed rows that name no language

_XML_RE = re.compile(r"\.xml(?:-p\d+p\d+)?(?:\.(?:bz2|gz))?$")
_JSONL_RE = re.compile(r"\.jsonl?(?:\.(?:bz2|gz))?$")
_PARQUET_RE = re.compile(r"\.parquet$")
_INDEX_RE = re.compile(r"multistream-index\d*\.txt(?:-p\d+p\d+)?\.bz2$")
# `X-multistream3.xml-p1p99.bz2` -> `X-multistream-index3.txt-p1p99.bz2` (Wikimedia naming)
_MULTISTREAM_RE = re.compile(r"multistream(\d*)\.xml(-p\d+p\d+)?\.bz2$")
_INDEX_OFFSET_RE = re.compile(rb"(?m)^(\d+):")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# Language codes name files (rejects/<lang>.jsonl): letters, digits and inner - or _ only
# (en, zh-min-nan, be_x_old; 35 at most, BCP 47's longest tag), so that no row's `lang` can be a path.
_LANG_RE = re.compile(r"(?=.{1,35}$)[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*")
_MAGIC = {"bz2": b"BZh", "gzip": b"\x1f\x8b"}
# Every bzip2 stream ends with this 48-bit marker (BCD of sqrt(pi)), a 32-bit CRC and 0-7 bits
# of padding to a whole byte; the marker is not byte-aligned, so each padding is tried.
_BZ2_END = 0x177245385090
_KINDS = "expected .xml[.bz2|.gz], .jsonl/.json[.gz|.bz2] or .parquet"


class InputError(Exception):
    """Bad or missing input; the message names the file and the position (with any credentials
    in its URL masked: contract.redact)."""

    def __init__(self, message: str):
        super().__init__(contract.redact(message))


@dataclass(frozen=True)
class WorkItem:
    path: str  # fsspec URL of one input file
    kind: str  # "xml" | "jsonl" | "parquet"
    start: int = 0  # multistream: byte offset of the first bz2 stream of the range
    end: int | None = None  # exclusive byte offset (None = to end of file)
    lang: str | None = None  # known at planning time: the dump's xml:lang, else --lang


@dataclass
class RawPage:
    page_id: int  # -1 when the page's id is missing or not an integer (then `error` says so)
    title: str
    ns: int  # MediaWiki namespace; 0 = article
    redirect: bool  # the dump's <redirect/> element (the cleaner also checks #REDIRECT text)
    text: str  # wikitext (XML) or plain text (JSON Lines / Parquet)
    lang: str
    source: str  # "path:line", "path@start:line" or "path#row", for messages and rejects
    error: str | None = None  # malformed page: counted as parse_errors, written to rejects/
    markup: str = "wikitext"  # "wikitext" (dumps) or "plain" (already-cleaned corpora)


# --- planning ------------------------------------------------------------------------------


def plan_work_items(patterns: list[str], lang: str | None = None, streams_per_item: int = 1) -> list[WorkItem]:
    """Expand fsspec URLs / globs into work items, sorted by (path, start).

    Fails with InputError before reading any page if a pattern matches nothing, a file's kind
    is unknown, a file has no language (its own xml:lang / `lang` column, else `lang`), or it
    is empty, cut or not what its name says, as far as its first and last bytes tell (module
    docstring, "Bad input").
    """
    if streams_per_item < 1:
        raise ValueError(f"streams_per_item must be >= 1, got {streams_per_item}")
    if lang is not None and not _LANG_RE.fullmatch(lang):
        raise InputError(f"--lang {lang!r}: not a language code (e.g. en, zh-min-nan)")
    items = []
    for path, fs, fs_path in _expand(patterns):
        kind, size = _kind(path), fs.size(fs_path)
        if size == 0:
            raise InputError(f"{path}: empty file (0 bytes)")
        if kind == "xml":
            items.extend(_plan_xml(path, fs, fs_path, lang, streams_per_item))
        elif kind == "jsonl":
            items.append(WorkItem(path, kind, lang=_jsonl_language(path, lang)))
        else:
            items.append(WorkItem(path, kind, lang=_parquet_language(path, lang)))
        if size:  # None: the server did not say. After the header checks above, which name a wrong format better
            _check_end(path, kind, size)
    return sorted(items, key=lambda it: (it.path, it.start))


def work_item_key(item: WorkItem) -> str:
    """A stable id of the item's input bytes (language is config, not identity)."""
    return f"{item.path}@{item.start}:{'eof' if item.end is None else item.end}"


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
                if not (_kind(p) or _INDEX_RE.search(p)) and fs.isdir(p):
                    files += sorted(f for f in fs.ls(p, detail=False) if _kind(f) and fs.isfile(f))
                elif not literal or fs.exists(p):
                    files.append(p)
                else:
                    raise InputError(f"{pattern}: input not found")
        except OSError as err:
            raise InputError(f"{pattern}: cannot list input: {err}") from None
        remote = "://" in pattern or "::" in pattern
        matched = 0
        for p in files:
            if _INDEX_RE.search(p):
                continue
            if not _kind(p):
                if literal:
                    raise InputError(f"{pattern}: unrecognized input kind ({_KINDS})")
                continue
            if _SURROGATE_RE.search(p):  # undecodable bytes in the name: the page sources could not be written
                raise InputError(f"{ascii(p)}: the file name is not valid UTF-8; rename the file")
            found[fs.unstrip_protocol(p) if remote else p] = (fs, p)
            matched += 1
        if not matched:
            raise InputError(f"{pattern}: no input files match ({_KINDS})")
    return [(url, fs, p) for url, (fs, p) in sorted(found.items())]


def _kind(path: str) -> str | None:
    name = posixpath.basename(path)
    if _XML_RE.search(name):
        return "xml"
    if _JSONL_RE.search(name):
        return "jsonl"
    if _PARQUET_RE.search(name):
        return "parquet"
    return None


def _codec(path: str) -> str | None:
    return "bz2" if path.endswith(".bz2") else "gzip" if path.endswith(".gz") else None


def _check_end(path: str, kind: str, size: int) -> None:
    """A cut download, the commonest bad input, seen from the file's last bytes where its format
    has a fixed ending, instead of after parsing everything before the cut. (gzip ends with a CRC
    and a length, nothing fixed; Parquet's footer is read when planning.)"""
    codec = _codec(path)
    if not (codec == "bz2" or (codec is None and kind == "xml")):
        return
    try:
        with fsspec.open(path, "rb") as f:
            f.seek(max(size - 64, 0))
            tail = f.read()
    except ValueError:  # a server that can't seek: the reader finds a cut just the same, later
        return
    except OSError as err:
        raise InputError(f"{path}: cannot read its last bytes: {err}") from None
    value = int.from_bytes(tail[-11:], "big")
    if codec == "bz2" and not any((value >> (32 + pad)) & (2**48 - 1) == _BZ2_END for pad in range(8)):
        raise InputError(f"{path}: truncated bz2 file: it does not end with a bz2 end-of-stream marker "
                         f"({size} bytes; an interrupted download?)")
    if codec is None and not tail.rstrip().endswith(b"</mediawiki>"):
        raise InputError(f"{path}: truncated XML: it does not end with </mediawiki> ({size} bytes; an interrupted download?)")


def _plan_xml(path: str, fs, fs_path: str, lang: str | None, streams_per_item: int) -> list[WorkItem]:
    lang = _xml_root_lang(path) or lang  # the dump's own language wins over --lang
    if not lang:
        raise InputError(f"{path}: no language: the dump's <mediawiki> has no xml:lang and no --lang was given")
    if not _LANG_RE.fullmatch(lang):
        raise InputError(f"{path}: xml:lang {lang!r} is not a language code")
    index_name = r"multistream-index\1.txt\2.bz2"
    if not _MULTISTREAM_RE.search(fs_path) or not fs.exists(_MULTISTREAM_RE.sub(index_name, fs_path)):
        return [WorkItem(path, "xml", lang=lang)]  # no index: bz2 can't be split, one item per file
    index = _MULTISTREAM_RE.sub(index_name, path)
    offsets = _stream_offsets(index, fs.size(fs_path))
    with fsspec.open(path, "rb") as f:  # an index of another dump, seen now rather than by a worker
        for offset in {*offsets[:1], *offsets[-1:]}:
            f.seek(offset)
            if f.read(3) != _MAGIC["bz2"]:
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
    for chunk in _decoded_chunks(index, "bz2"):
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


def _xml_root_lang(path: str) -> str | None:
    """xml:lang of the <mediawiki> root, reading only the first bytes of the dump."""
    parser, roots = ParserCreate(), []
    parser.StartElementHandler = lambda name, attrs: roots.append((name, attrs))
    seen = 0
    with closing(_decoded_chunks(path, _codec(path))) as chunks:
        for chunk in chunks:
            for i in range(0, len(chunk), 4096):  # small pieces: stop right after the root tag
                try:
                    parser.Parse(chunk[i : i + 4096], False)
                except ExpatError as err:
                    raise InputError(f"{path}: malformed XML at line {err.lineno}, column {err.offset}: {err}") from None
                if roots:
                    name, attrs = roots[0]
                    if name != "mediawiki":
                        raise InputError(f"{path}: not a MediaWiki export: root element <{name}>")
                    return attrs.get("xml:lang")
            seen += len(chunk)
            if seen > _HEADER_LIMIT:
                break
    what = f"the first {seen} decompressed bytes" if seen else "the file: it decompresses to nothing"
    raise InputError(f"{path}: no <mediawiki> root element in {what}")


def _jsonl_language(path: str, lang: str | None) -> str | None:
    """--lang is the rows' fallback; without it the first row must name its own `lang`. The
    first row is read either way: it also shows that the file decompresses and has rows."""
    with closing(_read_jsonl(WorkItem(path, "jsonl", lang=lang))) as pages:
        first = next(pages, None)
    if first is None:
        raise InputError(f"{path}: no rows: it holds only blank lines")
    if not lang and first.lang == _UNKNOWN_LANG:
        raise InputError(f"{first.source}: no --lang given and the first row can't say its language: {first.error}")
    return lang


def _parquet_language(path: str, lang: str | None) -> str | None:
    names = _parquet_columns(path)
    if "lang" not in names and not lang:
        raise InputError(f"{path}: no language: no `lang` column and no --lang was given")
    return lang


def _parquet_columns(path: str) -> list[str]:
    try:
        with fsspec.open(path, "rb") as f:
            names = pq.ParquetFile(f).schema_arrow.names
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"{path}: unreadable Parquet footer: {err}") from None
    missing = [c for c in ("id", "text") if c not in names]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} (has {', '.join(names)})")
    return [c for c in ("id", "title", "text", "lang") if c in names]


# --- reading -------------------------------------------------------------------------------


def read_pages(item: WorkItem) -> Iterator[RawPage]:
    """Stream the item's pages. Raises InputError on corrupt / truncated input or malformed XML."""
    reader = {"xml": _read_xml, "jsonl": _read_jsonl, "parquet": _read_parquet}.get(item.kind)
    if reader is None:
        raise InputError(f"{item.path}: unknown work item kind {item.kind!r}")
    return reader(item)


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
                yield pos, data
                pos += len(data)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as err:
        raise InputError(f"{path}: read failed at byte {pos}: {err}") from None
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


def _decoded_chunks(path: str, codec: str | None, start: int = 0, end: int | None = None) -> Iterator[bytes]:
    """Decompressed bytes of [start, end), which must hold whole, concatenated bz2 / gzip streams."""
    if codec is None:
        for _, data in _raw_chunks(path, start, end):
            yield data
        return
    inflater, stream_start, pos, inside = _Inflater(codec), start, start, False
    for pos, data in _raw_chunks(path, start, end):
        if pos == start and not data.startswith(_MAGIC[codec]):
            stale = " (a stale multistream index?)" if start else ""
            raise InputError(f"{path}: not {codec} data at byte {start}{stale}: it starts with {data[:8]!r}, "
                             f"a {codec} stream with {_MAGIC[codec]!r}")
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


class _PageParser:
    """expat callbacks that turn each <page> (a child of the root) into a RawPage."""

    _FIELDS = {("title", 3), ("ns", 3), ("id", 3), ("text", 4)}  # (element, depth) to capture

    def __init__(self, item: WorkItem, prefix: bytes):
        self.item, self.pages, self.root_lang = item, [], None
        self._prefix = len(prefix)  # bytes fed that are not in the file: shift byte positions
        self._source = item.path if item.start == 0 else f"{item.path}@{item.start}"
        self._depth, self._page, self._field, self._buf = 0, None, None, []
        p = self._parser = ParserCreate()
        p.buffer_text, p.buffer_size = True, _EXPAT_BUFFER
        p.StartElementHandler, p.EndElementHandler = self._start, self._end
        p.CharacterDataHandler = self._chars
        if prefix:
            self.feed(prefix)

    def feed(self, data: bytes, final: bool = False) -> None:
        try:
            self._parser.Parse(data, final)
        except ExpatError as err:
            where = "" if self.item.start == 0 else f" of the data decompressed from byte {self.item.start}"
            byte = max(self._parser.ErrorByteIndex - self._prefix, 0)
            page = self._page
            if page is not None:  # e.g. a dump that ends inside its last <page>
                where += f", in the <page> at line {page['line']}" + (f" ({page['title']!r})" if "title" in page else "")
            raise InputError(
                f"{self.item.path}: malformed XML at line {err.lineno}, column {err.offset}{where} "
                f"(decompressed byte {byte}): {err}"
            ) from None

    def _start(self, name, attrs):
        self._depth += 1
        depth = self._depth
        if depth == 1:
            self.root_lang = attrs.get("xml:lang")
        elif depth == 2 and name == "page":
            self._page = {"line": self._parser.CurrentLineNumber, "redirect": False}
        elif self._page is not None:
            if (name, depth) in self._FIELDS and "deleted" not in attrs:  # <text deleted="deleted"/>
                self._field, self._buf = name, []
            elif name == "redirect" and depth == 3:
                self._page["redirect"] = True

    def _chars(self, data):
        if self._field is not None:
            self._buf.append(data)

    def _end(self, name):
        if self._field is not None:
            self._page[self._field] = "".join(self._buf)
            self._field = None
        if self._depth == 2 and self._page is not None:
            self.pages.append(self._make(self._page))
            self._page = None
        self._depth -= 1

    def _make(self, page: dict) -> RawPage:
        lang = self.item.lang or self.root_lang
        if not lang:
            raise InputError(f"{self.item.path}: no language: the dump has no xml:lang and the work item none")
        page_id, id_error = _as_id(page.get("id"), "<id>")
        ns, ns_error = _as_id(page.get("ns"), "<ns>")
        error = id_error or ns_error or (None if "title" in page else "missing <title>")
        if "text" not in page:
            error = error or "missing <text> (no revision, or its text was deleted)"
        return RawPage(
            page_id, page.get("title", ""), ns, page["redirect"], page.get("text", ""), lang,
            f"{self._source}:{page['line']}", error,
        )


def _as_id(value, field: str) -> tuple[int, str | None]:
    """(integer, None) for a non-negative integer id, else (-1, reason)."""
    if value is None:
        return -1, f"missing {field}"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value, None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value), None
    return -1, f"non-integer {field} {str(value)[:40]!r}"


def _read_xml(item: WorkItem) -> Iterator[RawPage]:
    # A range that does not start at byte 0 lacks the <mediawiki> start tag (it is in the
    # header stream), one that stops before the end lacks the end tag: supply them so that
    # expat sees one document.
    parser = _PageParser(item, b"<mediawiki>" if item.start > 0 else b"")
    for chunk in _decoded_chunks(item.path, _codec(item.path), item.start, item.end):
        parser.feed(chunk)
        yield from parser.pages
        parser.pages.clear()
    parser.feed(b"</mediawiki>" if item.end is not None else b"", final=True)
    yield from parser.pages


def _read_jsonl(item: WorkItem) -> Iterator[RawPage]:
    return _in_file_language(_jsonl_pages(item), item.lang)


def _jsonl_pages(item: WorkItem) -> Iterator[RawPage]:
    line_no, pending = 0, b""
    for chunk in _decoded_chunks(item.path, _codec(item.path)):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            line_no += 1
            if line.strip():
                yield _json_page(line, item.lang, item.path, line_no)
    if pending.strip():
        yield _json_page(pending, item.lang, item.path, line_no + 1)


def _json_page(line: bytes, lang: str | None, path: str, line_no: int) -> RawPage:
    source, error = f"{path}:{line_no}", None
    try:
        row = json.loads(line)  # bytes: decoded with "surrogatepass", so UTF-8 surrogates get through
    except json.JSONDecodeError as err:
        error = f"invalid JSON at line {line_no}, column {err.colno}: {err.msg}"
    except UnicodeDecodeError as err:
        error = f"invalid UTF-8 at line {line_no}, byte {err.start + 1}: {line[err.start:err.start + 4]!r}"
    except RecursionError:  # json's decoder recurses per nesting level
        error = f"JSON nested too deeply at line {line_no}"
    if error is None and not isinstance(row, dict):
        error = f"expected a JSON object at line {line_no}, got {type(row).__name__}"
    return _row_page({} if error else row, lang, source, error)


def _read_parquet(item: WorkItem) -> Iterator[RawPage]:
    return _in_file_language(_parquet_pages(item), item.lang)


def _parquet_pages(item: WorkItem) -> Iterator[RawPage]:
    columns, row = _parquet_columns(item.path), 0
    try:
        with fsspec.open(item.path, "rb") as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=_PARQUET_BATCH, columns=columns):
                for record, error in _batch_records(batch):
                    row += 1
                    yield _row_page(record, item.lang, f"{item.path}#{row}", error)
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"{item.path}: unreadable Parquet data after row {row}: {err}") from None


def _batch_records(batch: pa.RecordBatch) -> list[tuple[dict, str | None]]:
    """The batch's rows as (record, error). Arrow does not check that a string column holds
    UTF-8 when writing it, so a bad cell can be read back: it spoils its row, not the job."""
    try:
        return [(record, None) for record in batch.to_pylist()]
    except UnicodeDecodeError:
        pass
    rows = []
    for i in range(batch.num_rows):
        record, error = {}, None
        for name, column in zip(batch.schema.names, batch.columns):
            try:
                record[name] = column[i].as_py()
            except UnicodeDecodeError as err:
                raw = column[i].as_buffer().to_pybytes()
                try:  # UTF-8 bytes of a lone surrogate: _row_page names it
                    record[name] = raw.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:
                    record[name] = raw.decode("utf-8", "backslashreplace")
                    error = error or f"{name} is not UTF-8 at byte {err.start}: {raw[err.start:err.start + 4]!r}"
        rows.append((record, error))
    return rows


def _in_file_language(pages: Iterator[RawPage], lang: str | None) -> Iterator[RawPage]:
    """Rows that can't say their language (not JSON, no usable `lang` and no --lang) are counted
    under the language of the file's last good row, not under "und": the manifest counts pages
    per language, and a one-language file should not grow a language of its own bad rows."""
    for page in pages:
        if page.error is None:
            lang = page.lang
        elif page.lang == _UNKNOWN_LANG and lang:
            page.lang = lang
        yield page


def _row_page(row: dict, lang: str | None, source: str, error: str | None = None) -> RawPage:
    """A RawPage from one JSON Lines / Parquet row; the row's own `lang` wins over --lang."""
    page_id, id_error = _as_id(row.get("id"), "id")
    text, title = row.get("text"), row.get("title")
    lang = row.get("lang") or lang
    error = error or id_error
    if error is None and not isinstance(text, str):
        error = "missing text" if text is None else f"text is {type(text).__name__}, not a string"
    if error is None and not isinstance(title, (str, type(None))):
        error = f"title is {type(title).__name__}, not a string"
    if error is None and not isinstance(lang, str):
        error = "no language: the row has no `lang` and no --lang was given"
    if isinstance(lang, str) and lang and not _LANG_RE.fullmatch(lang):  # checked on rejects too: it names their file
        error, lang = error or f"lang {lang[:40]!r} is not a language code", None
    for key, value in (("title", title), ("text", text)):
        if error is None and isinstance(value, str) and (where := lone_surrogate(value)):
            error = f"{key} has a {where}"
    title = title if isinstance(title, str) else ""
    return RawPage(
        page_id, _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", title), 0, False,
        text if isinstance(text, str) else "",
        lang if isinstance(lang, str) and lang else _UNKNOWN_LANG, source, error, markup="plain",
    )


def lone_surrogate(text: str) -> str | None:
    """'lone surrogate U+D800 at character 2' where `text` has one (from a `\\ud800` JSON escape or
    a `&#xD800;` entity in wikitext), else None. UTF-8 cannot encode it: Parquet and the
    rejects file would fail on it."""
    match = None if text.isascii() else _SURROGATE_RE.search(text)  # isascii: O(1), a flag of the str
    return None if match is None else f"lone surrogate U+{ord(match.group()):04X} at character {match.start()}"
