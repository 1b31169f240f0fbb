"""Wikitext -> text by the rules of pipeline/clean.py, over mwparserfromhell's tokens.

`mwparserfromhell.parse` is two steps: a C tokenizer, then a Python builder that turns the
tokens into a node tree. On the bundled sample the builder is ~5x the tokenizer's time
(measured on 40 MB: tokenize 0.8 s, build 4.3 s, walk the tree 0.4 s), and almost every
node it builds is then dropped (templates, refs, tables). `TokenRenderer` reads the token
list directly: it keeps the text of what the rules keep and steps over the rest. Its
output equals the tree walk (`TreeRenderer`, the reference, tests/pipeline/test_clean.py
checks both on every sample page); anything it does not model exactly (a link title or tag
name that is not plain text, a stray token the builder would reject) sends the whole page
to the tree walk instead (`render`).
"""

import re
import unicodedata

from mwparserfromhell.nodes import ExternalLink, Heading, HTMLEntity, Tag, Template, Text, Wikilink
from mwparserfromhell.parser import Parser, tokens as tk

# Tags whose content is not prose: citations, media, formulas, code, machine-readable data.
DROP_TAGS = frozenset(
    "ref references table gallery imagemap math chem ce hiero score timeline graph mapframe maplink "
    "inputbox categorytree templatedata templatestyles section syntaxhighlight source pre style "
    "script includeonly".split()
)
# Block-level tags: their content stands on its own lines.
BREAK_TAGS = frozenset("br p div li dt dd tr blockquote hr ul ol dl center poem caption".split())
_TEXT_TEMPLATES = frozenset({"nowrap", "nobr", "nobreak"})  # plus lang / lang-xx, see text_param

# Namespace names of File (6) and Category (14) links, with their aliases, on the larger
# wikis (Special:NamespaceInfo of each); compared case-folded and NFC.
_HIDDEN_NAMESPACES = frozenset(
    unicodedata.normalize("NFC", name).casefold()
    for name in (
        "File Image Media Category "  # en and every wiki's canonical names
        "Datei Bild Kategorie Fichier Catégorie Archivo Imagen Categoría Immagine Categoria "
        "Ficheiro Arquivo Imagem Bestand Afbeelding Categorie Plik Grafika Kategoria Fil Kategori "
        "Dosya Berkas Tập_tin Hình Thể_loại Файл Изображение Категория Зображення Категорія "
        "文件 檔案 档案 图像 圖像 分类 分類 ファイル 画像 カテゴリ 파일 그림 분류 "
        "ملف صورة تصنيف پرونده رده קובץ תמונה קטגוריה चित्र फ़ाइल श्रेणी ไฟล์ หมวดหมู่"
    ).split()
)
_MEDIA_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".svg", ".tif", ".tiff", ".webp", ".ogg", ".oga", ".ogv", ".webm", ".mp3", ".wav", ".pdf", ".djvu")
# Interlanguage prefixes are lowercase language codes (`de`, `zh-yue`, `be-tarask`); these
# lowercase interwiki prefixes of that shape are inline links, not interlanguage links.
_LANG_PREFIX_RE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]+)*|simple")
_INLINE_INTERWIKI = frozenset({"mw", "voy", "doi", "wmf", "oldwikisource"})


def is_hidden_link(title: str) -> bool:
    """File, Category and interlanguage links render outside the text: drop them."""
    if ":" not in title:
        return False
    title = title.strip()
    if title.startswith(":"):
        return False
    prefix, _, rest = title.partition(":")
    prefix = prefix.strip()
    if _LANG_PREFIX_RE.fullmatch(prefix) and prefix not in _INLINE_INTERWIKI:
        return True
    name = unicodedata.normalize("NFC", prefix.replace(" ", "_")).casefold()
    return name in _HIDDEN_NAMESPACES or rest.strip().lower().endswith(_MEDIA_EXTENSIONS)


