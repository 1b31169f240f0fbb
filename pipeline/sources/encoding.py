"""The character encoding of an XML export, and the bytes of a UTF-8 one that are not UTF-8.

expat reads UTF-8, UTF-16 (with a byte-order mark, or told by the first `<`), ISO-8859-1 and
US-ASCII itself, and through pyexpat any single-byte Python codec an XML declaration names
(windows-1252, KOI8-R, ...). A multi-byte encoding other than those (Shift_JIS, GB2312) it refuses
with "unknown encoding": `declared` finds the name, so that the message can give it.

MediaWiki writes UTF-8, but a dump repaired by hand, cut from a database with a wrong connection
charset or exported by another wiki may hold a byte that is not: expat then stops the whole
document at that byte ("not well-formed (invalid token)"). `Utf8Repair` checks each piece before
expat sees it, replaces each invalid sequence by as many `?` (same length, so every byte offset
and line stays true) and records it; the reader (pipeline/sources/mediawiki.py) rejects the page
that holds it, naming the bytes, their offset and line, and keeps the rest: what a scheduled run
over a dump of millions of pages wants. Checking costs one UTF-8 decode of each non-ASCII piece:
about 150 MB/s on Cyrillic text (ruwiki), a third of expat's own time on it and a fiftieth of the
cleaner's after it (about 3 MB/s a core), measured on this project's test pages.
"""

import codecs
import re
from dataclasses import dataclass

_BOMS = ((codecs.BOM_UTF8, "UTF-8"), (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
_DECLARATION_RE = re.compile(rb"""^<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z][A-Za-z0-9._-]*)["']""")


def declared(head: bytes) -> str | None:
    """The encoding the first bytes of a document say (byte-order mark, UTF-16's `<\\0`, or the
    XML declaration's `encoding`), as written; None when they say none (then it is UTF-8)."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    if head.startswith((b"<\x00", b"\x00<")):
        return "UTF-16"
    match = _DECLARATION_RE.match(head)
    return match.group(1).decode("ascii") if match else None


def is_utf8(name: str | None) -> bool:
    if name is None:
        return True
    try:
        return codecs.lookup(name).name == "utf-8"
    except LookupError:
        return False


def readable(text: bytes, name: str | None) -> str:
    """`text` (a few bytes of the document) decoded as `name` says, for a message."""
    try:
        return text.decode(name or "utf-8", "replace")
    except LookupError:
        return text.decode("latin-1")


@dataclass(frozen=True)
class BadBytes:
    offset: int  # of the first bad byte, in the bytes fed to the parser
    line: int  # 1-based line of that byte
    data: bytes  # the invalid sequence (1 to 3 bytes)

    def describe(self, shift: int = 0, decompressed: bool = False) -> str:
        """'invalid UTF-8 byte 0xFF at byte 10417 (line 157)'; `shift`: bytes fed that are not in
        the input, `decompressed`: the offset is in the decompressed data."""
        names = " ".join(f"0x{b:02X}" for b in self.data)
        what = "byte" if len(self.data) == 1 else "bytes"
        at = "decompressed byte" if decompressed else "byte"
        return f"invalid UTF-8 {what} {names} at {at} {self.offset - shift} (line {self.line})"


class Utf8Repair:
    """Feed a UTF-8 document's bytes through `repair` before expat: each invalid sequence becomes
    `?`s of its length and is appended to `found`. An incomplete sequence at the end of a piece is
    held back until the next (or reported by the final call)."""

    def __init__(self):
        self.found: list[BadBytes] = []
        self._pending = b""
        self._offset = 0  # stream offset of the first byte of the next piece (pending included)
        self._line = 1  # line at that offset

    def repair(self, data: bytes, final: bool = False) -> bytes:
        if self._pending:
            data = self._pending + data
        if data.isascii():  # the common case: nothing to decode
            used, out = len(data), data
        else:
            used, out = self._check(data, final)
        self._pending = data[used:]
        self._line += out.count(b"\n", 0, used)
        self._offset += used
        return out[:used]

    def _check(self, data: bytes, final: bool) -> tuple[int, bytes]:
        out, start, line = data, 0, self._line  # `line`: the line at byte `start`
        while True:
            try:
                _, n = codecs.utf_8_decode(memoryview(data)[start:], "strict", final)
                return start + n, bytes(out)
            except UnicodeDecodeError as e:
                a, b = start + e.start, start + e.end
                if out is data:
                    out = bytearray(data)
                out[a:b] = b"?" * (b - a)
                line += data.count(b"\n", start, a)
                self.found.append(BadBytes(self._offset + a, line, data[a:b]))
                start = b
