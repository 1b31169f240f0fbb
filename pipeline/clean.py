"""Wikitext -> plain text, NFC, special-codepoint escape, and one outcome per page.

Rules (issue 2, "Cleaning"); the choices follow mBERT's data, which CANINE pretrained on
(paper §4.1): WikiExtractor-style text without templates and tables.
- Namespace 0 only; redirects (the dump's <redirect/> or `#REDIRECT [[...]]`, also the
  localized keywords below) are dropped. Disambiguation pages are ns-0 articles and are kept:
  their "X may refer to: ..." lists are real prose in the language, and telling them apart
  needs per-wiki template names that the cleaner would have to guess.
- Templates are dropped, infoboxes included (their content is template parameters, mostly
  key/value data, not prose), except the few that only wrap running text: {{lang|xx|text}},
  {{lang-xx|text}}, {{nowrap|text}} keep their text, else sentences lose words.
  Tables are dropped: cell fragments are not sentences.
- Links keep their display text; File/Image/Category links and interlanguage links
  (`[[fr:Paris]]`) are dropped; `[[:Category:X]]` is an inline link and kept.
- External links keep their label; bare or unlabeled URLs are dropped.
- `<ref>`, `<references/>`, `<gallery>`, `<math>`, code blocks and the like are dropped;
  other tags (`<b>`, `<span>`, `<blockquote>`, ...) keep their text.
- Lists keep item text without bullets. Headings keep their text on a line of its own; a
  heading with no text under it (e.g. "References" once the refs are gone) is dropped.
- Paragraphs and line breaks become single newlines; HTML entities are decoded.
- After that: NFC, then characters that alias a special codepoint (U+0000, U+E000..U+E0FF,
  pipeline/contract.py) become U+FFFD and are counted.

Speed: parsing is nearly all the cost, so refs and comments are cut by regex before parsing
and non-articles / redirects are never parsed. On the bundled sample (1.01 MB of wikitext, one
process, CPU time, best of 5 on a shared 2-core machine) read_pages + clean_page run at 5.5-5.9
MB/s against 2.9-4.7 MB/s for `mwparserfromhell.parse(text).strip_code()` alone: 1.3-1.9x,
and 1.34-1.41x on the kept articles alone (the regex pre-pass is the gain). Reading alone:
60-100 MB/s.
"""

import re
import unicodedata
from dataclasses import dataclass

import mwparserfromhell
from mwparserfromhell.nodes import ExternalLink, Heading, HTMLEntity, Tag, Template, Text, Wikilink

from pipeline.contract import ALIASED_RANGE, REPLACEMENT_CHARACTER
from pipeline.sources import RawPage

# Tags whose content is not prose: citations, media, formulas, code, machine-readable data.
_DROP_TAGS = frozenset(
    "ref references table gallery imagemap math chem ce hiero score timeline graph mapframe maplink "
    "inputbox categorytree templatedata templatestyles section syntaxhighlight source pre style "
    "script includeonly".split()
)
# Block-level tags: their content stands on its own lines.
_BREAK_TAGS = frozenset("br p div li dt dd tr blockquote hr ul ol dl center poem caption".split())

_TEXT_TEMPLATES = frozenset({"nowrap", "nobr", "nobreak"})  # plus lang / lang-xx, see Renderer.template

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

# `#REDIRECT [[Target]]` and the localized keywords of the sample's and other large wikis.
_REDIRECT_RE = re.compile(
    r"\s*#\s*(?:REDIRECT|WEITERLEITUNG|REDIRECTION|REDIRECCIÓN|RINVIA|REDIRECIONAMENTO|DOORVERWIJZING|"
    r"PATRZ|PRZEKIERUJ|ĐỔI|YÖNLENDİRME|ALIH|ПЕРЕНАПРАВЛЕНИЕ|ПЕРЕНАПР|ПЕРЕНАПРАВЛЕННЯ|重定向|転送|"
    r"リダイレクト|넘겨주기|تحويل|تغییر_مسیر|הפניה|अनुप्रेषित)\s*:?\s*\[\[([^\]|#]*)",
    re.IGNORECASE,
)
# Markup that survives parsing when the wikitext is malformed (unclosed `{{`, stray `'''`),
# and behaviour switches such as __NOTOC__ (localized ones are upper case in every script).
_LEFTOVER_RE = re.compile(
    r"\{\{|\}\}|\[\[|\]\]|\{\||\|\}|'{2,}|__[^\W_a-z]+(?:_[^\W_a-z]+)*__|"
    r"(?i:</?(?:ref|references|nowiki|br|span|div|small|big|sup|sub|center|font|gallery|math|blockquote)\b[^<>\n]*>)"
)
# Dropped constructs that are cheap to find by regex are cut before parsing: <ref>s (with their
# cite templates) and comments are a large share of real wikitext, and tokenizing them is most
# of mwparserfromhell's time (parse time on the sample halves). A ref's body may not contain
# another <ref, so an unclosed <ref> never swallows text up to a later </ref>.
_PRESTRIP_RE = re.compile(
    r"<!--.*?-->|<ref(?:\s[^>]*)?/>|<ref(?:\s[^>]*)?(?<!/)>(?:(?!<ref[\s>/]).)*?</ref\s*>|<references(?:\s[^>]*)?/>",
    re.S | re.I,
)
_EMPTY_PARENS_RE = re.compile(r" ?\(\s*[,;:]*\s*\)|（\s*[,;:，；：]*\s*）")  # left by a dropped template
_SPACES_RE = re.compile(r"[ \t]+")
# "the Hokkien {{...}}, which": no space before a , or . that ends a clause (".NET" keeps it)
_SPACE_BEFORE_RE = re.compile(r" +(?=[,.](?:\s|$))")
_LINE_BREAKS_RE = re.compile(r" ?\n[ \n]*")  # blank lines and spaces around line breaks
_ALIASED_RE = re.compile(
    "[" + re.escape(chr(0)) + re.escape(chr(ALIASED_RANGE[0])) + "-" + re.escape(chr(ALIASED_RANGE[1])) + "]"
)
_REPLACEMENT = chr(REPLACEMENT_CHARACTER)


