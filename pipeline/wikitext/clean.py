"""Wikitext -> plain text, NFC, special-codepoint escape, and one outcome per page.

Rules; the choices follow mBERT's data, which CANINE
pretrained on (paper §4.1): WikiExtractor-style text without templates and tables.
- Namespace 0 only; redirects (the dump's <redirect/> or `#REDIRECT [[...]]`, also the
  localized keywords below) are dropped. Disambiguation pages ("X may refer to:" and a list of
  links) are ns-0 articles but no prose: they are dropped and counted as `disambiguation`, told
  by the `__DISAMBIG__` magic word and each wiki's disambiguation templates
  (pipeline/wikitext/disambiguation.py), unless `CleanOptions.keep_disambiguation`. Set-index
  articles (a surname's page) stay articles.
- Broken markup never takes text with it: bold/italic, headings and tables are found line by
  line first, as MediaWiki does (pipeline/wikitext/sections.py), so an unclosed construct ends at its
  line, its table or its section. Every heading is kept, or dropped on purpose and counted.
- Tables (wiki and HTML), infoboxes, galleries and images with their captions are dropped and
  counted; `CleanOptions.keep_tables` keeps the cells' text instead, a row a line, cells
  joined by " | ".
- End matter (References, Notes, See also, External links, ...) is dropped with its subsections
  and counted, unless `CleanOptions.keep_end_matter`: by its title, listed for ten languages
  or of end-matter words for any, or by its raw body, a list of citations with nearly no prose
  (pipeline/wikitext/endmatter.py).
- Templates are dropped, except those that put words into the sentence: conversions, language,
  transliteration and pronunciation, dates, formatting wrappers, quotations render as their words
  (pipeline/wikitext/templates.py); an unknown template inside a sentence keeps its one plain parameter.
- Language-variant markup `-{...}-` (zh, sr, kk, ...) renders as the wiki's own no-conversion view
  shows it, or as `CleanOptions.variants` picks (pipeline/wikitext/variants.py), before
  parsing; the count is `CleanResult.variants`. `CleanOptions.convert` converts a language's
  whole text to one variant after cleaning, what each construct shows excepted
  (pipeline/wikitext/convert.py); the characters changed are `CleanResult.converted`.
- Links keep their display text; File/Image/Category links and interlanguage links
  (`[[fr:Paris]]`) are dropped; `[[:Category:X]]` is an inline link and kept, and so is
  `[[Media:x.ogg|label]]`, a plain link to the file, shown by its label. File, Media and Category
  are told by the wiki's own namespace names from its dump's <siteinfo> (`[[Soubor:x.jpg]]`,
  `[[Kategorie:Y]]` on cswiki) added to a hand list of names and aliases (Bild, 图像, ...), which
  is all an input without <siteinfo> gets; the prefix is compared as MediaWiki does: in any
  case, `_` = space, NFC (pipeline/sources/namespaces.py).
- External links keep their label; bare or unlabeled URLs are dropped.
- `<ref>`, `<references/>`, `<gallery>`, code blocks, music scores and the like are dropped;
  other tags (`<b>`, `<span>`, `<blockquote>`, `<code>`, ...) keep their text. What stands in a
  sentence renders as its source, whitespace collapsed: formulas (`<math>` TeX, `<chem>`/`<ce>`
  mhchem; spacing commands at the ends dropped, `{{`/`}}` written `{ {`/`} }`) and inline code
  (`<syntaxhighlight inline>`); docs/text.md says why.
- Lists keep item text without bullets. Headings keep their text on a line of its own; a
  heading with no text under it (e.g. a section that only held a table) is dropped and counted.
- Paragraphs and line breaks become single newlines; HTML entities are decoded (`&apos;` too).
- After that: NFC, then characters that alias a special codepoint (U+0000, U+E000..U+E0FF,
  contract/schema.py) become U+FFFD and are counted.
- A lone surrogate left by an entity (`&#xD800;` in the wikitext decodes to U+D800) makes the
  page parse_errors, like one in a row's text (pipeline/sources/common.py): UTF-8 cannot encode it.
What a kept page loses is counted per reason (contract.schema.CONSTRUCT_DROPS) in
`CleanResult.dropped`; the job sums the counts per language into the manifest.

Speed: parsing is nearly all the cost. Comments, refs and dropped extension tags are cut by
regex before parsing; dropped tables and end-matter sections, non-articles and redirects are
never parsed; bold/italic runs are removed before parsing (sections.py), which spares
mwparserfromhell's tokenizer its costliest backtracking; the text is read off its token list
rather than its node tree (pipeline/wikitext/render.py). On the real pages of tests/data/wiki
(benchmarks/text_quality.py, MB of wikitext per CPU second): 7.4, against 0.76 for
`parse(text).strip_code()` alone and 6.8 for wikiextractor: reading the token list is what
makes the difference (a cleaner that walked the node tree did 4.1-4.2 where this one did 6.1-6.6
in the same runs). The whole job: benchmarks/preprocess.py.
"""

