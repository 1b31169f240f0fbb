"""Wikitext -> text by the rules of pipeline/wikitext/clean.py, over mwparserfromhell's tokens.

`mwparserfromhell.parse` is two steps: a C tokenizer, then a Python builder that turns the
tokens into a node tree. On the bundled sample the builder is ~5x the tokenizer's time
(measured on 40 MB: tokenize 0.8 s, build 4.3 s, walk the tree 0.4 s), and almost every
node it builds is then dropped (templates, refs, tables). `TokenRenderer` reads the token
list directly: it keeps the text of what the rules keep and steps over the rest. Its
output and its drop counts equal the tree walk's (`TreeRenderer`, the reference,
tests/pipeline/wikitext/test_clean.py checks both on every sample page and on the real pages);
anything it does not model exactly (a link title or tag name that is not plain text, a
stray token the builder would reject) sends the whole piece to the tree walk instead
(`render`).

What is rendered is one piece of a page: a heading's title, or the text between the
headings and tables that pipeline/wikitext/sections.py found, so headings never reach the walkers
(one nested in a tag is rendered on a line of its own).
"""

import re

from mwparserfromhell.nodes import ExternalLink, Heading, HTMLEntity, Tag, Template, Text, Wikilink
from mwparserfromhell.parser import Parser, tokens as tk

from pipeline.wikitext import templates
from pipeline.sources.namespaces import FALLBACK as _NAMES, Namespaces, key as _ns_key
from pipeline.wikitext.templates import FALLBACK, FALLBACK_CHARS, FALLBACK_CLOSE, FALLBACK_OPEN

# Tags whose content is not prose: citations, media, formulas, code, machine-readable data.
# (Wiki tables are cut out line by line before parsing, pipeline/wikitext/sections.py; `table` here is
# an HTML table, or a wiki table inside a template's parameter.)
DROP_TAGS = frozenset(
    "ref references table gallery imagemap math chem ce hiero score timeline graph mapframe maplink "
    "inputbox categorytree templatedata templatestyles section syntaxhighlight source pre style "
    "script includeonly".split()
)
TAG_REASONS = {"ref": "references", "table": "tables", "gallery": "galleries", "imagemap": "images"}  # counted drops
# Of those, the ones that stand in a sentence render as their source instead: formulas (TeX in
# <math>, mhchem in <chem> and <ce>) and inline code (<syntaxhighlight inline>, <source inline>).
# pipeline/wikitext/clean.py takes them out before parsing and puts their source back in the
# finished text (docs/text.md says why); one that only the parser finds is dropped.
SOURCE_TAGS = frozenset("math chem ce".split())
INLINE_CODE_TAGS = frozenset("syntaxhighlight source".split())  # kept only with an `inline` attribute
# Block-level tags: their content stands on its own lines.
BREAK_TAGS = frozenset("br p div li dt dd tr blockquote hr ul ol dl center poem caption table".split())
CELL = "\x03"  # before each kept table cell's text (XML 1.0 forbids U+0003: no page holds it); see clean.py
_CELL_TAGS = frozenset({"td", "th"})

# File, Media and Category links are told by their prefix (pipeline/sources/namespaces.py: the dump's
# own names and a hand list); a link to a media file under any other prefix is a file link too.
_MEDIA_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".svg", ".tif", ".tiff", ".webp", ".ogg", ".oga", ".ogv", ".webm", ".mp3", ".wav", ".pdf", ".djvu")
# Interlanguage prefixes are lowercase language codes (`de`, `zh-yue`, `be-tarask`); these
# lowercase interwiki prefixes of that shape are inline links, not interlanguage links.
_LANG_PREFIX_RE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]+)*|simple")
_INLINE_INTERWIKI = frozenset({"mw", "voy", "doi", "wmf", "oldwikisource"})
# MediaWiki decodes the HTML 4 entities and &apos; (Sanitizer's entity list adds it: XML defines it,
# HTML 4 does not); mwparserfromhell knows the HTML 4 ones only and leaves &apos; as text. (`&amp;apos;`
# is an entity then the text "apos;", so it stays "&apos;" as MediaWiki shows it.)
_APOS = "&apos;"


def _text(value: str) -> str:
    return value.replace(_APOS, "'") if _APOS in value else value


