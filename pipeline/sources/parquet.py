"""Parquet corpora (`.parquet`): columns `id` and `text` (required, checked in the footer when
planning), `title` and `lang` (optional), read in Arrow batches of `_PARQUET_BATCH` rows so that
memory stays bounded for corpora of long texts. A page's `source` is `path#row` (1-based).
"""

from collections.abc import Iterator

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.sources import network
from pipeline.sources.common import InputError, RawPage, WorkItem
from pipeline.sources.rows import in_file_language, row_page

_PARQUET_BATCH = 1024  # rows per Arrow batch: bounds memory for corpora of long texts


def file_language(path: str, lang: str | None) -> str | None:
    """--lang, which a file without a `lang` column needs; reading the footer also checks the columns."""
    names = _columns(path)
    if "lang" not in names and not lang:
        raise InputError(f"{path}: no language: no `lang` column and no --lang was given")
    return lang


def _columns(path: str) -> list[str]:
    try:
        with fsspec.open(path, "rb") as f:
            names = pq.ParquetFile(f).schema_arrow.names
    except (pa.ArrowException, OSError) as err:
        if (error := network.unreachable(path, err, "reading its footer", "check the network and the URL")):
            raise error from None
        raise InputError(f"{path}: unreadable Parquet footer: {err}") from None
    missing = [c for c in ("id", "text") if c not in names]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} (has {', '.join(names)})")
    return [c for c in ("id", "title", "text", "lang") if c in names]


def read_pages(item: WorkItem) -> Iterator[RawPage]:
    return in_file_language(_pages(item), item.lang)


def _pages(item: WorkItem) -> Iterator[RawPage]:
    columns, row = _columns(item.path), 0
    try:
        with fsspec.open(item.path, "rb") as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=_PARQUET_BATCH, columns=columns):
                for record, error in _batch_records(batch):
                    row += 1
                    yield row_page(record, item.lang, f"{item.path}#{row}", error)
    except (pa.ArrowException, OSError) as err:
        if (error := network.unreachable(item.path, err, f"reading it after row {row}",
                                         "check the network, then run the same command again")):
            raise error from None
        raise InputError(f"{item.path}: unreadable Parquet data after row {row}: {err}") from None


def _batch_records(batch: pa.RecordBatch) -> list[tuple[dict, str | None]]:
    """The batch's rows as (record, error). Arrow does not check that a string column holds
    UTF-8 when writing it, so a bad cell can be read back: it spoils its row, not the job."""
    try:
        return [(record, None) for record in batch.to_pylist()]
    except UnicodeDecodeError:
        pass
    rows = []
    for i in range(batch.num_rows):
        record, error = {}, None
        for name, column in zip(batch.schema.names, batch.columns):
            try:
                record[name] = column[i].as_py()
            except UnicodeDecodeError as err:
                raw = column[i].as_buffer().to_pybytes()
                try:  # UTF-8 bytes of a lone surrogate: rows.row_page names it
                    record[name] = raw.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:
                    record[name] = raw.decode("utf-8", "backslashreplace")
                    error = error or f"{name} is not UTF-8 at byte {err.start}: {raw[err.start:err.start + 4]!r}"
        rows.append((record, error))
    return rows