import re
import unicodedata
from dataclasses import dataclass, field

from contract.schema import ALIASED_RANGE, REPLACEMENT_CHARACTER
from pipeline.wikitext.endmatter import is_end_matter
from pipeline.wikitext.render import CELL, DROP_TAGS, INLINE_CODE_TAGS, SOURCE_TAGS, TAG_REASONS, render
from pipeline.wikitext.sections import split_sections, split_tables, strip_quotes
from pipeline.sources import RawPage, lone_surrogate
from pipeline.sources.common import SiteInfo
from pipeline.sources import namespaces
from pipeline.wikitext import convert, disambiguation
from pipeline.wikitext.templates import FALLBACK_OPEN
from pipeline.wikitext.variants import check_variants, render as render_variants

# `#REDIRECT [[Target]]` and the localized keywords of the sample's and other large wikis.
_REDIRECT_RE = re.compile(
    r"\s*#\s*(?:REDIRECT|WEITERLEITUNG|REDIRECTION|REDIRECCIÓN|RINVIA|REDIRECIONAMENTO|DOORVERWIJZING|"
    r"PATRZ|PRZEKIERUJ|ĐỔI|YÖNLENDİRME|ALIH|ПЕРЕНАПРАВЛЕНИЕ|ПЕРЕНАПР|ПЕРЕНАПРАВЛЕННЯ|重定向|転送|"
    r"リダイレクト|넘겨주기|تحويل|تغییر_مسیر|הפניה|अनुप्रेषित)\s*:?\s*\[\[([^\]|#]*)",
    re.IGNORECASE,
)
# Markup that survives parsing when the wikitext is malformed (an unclosed `{{` with its name,
# a stray `[[`), and behaviour switches such as __NOTOC__ (localized ones are upper case in every script).
# Every pattern below starts each branch with a literal, so `re` skips ahead to those characters
# instead of trying every branch at every position, and none matches what it would replace by
# itself (a lone space or line break): 1.2 s -> 0.57 s for the five passes on 40 MB.
_LEFTOVER_RE = re.compile(
    r"\{\{[^{}|\n]{0,80}\||\{\{|\}\}|\[\[|\]\]|\{\||\|\}|''+|__[^\W_a-z]+(?:_[^\W_a-z]+)*__|"
    r"<(?i:/?(?:ref|references|nowiki|br|span|div|small|big|sup|sub|center|font|gallery|math|blockquote|"
    r"onlyinclude|noinclude|includeonly|poem|table|tr|td|th|caption|p|b|i|u|s|em|strong|code|abbr|cite|ul|ol|li|"
    r"dl|dt|dd|hr|tt|var|del|ins|mark|q|bdi|bdo)\b[^<>\n]*>)"
)
# Dropped constructs that are cheap to find by regex are cut before parsing: comments, <ref>s
# (with their cite templates) and extension tags whose content is dropped are a large share of
# real wikitext, and tokenizing them is most of mwparserfromhell's time (parse time on the
# sample halves). A ref's body may not contain another <ref, so an unclosed <ref> never
# swallows text up to a later </ref>, and an unclosed comment ends with its line (on the wiki
# it hides the rest of the page). Other unclosed tags are left to the parser, which ends them
# with their section.
_COMMENT_RE = re.compile(r"<!--(?:.*?-->|[^\n]*)", re.S)
_REF_RE = re.compile(
    r"<ref(?:\s[^>]*)?/>|<ref(?:\s[^>]*)?(?<!/)>(?:(?!<ref[\s>/]).)*?</ref\s*>|<references(?:\s[^>]*)?/>", re.S | re.I
)
# Their body may not hold the same tag or a heading line: an unclosed one is not paired with a
# later one's close; it ends with its paragraph (a gallery's or a formula's lines stay together).
# Groups: the tag's name, its attributes, the body of a closed one.
_DROP_TAG_RE = re.compile(
    r"<(" + "|".join(sorted(DROP_TAGS - {"ref", "references", "table"})) + r")(\s[^>]*)?"
    r"(?:/>|(?<!/)>(?:((?:(?!<\1[\s>/]|\n=).)*?)</\1\s*>|(?:(?!\n[ \t]*\n|\n=).)*))",
    re.S | re.I,
)
# Formulas and inline code (render.SOURCE_TAGS, INLINE_CODE_TAGS) become a mark, KEPT_OPEN + their
# number + KEPT_CLOSE, that nothing from parsing to _finish touches, and their source replaces it
# in the finished text: TeX is full of `{{`, `}}`, `|`, `''` and `-{` that the parser, the
# variant rules and _finish would take for markup. (XML 1.0 forbids U+0005 and U+0006.)
KEPT_OPEN, KEPT_CLOSE = "\x05", "\x06"
_KEPT_RE = re.compile(KEPT_OPEN + r"(\d+)" + KEPT_CLOSE)
_INLINE_RE = re.compile(r"(?:^|\s)inline(?:[\s=/]|$)", re.I)
# Rendering hints at a formula's ends, nothing a reader sees: `\displaystyle`, and the spacing that
# editors add (`x^2\,\!`, once a way to force an image).
_TEX_EDGES_RE = re.compile(r"^\s*(?:\\(?:display|text|script)style(?![a-zA-Z])\s*)+|"
                           r"(?:\s*(?:\\[,;:!> ]|\\q?quad(?![a-zA-Z])|~))+\s*$")
