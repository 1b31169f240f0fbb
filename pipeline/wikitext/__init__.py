"""Wikitext in, plain text and counted drops out: where the text quality of the shards lives.

One idea per module:
    clean.py       a page's outcome (kept, redirect, empty, ...) and its text: the rules, in order
    disambiguation.py  which articles are disambiguation pages (__DISAMBIG__, each wiki's templates)
    sections.py    the line structure found before parsing: quotes, headings, tables
    variants.py    language-variant markup -{...}- as MediaWiki's LanguageConverter shows it (zh, sr, kk, ...)
    convert.py     a whole page in one variant (zh-hans, sr-el, ...), as MediaWiki shows a reader who picked one
    render.py      mwparserfromhell's tokens -> text; File / Category / interlanguage links
    templates.py   templates that put words into the sentence, and how each renders
    endmatter.py   which sections end an article (references, bibliography, links) on any wiki

Nothing here reads files or runs Beam: pipeline/beam/itemcache.py calls `clean.clean_page` for each
page a reader (pipeline/sources) yields, and the job counts what it returns. The imports run one
way: this package reads pipeline/sources' pages and namespace names; sources imports nothing here.
"""
