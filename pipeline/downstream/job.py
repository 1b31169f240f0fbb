"""The TyDi QA windowing job: official files -> Parquet windows per role, in bounded memory.

Steps (labelled; the bulk crosses each shuffle as files in staging, as pipeline/beam/spill.py
explains for the preprocessing job: Beam's local runners hold every PCollection in memory, so
only references and counts travel through Beam):
  Inputs     one element per input file: (role, index, path)
  Read       a file streamed line by line (fsspec, gzip inferred) into chunks of about
             CHUNK_BYTES of lines, each written whole to STAGING/chunks/ROLE/ (spill.write_whole);
             a gzip file cannot be split, so a file is read by one worker
  Reshuffle  the chunks spread over the workers
  Window     a chunk's lines parsed and windowed (windows.py); its windows, each example's to the
             shard of a hash of its example id (pipeline/seeds.py shard_index), into
             STAGING/windows/ROLE/, record batches by shard (spill.write_buckets); the chunk's
             counts tagged "counts"
  WriteShard a shard's batches, read in the order of their files' names (input, chunk), into
             STAGING/ROLE/part-i-of-n.parquet (parquet.py); emits its record
  Counts     each role's counts summed -> STAGING/counts.json; the shard records -> STAGING/shards.json

Deterministic bytes whatever the worker count: the chunks are cut by the file's bytes alone, the
shard of an example is a hash of its id, a shard's rows are in input order (file, line, then
window), and the row groups are cut every ROW_GROUP_ROWS rows of that order. The shard count of
a role comes from its inputs' stored size (shards_for), not from the workers. prepare.py plans
this job, runs it, and publishes what it staged.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any, Tuple

import apache_beam as beam
import fsspec
import pyarrow as pa
from apache_beam import pvalue

from contract.files import save_json
from pipeline import seeds
from pipeline.beam import spill
from pipeline.downstream import parquet
from pipeline.downstream.windows import WindowSettings, window_line

CHUNK_BYTES = 2 << 20  # of JSON lines per chunk: its windows (x4 overlap, 8 bytes a position) stay ~100 MB at most
SHARD_INPUT_BYTES = 64 << 20  # input bytes, as stored, per shard: the train file (1.6 GB gz) makes 26


def shards_for(input_bytes: int, shard_input_bytes: int = SHARD_INPUT_BYTES) -> int:
    return max(1, math.ceil(input_bytes / shard_input_bytes))


def shard_name(role: str, index: int, total: int) -> str:
    return f"{role}/part-{index:05d}-of-{total:05d}.parquet"


def _lines_table(numbers: list, lines: list) -> pa.Table:
    return pa.table({"line": pa.array(numbers, pa.int64()), "text": pa.array(lines, pa.large_binary())})


class _ReadFn(beam.DoFn):
    """(role, index, path) -> its chunks in staging; emits (role, index, chunk, url) for each."""

    def __init__(self, staging: str, chunk_bytes: int):
        self.staging, self.chunk_bytes = staging, chunk_bytes

    def process(self, item):
        role, index, path = item
        numbers, lines, size, chunk = [], [], 0, 0

        def flush():  # the name ends with the chunk's examples (non-blank lines), for the progress line
            examples = sum(1 for line in lines if line.strip())
            url = f"{self.staging}/chunks/{role}/{index:04d}-{chunk:07d}-{examples}{spill.SUFFIX}"
            spill.write_whole(url, _lines_table(numbers, lines))
            return (role, index, chunk, url)

        with fsspec.open(path, "rb", compression="infer") as f:
            for number, line in enumerate(f, 1):
                numbers.append(number)
                lines.append(line)
                size += len(line)
                if size >= self.chunk_bytes:
                    yield flush()
                    numbers, lines, size, chunk = [], [], 0, chunk + 1
        if lines or chunk == 0:
            yield flush()


class _WindowFn(beam.DoFn):
    """(role, index, chunk, url) -> ((role, shard), spill.Ref) per shard its windows reach, and
    (role, Counter) of its examples and windows, tagged "counts"."""

    def __init__(self, staging: str, paths: dict, settings: WindowSettings, training: frozenset, shards: dict):
        self.staging, self.paths, self.settings = staging, paths, settings
        self.training, self.shards = training, shards

    def process(self, chunk):
        role, index, number, url = chunk
        counts, by_shard = Counter(), {}
        total, training = self.shards[role], role in self.training
        for table in spill.read_whole(url):
            for line_no, text in zip(table.column("line").to_pylist(), table.column("text").to_pylist()):
                where = f"{self.paths[role][index]}:{line_no}"
                rows = window_line(text, self.settings, training, counts, where)
                if rows:
                    shard = seeds.shard_index(str(rows[0].example_id), total)
                    by_shard.setdefault(shard, []).extend(rows)
        tables = {shard: parquet.windows_table(rows) for shard, rows in by_shard.items()}
        del by_shard
        written = sum(t.num_rows for t in tables.values())
        out = f"{self.staging}/windows/{role}/{index:04d}-{number:07d}-{written}{spill.SUFFIX}"
        for shard, ref in spill.write_buckets(out, tables):
            yield (role, shard), ref
        yield pvalue.TaggedOutput("counts", (role, counts))


class _WriteShardFn(beam.DoFn):
    def __init__(self, staging: str, shards: dict):
        self.staging, self.shards = staging, shards

    def process(self, kv):
        (role, shard), refs = kv
        refs = sorted(refs)  # by file name (input, chunk), then batch: input order
        name = shard_name(role, shard, self.shards[role])
        record = parquet.write_shard(spill.read_buckets(refs), f"{self.staging}/{name}")
        yield {"role": role, "path": name, **record}


def _sum(counters) -> Counter:
    total = Counter()
    for c in counters:
        total.update(c)
    return total


def _save_counts(pairs, url: str) -> str:
    return save_json({role: [[list(k), n] for k, n in sorted(c.items())] for role, c in sorted(pairs)}, url)


def read_counts(text: str) -> dict:
    """STAGING/counts.json -> {role: Counter{(group, name): n}}."""
    return {role: Counter({tuple(k): n for k, n in pairs}) for role, pairs in json.loads(text).items()}


def build(p, inputs: dict, staging: str, settings: WindowSettings, training_roles, shards: dict,
          chunk_bytes: int = CHUNK_BYTES) -> None:
    """Add the job to pipeline `p`: `inputs` {role: [paths]}, `shards` {role: shard count};
    everything is written below `staging`."""
    items = [(role, i, path) for role in sorted(inputs) for i, path in enumerate(inputs[role])]
    paths = {role: list(v) for role, v in inputs.items()}
    windowed = (
        p
        | "Inputs" >> beam.Create(items, reshuffle=False)
        | "SpreadFiles" >> beam.Reshuffle()
        | "Read" >> beam.ParDo(_ReadFn(staging, chunk_bytes))
        | "Reshuffle" >> beam.Reshuffle()
        | "Window" >> beam.ParDo(_WindowFn(staging, paths, settings, frozenset(training_roles), shards))
        .with_output_types(Tuple[Tuple[str, int], spill.Ref], counts=Tuple[str, Any])
        .with_outputs("counts", main="refs")
    )
    _ = (
        windowed.refs
        | "GroupShard" >> beam.GroupByKey()
        | "WriteShard" >> beam.ParDo(_WriteShardFn(staging, shards))
        | "ShardList" >> beam.combiners.ToList()
        | "SortShards" >> beam.Map(lambda records: sorted(records, key=lambda r: r["path"]))
        | "WriteShardList" >> beam.Map(save_json, f"{staging}/shards.json")
    )
    _ = (
        windowed.counts
        | "SumCounts" >> beam.CombinePerKey(_sum)
        | "CountList" >> beam.combiners.ToList()
        | "WriteCounts" >> beam.Map(_save_counts, f"{staging}/counts.json")
    )
