"""What each worker reads, in which order: the manifest, work units, the per-epoch order, row reads.

Everything here is deterministic and addressable, which is what exact and elastic resume need:
- The train split is cut into units of at most `data.unit_rows` consecutive rows of one shard.
- Epoch e: the units are shuffled with the seed (seed, e) and dealt to `data.streams` streams,
  each unit to the stream with the fewest rows so far (balanced; ties to the lowest). A stream is
  its units in that order, the rows inside each unit permuted with the seed (seed, e, shard, start)
  (both in training/seeds.py).
- Global batch s of the epoch is rows [s*q, (s+1)*q) of every stream, q = global_batch / streams,
  laid out stream after stream; worker r of W trains on the contiguous block [r*b, (r+1)*b) of it,
  b = global_batch / W: a worker reads several streams' pieces of a batch (W < streams), one
  stream (W = streams) or a share of one (W > streams). The streams are the read parallelism
  (how many runs of units each global batch mixes), not the workers: they are part of the order,
  like the seed, and the worker count is not. As MosaicML streaming's "elastic determinism",
  whose canonical nodes are our streams, the default (`canonical_streams`) is computed at a run's
  first start from the global batch and the data only and saved with the run, so fresh runs on
  1, 2 or 4 workers and a resume on another count see the same global batches in the same order.
- Every epoch has the same number of batches for all (the shortest stream decides); the few rows
  beyond it wait for the next epoch's deal.
So the data position is just (epoch, rows consumed per stream): nothing is replayed on resume,
whole units are skipped and the first unit is sliced.

Ray Train's own dataset splitting (`streaming_split`) is not used: its OutputSplitter "does not
provide any ordering guarantees" (ray/data/_internal/execution/operators/output_splitter.py), and
a resumed run could not skip to its position without replaying the epoch.

Each shard is checked against the manifest's sha256 the first time a process reads it (hashed as
it streams, once per shard per process), so a corrupt or replaced file stops the run by name
instead of training on what it holds. Before that, the driver reads every shard's Parquet footer
(`check_shards`, before Ray starts): a missing, cut or replaced shard fails in seconds, not once
the workers meet it; on a run's first start it also hashes every shard, so a byte changed inside
one fails there too, before a run directory is made.

Of the project's other packages only the contract is imported (contract/schema.py, and
contract/manifest.py, which reads and checks the manifest); files are read through fsspec, so the
data may be local or on any fsspec filesystem (gs://, s3://, ...).
"""

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from contract import manifest as contract_manifest
from contract import schema
from contract.files import file_sha256, join
from training import seeds


@dataclass(frozen=True)
class ShardRef:
    url: str  # absolute fsspec URL of the Parquet file
    rows: int  # as recorded in the manifest
    sha256: str  # of the file's bytes, as recorded in the manifest (checked on first read)


@dataclass(frozen=True)
class Dataset:
    """What the training side reads of the contract's manifest (contract/manifest.py), with absolute
    URLs: the trainer, and evaluate, export and `canine report`, which read nothing else of it."""

    url: str  # the data directory
    splits: dict  # split name -> tuple[ShardRef, ...]
    seq_len: int  # the length the pipeline built examples for (0 if the manifest does not say)
    config_sha256: str  # identity of the data: a resumed run checks it did not change
    tokenizer_url: str  # tokenizer.json (CANINE-S vocabulary)
    # Every language the pipeline read -> its examples over both splits, sorted by code; 0 for one
    # whose pages were all rejected (evaluate names those with examples it scored none of; the model
    # card and `canine report` list all).
    languages: dict = field(default_factory=dict)
    manifest_sha256: str = ""  # of the manifest file's bytes: the model card names the data by it
    trial_slice: str | None = None  # the manifest's words for a --max-pages output; None: the whole dump
    # Language -> kept pages (only those with any): what a hint's --validation-fraction is computed
    # from (contract/holdout.py), so that the value it names holds something out of this input.
    kept_pages: dict = field(default_factory=dict)

    def split_rows(self) -> dict[str, int]:
        """{split: examples}, as the manifest records them."""
        return {name: sum(s.rows for s in shards) for name, shards in self.splits.items()}


@dataclass(frozen=True, order=True)
class Unit:
    shard: int  # index into the split's shards
    start: int  # first row in the shard
    stop: int  # one past the last row


