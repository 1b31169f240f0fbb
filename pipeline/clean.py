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
- A lone surrogate left by an entity (`&#xD800;` in the wikitext decodes to U+D800) makes the
  page parse_errors, like one in a row's text (pipeline/sources.py): UTF-8 cannot encode it.

Speed: parsing is nearly all the cost. Refs and comments are cut by regex before parsing,
non-articles and redirects are never parsed, and the text is read off mwparserfromhell's
token list rather than its node tree (pipeline/render.py, where the rules' code lives). On
40 MB made from the sample (10,720 pages, one process): the articles' parse, walk and regex
passes took 6.8 s through the node tree; `clean_page` over all pages now takes 2.6 s, against
8.7-9.1 s for `parse(text).strip_code()` alone.
"""

import re
import unicodedata
from dataclasses import dataclass

from pipeline.contract import ALIASED_RANGE, REPLACEMENT_CHARACTER
from pipeline.render import render
from pipeline.sources import RawPage, lone_surrogate

# `#REDIRECT [[Target]]` and the localized keywords of the sample's and other large wikis.
_REDIRECT_RE = re.compile(
    r"\s*#\s*(?:REDIRECT|WEITERLEITUNG|REDIRECTION|REDIRECCIÓN|RINVIA|REDIRECIONAMENTO|DOORVERWIJZING|"
    r"PATRZ|PRZEKIERUJ|ĐỔI|YÖNLENDİRME|ALIH|ПЕРЕНАПРАВЛЕНИЕ|ПЕРЕНАПР|ПЕРЕНАПРАВЛЕННЯ|重定向|転送|"
    r"リダイレクト|넘겨주기|تحويل|تغییر_مسیر|הפניה|अनुप्रेषित)\s*:?\s*\[\[([^\]|#]*)",
    re.IGNORECASE,
)
# Markup that survives parsing when the wikitext is malformed (unclosed `{{`, stray `'''`),
# and behaviour switches such as __NOTOC__ (localized ones are upper case in every script).
# Every pattern below starts each branch with a literal, so `re` skips ahead to those characters
# instead of trying every branch at every position, and none matches what it would replace by
# itself (a lone space or line break): 1.2 s -> 0.57 s for the five passes on 40 MB.
_LEFTOVER_RE = re.compile(
    r"\{\{|\}\}|\[\[|\]\]|\{\||\|\}|''+|__[^\W_a-z]+(?:_[^\W_a-z]+)*__|"
    r"<(?i:/?(?:ref|references|nowiki|br|span|div|small|big|sup|sub|center|font|gallery|math|blockquote)\b[^<>\n]*>)"
)
# Dropped constructs that are cheap to find by regex are cut before parsing: <ref>s (with their
# cite templates) and comments are a large share of real wikitext, and tokenizing them is most
# of mwparserfromhell's time (parse time on the sample halves). A ref's body may not contain
# another <ref, so an unclosed <ref> never swallows text up to a later </ref>.
_PRESTRIP_RE = re.compile(
    r"<!--.*?-->|<ref(?:\s[^>]*)?/>|<ref(?:\s[^>]*)?(?<!/)>(?:(?!<ref[\s>/]).)*?</ref\s*>|<references(?:\s[^>]*)?/>",
    re.S | re.I,
)
_EMPTY_PARENS_RE = re.compile(r"(?: \(|\()\s*[,;:]*\s*\)|（\s*[,;:，；：]*\s*）")  # left by a dropped template
_SPACES_RE = re.compile(r" [ \t]+|\t[ \t]*")  # runs of spaces and tabs -> one space
# "the Hokkien {{...}}, which": no space before a , or . that ends a clause (".NET" keeps it)
_SPACE_BEFORE_RE = re.compile(r"  *(?=[,.](?:\s|$))")
_LINE_BREAKS_RE = re.compile(r" \n[ \n]*|\n[ \n]+")  # blank lines and spaces around line breaks
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
    # Only a character reference makes a surrogate here (XML refuses one), so the scan is skipped
    # for the many pages without one (the scan: 24 ms for 5.4M characters, ~6% of cleaning).
    if wikitext and "&#" in page.text and (where := lone_surrogate(text)):
        return CleanResult("parse_errors", None, 0, f"parse error: the cleaned text has a {where} (an entity such as &#xD800;)")
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
    text = render(_PRESTRIP_RE.sub("", wikitext))
    text = _EMPTY_PARENS_RE.sub("", _LEFTOVER_RE.sub("", text))
    text = _SPACE_BEFORE_RE.sub("", _SPACES_RE.sub(" ", text))
    return _LINE_BREAKS_RE.sub("\n", text).strip()