def text_param(name: str, positional: int) -> int | None:
    """Templates are dropped, but those that only wrap running text keep one positional
    parameter: {{lang|xx|text}} its last, {{lang-xx|text}} / {{nowrap|text}} their first.
    Returns its index among `positional` parameters, or None to drop the template."""
    name = name.strip().lower()
    if not positional:
        return None
    if name == "lang":
        return positional - 1
    return 0 if name.startswith("lang-") or name in _TEXT_TEMPLATES else None


def render(wikitext: str) -> str:
    """Text of (pre-stripped) wikitext by the rules above, headings without text dropped."""
    parser = Parser()
    tokens = parser._tokenizer.tokenize(wikitext, 0, False)
    try:
        return TokenRenderer(tokens).top()
    except (_Fallback, IndexError, RecursionError):  # the builder's own error, if any, is the page's
        return TreeRenderer().render(parser._builder.build(tokens))  # what parse() does, tokens reused


# --- tree walk (the reference) ----------------------------------------------------------------
class TreeRenderer:
    """Walks mwparserfromhell's node tree into a list of strings (what strip_code does, with
    the rules above instead of its defaults, which keep ref text, table cells and file-link
    captions)."""

    def __init__(self):
        self.out: list[str] = []

    def render(self, code) -> str:
        out = self.out
        pending = []  # (level, index in out) of headings with no text under them yet
        for node in code.nodes:
            if type(node) is Heading:
                while pending and pending[-1][0] >= node.level:  # an empty section: drop its heading
                    out[pending.pop()[1]] = ""
                pending.append((node.level, len(out) + 1))
                out += ["\n", "".join(TreeRenderer().walk(node.title).out).strip(), "\n"]
                continue
            before = len(out)
            self.node(node)
            if pending and any(piece.strip() for piece in out[before:]):
                pending.clear()
        for _, index in pending:
            out[index] = ""
        return "".join(out)

    def walk(self, code) -> "TreeRenderer":
        for node in code.nodes:
            self.node(node)
        return self

    def node(self, node) -> None:
        kind = type(node)
        if kind is Text:
            self.out.append(node.value)
        elif kind is Wikilink:
            if is_hidden_link(str(node.title)):
                return
            start = len(self.out)
            self.walk(node.title if node.text is None else node.text)
            if node.text is None and start < len(self.out):  # [[:Category:X]] displays "Category:X"
                self.out[start] = self.out[start].lstrip(":")
        elif kind is Tag:
            name = str(node.tag).strip().lower()
            if name in DROP_TAGS:
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
            positional = [p for p in node.params if not p.showkey]
            keep = text_param(str(node.name), len(positional))
            if keep is not None:
                self.walk(positional[keep].value)
        elif kind is Heading:  # nested inside a tag: no empty-section logic there
            self.out.append("\n")
            self.walk(node.title).out.append("\n")
        # Argument, Comment: dropped.


# --- token walk (the fast path) ---------------------------------------------------------------
class _Fallback(Exception):
    """Something TokenRenderer does not model exactly: render this page with the tree."""


_OPEN = frozenset({tk.TemplateOpen, tk.ArgumentOpen, tk.WikilinkOpen, tk.ExternalLinkOpen, tk.HeadingStart,
                   tk.CommentStart, tk.TagOpenOpen, tk.HTMLEntityStart})
_CLOSE = frozenset({tk.TemplateClose, tk.ArgumentClose, tk.WikilinkClose, tk.ExternalLinkClose, tk.HeadingEnd,
                    tk.CommentEnd, tk.TagCloseSelfclose, tk.TagCloseClose, tk.HTMLEntityEnd})
_TEXT = tk.Text


