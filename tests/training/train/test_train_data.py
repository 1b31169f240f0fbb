"""The data order (manifest, units, deal, resume slicing) and the input pipeline on Ray."""

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contract import schema
from contract.files import file_sha256
from training.batch import build_batch_numpy
from training import seeds
from training.train import config, data, stream
from training.train.schema import DataConfig


def test_manifest_is_read_with_shard_urls(contract_shards):
    m = data.open_dataset(contract_shards)
    assert m.seq_len == 256 and len(m.splits["train"]) == 3
    assert all(os.path.exists(s.url) for s in m.splits["train"] + m.splits["validation"])
    assert data.vocab_size(m.tokenizer_url) > 50


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(schema_version=9), "schema_version 9"),
    (lambda m: m["splits"]["train"]["shards"][1].pop("rows"), r"splits\.train\.shards\[1\]\.rows"),
    (lambda m: m["splits"].pop("validation"), r"splits\.validation\.shards is missing"),
    (lambda m: m["splits"]["validation"]["shards"][0].pop("sha256"), r"splits\.validation\.shards\[0\]\.sha256"),
])
def test_bad_manifest_names_file_and_field(contract_shards, tmp_path, edit, message):
    with open(os.path.join(contract_shards, schema.MANIFEST)) as f:
        manifest = json.load(f)
    edit(manifest)
    (tmp_path / schema.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=message) as info:
        data.open_dataset(str(tmp_path))
    assert schema.MANIFEST in str(info.value)
    with pytest.raises(FileNotFoundError, match="canine preprocess"):
        data.open_dataset(str(tmp_path / "nowhere"))


def test_deal_is_a_balanced_deterministic_partition(contract_shards):
    shards = data.open_dataset(contract_shards).splits["train"]
    units = data.make_units(shards, 64)
    dealt = data.deal_units(units, 3, seed=0, epoch=0)
    assert sorted(u for r in dealt for u in r) == sorted(units)  # every unit exactly once
    rows = [sum(u.stop - u.start for u in r) for r in dealt]
    assert max(rows) - min(rows) <= 64
    assert dealt == data.deal_units(units, 3, seed=0, epoch=0)
    assert dealt != data.deal_units(units, 3, seed=0, epoch=1)


def test_read_unit_matches_a_plain_read_across_row_groups(contract_shards):
    shard = data.open_dataset(contract_shards).splits["train"][0]
    unit = data.read_unit(shard.url, shard.sha256, 50, 140)  # the fixture writes row groups of 64 rows
    assert unit.equals(pq.read_table(shard.url).slice(50, 90))


def test_a_resumed_stream_continues_where_the_order_left_off(contract_shards):
    """Rows from a resume position equal the tail of the uninterrupted stream, and the workers'
    streams never share an example within an epoch."""
    shards = data.open_dataset(contract_shards).splits["train"]
    order = data.epoch_order(shards, 64, seed=3, epoch=1, streams=2, global_batch=16)
    seen = []
    for rank in range(2):
        full = data.read_segments(data.rank_segments(order, shards, 0, order.steps, rank, 2, 3))
        tail = data.read_segments(data.rank_segments(order, shards, 5, order.steps, rank, 2, 3))
        assert full.num_rows == 8 * order.steps and tail.equals(full.slice(40))
        seen += full.column("example_id").to_pylist()
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("streams", [1, 2, 4])
def test_the_global_batches_do_not_depend_on_the_worker_count(contract_shards, streams):
    """Elastic determinism: with the streams fixed, any worker count splits the same global
    batches, in the same order, into its workers' blocks."""
    shards = data.open_dataset(contract_shards).splits["train"]
    order = data.epoch_order(shards, 64, seed=3, epoch=0, streams=streams, global_batch=16)
    ids = lambda segs: data.read_segments(segs).column("example_id").to_pylist()  # noqa: E731
    one = [ids(data.rank_segments(order, shards, s, s + 1, 0, 1, 3)) for s in range(order.steps)]
    assert all(len(batch) == 16 for batch in one) and len({i for b in one for i in b}) == 16 * order.steps
    for world in (2, 4, 8):
        for s in (0, order.steps - 1):
            blocks = [ids(data.rank_segments(order, shards, s, s + 1, r, world, 3)) for r in range(world)]
            assert [i for b in blocks for i in b] == one[s], (world, s)
    if streams == 2:  # a worker of a run with as many workers as streams reads one stream: few segments
        segs = data.rank_segments(order, shards, 0, order.steps, 1, 2, 3)
        assert len(segs) == len({(g["url"], g["start"]) for g in segs})


def test_the_canonical_streams_follow_the_global_batch_and_the_data_only():
    """The default data.streams: the largest divisor of the global batch up to the cap and up to
    the train split's units (a stream needs one); the worker count is not an argument."""
    assert data.MAX_CANONICAL_STREAMS == 16
    assert "16 (data.py MAX_CANONICAL_STREAMS)" in DataConfig.__dataclass_fields__["streams"].metadata["help"]
    assert data.canonical_streams(4096, 10**6) == 16  # the base recipe
    assert data.canonical_streams(16, 8) == 8 and data.canonical_streams(16, 5) == 4  # tiny data: capped by units
    assert data.canonical_streams(24, 100) == 12 and data.canonical_streams(17, 100) == 1
    for global_batch in range(1, 70):
        for units in range(0, 20):
            got = data.canonical_streams(global_batch, units)
            fits = [d for d in range(1, 17) if global_batch % d == 0 and d <= max(units, 1)]
            assert got == max(fits), (global_batch, units)