# `}}` in `\frac{a}{b^{2}}` would read as template markup to every check of the text: `} }` is the
# same TeX.
_DOUBLED_BRACKET_RE = re.compile(r"([{}\[\]])(?=\1)")
_EMPTY_PARENS_RE = re.compile(r"(?: \(|\()\s*[,;:]*\s*\)|（\s*[,;:，；：]*\s*）")  # left by a dropped template
_SPACES_RE = re.compile(r" [ \t]+|\t[ \t]*")  # runs of spaces and tabs -> one space
# "the Hokkien {{...}}, which": no space before a , or . that ends a clause (".NET" keeps it)
_SPACE_BEFORE_RE = re.compile(r"  *(?=[,.](?:\s|$))")
_LINE_BREAKS_RE = re.compile(r" \n[ \n]*|\n[ \n]+")  # blank lines and spaces around line breaks
# An unknown template's text (pipeline/wikitext/templates.py) is kept only inside a sentence: not on a
# line of its own (hatnotes, navigation), not right after a clause's punctuation (a footnote).
_FALLBACK_LINE_RE = re.compile(r"(?m)^[ \t]*(?:\x01[^\x02\n]*\x02[ \t,;.·]*)+$")
_FALLBACK_AFTER_PUNCT_RE = re.compile(r"(?<=[.,;:!?])\x01[^\x02\n]*\x02")
_FALLBACK_MARKS_RE = re.compile("[\x01\x02]")
# Kept tables: CELL starts each cell's text; the cells of a row are joined by " | " (a leading
# "+" is a caption, which mwparserfromhell reads as a cell).
_CELL_EDGE_RE = re.compile(r"(?m)^[ \t\x03]*\x03[ \t]*\+?[ \t]*|[ \t\x03]*\x03[ \t\x03]*$")
_CELL_RE = re.compile(r"[ \t]*\x03[ \t\x03]*")
# Cell attributes a template was to complete (`| colspan="5" {{CMain}}`) stay text: dropped.
_CELL_ATTR_RE = re.compile(
    r"\b(?:colspan|rowspan|style|class|align|valign|bgcolor|width|height|scope)[ \t]*=[ \t]*"
    r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s|\x03]+)"
)
_ALIASED_RE = re.compile(
    "[" + re.escape(chr(0)) + re.escape(chr(ALIASED_RANGE[0])) + "-" + re.escape(chr(ALIASED_RANGE[1])) + "]"
)
_REPLACEMENT = chr(REPLACEMENT_CHARACTER)
_MARKUP_RE = re.compile(r"[\[\]{}<>&'_~:|]|https?:|//")  # what a heading title without markup cannot hold


