"""Pipeline inputs: plan work items from fsspec globs, then stream pages out of each one.

One idea per module:
    plan.py         globs -> input files -> work items, sorted; the cheap checks; read_pages by kind
    mediawiki.py    MediaWiki XML exports (schemas 0.3-0.11): the dump's language and <siteinfo> names,
                    the expat page parser, a page's namespace from its title where it has no <ns>
    encoding.py     an export's character encoding, and the bytes of a UTF-8 one that are not UTF-8
    multistream.py  a bz2 multistream dump split by its index into ranges of whole streams
    dumps.py        Wikimedia's dump naming: a dump's and its index's names, `--dump LANG:DATE`, `latest`, mirrors
    seekable.py     a single-stream .bz2 / .gz dump split at bz2 blocks / gzip seek points
    jsonl.py        JSON Lines corpora, line by line
    parquet.py      Parquet corpora, in Arrow batches
    rows.py         a JSON Lines / Parquet row -> RawPage (markup "plain"), bad rows marked
    compressed.py   a file's bytes, read in blocks and bz2 / gzip-decompressed in bounded pieces
    network.py      a network failure told from a missing file and named (host, what failed)
    common.py       WorkItem, RawPage, SiteInfo, InputError and the id / language / surrogate checks
    namespaces.py   which link prefixes name File, Media and Category: the dump's <siteinfo> names and a hand list

Inputs:
- MediaWiki XML exports: `.xml`, `.xml.bz2`, `.xml.gz` (and Wikimedia's split names such as
  `...-multistream1.xml-p1p41242.bz2`). A multistream dump with its index beside it (named
  as dumps.py says: `X-multistream.xml.bz2`, `X-multistream-index.txt.bz2`) is split into one
  work item per range of bz2 streams, so one big dump is parsed in parallel. Any other `.bz2` or `.gz` dump in UTF-8 is split at
  bzip2 blocks / gzip seek points about 64 MB of XML apart (seekable.py; a gzip file is
  decompressed once when planning, to find them); a plain `.xml` is one work item.
- JSON Lines (`.jsonl`, `.json`, optionally `.gz` / `.bz2`) and Parquet (`.parquet`) with
  columns `id`, `text`, optional `title` and `lang`: already-cleaned corpora (RawPage.markup
  "plain", so the cleaner does not treat their text as wikitext).

Everything streams: bytes are read in blocks, decompressed in bounded pieces, and XML is parsed
by expat callbacks that keep only the current page, so memory does not grow with the input
(tests/pipeline/sources/test_sources_compressed.py measures it: about 2 MB peak for 3 MB and for
11 MB of XML).

Positions in messages: compressed input errors name the byte offset in the file; XML errors
name the line and column of the decompressed text. A page's `source` is `path:line` (line of
its `<page>` tag in the decompressed file, `bzcat path | sed -n LINEp`), `path@start:line` for
a multistream range (line counted from the data decompressed at byte `start`) or an item of a
split .bz2 / .gz from byte `start` (line counted from the item's first `<page>`, line 1),
`path:line` for JSON Lines and `path#row` (1-based) for Parquet.

Bad input, decided as datatrove decides between a failed task and a dropped document:
- Whole-input errors raise InputError naming the file, and `canine preprocess` exits 2. What is
  cheap to see is seen by `plan_work_items`, before anything is written: a 0-byte file, a
  missing bz2 / gzip header, a bz2 file that does not end with bzip2's end-of-stream marker
  (a cut download; pages before the cut are not used: a shorter corpus that looks complete is
  worse than a failed run), a plain XML file that does not end with </mediawiki>, a JSON Lines
  file without rows, a Parquet file without its `id` / `text` columns, a file name that is not
  UTF-8, an XML encoding the reader cannot read (named). The rest is found while reading, and
  fails the job naming the byte or line: corrupt or cut compressed data, and XML that is not
  well-formed (an unclosed last <page> included, named by its line and title; every container,
  .xml, .bz2, .gz and multistream ranges, names the file, line, column, byte and expat's reason).
  XML with a lone surrogate (`&#xD800;`) is one of those: expat refuses it, as XML 1.0 §4.1
  "Legal Character" requires, and MediaWiki never writes it.
- A host that cannot be reached (connection refused, name not resolved, time-out, an HTTP error
  status) is named as such with the host, never as a missing file (network.py); an HTTP server
  that does not answer range requests is named too.
- Row-level rejects are pages with `error` set: the cleaner gives them outcome parse_errors and
  they go to rejects/ with their title. A JSON Lines line that is not JSON or not an object, a
  row with a bad id, text, title or language, and a lone surrogate in a row's title or text (a
  `\\ud800` JSON escape, or its UTF-8 bytes in a Parquet string column), which UTF-8, and so the
  cache Parquet and the rejects file, cannot encode: the reason names it and its character. A
  page of a UTF-8 export that holds bytes that are not UTF-8: the reason names the bytes, their
  offset and line (encoding.py); the rest of the file is read.
  A row that cannot say its language is counted under the language of the file's last good row.
"""

from pipeline.sources.common import InputError, RawPage, WorkItem, lone_surrogate
from pipeline.sources.plan import plan_work_items, read_pages, work_item_key

__all__ = ["InputError", "RawPage", "WorkItem", "lone_surrogate", "plan_work_items", "read_pages", "work_item_key"]