def hidden_link(title: str, names: Namespaces = _NAMES) -> str | None:
    """None for a link shown in the text (Media links too: a link to the file); File links (with
    their captions) render outside the text: "images", a counted drop; Category and interlanguage
    links are page metadata: "". `names`: the File, Media and Category prefixes of the page's wiki
    (pipeline/sources/namespaces.py)."""
    if ":" not in title:
        return None
    title = title.strip()
    if title.startswith(":"):
        return None
    prefix, _, rest = title.partition(":")
    prefix = prefix.strip()
    if _LANG_PREFIX_RE.fullmatch(prefix) and prefix not in _INLINE_INTERWIKI:
        return ""
    name = _ns_key(prefix)
    if name in names.media:  # a link to the file, shown as its label (namespaces.py), whatever its extension
        return None
    if name in names.files:
        return "images"
    if name in names.categories:
        return ""
    return "images" if rest.strip().lower().endswith(_MEDIA_EXTENSIONS) else None


def render(wikitext: str, lang: str = "en", keep_tables: bool = False, drops: dict | None = None,
           names: Namespaces = _NAMES) -> str:
    """Text of one (pre-stripped) piece of wikitext by the rules above; counted drops are added
    to `drops`. `names`: the wiki's File and Category prefixes (hidden_link)."""
    parser = Parser()
    tokens = parser._tokenizer.tokenize(wikitext, 0, False)
    walker = TokenRenderer(tokens, lang, keep_tables, names)
    try:
        text = walker.top()
    except (_Fallback, IndexError, RecursionError):  # the builder's own error, if any, is the page's
        walker = TreeRenderer(lang, keep_tables, names)
        text = walker.render(parser._builder.build(tokens))  # what parse() does, tokens reused
    if drops is not None:
        for reason, n in walker.drops.items():
            drops[reason] = drops.get(reason, 0) + n
    return text


def _fallback_text(text: str) -> str | None:
    """A template not in pipeline/wikitext/templates.py keeps its one plain parameter, marked so that
    pipeline/wikitext/clean.py can drop it again where it is not inside a sentence."""
    text = text.strip()
    return FALLBACK_OPEN + text + FALLBACK_CLOSE if text and len(text) <= FALLBACK_CHARS and "\n" not in text else None


# --- tree walk (the reference) ----------------------------------------------------------------
class TreeRenderer:
    """Walks mwparserfromhell's node tree into a list of strings (what strip_code does, with
    the rules above instead of its defaults, which keep ref text, table cells and file-link
    captions)."""

    def __init__(self, lang: str = "en", keep_tables: bool = False, names: Namespaces = _NAMES):
        self.out: list[str] = []
        self.lang, self.keep_tables, self.names = lang, keep_tables, names
        self.drops: dict[str, int] = {}

    def count(self, reason: str) -> None:
        if reason:
            self.drops[reason] = self.drops.get(reason, 0) + 1

    def render(self, code) -> str:
        return "".join(self.walk(code).out)

    def walk(self, code) -> "TreeRenderer":
        for node in code.nodes:
            self.node(node)
        return self

    def text_of(self, code) -> str:
        outer, self.out = self.out, []
        text = "".join(self.walk(code).out)
        self.out = outer
        return text

    def node(self, node) -> None:
        kind = type(node)
        if kind is Text:
            self.out.append(_text(node.value))
        elif kind is Wikilink:
            hidden = hidden_link(str(node.title), self.names)
            if hidden is not None:
                self.count(hidden)
                return
            start = len(self.out)
            self.walk(node.title if node.text is None else node.text)
            if node.text is None and start < len(self.out):  # [[:Category:X]] displays "Category:X"
                self.out[start] = self.out[start].lstrip(":")
        elif kind is Tag:
            name = str(node.tag).strip().lower()
            if name in DROP_TAGS and not (name == "table" and self.keep_tables):
                self.count(TAG_REASONS.get(name, ""))
                return
            if name in _CELL_TAGS and self.keep_tables:  # a row's cells stay on its line
                cell = "" if node.contents is None else self.text_of(node.contents)
                self.out.append(CELL + cell.replace("\n", " "))
                return
            brk = name in BREAK_TAGS
            if brk:
                self.out.append("\n")
            if node.contents is not None:
                self.walk(node.contents)
            if brk:
                self.out.append("\n")
        elif kind is HTMLEntity:
            self.out.append(node.normalize())
        elif kind is ExternalLink:
            if node.brackets and node.title is not None:
                self.walk(node.title)
        elif kind is Template:
            self.template(node)
        elif kind is Heading:  # nested inside a tag (a heading line never reaches the walkers)
            self.out.append("\n")
            self.walk(node.title).out.append("\n")
        # Argument, Comment: dropped.

    def template(self, node) -> None:
        spec = templates.lookup(str(node.name), self.lang)
        if type(spec) is str:
            self.count(spec)
        elif spec is FALLBACK:
            params = node.params
            kept = None
            if len(params) == 1 and not params[0].showkey and all(type(n) is Text for n in params[0].value.nodes):
                kept = _fallback_text(str(params[0].value))
            if kept is None:
                self.count("templates")
            else:
                self.out.append(kept)
        else:
            params = [(str(p.name).strip() if p.showkey else None, self.text_of(p.value).strip()) for p in node.params]
            self.out.append(templates.call(spec, params))