@dataclass(frozen=True)
class CleanOptions:
    """What the cleaner takes of a job's config, each choice resolved once (`of`), not per page:
    keep tables' cells, keep end matter, the variant each language's `-{...}-` markup renders
    in ({lang: variant}, from PreprocessConfig.variants), the variant each language's pages
    are converted to ({lang: variant}, PreprocessConfig.convert) and keep disambiguation pages.
    The defaults: the job's own."""

    keep_tables: bool = False
    keep_end_matter: bool = False
    variants: dict = field(default_factory=dict)
    convert: dict = field(default_factory=dict)
    keep_disambiguation: bool = False

    @classmethod
    def of(cls, cfg) -> "CleanOptions":
        """From a PreprocessConfig (its keep_tables, keep_end_matter, variants, convert and
        keep_disambiguation). An unknown variant, or a conversion whose package is missing, raises
        its ValueError here, once, when the job starts cleaning: not as a parse error on every page."""
        chosen = convert.check_convert(tuple(cfg.convert)) if cfg.convert else {}
        convert.require(chosen)
        return cls(cfg.keep_tables, cfg.keep_end_matter, check_variants(cfg.variants) if cfg.variants else {}, chosen,
                   cfg.keep_disambiguation)


_DEFAULTS = CleanOptions()
_SECTION_BREAK = "\n\x04\n"  # between the sections' texts while they are finished together (XML 1.0 forbids U+0004)


@dataclass
class CleanResult:
    outcome: str  # one of contract.schema.PAGE_OUTCOMES
    text: str | None  # cleaned NFC text when kept, else None
    replaced: int  # aliased characters replaced by U+FFFD (kept pages only)
    reason: str  # why a page was not kept ("" when kept), written to rejects/
    dropped: dict = field(default_factory=dict)  # {contract.schema.CONSTRUCT_DROPS reason: count} (kept pages only)
    headings: "Headings | None" = None  # what the end-matter rule saw on a kept page (its stats per language)
    variants: int = 0  # language-variant constructs `-{...}-` rendered on a kept page (pipeline/wikitext/variants.py)
    converted: int = 0  # characters the whole-page conversion changed (CleanOptions.convert; convert.py)


@dataclass
class Headings:
    """A page's headings as the end-matter rule met them, for the per-language stats that show
    what the rule did on a wiki nobody checked (pipeline/wikitext/endmatter.py)."""

    dropped: list = field(default_factory=list)  # rendered titles of the sections dropped as end matter
    last_kept: str = ""  # the title of the last top-level section kept ("" if the page has none)


def clean_page(page: RawPage, options: CleanOptions = _DEFAULTS) -> CleanResult:
    """The page's outcome; never raises on a bad page (it becomes parse_errors with a reason).
    `options` choose what is kept and how variants render."""
    if page.error is not None:
        return CleanResult("parse_errors", None, 0, f"parse error: {page.error}")
    if page.ns != 0:
        return CleanResult("non_article", None, 0, f"namespace {page.ns}")
    wikitext = page.markup == "wikitext"
    target = redirect_target(page.text) if wikitext else None
    if page.redirect or target is not None:
        return CleanResult("redirects", None, 0, f"redirect to {target if target else '(unknown)'}")
    if wikitext and not options.keep_disambiguation and (mark := disambiguation.marker(page.text, page.lang)):
        return CleanResult("disambiguation", None, 0, f"disambiguation page: {mark}")
    dropped, headings, stats = {}, Headings(), {}
    try:
        text = clean_wikitext(page.text, page.lang, options, dropped, headings, stats, page.site) if wikitext else page.text
    except Exception as err:  # mwparserfromhell's ParserError, RecursionError on absurd nesting
        return CleanResult("parse_errors", None, 0, f"parse error: {type(err).__name__}: {err}")
    # Only a character reference makes a surrogate here (XML refuses one), so the scan is skipped
    # for the many pages without one (the scan: 24 ms for 5.4M characters, ~6% of cleaning).
    if wikitext and "&#" in page.text and (where := lone_surrogate(text)):
        return CleanResult("parse_errors", None, 0, f"parse error: the cleaned text has a {where} (an entity such as &#xD800;)")
    text, replaced = escape_aliased(unicodedata.normalize("NFC", text))
    if not text.strip():
        return CleanResult("empty", None, 0, "empty after cleaning")
    return CleanResult("kept", text, replaced, "", dropped, headings if wikitext else None, stats.get("variants", 0),
                       stats.get("converted", 0))


