"""Rows of already-cleaned corpora (a JSON Lines line, a Parquet row) as RawPages: columns
`id`, `text`, optional `title` and `lang`, markup "plain" so that the cleaner does not treat
their text as wikitext. A bad row is not an input error: it becomes a page with `error` set
(parse_errors, kept in rejects/ with its title), the reason naming the field and its value.
"""

from collections.abc import Iterator

from pipeline.sources.common import LANG_RE, SURROGATE_RE, RawPage, as_id, lone_surrogate

UNKNOWN_LANG = "und"  # BCP 47 "undetermined", only on malformed rows that name no language


def row_page(row: dict, lang: str | None, source: str, error: str | None = None) -> RawPage:
    """A RawPage from one JSON Lines / Parquet row; the row's own `lang` wins over --lang."""
    page_id, id_error = as_id(row.get("id"), "id")
    text, title = row.get("text"), row.get("title")
    lang = row.get("lang") or lang
    error = error or id_error
    if error is None and not isinstance(text, str):
        error = "missing text" if text is None else f"text is {type(text).__name__}, not a string"
    if error is None and not isinstance(title, (str, type(None))):
        error = f"title is {type(title).__name__}, not a string"
    if error is None and not isinstance(lang, str):
        error = "no language: the row has no `lang` and no --lang was given"
    if isinstance(lang, str) and lang and not LANG_RE.fullmatch(lang):  # checked on rejects too: it names their file
        error, lang = error or f"lang {lang[:40]!r} is not a language code", None
    for key, value in (("title", title), ("text", text)):
        if error is None and isinstance(value, str) and (where := lone_surrogate(value)):
            error = f"{key} has a {where}"
    title = title if isinstance(title, str) else ""
    return RawPage(
        page_id, SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", title), 0, False,
        text if isinstance(text, str) else "",
        lang if isinstance(lang, str) and lang else UNKNOWN_LANG, source, error, markup="plain",
    )


def in_file_language(pages: Iterator[RawPage], lang: str | None) -> Iterator[RawPage]:
    """Rows that can't say their language (not JSON, no usable `lang` and no --lang) are counted
    under the language of the file's last good row, not under "und": the manifest counts pages
    per language, and a one-language file should not grow a language of its own bad rows."""
    for page in pages:
        if page.error is None:
            lang = page.lang
        elif page.lang == UNKNOWN_LANG and lang:
            page.lang = lang
        yield page
