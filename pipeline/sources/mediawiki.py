"""MediaWiki XML exports (`.xml`, `.xml.bz2`, `.xml.gz`, and ranges of multistream dumps), export
schemas 0.3 to 0.11: the dump's language from its <mediawiki> root and its namespace names from its
<siteinfo> when planning, then its pages, parsed by expat callbacks that keep only the current page,
so memory does not grow with the dump.

The header (<mediawiki> and <siteinfo>) is read once per dump, when planning, and every work item
carries it (WorkItem.site), so every page of a dump gets the same names whichever worker reads
which range: a multistream range past byte 0 does not hold the header stream. A page carries the
SiteInfo as RawPage.site, None where the dump has no <siteinfo> (the cleaner's fallback names,
pipeline/sources/namespaces.py).

Older and other exports: a page's namespace is its <ns>, which schema 0.6 (MediaWiki 1.17, 2011)
added; without one (schemas 0.3-0.5, and exporters of other wikis) it follows from the title's
prefix, as MediaWiki splits a title: the <siteinfo> names of every namespace, MediaWiki's canonical
English names (valid on every wiki) and, without a <siteinfo>, the cleaner's hand list of File and
Category names (pipeline/sources/namespaces.py); a title whose prefix is none of these is an
article. A page-level `<redirect/>` (schemas 0.4-0.5) or `<redirect title="..."/>` (0.6 on) marks
a redirect; schema 0.3 has neither, and the cleaner finds its redirects by their #REDIRECT text.
Of several revisions (a full-history export) the last is the page's text.

Encodings (pipeline/sources/encoding.py): UTF-8, UTF-16, ISO-8859-1, US-ASCII and any single-byte
encoding an XML declaration names are read; another (Shift_JIS, UTF-32) fails when planning,
naming it. In a UTF-8 export, a byte sequence that is not UTF-8 rejects the page that holds it
(parse_errors, in rejects/ with the bytes, their offset and line) and the rest is read; one outside
any page (in the header, between pages) fails the work item, since no page can be counted for it.

A page's `source` is `path:line`, the line of its `<page>` tag in the decompressed file
(`bzcat path | sed -n LINEp`), or `path@start:line` for a multistream range (line counted from
the data decompressed at byte `start`). XML that is not well-formed fails the work item, naming
the file, line and column, the decompressed byte, the open <page> and expat's reason; a page
without id, title or text is kept with `error` set, for the cleaner to count as parse_errors.
"""

import dataclasses
import re
from collections.abc import Iterator
from contextlib import closing
from pyexpat import ErrorString, ExpatError, ParserCreate, errors as expat_errors

from pipeline.sources import encoding, multistream, seekable
from pipeline.sources.common import LANG_RE, NAMESPACE_KEYS, InputError, RawPage, SiteInfo, WorkItem, as_id
from pipeline.sources.compressed import codec_of, decoded_chunks

# expat hands character data in pieces of at most this size (buffer_text); wikitext pages
# are mostly under 64 KiB, so a page's text usually arrives in one piece.
_EXPAT_BUFFER = 1 << 16
# The <mediawiki> root must start within this many decompressed bytes of a dump, and its
# <siteinfo> (a few KB) end within them to be read.
_HEADER_LIMIT = 1 << 20
# MediaWiki's canonical namespace names (NamespaceInfo::$canonicalNamespaces), and `Image`, the
# name of File before MediaWiki 1.14 and its alias since: valid as a title prefix on every wiki.
CANONICAL = (
    (-2, "Media"), (-1, "Special"), (1, "Talk"), (2, "User"), (3, "User talk"), (4, "Project"),
    (5, "Project talk"), (6, "File"), (6, "Image"), (7, "File talk"), (7, "Image talk"), (8, "MediaWiki"),
    (9, "MediaWiki talk"), (10, "Template"), (11, "Template talk"), (12, "Help"), (13, "Help talk"),
    (14, "Category"), (15, "Category talk"),
)
# A <page> start tag, found by its bytes where a split dump's work item starts (_read_split): `<`
# is `&lt;` in text, and no other element's name starts with "page" followed by a space or `>`.
_PAGE_TAG = re.compile(rb"<page[\s>]")
_ENCODING_ERRORS = {expat_errors.codes[expat_errors.XML_ERROR_UNKNOWN_ENCODING],
                    expat_errors.codes[expat_errors.XML_ERROR_INCORRECT_ENCODING]}