def redirect_target(wikitext: str) -> str | None:
    """The target of a `#REDIRECT [[Target]]` page ("" if unnamed), else None."""
    match = _REDIRECT_RE.match(wikitext)
    return None if match is None else match.group(1).strip()


def escape_aliased(text: str) -> tuple[str, int]:
    """Replace U+0000 and U+E000..U+E0FF by U+FFFD (one C-level regex pass); return the count."""
    return _ALIASED_RE.subn(_REPLACEMENT, text)


def wikitext_to_text(wikitext: str, lang: str = "en", options: CleanOptions = _DEFAULTS) -> str:
    """Plain text of a page's wikitext by the rules in the module docstring (not NFC'd)."""
    return clean_wikitext(wikitext, lang, options, {})


def clean_wikitext(wikitext: str, lang: str, options: CleanOptions, dropped: dict, headings: "Headings | None" = None,
                   stats: dict | None = None, site: SiteInfo | None = None) -> str:
    """`wikitext_to_text`, adding what it drops to `dropped` ({reason: count}) and, when given,
    the end-matter headings it dropped and the last top-level heading it kept to `headings`, and
    the number of `-{...}-` constructs it rendered to `stats["variants"]` and the characters a
    conversion (`options.convert`) changed to `stats["converted"]`. `site`: the page's dump's
    <siteinfo> (RawPage.site), whose namespace names tell File and Category links."""
    headings = Headings() if headings is None else headings
    names = namespaces.of(site)
    kept = []  # the source of each formula and inline code, by its mark's number
    wikitext = _prestrip(wikitext, dropped, kept)
    to = options.convert.get(lang, "")  # "" when the page keeps its text as written
    if to and convert.NO_CONVERT_RE.search(wikitext):  # __NOCONTENTCONVERT__: every reader sees it as written
        to = ""
    rules = {} if to else None  # the page's manual conversion rules, filled by render_variants
    if "-{" in wikitext:  # the only cost a page without variant markup pays
        wikitext, n = render_variants(wikitext, lang, to or options.variants.get(lang, ""), rules)
        if stats is not None:
            stats["variants"] = n
    sections = []  # (level, title, text); level 0 is the lead
    end_matter = 0  # level of the end-matter section being skipped, 0 if none
    top = 7  # the page's top heading level (the smallest seen)
    first_dropped = len(headings.dropped)
    for level, title, body in split_sections(strip_quotes(wikitext)):
        if level:
            if end_matter and level > end_matter:  # a subsection of end matter
                _count(dropped, "end_matter")
                continue
            end_matter = 0
            title = _render_title(title, lang, dropped, names)  # formulas still marks, as in the text
            top = min(top, level)
            tail = bool(headings.dropped)
            if not options.keep_end_matter and is_end_matter(_restore(title, kept), lang, body, tail=tail):
                _count(dropped, "end_matter")
                headings.dropped.append(title)
                end_matter = level
                continue
        sections.append((level, title, _render_body(body, lang, options.keep_tables, dropped, names)))
    # One _finish for the whole page: its regex passes cost as much per call as per character.
    texts = _finish(_SECTION_BREAK.join(text for _, _, text in sections), options.keep_tables).split("\x04")
    shown = []  # (level, title) of the headings the text keeps: not those dropped as empty (a gallery's)
    text = _join([(level, title, text.strip()) for (level, title, _), text in zip(sections, texts)], dropped, shown)
    last_kept = next((title for level, title in reversed(shown) if level == top), "")
    titles = [*headings.dropped[first_dropped:], last_kept]
    if to:  # on the text a reader sees, formulas and code still marks, so never converted
        # The recorded headings too: the run's summary and `canine inspect` show them as the text has them.
        titles = convert.convert_titles(titles, text, lang, to, rules)
        text, changed = convert.convert_page(text, lang, to, rules)
        if stats is not None:
            stats["converted"] = changed
    headings.dropped[first_dropped:] = [_restore(title, kept) for title in titles[:-1]]
    headings.last_kept = _restore(titles[-1], kept)
    return _restore(text, kept)