def open_dataset(data_url: str) -> Dataset:
    """Load and check `DIR/<schema.MANIFEST>`; errors name the file and the offending field."""
    try:
        m, manifest_sha256 = contract_manifest.open_manifest(data_url)
    except FileNotFoundError:
        raise FileNotFoundError(f"{contract_manifest.manifest_url(data_url)}: no manifest; --data must be a "
                                "directory written by `canine preprocess`") from None
    splits = {name: tuple(ShardRef(join(data_url, s.path), s.rows, s.sha256) for s in split.shards)
              for name, split in m.splits.items()}
    if not sum(s.rows for s in splits["train"]):
        raise ValueError(f"{contract_manifest.manifest_url(data_url)}: the train split has no rows")
    return Dataset(url=data_url, splits=splits, seq_len=m.seq_len, config_sha256=m.config_sha256,
                    tokenizer_url=join(data_url, m.tokenizer.path),
                    languages={lang: c.examples for lang, c in sorted(m.languages.items())},
                    kept_pages={lang: c.kept for lang, c in sorted(m.languages.items()) if c.kept},
                    manifest_sha256=manifest_sha256, trial_slice=m.trial_slice)


_CORRUPT = "(a damaged or replaced file; rerun `canine preprocess` or restore it)"


def _footer_problem(shard: ShardRef) -> str | None:
    """What is wrong with a shard that its Parquet footer shows (None: nothing): missing, not
    Parquet (cut, appended to, overwritten at its end), another row count than the manifest's,
    columns of the contract missing. Only the footer is read: a few KB at the end of the file."""
    try:
        with fsspec.open(shard.url, "rb") as f:
            meta = pq.ParquetFile(f).metadata
    except FileNotFoundError:
        return (f"{shard.url}: missing: the manifest lists it with {shard.rows} rows; restore it or rerun "
                "`canine preprocess`")
    except pa.ArrowInvalid as e:  # "Parquet magic bytes not found in footer", "file size is 0 bytes", ...
        return f"{shard.url}: corrupt shard: not a readable Parquet file ({str(e).strip().splitlines()[0]}) {_CORRUPT}"
    if meta.num_rows != shard.rows:
        return f"{shard.url}: corrupt shard: it holds {meta.num_rows} rows, the manifest records {shard.rows} {_CORRUPT}"
    missing = set(schema.COLUMNS) - set(meta.schema.to_arrow_schema().names)
    if missing:
        return f"{shard.url}: corrupt shard: columns {sorted(missing)} of the shard contract are missing {_CORRUPT}"
    return None


def check_shards(ds: Dataset, whole: bool = False, threads: int = 16, say=None, every_s: float = 10.0) -> None:
    """What the driver checks of the shards before Ray starts: every shard's footer
    (`_footer_problem`, a few KB each), and with `whole` (a run's first start) every byte against
    the manifest's sha256, `threads` files at a time, so that bytes changed inside a shard (its
    footer whole) fail here, with no run directory made, not in a worker once Ray is up.
    `say(line)` is told the progress every `every_s` seconds while hashing takes longer than
    that. Raises a ValueError naming the first bad shard in the manifest's order.

    What hashing costs: sha256 ran at 1.05 GB/s on one thread and 1.85 GB/s on two (AMD EPYC with
    SHA-NI, 2 cores, files in the page cache), so on a node of 16 threads it is bound by reading:
    100 GB of shards from a local NVMe disk (~2-3 GB/s) takes about 35-50 s, from an object store
    at ~1 GB/s about 100 s, once per run: that is the price of failing before Ray starts rather
    than at a worker's first read (which cost 64 s of Ray start-up on the bundled sample, and
    left a run directory). A resumed run skips it:
    its shards were hashed at its first start, and the workers still hash each shard the first
    time they read it (verify_shard)."""
    shards = [s for split in ds.splits.values() for s in split]
    if not shards:
        return
    with ThreadPoolExecutor(min(threads, len(shards))) as pool:
        for problem in pool.map(_footer_problem, shards):
            if problem:
                raise ValueError(f"{problem}; `canine validate {ds.url}` checks every shard whole")
        if whole:
            _hash_all(shards, pool, say, every_s)


