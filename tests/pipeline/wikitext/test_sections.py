"""pipeline/wikitext/sections.py: bold/italic, headings and tables found line by line, as MediaWiki does."""

import pytest

from pipeline.wikitext.sections import Section, split_sections, split_tables, strip_quotes


@pytest.mark.parametrize(
    "line, text",
    [
        ("''it'' and '''bold''' and '''''both'''''", "it and bold and both"),
        ("''''four''''", "'four'"),  # four: an apostrophe, then bold
        ("'''''''seven'''''''", "''seven''"),  # more than five: all but the last five are text
        ("l'''amour'' est", "l'amour est"),  # odd bold and odd italic: the bold after a one-letter word
        ("''[[Achilles]]''' heel", "[[Achilles]]' heel"),  # ... else after a longer word
        ("'''unclosed bold", "unclosed bold"),  # ends with its line
        ("a'b 'c'", "a'b 'c'"),  # single apostrophes are text
    ],
)
def test_strip_quotes_follows_mediawiki(line, text):
    assert strip_quotes(line) == text


def test_strip_quotes_closes_at_each_line():
    assert strip_quotes("'''open\nnext ''line''\n''x") == "open\nnext line\nx"


def test_split_sections_levels_and_titles():
    text = "lead\n== A ==\na\n=== B ===  \nb\n= C =\nc\n==== D ==\nd\n== E = F ==\n"
    assert split_sections(text) == [
        Section(0, "", "lead\n"),
        Section(2, " A ", "\na\n"),
        Section(3, " B ", "\nb\n"),
        Section(1, " C ", "\nc\n"),
        Section(2, "== D ", "\nd\n"),  # unbalanced: the shorter run is the level, the rest is title
        Section(2, " E = F ", "\n"),
    ]
    assert split_sections("no headings ==here== x") == [Section(0, "", "no headings ==here== x")]


def test_split_tables_pieces_join_to_the_body():
    body = "a\n{| x\n| 1\n{|\n| nested\n|}\n| 2\n|} tail\nb\n:{|\n| indented\n|}\nc"
    pieces = split_tables(body)
    assert "".join(text for _, text in pieces) == body
    assert pieces == [
        (False, "a\n"),
        (True, "{| x\n| 1\n{|\n| nested\n|}\n| 2\n|}"),
        (False, " tail\nb\n"),
        (True, ":{|\n| indented\n|}"),
        (False, "\nc"),
    ]


def test_an_unclosed_table_ends_with_its_section():
    assert split_tables("a\n{|\n| cell '''bold\n| more") == [(False, "a\n"), (True, "{|\n| cell '''bold\n| more")]


def test_a_table_inside_a_template_is_left_to_the_template():
    body = "{{Quote box|quote=\n{|\n| x\n|}\n}}\n{|\n| y\n|}"
    assert split_tables(body) == [(False, "{{Quote box|quote=\n{|\n| x\n|}\n}}\n"), (True, "{|\n| y\n|}")]
    # an unclosed {{ is text, as on the wiki: the table after it is still a table
    assert split_tables("{{broken\n{|\n| y\n|}") == [(False, "{{broken\n"), (True, "{|\n| y\n|}")]


def test_no_table_marks_mid_line():
    assert split_tables("x {| not a table |}") == [(False, "x {| not a table |}")]