def _prestrip(wikitext: str, dropped: dict, kept: list) -> str:
    """Comments, refs and dropped tags cut; formulas and inline code replaced by marks, their
    source appended to `kept`."""
    if "<!--" in wikitext:
        wikitext = _COMMENT_RE.sub("", wikitext)
    if "<" not in wikitext:
        return wikitext
    wikitext, n = _REF_RE.subn("", wikitext)
    if n:
        _count(dropped, "references", n)
    return _DROP_TAG_RE.sub(lambda m: _cut_tag(m, dropped, kept), wikitext)


def _cut_tag(m: re.Match, dropped: dict, kept: list) -> str:
    """A dropped tag: "" (its drop counted), or the mark of a formula or inline code that keeps
    its source. An unclosed one is dropped with the rest of its paragraph, whatever its name."""
    name, body = m.group(1).lower(), m.group(3)
    if body is not None and (name in SOURCE_TAGS or name in INLINE_CODE_TAGS and _INLINE_RE.search(m.group(2) or "")):
        source = " ".join((_TEX_EDGES_RE.sub("", body) if name in SOURCE_TAGS else body).split())
        if not source:  # nothing to keep: _finish tidies the space it leaves, as for a drop
            return ""
        kept.append(_DOUBLED_BRACKET_RE.sub(r"\1 ", source))
        return f"{KEPT_OPEN}{len(kept) - 1}{KEPT_CLOSE}"
    return _count(dropped, TAG_REASONS.get(name, ""))


def _restore(text: str, kept: list) -> str:
    """The source of each formula and inline code in place of its mark."""
    return _KEPT_RE.sub(lambda m: kept[int(m.group(1))], text) if kept else text


def _render_title(title: str, lang: str, dropped: dict, names: namespaces.Namespaces) -> str:
    if _MARKUP_RE.search(title) is None:  # most titles are plain words: no parse
        return " ".join(title.split())
    return _finish(render(title, lang, False, dropped, names), False).replace("\n", " ")


def _render_body(body: str, lang: str, keep_tables: bool, dropped: dict, names: namespaces.Namespaces) -> str:
    pieces = split_tables(body)
    if len(pieces) == 1 and not pieces[0][0]:
        return render(body, lang, keep_tables, dropped, names)
    out = []
    for is_table, wikitext in pieces:
        if is_table and not keep_tables:
            _count(dropped, "tables")
            out.append("\n")  # the text on either side stays apart
        else:
            out.append(render(wikitext, lang, keep_tables, dropped, names))
    return "".join(out)


def _finish(text: str, keep_tables: bool) -> str:
    """Leftover markup, kept fallback text outside sentences, table cells, spaces and lines."""
    text = _LEFTOVER_RE.sub("", text)
    if FALLBACK_OPEN in text:
        text = _FALLBACK_LINE_RE.sub("", text)
        text = _FALLBACK_MARKS_RE.sub("", _FALLBACK_AFTER_PUNCT_RE.sub("", text))
    if keep_tables and CELL in text:
        text = _CELL_RE.sub(" | ", _CELL_EDGE_RE.sub("", _CELL_ATTR_RE.sub("", text)))
    if ")" in text or "）" in text:
        text = _EMPTY_PARENS_RE.sub("", text)
    text = _SPACE_BEFORE_RE.sub("", _SPACES_RE.sub(" ", text))
    return _LINE_BREAKS_RE.sub("\n", text).strip()


def _join(sections: list, dropped: dict, shown: list | None = None) -> str:
    """The sections' text; a heading with no text under it before the next heading of its level
    or higher, or with no text in its title, is dropped and counted. `shown`, when given, gets
    (level, title) of each heading kept, in order."""
    lines, pending = [], []  # pending: (level, index in lines) of headings with no text under them yet
    heads = []  # (level, index in lines) of every heading written
    for level, title, text in sections:
        if level:
            while pending and pending[-1][0] >= level:
                lines[pending.pop()[1]] = ""
                _count(dropped, "empty_sections")
            if title:
                pending.append((level, len(lines)))
                heads.append((level, len(lines)))
                lines.append(title)
            else:
                _count(dropped, "empty_sections")
        if text:
            lines.append(text)
            pending.clear()
    for _, index in pending:
        lines[index] = ""
        _count(dropped, "empty_sections")
    if shown is not None:
        shown += [(level, lines[index]) for level, index in heads if lines[index]]
    return "\n".join(line for line in lines if line)


def _count(dropped: dict, reason: str, n: int = 1) -> str:
    if reason:
        dropped[reason] = dropped.get(reason, 0) + n
    return ""