def plan_items(path: str, fs, fs_path: str, lang: str | None, streams_per_item: int, size: int | None = None,
               item_bytes: int = seekable.ITEM_BYTES, max_pages: int | None = None,
               min_items: int = 1) -> list[WorkItem]:
    """The dump's work items, with its language (its own xml:lang, else `lang`, --lang) and its
    <siteinfo>: a multistream dump's ranges of streams; any other UTF-8 dump (.xml, .bz2, .gz)
    split about `item_bytes` of text apart, at bz2 blocks / gzip seek points (seekable.py);
    a dump in another encoding whole. `max_pages` (a trial slice): a multistream dump's ranges
    of the streams that hold its first `max_pages` pages, any other dump one item read from its
    start up to its `max_pages`th page (not split: the split's planning alone reads a whole .gz).
    `min_items`: a multistream dump's ranges hold fewer streams to make at least this many
    (multistream.split)."""
    root_lang, site, declared = _header(path)
    lang = root_lang or lang  # the dump's own language wins over --lang
    if not lang:
        raise InputError(f"{path}: no language: the dump's <mediawiki> has no xml:lang and no --lang was given")
    if not LANG_RE.fullmatch(lang):
        raise InputError(f"{path}: xml:lang {lang!r} is not a language code")
    items = multistream.split(path, fs, fs_path, lang, streams_per_item, max_pages, min_items)
    codec = codec_of(path)
    if max_pages is not None:
        if items[-1].max_pages is None:  # no index to say where page N is: read from the start
            items = [WorkItem(path, "xml", lang=lang, max_pages=max_pages)]
    elif len(items) == 1 and size and encoding.is_utf8(declared):  # its <page> tags are found by their bytes
        points = seekable.plan(path, codec, size, item_bytes)
        if len(points) > 1:
            items = [WorkItem(path, "xml", p.bit // 8, None if p.end_bit is None else p.end_bit // 8, lang, seek=p)
                     for p in points]
            items[0] = dataclasses.replace(items[0], start=0)  # it reads the header: the file from its start
    return [dataclasses.replace(item, site=site) for item in items]


def _header(path: str) -> tuple[str | None, SiteInfo | None, str | None]:
    """xml:lang of the <mediawiki> root, the <siteinfo> (None if the dump has none) and the
    encoding its first bytes declare (None: UTF-8), reading only the first bytes of the dump: up
    to the end of <siteinfo> or the start of the first <page>."""
    parser, seen = _PageParser(WorkItem(path, "xml"), b"", header_only=True), 0
    with closing(decoded_chunks(path, codec_of(path))) as chunks:
        for chunk in chunks:
            for i in range(0, len(chunk), 4096):  # small pieces: stop right after the header
                parser.feed(chunk[i : i + 4096])
                if parser.root_name not in (None, "mediawiki"):
                    raise InputError(f"{path}: not a MediaWiki export: root element <{parser.root_name}>")
                if parser.header_done:
                    return parser.root_lang, parser.site, parser._encoding
            seen += len(chunk)
            if seen > _HEADER_LIMIT:
                break
    if parser.root_name is not None:  # a root with no <siteinfo> or <page> in the bytes read
        return parser.root_lang, parser.site, parser._encoding
    what = f"the first {seen} decompressed bytes" if seen else "the file: it decompresses to nothing"
    raise InputError(f"{path}: no <mediawiki> root element in {what}")


def read_pages(item: WorkItem) -> Iterator[RawPage]:
    # A range that does not start at byte 0 lacks the <mediawiki> start tag and the <siteinfo>
    # (both in the header stream), one that stops before the end lacks the end tag: supply them
    # so that expat sees one document and the pages their dump's names. A planned item brings
    # its <siteinfo>; one made by hand reads the header stream here.
    site = _header(item.path)[1] if item.site is None and item.start > 0 else item.site
    if item.seek is not None:
        yield from _read_split(item, site)
        return
    parser = _PageParser(item, b"<mediawiki>" if item.start > 0 else b"", site)
    with closing(decoded_chunks(item.path, codec_of(item.path), item.start, item.end)) as chunks:
        for chunk in chunks:
            parser.feed(chunk)
            yield from parser.pages
            parser.pages.clear()
            if parser.enough:  # a trial slice's last page (item.max_pages): nothing after it is read
                return
    parser.feed(b"</mediawiki>" if item.end is not None else b"", final=True)
    yield from parser.pages


def _read_split(item: WorkItem, site: SiteInfo | None) -> Iterator[RawPage]:
    """The pages of an item of a split single-stream dump: those whose `<page>` tag starts in the
    item's own text (seekable.py). The text before its first <page> is the end of the previous
    item's last page; past its own text it reads on to the next <page> tag, so that its last
    page is whole. `pos`: text bytes from the item's seek point; `owned_end`: its own text's
    length, known when the first piece past it comes."""
    parser = _PageParser(item, b"", site) if item.start == 0 else None
    pos, owned_end, carry, parsed_from = 0, None, b"", 0
    with closing(seekable.chunks(item.path, item.seek)) as pieces:
        for data, owned in pieces:
            if not owned and owned_end is None:
                owned_end = pos
            at, pos = pos, pos + len(data)
            if parser is None:  # looking for the first <page>
                data, at = carry + data, at - len(carry)
                match = _PAGE_TAG.search(data)
                if match is None or (owned_end is not None and at + match.start() >= owned_end):
                    if owned_end is not None:
                        return  # no <page> starts in this item's text
                    carry = data[-5:]  # "<page" may be cut between pieces
                    continue
                data, at, parsed_from = data[match.start() :], at + match.start(), at + match.start()
                parser = _PageParser(item, b"<mediawiki>", site)
            if owned_end is not None:  # past the item's text: on to the next <page> only
                # (one whose tag is cut between pieces is not searched for, but not read either: `limit`)
                parser.limit = parser.prefix + owned_end - parsed_from
                match = _PAGE_TAG.search(data, max(owned_end - at, 0))
                if match is not None:
                    data = data[: match.start()]
            parser.feed(data)
            yield from parser.pages
            parser.pages.clear()
            if parser.enough:
                return
            if owned_end is not None and (match is not None or parser.past_limit):
                parser.unclosed_page()
                return
    if parser is not None:  # the end of the file: the end of the document
        parser.feed(b"", final=True)
        yield from parser.pages


class _Enough(Exception):
    """Raised in an expat callback at a trial slice's last page: it stops Parse() right there."""


class _PageParser:
    """expat callbacks that turn each <page> (a child of the root) into a RawPage, and the
    <siteinfo> before them into a SiteInfo (`site`: the one given, else the document's own);
    `header_only`: no pages, for _header (which has no language to give them yet).
    With item.max_pages, parsing stops at the end of that many pages (`enough`): what follows,
    malformed or not, is never parsed, so the slice reads the same whatever comes after it."""

    _FIELDS = {("title", 3), ("ns", 3), ("id", 3), ("text", 4)}  # (element, depth) to capture

    def __init__(self, item: WorkItem, prefix: bytes, site: SiteInfo | None = None, header_only: bool = False):
        self.item, self.pages, self.root_name, self.root_lang, self.site = item, [], None, None, site
        self._header_only = header_only
        self.header_done = False  # past the <siteinfo>, or at a first child that is not one
        self._names, self._key = None, None  # [(key, name)] while inside <siteinfo>; the <namespace> key being read
        self._prefix = len(prefix)  # bytes fed that are not in the file: shift byte positions
        # A <page> starting at or after this byte of the fed data (prefix included) is the next
        # work item's (a split dump, _read_split): it is not read, and `past_limit` is set
        self.limit, self.past_limit = None, False
        self._made, self.enough = 0, False  # pages made; item.max_pages of them made
        self._source = item.path if item.start == 0 else f"{item.path}@{item.start}"
        self._depth, self._page, self._field, self._buf, self._child = 0, None, None, [], None
        self._encoding, self._repair = None, None  # as the first bytes say; a Utf8Repair for UTF-8, else False
        self._title_ns = None  # compared title prefix -> namespace, made for the first page without <ns>
        p = self._parser = ParserCreate()
        p.buffer_text, p.buffer_size = True, _EXPAT_BUFFER
        p.StartElementHandler, p.EndElementHandler = self._start, self._end
        p.CharacterDataHandler = self._chars
        if prefix:
            self.feed(prefix)

    def feed(self, data: bytes, final: bool = False) -> None:
        if self.enough:  # expat cannot go on after a callback raised
            return
        if self._repair is None:  # the first bytes: a byte-order mark or an XML declaration
            self._encoding = encoding.declared(data[:256])
            self._repair = encoding.is_utf8(self._encoding) and encoding.Utf8Repair()
        if self._repair:
            data = self._repair.repair(data, final)
        try:
            self._parser.Parse(data, final)
        except _Enough:
            self.enough = True
            return
        except ExpatError as err:
            raise self._malformed(err) from None
        except (ValueError, LookupError):  # pyexpat: "multi-byte encodings are not supported", "unknown encoding: X"
            raise self._unknown_encoding() from None
        if final:
            self._outside(None)

    @property
    def prefix(self) -> int:
        return self._prefix

    def unclosed_page(self) -> None:
        """Fail if a <page> is still open where the next one starts (a split dump's item ends there)."""
        page = self._page
        if page is not None:
            title = f" ({page['title']!r})" if "title" in page else ""
            raise InputError(f"{self.item.path}: malformed XML: the <page> at line {page['line']}{self._where()}"
                             f"{title} does not end before the next <page>")

    def _where(self) -> str:
        if self.item.start == 0:
            return ""
        if self.item.seek is not None:
            return f" counted from the first <page> of the work item at byte {self.item.start}"
        return f" of the data decompressed from byte {self.item.start}"

    def _unknown_encoding(self) -> InputError:
        return InputError(
            f"{self.item.path}: its XML declaration names encoding {self._encoding!r}, which the XML reader does not "
            f"read (it reads UTF-8, UTF-16, ISO-8859-1 and single-byte encodings); convert the file to UTF-8, e.g. "
            f"iconv -f {self._encoding} -t UTF-8, and change its declaration to encoding=\"UTF-8\"")

    def _malformed(self, err: ExpatError) -> InputError:
        if err.code in _ENCODING_ERRORS:
            if err.code == expat_errors.codes[expat_errors.XML_ERROR_UNKNOWN_ENCODING]:
                return self._unknown_encoding()
            return InputError(f"{self.item.path}: its XML declaration says encoding {self._encoding!r}, but its first "
                              f"bytes are not in it; fix the declaration or convert the file")
        where = self._where()
        byte = max(self._parser.ErrorByteIndex - self._prefix, 0)
        page = self._page
        if page is not None:  # e.g. a dump that ends inside its last <page>
            where += f", in the <page> at line {page['line']}" + (f" ({page['title']!r})" if "title" in page else "")
        reason = ErrorString(err.code)
        found = self._repair.found if self._repair else []
        bad = [b for b in found if b.line == err.lineno and b.offset <= self._parser.ErrorByteIndex]
        if bad:  # an invalid byte inside markup (a tag's name), which the `?` put there cannot mend
            reason = f"{bad[0].describe(self._prefix, self._compressed)} inside the markup ({reason})"
        decompressed = "decompressed byte" if self._compressed else "byte"
        return InputError(f"{self.item.path}: malformed XML at line {err.lineno}, column {err.offset}{where} "
                          f"({decompressed} {byte}): {reason}")

    @property
    def _compressed(self) -> bool:
        return codec_of(self.item.path) is not None

    def _claim(self, before: int | None) -> list:
        """The invalid byte sequences found before byte `before` of the fed data (all: None), taken."""
        found = self._repair.found if self._repair else []
        n = len(found) if before is None else next((i for i, b in enumerate(found) if b.offset >= before), len(found))
        taken, found[:n] = found[:n], []
        return taken

    def _outside(self, before: int | None) -> None:
        """Fail on an invalid byte sequence before byte `before`, outside any page: none to count it for."""
        bad = self._claim(before)
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise InputError(f"{self.item.path}: {bad[0].describe(self._prefix, self._compressed)}{more} outside any "
                             f"<page> (in the header or between pages): the export is not UTF-8 there; fix or remove "
                             f"the byte, or declare the file's real encoding in its <?xml ...?> declaration")

    def _start(self, name, attrs):
        self._depth += 1
        depth = self._depth
        if depth == 1:
            self.root_name, self.root_lang = name, attrs.get("xml:lang")
        elif depth == 2 and name == "page":
            self.header_done = True
            self._outside(self._parser.CurrentByteIndex)
            if self.limit is not None and self._parser.CurrentByteIndex >= self.limit:
                self.past_limit = True
            elif not self._header_only:
                self._page = {"line": self._parser.CurrentLineNumber, "redirect": False}
        elif self._page is not None:
            if depth == 3:
                self._child = name
                if name == "revision":  # a later revision's text replaces an earlier one's (full-history exports)
                    self._page.pop("text", None)
            if (name, depth) in self._FIELDS and "deleted" not in attrs:  # <text deleted="deleted"/>
                if depth == 3 or self._child == "revision":  # not a <logitem>'s or an <upload>'s <text>
                    self._field, self._buf = name, []
            elif name == "redirect" and depth == 3:  # <redirect/> (0.4, 0.5) or <redirect title="..."/> (0.6 on)
                self._page["redirect"] = True
        elif depth == 2:
            if name == "siteinfo" and not self.header_done:
                self._names = []
            else:
                self.header_done = True
        elif depth == 4 and name == "namespace" and self._names is not None:  # <siteinfo><namespaces><namespace key=..>
            key = attrs.get("key", "")
            if key.lstrip("-").isdigit():
                self._field, self._buf, self._key = name, [], int(key)

    def _chars(self, data):
        if self._field is not None:
            self._buf.append(data)

    def _end(self, name):
        if self._field is not None:
            if self._page is not None:
                self._page[self._field] = "".join(self._buf)
            else:
                self._names.append((self._key, "".join(self._buf).strip()))
            self._field = None
        if self._depth == 2:
            if self._page is not None:
                self._page["bad"] = self._claim(self._parser.CurrentByteIndex)
                self.pages.append(self._make(self._page))
                self._page, self._made = None, self._made + 1
                if self._made == self.item.max_pages:
                    raise _Enough
            elif self._names is not None:  # </siteinfo>
                self._outside(self._parser.CurrentByteIndex)
                if self.site is None:
                    names = tuple((key, name) for key, name in self._names if name)
                    self.site = SiteInfo(tuple((k, n) for k, n in names if k in NAMESPACE_KEYS),
                                         tuple((k, n) for k, n in names if k != 0))
                self._names, self.header_done = None, True
        elif self._depth == 3:
            self._child = None
        self._depth -= 1

    def _make(self, page: dict) -> RawPage:
        lang = self.item.lang or self.root_lang
        if not lang:
            raise InputError(f"{self.item.path}: no language: the dump has no xml:lang and the work item none")
        page_id, id_error = as_id(page.get("id"), "<id>")
        title = page.get("title", "")
        ns, ns_error = as_id(page["ns"], "<ns>") if "ns" in page else (self._namespace_of(title), None)
        error = None
        if page["bad"]:  # first: a `?` put in for a bad byte may be what makes another field wrong
            bad = page["bad"]
            error = bad[0].describe(self._prefix, self._compressed) + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
        error = error or id_error or ns_error or (None if "title" in page else "missing <title>")
        if "text" not in page:
            error = error or "missing <text> (no revision, or its text was deleted)"
        return RawPage(
            page_id, title, ns, page["redirect"], page.get("text", ""), lang,
            f"{self._source}:{page['line']}", error, site=self.site,
        )

    def _namespace_of(self, title: str) -> int:
        """The namespace a title's prefix names (module docstring, "Older and other exports"); 0 for none."""
        prefix, colon, _ = title.partition(":")
        if not colon:
            return 0
        from pipeline.sources import namespaces  # the name comparison and hand list the cleaner uses too

        if self._title_ns is None:
            table = {namespaces.key(name): k for k, name in CANONICAL}
            if self.site is None:
                hand = namespaces.FALLBACK
                table |= dict.fromkeys(hand.files, 6) | dict.fromkeys(hand.categories, 14) | dict.fromkeys(hand.media, -2)
            else:
                table |= {namespaces.key(name): k for k, name in self.site.prefixes}
            self._title_ns = table
        return self._title_ns.get(namespaces.key(prefix), 0)
