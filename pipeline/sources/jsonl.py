"""JSON Lines corpora (`.jsonl`, `.json`, optionally `.gz` / `.bz2`): one JSON object a line,
read line by line from the decompressed stream. A page's `source` is `path:line`. A file
without rows fails when planning; a line that is not JSON, not an object or not UTF-8 is a
row with `error` set (pipeline/sources/rows.py), not a failed job.
"""

import json
from collections.abc import Iterator
from contextlib import closing

from pipeline.sources.common import InputError, RawPage, WorkItem
from pipeline.sources.compressed import codec_of, decoded_chunks
from pipeline.sources.rows import UNKNOWN_LANG, in_file_language, row_page


def file_language(path: str, lang: str | None) -> str | None:
    """--lang is the rows' fallback; without it the first row must name its own `lang`. The
    first row is read either way: it also shows that the file decompresses and has rows."""
    with closing(read_pages(WorkItem(path, "jsonl", lang=lang))) as pages:
        first = next(pages, None)
    if first is None:
        raise InputError(f"{path}: no rows: it holds only blank lines")
    if not lang and first.lang == UNKNOWN_LANG:
        raise InputError(f"{first.source}: no --lang given and the first row can't say its language: {first.error}")
    return lang


def read_pages(item: WorkItem) -> Iterator[RawPage]:
    return in_file_language(_pages(item), item.lang)


def _pages(item: WorkItem) -> Iterator[RawPage]:
    line_no, pending = 0, b""
    for chunk in decoded_chunks(item.path, codec_of(item.path)):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            line_no += 1
            if line.strip():
                yield _json_page(line, item.lang, item.path, line_no)
    if pending.strip():
        yield _json_page(pending, item.lang, item.path, line_no + 1)


def _json_page(line: bytes, lang: str | None, path: str, line_no: int) -> RawPage:
    source, error = f"{path}:{line_no}", None
    try:
        row = json.loads(line)  # bytes: decoded with "surrogatepass", so UTF-8 surrogates get through
    except json.JSONDecodeError as err:
        error = f"invalid JSON at line {line_no}, column {err.colno}: {err.msg}"
    except UnicodeDecodeError as err:
        error = f"invalid UTF-8 at line {line_no}, byte {err.start + 1}: {line[err.start:err.start + 4]!r}"
    except RecursionError:  # json's decoder recurses per nesting level
        error = f"JSON nested too deeply at line {line_no}"
    if error is None and not isinstance(row, dict):
        error = f"expected a JSON object at line {line_no}, got {type(row).__name__}"
    return row_page({} if error else row, lang, source, error)