def _rows_of(shards) -> dict:
    """example_id -> (shard, row) of a split."""
    return {e: (i, r) for i, s in enumerate(shards) for r, e in enumerate(pq.read_table(s.url).column("example_id")
                                                                           .to_pylist())}


@pytest.mark.parametrize("unit_rows", [64, 100])
def test_fresh_runs_on_any_worker_count_read_the_same_global_batches(contract_shards, unit_rows):
    """The order a run reads (its global batches, rank after rank) is a function of the seed, the
    data and the global batch: on 1, 2, 4 and 8 workers the canonical streams (8 for units of 64
    rows, 4 for 100: then 8 workers share streams, 1 and 2 read several) give the same (shard,
    row) pairs, read in chunks of several batches as the input pipeline does (stream.py)."""
    shards = data.open_dataset(contract_shards).splits["train"]
    streams = data.canonical_streams(16, len(data.make_units(shards, unit_rows)))
    assert streams == {64: 8, 100: 4}[unit_rows]
    where = _rows_of(shards)
    for epoch in (0, 1):
        p = data.epoch_order(shards, unit_rows, seed=3, epoch=epoch, streams=streams, global_batch=16)
        # The definition (data.py): batch s is rows [s*q, (s+1)*q) of every stream, stream after stream.
        expected = [[where[e] for c in range(streams) for e in data.read_segments(
            data.segments(p.streams[c], shards, s * p.stream_rows, (s + 1) * p.stream_rows, 3, epoch))
            .column("example_id").to_pylist()] for s in range(p.steps)]
        assert len({pair for batch in expected for pair in batch}) == 16 * p.steps  # no row twice in an epoch
        for world in (1, 2, 4, 8):
            b = 16 // world
            ranks = []
            for rank in range(world):
                chunks = stream.chunk_descriptors(p, shards, 0, rank, world, steps_per_chunk=3, seed=3)
                ids = [e for c in chunks for e in data.read_segments(json.loads(c)["segments"])
                       .column("example_id").to_pylist()]
                ranks.append([[where[e] for e in ids[s * b:(s + 1) * b]] for s in range(p.steps)])
            assert [[pair for r in ranks for pair in r[s]] for s in range(p.steps)] == expected, (world, epoch)