@dataclass
class CleanResult:
    outcome: str  # one of contract.PAGE_OUTCOMES
    text: str | None  # cleaned NFC text when kept, else None
    replaced: int  # aliased characters replaced by U+FFFD (kept pages only)
    reason: str  # why a page was not kept ("" when kept), written to rejects/


def clean_page(page: RawPage) -> CleanResult:
    """The page's outcome; never raises on a bad page (it becomes parse_errors with a reason)."""
    if page.error is not None:
        return CleanResult("parse_errors", None, 0, f"parse error: {page.error}")
    if page.ns != 0:
        return CleanResult("non_article", None, 0, f"namespace {page.ns}")
    wikitext = page.markup == "wikitext"
    target = redirect_target(page.text) if wikitext else None
    if page.redirect or target is not None:
        return CleanResult("redirects", None, 0, f"redirect to {target if target else '(unknown)'}")
    try:
        text = wikitext_to_text(page.text) if wikitext else page.text
    except Exception as err:  # mwparserfromhell's ParserError, RecursionError on absurd nesting
        return CleanResult("parse_errors", None, 0, f"parse error: {type(err).__name__}: {err}")
    text, replaced = escape_aliased(unicodedata.normalize("NFC", text))
    if not text.strip():
        return CleanResult("empty", None, 0, "empty after cleaning")
    return CleanResult("kept", text, replaced, "")


def redirect_target(wikitext: str) -> str | None:
    """The target of a `#REDIRECT [[Target]]` page ("" if unnamed), else None."""
    match = _REDIRECT_RE.match(wikitext)
    return None if match is None else match.group(1).strip()


def escape_aliased(text: str) -> tuple[str, int]:
    """Replace U+0000 and U+E000..U+E0FF by U+FFFD (one C-level regex pass); return the count."""
    return _ALIASED_RE.subn(_REPLACEMENT, text)


def wikitext_to_text(wikitext: str) -> str:
    """Plain text of a page's wikitext by the rules in the module docstring (not NFC'd)."""
    text = _Renderer().render(mwparserfromhell.parse(_PRESTRIP_RE.sub("", wikitext)))
    text = _EMPTY_PARENS_RE.sub("", _LEFTOVER_RE.sub("", text))
    text = _SPACE_BEFORE_RE.sub("", _SPACES_RE.sub(" ", text))
    return _LINE_BREAKS_RE.sub("\n", text).strip()


class _Renderer:
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
                out += ["\n", "".join(_Renderer().walk(node.title).out).strip(), "\n"]
                continue
            before = len(out)
            self.node(node)
            if pending and any(piece.strip() for piece in out[before:]):
                pending.clear()
        for _, index in pending:
            out[index] = ""
        return "".join(out)

    def walk(self, code) -> "_Renderer":
        for node in code.nodes:
            self.node(node)
        return self

    def node(self, node) -> None:
        kind = type(node)
        if kind is Text:
            self.out.append(node.value)
        elif kind is Wikilink:
            self.link(node)
        elif kind is Tag:
            self.tag(node)
        elif kind is HTMLEntity:
            self.out.append(node.normalize())
        elif kind is ExternalLink:
            if node.brackets and node.title is not None:
                self.walk(node.title)
        elif kind is Template:
            self.template(node)
        elif kind is Heading:  # nested inside a tag: no empty-section logic there
            self.out.append("\n")
            self.walk(node.title).out.append("\n")
        # Argument, Comment: dropped.

    def template(self, node) -> None:
        """Only templates that wrap running text keep it (their last / first positional param)."""
        name = str(node.name).strip().lower()
        if name == "lang" or name.startswith("lang-") or name in _TEXT_TEMPLATES:
            positional = [p for p in node.params if not p.showkey]
            if positional:
                self.walk(positional[-1 if name == "lang" else 0].value)

    def link(self, node) -> None:
        title = str(node.title)
        if ":" in title and _is_hidden_link(title):
            return
        start = len(self.out)
        self.walk(node.title if node.text is None else node.text)
        if node.text is None and start < len(self.out):  # [[:Category:X]] displays "Category:X"
            self.out[start] = self.out[start].lstrip(":")

    def tag(self, node) -> None:
        name = str(node.tag).strip().lower()
        if name in _DROP_TAGS:
            return
        brk = name in _BREAK_TAGS
        if brk:
            self.out.append("\n")
        if node.contents is not None:
            self.walk(node.contents)
        if brk:
            self.out.append("\n")


def _is_hidden_link(title: str) -> bool:
    """File, Category and interlanguage links render outside the text: drop them."""
    title = title.strip()
    if title.startswith(":"):
        return False
    prefix, _, rest = title.partition(":")
    prefix = prefix.strip()
    if _LANG_PREFIX_RE.fullmatch(prefix) and prefix not in _INLINE_INTERWIKI:
        return True
    name = unicodedata.normalize("NFC", prefix.replace(" ", "_")).casefold()
    return name in _HIDDEN_NAMESPACES or rest.strip().lower().endswith(_MEDIA_EXTENSIONS)