def _hash_all(shards, pool, say, every_s: float) -> None:
    """Hash every shard on `pool`; raise the first mismatch in the manifest's order."""
    import time
    from concurrent.futures import wait

    import threading

    done, lock = [0], threading.Lock()  # bytes hashed so far, by all of the pool's threads

    def count(n: int) -> None:
        with lock:
            done[0] += n

    def check(shard):
        actual = file_sha256(shard.url, progress=count)
        return None if actual == shard.sha256 else (
            f"{shard.url}: corrupt shard: its sha256 is {actual}, the manifest records {shard.sha256} {_CORRUPT}")

    futures = [pool.submit(check, s) for s in shards]
    start, total = time.monotonic(), None
    while wait(futures, timeout=every_s).not_done:
        if say:
            if total is None:
                total = sum(fsspec.open(s.url).fs.size(s.url) for s in shards)
            took = time.monotonic() - start
            say(f"checking {len(shards)} shards against the manifest's sha256 before Ray starts (a run's first "
                f"start): {done[0] / 1e9:.1f} of {total / 1e9:.1f} GB, {done[0] / 1e9 / took:.2f} GB/s")
    for future, shard in zip(futures, shards):
        if future.result():
            raise ValueError(future.result())
        _verified.add((shard.url, shard.sha256))


def vocab_size(tokenizer_url: str) -> int:
    """CANINE-S output size: the vocabulary of the pipeline's tokenizer.json (HF tokenizers)."""
    from tokenizers import Tokenizer

    try:
        with fsspec.open(tokenizer_url, "rt", encoding="utf-8") as f:
            return Tokenizer.from_str(f.read()).get_vocab_size()
    except FileNotFoundError:
        raise FileNotFoundError(f"{tokenizer_url}: missing; the subword objective needs the pipeline's tokenizer") from None


def make_units(shards, unit_rows: int) -> list[Unit]:
    return [Unit(i, start, min(start + unit_rows, s.rows))
            for i, s in enumerate(shards) for start in range(0, s.rows, unit_rows)]


# The default streams: at the base recipe (global batch 4096, units of 1024 rows) 16 streams give
# every global batch 256 consecutive rows (= data.chunk_rows) from each of 16 units, usually of 16
# shards: mixed enough, while a worker's block is still a few runs of a quarter unit each, not
# dozens of short reads that decode a unit's row group for a handful of rows. 16 is also 2 nodes
# of 8 GPUs: the common run reads one stream per worker.
MAX_CANONICAL_STREAMS = 16


def canonical_streams(global_batch: int, units: int) -> int:
    """The streams of a run that does not set data.streams: the largest divisor of the global batch
    (each stream gives a batch the same number of rows) up to MAX_CANONICAL_STREAMS and up to the
    train split's units (a stream needs one), whatever the worker count."""
    cap = max(1, min(MAX_CANONICAL_STREAMS, units))
    return max(d for d in range(1, cap + 1) if global_batch % d == 0)


def deal_units(units: list[Unit], streams: int, seed: int, epoch: int) -> list[list[Unit]]:
    """Shuffle the units with (seed, epoch), then give each to the stream with the fewest rows."""
    order = seeds.unit_order(seed, epoch, len(units))
    dealt = [[] for _ in range(streams)]
    rows = [0] * streams
    for i in order:
        r = min(range(streams), key=lambda k: (rows[k], k))
        dealt[r].append(units[i])
        rows[r] += units[i].stop - units[i].start
    return dealt


@dataclass(frozen=True)
class EpochOrder:
    epoch: int
    streams: tuple  # per stream, its units in stream order
    steps: int  # global batches in this epoch
    stream_rows: int  # rows each stream gives one global batch (q)


def epoch_order(shards, unit_rows: int, seed: int, epoch: int, streams: int, global_batch: int) -> EpochOrder:
    dealt = deal_units(make_units(shards, unit_rows), streams, seed, epoch)
    q = global_batch // streams
    steps = min(sum(u.stop - u.start for u in units) for units in dealt) // q
    if steps == 0:
        total = sum(s.rows for s in shards)
        raise ValueError(
            f"the train split ({total} rows in {len(shards)} shard{'s' * (len(shards) != 1)}, units of {unit_rows} "
            f"rows) cannot give each of {streams} data streams {q} rows for one global batch; lower "
            "train.global_batch, data.unit_rows or data.streams")
    return EpochOrder(epoch, tuple(tuple(units) for units in dealt), steps, q)


