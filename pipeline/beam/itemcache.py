"""Per-work-item results, so a killed run resumes without parsing finished items again.

Parsing wikitext is the job's dominant cost (benchmarks/preprocess.py), and everything after it
is deterministic, so the only state worth keeping across runs is each work item's cleaned
pages. A work item (a file, a range of multistream bz2 streams, or a byte range of a single-stream
.bz2, .gz or .xml split at block or seek points, pipeline/sources/seekable.py) is written to
`STAGING/items/<hash of its key>.parquet` whole, only when the whole item is done; a later run of the same config finds it and replays it instead of parsing (docs/schedule.md,
"Scheduled preprocessing"). The staging folder is keyed by the config's sha, so a changed
config or input never reuses stale items.
"""

from typing import Iterator, NamedTuple

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from contract import schema
from contract.files import atomic_write, redact
from pipeline import sources
from pipeline.wikitext import clean
from pipeline.preprocess_config import PreprocessConfig
from pipeline.hashing import stable_int

_BATCH = 512  # rows per Parquet row group while streaming an item to its cache file
# The footer's count of the item's kept pages: the launcher's ETA sizes the vocabulary's sample
# against the kept pages, not all pages read (redirects and the rest are about half of a dump's)
KEPT_KEY = "canine.kept_pages"


class Cleaned(NamedTuple):
    """One page after cleaning: its outcome, and its text if kept. What the cache stores."""

    lang: str
    page_id: int
    title: str
    source: str
    outcome: str  # one of schema.PAGE_OUTCOMES
    reason: str
    text: str | None
    replaced: int
    dropped: list  # counts in the order of schema.CONSTRUCT_DROPS (kept pages; zeros otherwise)
    variants: int  # language-variant constructs rendered (kept pages)
    converted: int  # characters the whole-page conversion changed (kept pages)
    end_matter: list  # titles of the sections dropped as end matter (kept pages)
    last_heading: str  # the last top-level heading kept ("" if none, or not a wikitext page)


class Reject(NamedTuple):  # one line of _rejects/<lang>.jsonl (pipeline/beam/job.py WriteRejects)
    lang: str
    page_id: int
    title: str
    source: str
    outcome: str
    reason: str


SCHEMA = pa.schema(
    [("lang", pa.string()), ("page_id", pa.int64()), ("title", pa.string()), ("source", pa.string()),
     ("outcome", pa.string()), ("reason", pa.string()), ("text", pa.string()), ("replaced", pa.int32()),
     ("dropped", pa.list_(pa.int32())), ("variants", pa.int32()), ("converted", pa.int32()),
     ("end_matter", pa.list_(pa.string())),
     ("last_heading", pa.string())]
)
# Part of every cache file's name: a cache written by a version that stored other columns (or
# cleaned differently) under the same config is never replayed (a run upgraded between a kill
# and its resume parses its items again).
_CACHE_VERSION = 5  # 3: <math> kept as TeX source; 4: the converted column; 5: Han end-matter titles folded


def clean_raw(page: sources.RawPage, options: clean.CleanOptions = clean.CleanOptions()) -> Cleaned:
    r = clean.clean_page(page, options)
    # The source (path:line) goes into the cache and the rejects file: no credentials of its URL.
    headings = r.headings
    return Cleaned(page.lang, page.page_id, page.title, redact(page.source), r.outcome, r.reason, r.text,
                   r.replaced, [r.dropped.get(reason, 0) for reason in schema.CONSTRUCT_DROPS], r.variants,
                   r.converted, list(headings.dropped) if headings else [], headings.last_kept if headings else "")


def cache_url(staging: str, item: sources.WorkItem) -> str:
    return f"{staging}/items/{stable_int(_CACHE_VERSION, sources.work_item_key(item)):016x}.parquet"


def _batch(rows: list[Cleaned]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(col, type=f.type) for col, f in zip(zip(*rows), SCHEMA)], schema=SCHEMA)


def replay(url: str) -> Iterator[Cleaned]:
    with fsspec.open(url, "rb") as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=_BATCH):
            for row in zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns))):
                yield Cleaned(*row)


def parse_and_store(item: sources.WorkItem, url: str, cfg: PreprocessConfig = PreprocessConfig()) -> Iterator[Cleaned]:
    """Parse and clean the item, then store it whole (atomic_write): a killed or failed
    item leaves no cache file, nor a temp one. The compressed rows are held in memory until
    then (a few MB for 10 streams of ~100 pages); on an object store that makes one PUT
    instead of a streamed upload plus a server-side move."""
    options = clean.CleanOptions.of(cfg)
    sink = pa.BufferOutputStream()
    rows, kept = [], 0
    with pq.ParquetWriter(sink, SCHEMA, compression="zstd") as writer:
        for page in sources.read_pages(item):
            rows.append(clean_raw(page, options))
            kept += rows[-1].outcome == "kept"
            yield rows[-1]
            if len(rows) >= _BATCH:
                writer.write_batch(_batch(rows))
                rows = []
        if rows:
            writer.write_batch(_batch(rows))
        writer.add_key_value_metadata({KEPT_KEY: str(kept)})  # the launcher's progress reads it from the footer
    atomic_write(url, sink.getvalue().to_pybytes())

def kept_pages(url: str) -> Iterator[tuple]:
    """(lang, page id, text) of the cached item's kept pages, in the order it read them: what the
    steps after ReadAndClean read instead of pages passed through Beam. A row group at a time."""
    with fsspec.open(url, "rb") as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=_BATCH, columns=["lang", "page_id", "outcome", "text"]):
            langs, ids, outcomes, texts = (batch.column(i).to_pylist() for i in range(4))
            for lang, page_id, outcome, text in zip(langs, ids, outcomes, texts):
                if outcome == "kept":
                    yield lang, page_id, text


def kept_sizes(url: str) -> Iterator[tuple]:
    """(lang, page id, characters) of the cached item's kept pages: kept_pages without making a
    Python string of each text (Arrow counts the codepoints, as len() would)."""
    import pyarrow.compute as pc

    with fsspec.open(url, "rb") as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=_BATCH, columns=["lang", "page_id", "outcome", "text"]):
            kept = pc.equal(batch.column(2), "kept")
            langs, ids = pc.filter(batch.column(0), kept).to_pylist(), pc.filter(batch.column(1), kept).to_pylist()
            chars = pc.utf8_length(pc.filter(batch.column(3), kept)).to_pylist()
            yield from zip(langs, ids, chars)


def rejects(urls, lang: str) -> Iterator[Reject]:
    """The reject lines of one language in these items' caches (parse errors and empty pages)."""
    columns = ["lang", "page_id", "title", "source", "outcome", "reason"]
    for url in urls:
        with fsspec.open(url, "rb") as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=_BATCH, columns=columns):
                for row in zip(*(batch.column(i).to_pylist() for i in range(len(columns)))):
                    if row[0] == lang and row[4] in ("parse_errors", "empty"):
                        yield Reject(*row)
