"""Shuffles through files: the bulk of the job's data crosses a GroupByKey as row groups of
Parquet files in staging, and only (key, file, row group) references travel through Beam.

Beam's local runners keep every PCollection in memory (the DirectRunner in its launcher, Dask
in its workers), so a job that shuffles its pages and examples through Beam needs memory in
proportion to the dump: about 38 MB per MB of XML at b86d9bd (docs/scale.md). datatrove scales the
other way (src/datatrove/pipeline/dedup/minhash.py): a stage writes its records to files per
destination bucket and the next reads one bucket at a time. Here a producer writes ONE file
per source (a work item, a pack group) with one row group per destination key, sorted by key,
and emits a `Ref` per row group; the consumer of a key reads just its row groups (a footer
and a byte range each, on local disk or an object store alike). Memory: one source's rows at
the producer, one destination's at the consumer, whatever the input's size; the runner holds
a few references per (source, destination).

Files are written whole (contract.files.atomic_write) under a name that depends only on the
source, so a retried bundle rewrites the same bytes and a killed one leaves nothing half-written.

docs/scale.md draws the steps and what each holds in memory.
"""

from typing import Iterable, Iterator, NamedTuple

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contract.files import atomic_write
from pipeline.rows.examples import PackedExample

# zstd level 1: these files are read once, a few seconds later; they only have to be small
# enough not to double the staging disk (benchmarks/scale.py measures the peak). No dictionary
# pages: codepoints and texts hardly repeat within a page, and building the dictionary of a
# 15M-codepoint column cost ~50 MB more memory (measured).
_WRITE = dict(compression="zstd", compression_level=1, write_statistics=False, use_dictionary=False)
# Rows per row group of a whole file (write_whole), and at most per row group of a key's rows
# (write_buckets): the writer encodes a row group at a time, so this bounds its buffers (1024
# examples of 2048 codepoints: ~10 MB of columns).
WHOLE_ROWS = BUCKET_ROWS = 1024


class Ref(NamedTuple):  # one destination's rows in one source's file
    url: str
    row_group: int
    rows: int


def write_buckets(url: str, tables: dict) -> list:
    """{key: table} (one schema) -> one Parquet file at `url`, each key's rows in row groups of at
    most BUCKET_ROWS (the writer encodes a row group at a time), keys in sorted order; returns
    [(key, Ref)], a Ref per row group. Nothing is written when no key has rows."""
    keys = sorted(k for k, t in tables.items() if t.num_rows)
    if not keys:
        return []
    sink = pa.BufferOutputStream()
    out = []
    with pq.ParquetWriter(sink, tables[keys[0]].schema, **_WRITE) as writer:
        for key in keys:
            table = tables[key]
            for start in range(0, table.num_rows, BUCKET_ROWS):
                rows = min(BUCKET_ROWS, table.num_rows - start)
                writer.write_table(table.slice(start, rows), row_group_size=rows)  # exactly one row group
                out.append((key, Ref(url, len(out), rows)))
    atomic_write(url, sink.getvalue().to_pybytes())
    return out


def read_buckets(refs: Iterable[Ref], columns=None) -> Iterator[pa.Table]:
    """The row groups `refs` name, one table each, in the order given (sort them first for an
    order that does not depend on the runner). Each file is opened once for all its row groups."""
    by_url = {}
    for ref in refs:
        by_url.setdefault(ref.url, []).append(ref.row_group)
    for url in sorted(by_url):
        with fsspec.open(url, "rb") as f:
            pf = pq.ParquetFile(f)
            for rg in sorted(by_url[url]):
                yield pf.read_row_group(rg, columns=columns)


def read_whole(url: str, columns=None) -> Iterator[pa.Table]:
    """A file of write_whole, a row group at a time."""
    with fsspec.open(url, "rb") as f:
        pf = pq.ParquetFile(f)
        for rg in range(pf.num_row_groups):
            yield pf.read_row_group(rg, columns=columns)


def write_whole(url: str, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=WHOLE_ROWS, **_WRITE)
    atomic_write(url, sink.getvalue().to_pybytes())


# --- pages and examples as Arrow columns ---------------------------------------------------------
PAGES = pa.schema([("lang", pa.string()), ("page_id", pa.int64()), ("text", pa.large_string())])
EXAMPLES = pa.schema([
    ("lang", pa.string()), ("copy", pa.int32()), ("page_ids", pa.large_list(pa.int64())),
    ("codepoints", pa.large_list(pa.int32())), ("segment_ids", pa.large_list(pa.int8())),
    ("sop_label", pa.int8()), ("part", pa.int32()),
])


def pages_table(langs: list, page_ids: list, texts: list) -> pa.Table:
    return pa.Table.from_arrays([pa.array(langs, pa.string()), pa.array(page_ids, pa.int64()),
                                 pa.array(texts, pa.large_string())], schema=PAGES)


def _lists(arrays: list, value_type) -> pa.Array:
    """numpy arrays -> one large_list column, from one concatenated buffer and its offsets."""
    offsets = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    np_type = pa.array([], type=value_type).to_numpy().dtype
    flat = np.concatenate(arrays).astype(np_type, copy=False) if arrays else np.zeros(0, np_type)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat, type=value_type))


def examples_table(rows: list) -> pa.Table:
    """[(lang, copy, PackedExample)] -> a table of EXAMPLES."""
    exs = [ex for _, _, ex in rows]
    return pa.Table.from_arrays([
        pa.array([lang for lang, _, _ in rows], pa.string()),
        pa.array([copy for _, copy, _ in rows], pa.int32()),
        _lists([np.asarray(ex.page_ids, np.int64) for ex in exs], pa.int64()),
        _lists([ex.codepoints for ex in exs], pa.int32()),
        _lists([ex.segment_ids for ex in exs], pa.int8()),
        pa.array([ex.sop_label for ex in exs], pa.int8()),
        pa.array([ex.part for ex in exs], pa.int32()),
    ], schema=EXAMPLES)


def _split_list(column: pa.ChunkedArray, dtype) -> list:
    """A large_list column -> a numpy view per row (of one buffer per chunk)."""
    out = []
    for chunk in column.chunks:
        offsets = chunk.offsets.to_numpy()
        values = chunk.values.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
        out += [values[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    return out


def table_examples(table: pa.Table) -> list:
    """A table of EXAMPLES -> [(lang, copy, PackedExample)]: the arrays as they were written
    (int32 codepoints, int8 segment ids, Python ints for page ids)."""
    page_ids = _split_list(table.column("page_ids"), np.int64)
    cps = _split_list(table.column("codepoints"), np.int32)
    segs = _split_list(table.column("segment_ids"), np.int8)
    langs, copies = table.column("lang").to_pylist(), table.column("copy").to_pylist()
    sops, parts = table.column("sop_label").to_pylist(), table.column("part").to_pylist()
    return [(lang, copy, PackedExample(ids.tolist(), c, s, sop, part))
            for lang, copy, ids, c, s, sop, part in zip(langs, copies, page_ids, cps, segs, sops, parts)]
