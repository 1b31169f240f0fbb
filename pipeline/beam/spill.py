"""Shuffles through files: the bulk of the job's data crosses a GroupByKey as record batches of
Arrow IPC files in staging, and only (key, file, batch) references travel through Beam.

Beam's local runners keep every PCollection in memory (the DirectRunner in its launcher, Dask
in its workers), so a job that shuffles its pages and examples through Beam needs memory in
proportion to the dump: about 38 MB per MB of XML at b86d9bd (docs/scale.md). datatrove scales the
other way (src/datatrove/pipeline/dedup/minhash.py): a stage writes its records to files per
destination bucket and the next reads one bucket at a time. Here a producer writes ONE file
per source (a work item, a pack group) with its rows record batches by destination key, sorted
by key, and emits a `Ref` per batch; the consumer of a key reads just its batches (a footer and
a byte range each, on local disk or an object store alike). Memory: one source's rows at
the producer, one destination's at the consumer, whatever the input's size; the runner holds
a few references per (source, destination).

Files are written whole (contract.files.atomic_write) under a name that depends only on the
source, so a retried bundle rewrites the same bytes and a killed one leaves nothing half-written.

docs/scale.md draws the steps and what each holds in memory.
"""

import contextlib
from typing import Callable, Iterable, Iterator, NamedTuple

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from contract.files import atomic_write
from pipeline.rows.examples import PackedExample

# Arrow IPC files (the "Feather v2" file format), each buffer zstd level 1: these files are read
# once or a few times, seconds later, by this job alone, so what matters is the CPU to write and
# read them, and that they do not double the staging disk (benchmarks/scale.py measures the
# peak). Parquet (zstd 1, no dictionary, what they were until this was measured) cost twice the
# CPU to write and 3.4x to read for the same size: it encodes every list's repetition and
# definition levels, value by value, and decodes them again (8.3M codepoints of real examples:
# 199 ms to write, 129 to read, 6.2 MB; IPC 101 ms, 38 ms, 6.0 MB; benchmarks/phases.py, the
# phases that read and write them, before and after: docs/scale.md). A record batch is read
# with only the columns asked for: the others' buffers are not decompressed.
SUFFIX = ".arrow"
_OPTIONS = ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=1))
# Rows per record batch of a whole file (write_whole), and at most per record batch of a key's
# rows (write_buckets): a reader decodes a batch at a time, so this bounds its buffers (1024
# examples of 2048 codepoints: ~10 MB of columns).
WHOLE_ROWS = BUCKET_ROWS = 1024


class Ref(NamedTuple):  # one destination's rows in one source's file: a record batch of it
    url: str
    row_group: int  # the record batch's number in the file
    rows: int


def spill_name(name: str) -> str:
    """A spill file's name for a source named `name` (an item cache's file name, say)."""
    return name.removesuffix(".parquet") + SUFFIX


def _batch(table: pa.Table) -> pa.RecordBatch:
    """A table's rows (at least one) as one record batch: a concatenated table's chunks joined."""
    return table.combine_chunks().to_batches()[0]


def write_buckets(url: str, tables: dict) -> list:
    """{key: table} (one schema) -> one spill file at `url`, each key's rows in record batches of
    at most BUCKET_ROWS, keys in sorted order; returns [(key, Ref)], a Ref per batch. Nothing is
    written when no key has rows."""
    keys = sorted(k for k, t in tables.items() if t.num_rows)
    if not keys:
        return []
    sink = pa.BufferOutputStream()
    out = []
    with ipc.new_file(sink, tables[keys[0]].schema, options=_OPTIONS) as writer:
        for key in keys:
            table = tables[key]
            for start in range(0, table.num_rows, BUCKET_ROWS):
                rows = min(BUCKET_ROWS, table.num_rows - start)
                writer.write_batch(_batch(table.slice(start, rows)))  # exactly one batch
                out.append((key, Ref(url, len(out), rows)))
    atomic_write(url, sink.getvalue().to_pybytes())
    return out


@contextlib.contextmanager
def opened(url: str, columns=None) -> Iterator[tuple[int, Callable[[int], pa.Table]]]:
    """A spill file open: (its batch count, batch number -> a table of `columns`, all if None).
    Only those columns' buffers are read back and decompressed (IpcReadOptions.included_fields)."""
    with fsspec.open(url, "rb") as f:
        reader = ipc.open_file(f)
        names = reader.schema.names
        if columns is not None:
            missing = [c for c in columns if c not in names]
            if missing:
                raise KeyError(f"{url}: no column {', '.join(missing)} (it has {', '.join(names)})")
            reader = ipc.open_file(f, options=ipc.IpcReadOptions(
                included_fields=sorted(names.index(c) for c in columns)))
        wanted = list(columns) if columns is not None else names
        yield reader.num_record_batches, lambda i: pa.Table.from_batches([reader.get_batch(i)]).select(wanted)


def read_buckets(refs: Iterable[Ref], columns=None) -> Iterator[pa.Table]:
    """The batches `refs` name, one table each, files in sorted order and each file's batches in
    order (sort the refs first for an order that does not depend on the runner). Each file is
    opened once for all its batches."""
    by_url = {}
    for ref in refs:
        by_url.setdefault(ref.url, []).append(ref.row_group)
    for url in sorted(by_url):
        with opened(url, columns) as (_, batch):
            for i in sorted(by_url[url]):
                yield batch(i)


def read_whole(url: str, columns=None) -> Iterator[pa.Table]:
    """A file of write_whole, a batch at a time."""
    with opened(url, columns) as (n, batch):
        for i in range(n):
            yield batch(i)


def write_whole(url: str, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema, options=_OPTIONS) as writer:
        for start in range(0, table.num_rows, WHOLE_ROWS):
            writer.write_batch(_batch(table.slice(start, WHOLE_ROWS)))
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