# --- token walk (the fast path) ---------------------------------------------------------------
class _Fallback(Exception):
    """Something TokenRenderer does not model exactly: render this piece with the tree."""


_OPEN = frozenset({tk.TemplateOpen, tk.ArgumentOpen, tk.WikilinkOpen, tk.ExternalLinkOpen, tk.HeadingStart,
                   tk.CommentStart, tk.TagOpenOpen, tk.HTMLEntityStart})
_CLOSE = frozenset({tk.TemplateClose, tk.ArgumentClose, tk.WikilinkClose, tk.ExternalLinkClose, tk.HeadingEnd,
                    tk.CommentEnd, tk.TagCloseSelfclose, tk.TagCloseClose, tk.HTMLEntityEnd})
_TEXT = tk.Text


class TokenRenderer:
    """The tree walk's output from the token list: one pass, no nodes. Tokens nest like the
    nodes they would build (the builder relies on it), so a construct ends where the count
    of open minus close tokens returns to zero."""

    def __init__(self, tokens, lang: str = "en", keep_tables: bool = False, names: Namespaces = _NAMES):
        self.t = tokens
        self.lang, self.keep_tables, self.names = lang, keep_tables, names
        self.drops: dict[str, int] = {}

    def count(self, reason: str) -> None:
        if reason:
            self.drops[reason] = self.drops.get(reason, 0) + 1

    def end_of(self, i: int) -> int:
        """Index after the construct that starts at i."""
        t = self.t
        if type(t[i]) not in _OPEN:  # text, or a separator inside its construct
            return i + 1
        depth, i = 1, i + 1
        while depth:
            kind = type(t[i])
            if kind in _OPEN:
                depth += 1
            elif kind in _CLOSE:
                depth -= 1
            i += 1
        return i

    def parts(self, i: int, stops) -> list[int]:
        """Positions of the depth-0 tokens of types `stops` from i up to the construct's close."""
        t, found = self.t, []
        while True:
            kind = type(t[i])
            if kind in stops:
                found.append(i)
                i += 1
            elif kind in _CLOSE:
                found.append(i)
                return found
            else:
                i = self.end_of(i)

    def equals_at(self, i: int, j: int) -> int | None:
        """Where the `=` of a named template parameter in tokens i..j is (`key=value`), if any."""
        t = self.t
        while i < j:
            if type(t[i]) is tk.TemplateParamEquals:
                return i
            i = self.end_of(i)
        return None

    def plain(self, i: int, j: int) -> str:
        """The text of tokens i..j, which must all be Text (else the tree walk decides)."""
        t = self.t
        if any(type(t[k]) is not _TEXT for k in range(i, j)):
            raise _Fallback
        return "".join(t[k]["text"] for k in range(i, j))

    def top(self) -> str:
        out: list[str] = []
        self.walk(0, len(self.t), out)
        return "".join(out)

    def walk(self, i: int, j: int, out: list) -> None:
        while i < j:
            i = self.node(i, out)

    def text_of(self, i: int, j: int) -> str:
        out: list[str] = []
        self.walk(i, j, out)
        return "".join(out)

    def node(self, i: int, out: list) -> int:
        """Render the construct at i into out; return the index after it."""
        t = self.t
        tok = t[i]
        kind = type(tok)
        if kind is _TEXT:
            out.append(_text(tok["text"]))
            return i + 1
        if kind is tk.WikilinkOpen:
            sep = self.parts(i + 1, (tk.WikilinkSeparator,))
            end = sep[-1] + 1
            if len(sep) > 2:
                raise _Fallback  # the builder would nest a second separator into the text
            hidden = hidden_link(self.plain(i + 1, sep[0]), self.names)
            if hidden is not None:
                self.count(hidden)
                return end
            if len(sep) == 2:
                self.walk(sep[0] + 1, sep[1], out)
            else:
                start = len(out)
                self.walk(i + 1, sep[0], out)
                if start < len(out):  # [[:Category:X]] displays "Category:X"
                    out[start] = out[start].lstrip(":")
            return end
        if kind is tk.TemplateOpen:
            return self.template(i, out)
        if kind is tk.TagOpenOpen:
            marks = self.parts(i + 1, (tk.TagAttrStart, tk.TagCloseOpen, tk.TagOpenClose))
            name = self.plain(i + 1, marks[0]).strip().lower()
            end = marks[-1] + 1
            if name in DROP_TAGS and not (name == "table" and self.keep_tables):
                self.count(TAG_REASONS.get(name, ""))
                return end
            opened = [m for m in marks if type(t[m]) is tk.TagCloseOpen]
            closed = [m for m in marks if type(t[m]) is tk.TagOpenClose]
            if opened and (len(opened) != 1 or len(closed) != 1):
                raise _Fallback
            if name in _CELL_TAGS and self.keep_tables:  # a row's cells stay on its line
                out.append(CELL + (self.text_of(opened[0] + 1, closed[0]) if opened else "").replace("\n", " "))
                return end
            brk = name in BREAK_TAGS
            if brk:
                out.append("\n")
            if opened:
                self.walk(opened[0] + 1, closed[0], out)
            if brk:
                out.append("\n")
            return end
        if kind is tk.HTMLEntityStart:
            end = self.end_of(i)
            numeric = type(t[i + 1]) is tk.HTMLEntityNumeric
            hexadecimal = numeric and type(t[i + 2]) is tk.HTMLEntityHex
            value = t[end - 2]["text"]
            out.append(HTMLEntity(value, named=not numeric, hexadecimal=hexadecimal).normalize())
            return end
        if kind is tk.ExternalLinkOpen:
            sep = self.parts(i + 1, (tk.ExternalLinkSeparator,))
            if tok.get("brackets") and len(sep) == 2:
                self.walk(sep[0] + 1, sep[1], out)
            elif len(sep) > 2:
                raise _Fallback
            return sep[-1] + 1
        if kind is tk.HeadingStart:  # nested inside a tag (a heading line never reaches the walkers)
            end = self.end_of(i)
            out.append("\n")
            self.walk(i + 1, end - 1, out)
            out.append("\n")
            return end
        if kind in (tk.CommentStart, tk.ArgumentOpen):
            return self.end_of(i)
        raise _Fallback  # a token the builder does not expect here: its error decides

    def template(self, i: int, out: list) -> int:
        t = self.t
        sep = self.parts(i + 1, (tk.TemplateParamSeparator,))
        end = sep[-1] + 1
        spec = templates.lookup(self.name_of(i + 1, sep[0]), self.lang)
        if type(spec) is str:
            self.count(spec)
        elif spec is FALLBACK:
            kept = None
            if len(sep) == 2 and all(type(t[k]) is _TEXT for k in range(sep[0] + 1, sep[1])):
                kept = _fallback_text("".join(t[k]["text"] for k in range(sep[0] + 1, sep[1])))
            if kept is None:
                self.count("templates")
            else:
                out.append(kept)
        else:
            params = []
            for a, b in zip(sep, sep[1:]):
                eq = self.equals_at(a + 1, b)
                if eq is None:
                    params.append((None, self.text_of(a + 1, b).strip()))
                else:
                    params.append((self.plain(a + 1, eq).strip(), self.text_of(eq + 1, b).strip()))
            out.append(templates.call(spec, params))
        return end

    def name_of(self, i: int, j: int) -> str:
        """A template's name. A name with markup in it (a nested template, an entity) is compared
        as its source text by the tree walk: only a parser function's (`{{#if:{{{1}}}|..}}`,
        dropped whatever follows the `#`) is decided here."""
        t = self.t
        k = i
        while k < j and type(t[k]) is _TEXT:
            k += 1
        head = "".join(t[m]["text"] for m in range(i, k))
        if k == j or head.lstrip()[:1] == "#":
            return head
        raise _Fallback
