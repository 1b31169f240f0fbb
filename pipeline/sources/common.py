"""What every reader hands on and every check shares: the work item, the raw page, a dump's site
info, the input error, and the checks of a page's id, its language code and a lone surrogate in
its text. XML pages and JSON Lines / Parquet rows are checked by the same functions, so one bad
value gets one message whatever the input kind; pipeline/wikitext/clean.py uses lone_surrogate on cleaned text too.
"""

import re
from dataclasses import dataclass, field

from contract.files import redact

SURROGATE_RE = re.compile("[\ud800-\udfff]")
# Language codes name files (rejects/<lang>.jsonl): letters, digits and inner - or _ only
# (en, zh-min-nan, be_x_old; 35 at most, BCP 47's longest tag), so that no row's `lang` can be a path.
LANG_RE = re.compile(r"(?=.{1,35}$)[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*")


class InputError(Exception):
    """Bad or missing input; the message names the file and the position (with any credentials
    in its URL masked: redact)."""

    # The name the package exports it under, not this module's: a worker's exception
    # reaches the launcher as traceback text, which pipeline/output/output.py matches by
    # "pipeline.sources.InputError: MSG" (_WORKER_INPUT_ERROR); pickle finds it there too.
    __module__ = "pipeline.sources"

    def __init__(self, message: str):
        super().__init__(redact(message))


# The <siteinfo> namespaces SiteInfo.namespaces keeps: those pipeline/sources/namespaces.py reads
# (Media, File, Category), so that its table is keyed by these names only.
NAMESPACE_KEYS = frozenset({-2, 6, 14})


@dataclass(frozen=True)
class SiteInfo:
    """What a MediaWiki dump's <siteinfo> says that the reader and the cleaner use: the local names
    of the namespaces in NAMESPACE_KEYS, and of every namespace for title prefixes. Read once per
    dump when planning (pipeline/sources/mediawiki.py) and carried by each of its work items; the
    pages of an item share their item's object."""

    namespaces: tuple = ()  # ((key, name), ...) in the dump's order, e.g. ((-2, "Medium"), (6, "Datei"), (14, "Kategorie"))
    # ((key, name), ...) of every namespace but the main one, in the dump's order: the namespace of
    # a page without <ns> (export schema < 0.6) is the one its title's prefix names (mediawiki.py)
    prefixes: tuple = ()


@dataclass(frozen=True)
class SeekPoint:
    """Where a work item of a single-stream .bz2 / .gz starts and stops decoding
    (pipeline/sources/seekable.py): a bzip2 block, or a deflate block with the 32 KiB of text
    before it that its back-references may copy from. Found when planning."""

    bit: int  # compressed bit offset of the item's first bz2 block / deflate block (0: the file's start)
    end_bit: int | None = None  # the next item's `bit` (None: to the end of the file)
    out: int = 0  # gzip: decompressed byte offset at `bit` (bz2: unknown without decompressing what is before)
    end_out: int | None = None  # gzip: the next item's `out`
    window: bytes = field(default=b"", repr=False)  # gzip: the 32 KiB decompressed before `bit`


@dataclass(frozen=True)
class WorkItem:
    path: str  # fsspec URL of one input file
    kind: str  # "xml" | "jsonl" | "parquet"
    start: int = 0  # multistream: byte offset of the first bz2 stream of the range; split: seek.bit // 8
    end: int | None = None  # exclusive byte offset (None = to end of file)
    lang: str | None = None  # known at planning time: the dump's xml:lang, else --lang
    site: SiteInfo | None = None  # the dump's <siteinfo>, read when planning (a multistream range past byte 0 lacks it)
    # A single-stream .bz2 / .gz split at bz2 blocks / deflate blocks (seekable.py); None: whole
    # streams (a file, or a multistream range)
    seek: SeekPoint | None = None
    # A trial slice (--max-pages): the item stops after this many pages (every <page>, a JSONL /
    # Parquet row each); set on the last item of a file's slice only (plan.py). None: all of them.
    max_pages: int | None = None
    # Where the worker reading the item reports how far it got, for the launcher's progress line
    # (plan.py `read_pages`, pipeline/progress.py): a folder in the run's staging. Not part of the
    # item's identity (plan.work_item_key): None, or any folder, reads the same pages.
    progress: str | None = None


@dataclass
class RawPage:
    page_id: int  # -1 when the page's id is missing or not an integer (then `error` says so)
    title: str
    ns: int  # MediaWiki namespace; 0 = article
    redirect: bool  # the dump's <redirect/> element (the cleaner also checks #REDIRECT text)
    text: str  # wikitext (XML) or plain text (JSON Lines / Parquet)
    lang: str
    source: str  # "path:line", "path@start:line" or "path#row", for messages and rejects
    error: str | None = None  # malformed page: counted as parse_errors, written to rejects/
    markup: str = "wikitext"  # "wikitext" (dumps) or "plain" (already-cleaned corpora)
    site: SiteInfo | None = None  # the dump's <siteinfo> (shared by its pages); None: none in the input


def as_id(value, field: str) -> tuple[int, str | None]:
    """(integer, None) for a non-negative integer id, else (-1, reason)."""
    if value is None:
        return -1, f"missing {field}"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value, None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value), None
    return -1, f"non-integer {field} {str(value)[:40]!r}"


def lone_surrogate(text: str) -> str | None:
    """'lone surrogate U+D800 at character 2' where `text` has one (from a `\\ud800` JSON escape or
    a `&#xD800;` entity in wikitext), else None. UTF-8 cannot encode it: Parquet and the
    rejects file would fail on it."""
    match = None if text.isascii() else SURROGATE_RE.search(text)  # isascii: O(1), a flag of the str
    return None if match is None else f"lone surrogate U+{ord(match.group()):04X} at character {match.start()}"
