"""Rows of the shard contract <-> Arrow tables <-> Parquet files on any fsspec filesystem."""

import hashlib

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contract import schema
from contract.files import atomic_write

# Fixed writer settings: part of what makes equal rows give byte-identical files.
PARQUET_OPTIONS = dict(compression="zstd", compression_level=3, row_group_size=1024, write_statistics=False)


def _list_column(values, field: pa.Field) -> pa.Array:
    value_type = field.type.value_type
    # numpy's dtype of the Arrow type; DataType.to_pandas_dtype() would import pandas, which the
    # preprocessing install does not have (tests/test_install_roles.py).
    np_type = pa.array([], type=value_type).to_numpy().dtype
    arrays = [np.asarray(v, dtype=np_type) for v in values]
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    flat = np.concatenate(arrays) if arrays else np.zeros(0, np_type)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=value_type))


def rows_to_table(rows: list[dict]) -> pa.Table:
    """Contract rows (dicts of Python / numpy values) to a table with exactly `schema.SCHEMA`."""
    columns = []
    for field in schema.SCHEMA:
        values = [r[field.name] for r in rows]
        if pa.types.is_list(field.type):
            columns.append(_list_column(values, field))
        else:
            columns.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(columns, schema=schema.SCHEMA)


def write_table(table: pa.Table, url: str) -> dict:
    """Write one shard and return what the manifest records of it (sha256 of the bytes written)."""
    return write_tables([table], url)


# Rows per row group: a table handed to write_tables is cut into groups of this many, so tables
# of whole row groups (all but the last) give the bytes of one table of all the rows.
ROW_GROUP_ROWS = PARQUET_OPTIONS["row_group_size"]


def write_tables(tables, url: str) -> dict:
    """Write one shard from tables of consecutive rows, each but the last a multiple of
    ROW_GROUP_ROWS rows: the job hands them one row group at a time, so a shard's rows never sit
    in memory as one table (pipeline/beam/job.py _PlanAndWriteFn). Returns what the manifest records."""
    options = {k: v for k, v in PARQUET_OPTIONS.items() if k != "row_group_size"}
    sink = pa.BufferOutputStream()
    rows = codepoints = 0
    with pq.ParquetWriter(sink, schema.SCHEMA, **options) as writer:
        for table in tables:
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
            rows += table.num_rows
            codepoints += len(table.column("codepoints").combine_chunks().flatten())
    data = sink.getvalue().to_pybytes()
    # Whole or not at all: a retried or duplicated bundle (Dataflow runs some twice) rewrites the
    # same bytes under the same name, and a killed one leaves no partial file under it.
    atomic_write(url, data)
    return {"rows": rows, "codepoints": int(codepoints), "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def read_table(url: str, columns=None) -> pa.Table:
    with fsspec.open(url, "rb") as f:
        return pq.read_table(f, columns=columns)