def test_a_chunk_reads_each_of_its_units_once(contract_shards, monkeypatch):
    """One worker reading pieces of several streams interleaves units in a chunk (stream after
    stream, batch after batch): each unit is decoded once per chunk, not once per piece, and the
    rows come out in epoch order."""
    shards = data.open_dataset(contract_shards).splits["train"]
    p = data.epoch_order(shards, 64, seed=3, epoch=0, streams=8, global_batch=16)
    segs = data.rank_segments(p, shards, 0, 6, 0, 1, 3)  # 6 batches, 2 rows of each of 8 streams in each
    pieces = [data.read_segments([s]) for s in segs]
    calls = []
    real = data.read_unit
    monkeypatch.setattr(data, "read_unit", lambda *key: calls.append(key) or real(*key))
    rows = data.read_segments(segs)
    assert len(segs) == 48 and len(calls) == len(set(calls)) == 8
    assert rows.equals(pa.concat_tables(pieces))

    # Units smaller than a row group (16 rows, 4 to a group of the fixture's 64): each group that
    # the chunk touches is decoded once, however many of its units the chunk reads.
    p = data.epoch_order(shards, 16, seed=3, epoch=0, streams=16, global_batch=16)
    segs = data.rank_segments(p, shards, 0, 8, 0, 1, 3)
    groups = {(g["url"], g["start"] // 64) for g in segs}
    data._row_group.cache_clear()
    data.read_segments(segs)
    assert len({(g["url"], g["start"]) for g in segs}) > len(groups)  # several units of one group
    assert data._row_group.cache_info().misses == len(groups)


def test_too_little_data_for_one_step_is_a_clear_error(contract_shards):
    shards = data.open_dataset(contract_shards).splits["train"]
    with pytest.raises(ValueError, match="cannot give each of 2 data streams 2048 rows"):
        data.epoch_order(shards, 64, 0, 0, 2, global_batch=4096)


def test_missing_contract_column_names_the_file(contract_shards, tmp_path):
    shard = data.open_dataset(contract_shards).splits["train"][2]
    bad = tmp_path / "bad.parquet"
    pq.write_table(pq.read_table(shard.url).drop(["char_mask_positions"]), bad)
    with pytest.raises(ValueError, match=r"bad\.parquet: columns \['char_mask_positions'\]"):
        data.read_unit(str(bad), file_sha256(str(bad)), 0, 10)


def test_a_corrupt_shard_is_named_with_both_hashes(contract_shards, tmp_path):
    data_dir = str(tmp_path / "shards")
    shutil.copytree(contract_shards, data_dir)
    shard = data.open_dataset(data_dir).splits["train"][1]
    _flip_a_byte(shard.url)
    actual = file_sha256(shard.url)
    with pytest.raises(ValueError) as info:
        data.read_unit(shard.url, shard.sha256, 0, 10)
    assert str(info.value).startswith(f"{shard.url}: corrupt shard: its sha256 is {actual}, "
                                      f"the manifest records {shard.sha256}")


def _flip_a_byte(url: str) -> None:
    """One byte in the middle of the file: the Parquet footer stays whole."""
    with open(url, "r+b") as f:
        f.seek(os.path.getsize(url) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_first_start_hashes_every_shard_before_ray_and_says_its_progress(contract_shards, tmp_path, monkeypatch):
    data_dir = str(tmp_path / "shards")
    shutil.copytree(contract_shards, data_dir)
    ds = data.open_dataset(data_dir)
    data.check_shards(ds)  # the footers: whole
    data.check_shards(ds, whole=True)
    shard = ds.splits["train"][1]
    _flip_a_byte(shard.url)
    data.check_shards(ds)  # a changed byte inside: the footers cannot see it
    lines, hashed = [], []

    def slow(url, progress=None):  # a large or remote shard: long enough for progress lines
        import time

        time.sleep(0.3)
        hashed.append(url)
        return file_sha256(url, progress=progress)

    monkeypatch.setattr(data, "file_sha256", slow)
    with pytest.raises(ValueError) as info:
        data.check_shards(ds, whole=True, say=lines.append, every_s=0.1)
    assert str(info.value).startswith(f"{shard.url}: corrupt shard: its sha256 is {file_sha256(shard.url)}, "
                                      f"the manifest records {shard.sha256}")
    assert sorted(hashed) == sorted(s.url for split in ds.splits.values() for s in split)  # every shard, once
    total = sum(os.path.getsize(s.url) for split in ds.splits.values() for s in split) / 1e9
    assert lines and all(line.startswith(f"checking {len(hashed)} shards against the manifest's sha256 before Ray "
                                         "starts (a run's first start): ") for line in lines), lines
    assert f" of {total:.1f} GB, " in lines[-1]


def test_a_shard_is_hashed_once_per_process_not_per_read(contract_shards, tmp_path, monkeypatch):
    data_dir = str(tmp_path / "shards")
    shutil.copytree(contract_shards, data_dir)  # URLs this process has not verified yet
    shards = data.open_dataset(data_dir).splits["train"]
    hashed, real = [], file_sha256
    monkeypatch.setattr(data, "file_sha256", lambda url: hashed.append(url) or real(url))
    for start in range(0, 150, 10):  # 15 reads of 2 shards, past the row-group cache of 4
        data.read_segments(data.segments(data.make_units(shards[:2], 10), shards, start, start + 10, 0, 0))
    assert sorted(hashed) == [shards[0].url]
    data.read_unit(shards[1].url, shards[1].sha256, 0, 5)
    data.read_unit(shards[1].url, shards[1].sha256, 5, 9)
    assert sorted(hashed) == [shards[0].url, shards[1].url]


@pytest.mark.slow
def test_the_stream_resumes_exactly_through_ray_tasks(contract_shards, ray_local, tmp_path):
    """Through Ray tasks on the local cluster: the stream resumed at a position yields the batches the uninterrupted
    stream yields from there, across an epoch boundary, and equal to building the rows directly."""
    data_dir = str(tmp_path / "shards")
    shutil.copytree(contract_shards, data_dir)
    cfg = config.load_config("tiny", {"data.path": data_dir, "data.chunk_rows": 12, "data.seq_len": 256})
    dataset = data.open_dataset(data_dir)
    kwargs = dict(num_hash_buckets=2048)
    full = stream.TrainStream(dataset, cfg, rank=1, world=2, **kwargs)
    assert full.streams == 8  # data.streams 0: the canonical count of 8 units, not the 2 workers
    order = data.epoch_order(dataset.splits["train"], 64, 0, 0, 8, 16)
    q, per_epoch = order.stream_rows, order.steps * 2  # 2 micro batches per step
    batches = [full.next() for _ in range(per_epoch + 4)]
    assert full.position == {"epoch": 1, "rows": 2 * q}

    resumed = stream.TrainStream(dataset, cfg, rank=1, world=2, position={"epoch": 0, "rows": q * (order.steps - 1)},
                                 **kwargs)
    for expected in batches[per_epoch - 2:]:
        got = resumed.next()
        assert all(np.array_equal(got[k].numpy(), expected[k].numpy()) for k in expected)
    full.close()
    resumed.close()

    rows = data.read_segments(data.rank_segments(order, dataset.splits["train"], 0, 1, 1, 2, 0)).slice(0, 4)
    direct = build_batch_numpy(rows, 256, "char", seed=seeds.build_seed(0, 0), num_hash_buckets=2048)
    assert all(np.array_equal(batches[0][k].numpy(), direct[k]) for k in direct)
    assert full.wait_s > 0
