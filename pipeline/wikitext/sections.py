"""A page's line structure, found before parsing: bold/italic runs, headings, tables (pipeline/wikitext/clean.py, the rule on broken markup).

mwparserfromhell parses a page as one tree, so a construct it cannot close takes everything up
to a false end with it: a `'''` in a table cell that it pairs with one paragraphs later, or a
table whose broken cell hides its `|}`, swallowed 18 of Alaska's 50 headings and the text under
them (the real pages of tests/data/wiki). MediaWiki itself never lets that happen, because
three of its structures are lines: bold and italic close at the end of their line
(Parser::doQuotes), a heading is a line of its own (Parser::doHeadings), a table is the lines
from `{|` to `|}` (Parser::doTableStuff). They are found here with regexes, and the parser is
only handed what lies between them: a broken construct then ends at its line, its table or its
section, as it does on the wiki.

- Quotes: apostrophe runs are markup, removed line by line with MediaWiki's own counting (four
  make one apostrophe and bold, more than five keep all but five, and with an odd count of both
  bold and italic one bold becomes an apostrophe and italic: "l'''amour''" -> "l'amour").
- Headings: `=..=` lines, level = the shorter run of `=` (at most 6); the rest is the title.
- Tables: a `{|` line up to its matching `|}` line, nested tables counted. A table that is never
  closed ends where its section ends. A table inside a template's braces is left to the
  template (cutting the template in two would turn both halves into text).
"""

import bisect
import re
from typing import NamedTuple

_QUOTE_LINE_RE = re.compile(r"(?m)^.*''.*$")
_QUOTE_RUN_RE = re.compile(r"('{2,})")
_HEADING_RE = re.compile(r"(?m)^(=+)(.+?)(=+)[ \t]*$")
_TABLE_LINE_RE = re.compile(r"(?m)^[ \t:]*(\{\||\|\})")
_BRACES_RE = re.compile(r"\{\{|\}\}")


class Section(NamedTuple):
    level: int  # 0 for the lead (the text before the first heading), else 1..6
    title: str  # the heading's wikitext between its `=` runs ("" for the lead)
    body: str  # wikitext up to the next heading


def strip_quotes(text: str) -> str:
    """Bold and italic markup removed, as MediaWiki's doQuotes decides it, line by line."""
    return _QUOTE_LINE_RE.sub(_line_without_quotes, text) if "''" in text else text


def _line_without_quotes(match: re.Match) -> str:
    parts = _QUOTE_RUN_RE.split(match.group())  # text, run, text, run, ..., text
    bold = italic = 0
    for i in range(1, len(parts), 2):
        n = len(parts[i])
        if n == 4:  # one apostrophe of text, then bold
            parts[i - 1] += "'"
            n = 3
        elif n > 5:  # all but the last five are text
            parts[i - 1] += "'" * (n - 5)
            n = 5
        parts[i] = n
        bold += n in (3, 5)
        italic += n in (2, 5)
    if bold % 2 and italic % 2:
        # One bold was an apostrophe then italic: after a one-letter word ("l'''"), else after a
        # longer word ("Achilles'''"), else after a space, the first such (Parser::doQuotes).
        single = multi = space = None
        for i in range(1, len(parts), 2):
            if parts[i] == 3:
                before = parts[i - 1]
                if before[-1:] == " ":
                    space = i if space is None else space
                elif before[-2:-1] == " ":
                    single = i
                    break
                elif multi is None:
                    multi = i
        chosen = single if single is not None else multi if multi is not None else space
        if chosen is not None:
            parts[chosen - 1] += "'"
    return "".join(parts[0::2])


def split_sections(text: str) -> list[Section]:
    """The lead and one Section per heading line, in order; bodies hold no heading line."""
    sections, level, title, start = [], 0, "", 0
    for m in _HEADING_RE.finditer(text):
        sections.append(Section(level, title, text[start : m.start()]))
        left, right = len(m.group(1)), len(m.group(3))
        level = min(left, right, 6)
        title = "=" * (left - level) + m.group(2) + "=" * (right - level)
        start = m.end()
    sections.append(Section(level, title, text[start:]))
    return sections


def split_tables(body: str) -> list[tuple[bool, str]]:
    """(is_table, wikitext) pieces of a section body, in order, joined they give the body."""
    if "{|" not in body:
        return [(False, body)]
    inside = _template_spans(body) if "{{" in body else []
    starts = [s for s, _ in inside]
    pieces, depth, start, last = [], 0, 0, 0
    for m in _TABLE_LINE_RE.finditer(body):
        k = bisect.bisect_right(starts, m.start()) - 1
        if k >= 0 and m.start() < inside[k][1]:
            continue  # a table in a template's parameter: the template's business
        if m.group(1) == "{|":
            if depth == 0:
                start = m.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                pieces += [(False, body[last:start]), (True, body[start : m.end()])]
                last = m.end()
    if depth:  # never closed: the table ends with its section
        pieces += [(False, body[last:start]), (True, body[start:])]
        last = len(body)
    pieces.append((False, body[last:]))
    return [p for p in pieces if p[1]]


def _template_spans(text: str) -> list[tuple[int, int]]:
    """Outermost matched `{{ ... }}` spans, sorted; an unmatched `{{` is text, as on the wiki."""
    stack, spans = [], []
    for m in _BRACES_RE.finditer(text):
        if m.group() == "{{":
            stack.append(m.start())
        elif stack:
            spans.append((stack.pop(), m.end()))
    spans.sort()
    outer, end = [], -1
    for s, e in spans:
        if s >= end:
            outer.append((s, e))
            end = e
    return outer
