"""MediaWiki XML exports (`.xml`, `.xml.bz2`, `.xml.gz`, and ranges of multistream dumps):
the dump's language from its <mediawiki> root and its namespace names from its <siteinfo> when
planning, then its pages, parsed by expat callbacks that keep only the current page, so memory
does not grow with the dump.

The header (<mediawiki> and <siteinfo>) is read once per dump, when planning, and every work item
carries it (WorkItem.site), so every page of a dump gets the same names whichever worker reads
which range: a multistream range past byte 0 does not hold the header stream. A page carries the
SiteInfo as RawPage.site, None where the dump has no <siteinfo> (the cleaner's fallback names,
pipeline/wikitext/namespaces.py).

A page's `source` is `path:line`, the line of its `<page>` tag in the decompressed file
(`bzcat path | sed -n LINEp`), or `path@start:line` for a multistream range (line counted from
the data decompressed at byte `start`). XML that is not well-formed fails the work item,
naming line and column (and the open <page>); a page without id, title or text is kept with
`error` set, for the cleaner to count as parse_errors.
"""

import dataclasses
from collections.abc import Iterator
from contextlib import closing
from pyexpat import ExpatError, ParserCreate

from pipeline.sources import multistream
from pipeline.sources.common import LANG_RE, NAMESPACE_KEYS, InputError, RawPage, SiteInfo, WorkItem, as_id
from pipeline.sources.compressed import codec_of, decoded_chunks

# expat hands character data in pieces of at most this size (buffer_text); wikitext pages
# are mostly under 64 KiB, so a page's text usually arrives in one piece.
_EXPAT_BUFFER = 1 << 16
# The <mediawiki> root must start within this many decompressed bytes of a dump, and its
# <siteinfo> (a few KB) end within them to be read.
_HEADER_LIMIT = 1 << 20


def plan_items(path: str, fs, fs_path: str, lang: str | None, streams_per_item: int) -> list[WorkItem]:
    """The dump's work items, with its language (its own xml:lang, else `lang`, --lang) and its
    <siteinfo>."""
    root_lang, site = _header(path)
    lang = root_lang or lang  # the dump's own language wins over --lang
    if not lang:
        raise InputError(f"{path}: no language: the dump's <mediawiki> has no xml:lang and no --lang was given")
    if not LANG_RE.fullmatch(lang):
        raise InputError(f"{path}: xml:lang {lang!r} is not a language code")
    return [dataclasses.replace(item, site=site) for item in multistream.split(path, fs, fs_path, lang, streams_per_item)]


def _header(path: str) -> tuple[str | None, SiteInfo | None]:
    """xml:lang of the <mediawiki> root and the <siteinfo> (None if the dump has none), reading
    only the first bytes of the dump: up to the end of <siteinfo> or the start of the first <page>."""
    parser, seen = _PageParser(WorkItem(path, "xml"), b"", header_only=True), 0
    with closing(decoded_chunks(path, codec_of(path))) as chunks:
        for chunk in chunks:
            for i in range(0, len(chunk), 4096):  # small pieces: stop right after the header
                parser.feed(chunk[i : i + 4096])
                if parser.root_name not in (None, "mediawiki"):
                    raise InputError(f"{path}: not a MediaWiki export: root element <{parser.root_name}>")
                if parser.header_done:
                    return parser.root_lang, parser.site
            seen += len(chunk)
            if seen > _HEADER_LIMIT:
                break
    if parser.root_name is not None:  # a root with no <siteinfo> or <page> in the bytes read
        return parser.root_lang, parser.site
    what = f"the first {seen} decompressed bytes" if seen else "the file: it decompresses to nothing"
    raise InputError(f"{path}: no <mediawiki> root element in {what}")


def read_pages(item: WorkItem) -> Iterator[RawPage]:
    # A range that does not start at byte 0 lacks the <mediawiki> start tag and the <siteinfo>
    # (both in the header stream), one that stops before the end lacks the end tag: supply them
    # so that expat sees one document and the pages their dump's names. A planned item brings
    # its <siteinfo>; one made by hand reads the header stream here.
    site = _header(item.path)[1] if item.site is None and item.start > 0 else item.site
    parser = _PageParser(item, b"<mediawiki>" if item.start > 0 else b"", site)
    for chunk in decoded_chunks(item.path, codec_of(item.path), item.start, item.end):
        parser.feed(chunk)
        yield from parser.pages
        parser.pages.clear()
    parser.feed(b"</mediawiki>" if item.end is not None else b"", final=True)
    yield from parser.pages


class _PageParser:
    """expat callbacks that turn each <page> (a child of the root) into a RawPage, and the
    <siteinfo> before them into a SiteInfo (`site`: the one given, else the document's own);
    `header_only`: no pages, for _header (which has no language to give them yet)."""

    _FIELDS = {("title", 3), ("ns", 3), ("id", 3), ("text", 4)}  # (element, depth) to capture

    def __init__(self, item: WorkItem, prefix: bytes, site: SiteInfo | None = None, header_only: bool = False):
        self.item, self.pages, self.root_name, self.root_lang, self.site = item, [], None, None, site
        self._header_only = header_only
        self.header_done = False  # past the <siteinfo>, or at a first child that is not one
        self._names, self._key = None, None  # [(key, name)] while inside <siteinfo>; the <namespace> key being read
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
            self.root_name, self.root_lang = name, attrs.get("xml:lang")
        elif depth == 2 and name == "page":
            self.header_done = True
            if not self._header_only:
                self._page = {"line": self._parser.CurrentLineNumber, "redirect": False}
        elif self._page is not None:
            if (name, depth) in self._FIELDS and "deleted" not in attrs:  # <text deleted="deleted"/>
                self._field, self._buf = name, []
            elif name == "redirect" and depth == 3:
                self._page["redirect"] = True
        elif depth == 2:
            if name == "siteinfo" and not self.header_done:
                self._names = []
            else:
                self.header_done = True
        elif depth == 4 and name == "namespace" and self._names is not None:  # <siteinfo><namespaces><namespace key=..>
            key = attrs.get("key", "")
            if key.lstrip("-").isdigit() and int(key) in NAMESPACE_KEYS:
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
                self.pages.append(self._make(self._page))
                self._page = None
            elif self._names is not None:  # </siteinfo>
                if self.site is None:
                    self.site = SiteInfo(tuple((key, name) for key, name in self._names if name))
                self._names, self.header_done = None, True
        self._depth -= 1

    def _make(self, page: dict) -> RawPage:
        lang = self.item.lang or self.root_lang
        if not lang:
            raise InputError(f"{self.item.path}: no language: the dump has no xml:lang and the work item none")
        page_id, id_error = as_id(page.get("id"), "<id>")
        ns, ns_error = as_id(page.get("ns"), "<ns>")
        error = id_error or ns_error or (None if "title" in page else "missing <title>")
        if "text" not in page:
            error = error or "missing <text> (no revision, or its text was deleted)"
        return RawPage(
            page_id, page.get("title", ""), ns, page["redirect"], page.get("text", ""), lang,
            f"{self._source}:{page['line']}", error, site=self.site,
        )