def rank_segments(p: EpochOrder, shards, first: int, last: int, rank: int, world: int, seed: int) -> list[dict]:
    """What worker `rank` of `world` trains on in global batches [first, last) of the epoch: its
    block of each batch (module docstring), as read instructions; neighbouring pieces of one unit
    are merged, so a worker that reads one stream gets one segment per unit."""
    q, streams = p.stream_rows, len(p.streams)
    b = q * streams // world
    out = []
    for step in range(first, last):
        lo, hi = rank * b, (rank + 1) * b  # within the batch, laid out stream after stream
        for c in range(lo // q, min(streams, -(-hi // q))):
            a, z = max(lo, c * q) - c * q, min(hi, (c + 1) * q) - c * q
            for seg in segments(p.streams[c], shards, step * q + a, step * q + z, seed, p.epoch):
                last_seg = out[-1] if out else None
                if (last_seg and last_seg["url"] == seg["url"] and last_seg["start"] == seg["start"]
                        and last_seg["take"][1] == seg["take"][0]):
                    last_seg["take"][1] = seg["take"][1]
                else:
                    out.append(seg)
    return out


def unit_seed(seed: int, epoch: int, unit: Unit) -> list[int]:
    return seeds.row_order_seed(seed, epoch, unit.shard, unit.start)


def segments(units, shards, lo: int, hi: int, seed: int, epoch: int | None) -> list[dict]:
    """Rows [lo, hi) of a stream made of `units`, as JSON-ready read instructions. epoch None =
    rows in stored order (validation)."""
    out, pos = [], 0
    for unit in units:
        n = unit.stop - unit.start
        a, b = max(lo, pos), min(hi, pos + n)
        if a < b:
            shard = shards[unit.shard]
            out.append({
                "url": shard.url, "sha256": shard.sha256, "start": unit.start, "stop": unit.stop,
                "perm_seed": None if epoch is None else unit_seed(seed, epoch, unit),
                "take": [a - pos, b - pos],
            })
        pos += n
        if pos >= hi:
            break
    return out


_verified: set = set()  # (url, sha256) of the shards this process has hashed


def verify_shard(url: str, sha256: str) -> None:
    """Check a shard against the manifest's sha256 the first time this process reads it; later
    reads (every unit, every epoch) cost a set lookup."""
    if (url, sha256) in _verified:
        return
    actual = file_sha256(url)
    if actual != sha256:
        raise ValueError(f"{url}: corrupt shard: its sha256 is {actual}, the manifest records {sha256} {_CORRUPT}")
    _verified.add((url, sha256))


@functools.lru_cache(maxsize=4)
def _parquet_meta(url: str):
    with fsspec.open(url, "rb") as f:
        return pq.ParquetFile(f).metadata


# Decoded row groups, the unit of Parquet decoding (the pipeline writes 1024 rows a group): units
# of one group (units smaller than a group) decode it once, and consecutive chunks of a worker
# that reads one stream share a unit. 4 groups: what the 2 cached units of a unit cache held.
@functools.lru_cache(maxsize=4)
def _row_group(url: str, sha256: str, group: int) -> pa.Table:
    """Row group `group` of a shard read_unit has verified (sha256: part of the cache key only)."""
    with fsspec.open(url, "rb") as f:
        table = pq.ParquetFile(f).read_row_group(group)
    missing = set(schema.COLUMNS) - set(table.column_names)
    if missing:
        raise ValueError(f"{url}: columns {sorted(missing)} of the shard contract are missing")
    return table


def read_unit(url: str, sha256: str, start: int, stop: int) -> pa.Table:
    """Rows [start, stop) of one shard, reading only the row groups that hold them (the whole
    shard is hashed once first, see verify_shard)."""
    verify_shard(url, sha256)
    meta = _parquet_meta(url)
    if stop > meta.num_rows:
        raise ValueError(f"{url}: the manifest promises rows up to {stop}, the file has {meta.num_rows}")
    groups, first, row = [], None, 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        if row < stop and row + n > start:
            groups.append(g)
            first = row if first is None else first
        row += n
    table = pa.concat_tables([_row_group(url, sha256, g) for g in groups])
    return table.slice(start - first, stop - start)


def read_segments(segs: list[dict]) -> pa.Table:
    """The rows a list of `segments` describes, in their order, permuted inside each unit where
    asked. Each distinct unit is read and permuted once per call: a worker that takes pieces of
    several streams interleaves units (stream after stream, batch after batch), more than the
    row-group cache holds, and would otherwise decode the same row groups once per piece. They
    are read in shard order, so units that share a row group follow one another in the cache."""
    keys = [(s["url"], s["sha256"], s["start"], s["stop"], None if s["perm_seed"] is None else tuple(s["perm_seed"]))
            for s in segs]
    units = {}
    for key in sorted(set(keys), key=lambda k: k[:4]):
        url, sha256, start, stop, perm_seed = key
        unit = read_unit(url, sha256, start, stop)
        if perm_seed is not None:
            unit = unit.take(seeds.row_order(perm_seed, unit.num_rows))
        units[key] = unit
    tables = [units[key].slice(a, b - a) for key, (a, b) in zip(keys, (s["take"] for s in segs))]
    return pa.concat_tables(tables)