class TokenRenderer:
    """The tree walk's output from the token list: one pass, no nodes. Tokens nest like the
    nodes they would build (the builder relies on it), so a construct ends where the count
    of open minus close tokens returns to zero."""

    def __init__(self, tokens):
        self.t = tokens

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

    def has_equals(self, i: int, j: int) -> bool:
        """Whether the template parameter in tokens i..j is named (`key=value`, showkey)."""
        t = self.t
        while i < j:
            if type(t[i]) is tk.TemplateParamEquals:
                return True
            i = self.end_of(i)
        return False

    def plain(self, i: int, j: int) -> str:
        """The text of tokens i..j, which must all be Text (else the tree walk decides)."""
        t = self.t
        if any(type(t[k]) is not _TEXT for k in range(i, j)):
            raise _Fallback
        return "".join(t[k]["text"] for k in range(i, j))

    def top(self) -> str:
        out: list[str] = []
        pending = []  # as TreeRenderer.render
        t, i, n = self.t, 0, len(self.t)
        while i < n:
            tok = t[i]
            if type(tok) is tk.HeadingStart:
                level = tok["level"]
                while pending and pending[-1][0] >= level:
                    out[pending.pop()[1]] = ""
                pending.append((level, len(out) + 1))
                end = self.end_of(i)
                title: list[str] = []
                self.walk(i + 1, end - 1, title)
                out += ["\n", "".join(title).strip(), "\n"]
                i = end
                continue
            before = len(out)
            i = self.node(i, out)
            if pending and any(piece.strip() for piece in out[before:]):
                pending.clear()
        for _, index in pending:
            out[index] = ""
        return "".join(out)

    def walk(self, i: int, j: int, out: list) -> None:
        while i < j:
            i = self.node(i, out)

    def node(self, i: int, out: list) -> int:
        """Render the construct at i into out; return the index after it."""
        t = self.t
        tok = t[i]
        kind = type(tok)
        if kind is _TEXT:
            out.append(tok["text"])
            return i + 1
        if kind is tk.WikilinkOpen:
            sep = self.parts(i + 1, (tk.WikilinkSeparator,))
            end = sep[-1] + 1
            if len(sep) > 2:
                raise _Fallback  # the builder would nest a second separator into the text
            title = self.plain(i + 1, sep[0])
            if is_hidden_link(title):
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
            sep = self.parts(i + 1, (tk.TemplateParamSeparator,))
            end = sep[-1] + 1
            name = self.name_of(i + 1, sep[0])
            if name is None:  # not one of the text templates, whatever the rest of its name
                return end
            positional = [(a + 1, b) for a, b in zip(sep, sep[1:]) if not self.has_equals(a + 1, b)]
            keep = text_param(name, len(positional))
            if keep is not None:
                self.walk(*positional[keep], out)
            return end
        if kind is tk.TagOpenOpen:
            marks = self.parts(i + 1, (tk.TagAttrStart, tk.TagCloseOpen, tk.TagOpenClose))
            name = self.plain(i + 1, marks[0]).strip().lower()
            end = marks[-1] + 1
            if name in DROP_TAGS:
                return end
            brk = name in BREAK_TAGS
            if brk:
                out.append("\n")
            opened = [m for m in marks if type(t[m]) is tk.TagCloseOpen]
            if opened:
                closed = [m for m in marks if type(t[m]) is tk.TagOpenClose]
                if len(opened) != 1 or len(closed) != 1:
                    raise _Fallback
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
        if kind is tk.HeadingStart:  # nested inside a tag: no empty-section logic there
            end = self.end_of(i)
            out.append("\n")
            self.walk(i + 1, end - 1, out)
            out.append("\n")
            return end
        if kind in (tk.CommentStart, tk.ArgumentOpen):
            return self.end_of(i)
        raise _Fallback  # a token the builder does not expect here: its error decides

    def name_of(self, i: int, j: int) -> str | None:
        """A template's name if it may be a text template, None if it surely is not. A name
        with markup in it (a nested template, an entity) is compared as its source text by
        the tree walk, which never equals a text template's name but may start with lang-."""
        t = self.t
        k = i
        while k < j and type(t[k]) is _TEXT:
            k += 1
        head = "".join(t[m]["text"] for m in range(i, k))
        if k == j:
            return head
        if head.lstrip().lower().startswith("lang-") or not head.strip():
            raise _Fallback
        return None
