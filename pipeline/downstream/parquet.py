"""Windows as Arrow tables and the Parquet files of contract/tydiqa.py's window schema.

`windows_table` turns windows.py's rows into a table (one concatenated buffer per list column,
no Python list per position); `write_shard` writes a shard from tables of consecutive rows,
whole or not at all (contract.files.atomic_write), in row groups of ROW_GROUP_ROWS windows, and
returns what the manifest records of it.

Encoding (measured on tests/data/tydiqa/tiny_dev.jsonl.gz, 11 examples; zstd level 3 for all):
doc_chars is DELTA_BINARY_PACKED with no dictionary, as contract/tydiqa.py WINDOW_ENCODINGS
says: inside a passage an offset is its predecessor + 1, so the column packs to about 100 bytes
a window, 2,048 int32 (8 kB) raw. Its 200 prediction windows: doc_chars 20.5 kB delta-packed
against 122.5 kB PLAIN (6.0x; with a dictionary 243 kB), the whole file 127 kB against 229 kB;
its 34 training windows: 5.2 kB against 50.4 kB. input_ids stays PLAIN (103.7 kB of the 200
windows): windows overlap by three quarters (stride 512 of 2,048), which zstd finds within a row
group; BYTE_STREAM_SPLIT saved 17% more of it but needs a recent Parquet reader, DELTA made it
larger (67 kB against 38 kB for the training windows). tests/pipeline/downstream/
test_tydiqa_job.py checks the encoding is in the files.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contract.files import atomic_write
from contract.tydiqa import WINDOW_ENCODINGS, window_schema

ROW_GROUP_ROWS = 256  # windows per row group: 256 x 2,048 positions x 8 bytes = 4 MB of list values to encode at once
WRITE = dict(compression="zstd", compression_level=3, write_statistics=False, use_dictionary=False,
             column_encoding=dict(WINDOW_ENCODINGS))


def _lists(arrays: list) -> pa.Array:
    offsets = np.zeros(len(arrays) + 1, np.int32)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    flat = np.concatenate(arrays).astype(np.int32, copy=False) if arrays else np.zeros(0, np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.int32()))


def windows_table(rows: list) -> pa.Table:
    """[windows.Window] -> a table of contract.tydiqa.window_schema()."""
    s = window_schema()
    return pa.Table.from_arrays([
        pa.array([r.example_id for r in rows], pa.int64()),
        pa.array([r.language for r in rows], pa.string()),
        pa.array([r.window for r in rows], pa.int32()),
        _lists([r.input_ids for r in rows]),
        _lists([r.doc_chars for r in rows]),
        pa.array([r.doc_start for r in rows], pa.int32()),
        pa.array([r.start for r in rows], pa.int32()),
        pa.array([r.end for r in rows], pa.int32()),
        pa.array([r.answer_type for r in rows], pa.int8()),
    ], schema=s)


def regroup(tables, rows: int = ROW_GROUP_ROWS):
    """Tables of consecutive rows -> tables of exactly `rows` rows (the last one fewer): the
    row groups of a shard do not depend on how its rows arrived."""
    held, n = [], 0
    for table in tables:
        held.append(table)
        n += table.num_rows
        while n >= rows:
            whole = pa.concat_tables(held)
            yield whole.slice(0, rows)
            rest = whole.slice(rows)
            held, n = ([rest] if rest.num_rows else []), rest.num_rows
    if n:
        yield pa.concat_tables(held)


def write_shard(tables, url: str, **options) -> dict:
    """One shard from tables of consecutive rows; {rows, bytes, sha256}. The file's bytes are
    held until written whole (pipeline/rows/shards.py does the same): a retried bundle rewrites
    the same bytes under the same name and a killed one leaves nothing half-written."""
    sink = pa.BufferOutputStream()
    rows = 0
    with pq.ParquetWriter(sink, window_schema(), **(WRITE | options)) as writer:
        for table in regroup(tables):
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
            rows += table.num_rows
    data = sink.getvalue().to_pybytes()
    atomic_write(url, data)
    return {"rows": rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
