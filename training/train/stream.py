"""The input pipeline of one worker: read its rows, build batches, prefetch.

Per epoch, the worker's slice of the epoch order (data.py) becomes a list of chunk descriptors (JSON
strings: which rows of which units). Ray tasks run `read + build_batch_numpy` on them on the
cluster's CPUs, ahead of the step (`data.prefetch_batches`), and the worker takes micro batches of
torch tensors in epoch order, which exact resume relies on (see `batches`).
The batch builder is training/batch.py's: it draws its randomness from
(seed, example_id) (training/seeds.py), so a batch does not depend on how rows were grouped into chunks.
"""

import collections
import json
import time

import numpy as np

from training.seeds import build_seed
from training.train import data


def _build_chunk(descriptor: str, *, seq_len: int, objective: str, num_hash_buckets: int,
                 noise_rate: float = 0.0) -> dict:
    """A Ray task: a chunk descriptor -> its built examples, numpy arrays of one row per example."""
    from training.batch import build_batch_numpy

    chunk = json.loads(descriptor)
    return build_batch_numpy(data.read_segments(chunk["segments"]), seq_len, objective, seed=chunk["build_seed"],
                             num_hash_buckets=num_hash_buckets, noise_rate=noise_rate)


def _rows(descriptor: str) -> int:
    return sum(b - a for a, b in (seg["take"] for seg in json.loads(descriptor)["segments"]))


def chunk_descriptors(p: data.EpochOrder, shards, first: int, rank: int, world: int, steps_per_chunk: int,
                      seed: int) -> list[str]:
    """Worker `rank`'s rows of global batches [first, p.steps) of an epoch, in chunks of
    `steps_per_chunk` batches that start at multiples of it (counted from the epoch start, so a
    resumed stream chunks like an uninterrupted one)."""
    out = []
    start = first
    while start < p.steps:
        stop = min(p.steps, (start // steps_per_chunk + 1) * steps_per_chunk)
        out.append(json.dumps({"segments": data.rank_segments(p, shards, start, stop, rank, world, seed),
                               "build_seed": build_seed(seed, p.epoch)}))
        start = stop
    return out


def batches(descriptors: list[str], *, micro_batch: int, prefetch: int, cpus_per_task: float, build_kwargs: dict,
            device: str = "cpu"):
    """Iterate micro batches (dicts of torch tensors on `device`) over the rows the descriptors
    name, in their order. Each descriptor is one Ray task on the cluster's CPUs, submitted ahead
    of the step: the tasks after the one being consumed hold at least `prefetch` micro batches
    (and there is always one), and results are taken in submission order.

    Why plain Ray tasks and not Ray Data (which this was): the stream is an ordered map of one
    function over a list with a bounded look-ahead, and Ray Data's StreamingExecutor runs its
    scheduling loop in a thread of the consuming process that, in ray 2.60, blocks in `ray.wait`
    only while tasks are in flight (data/_internal/execution/streaming_executor_state.py,
    process_completed_tasks). When backpressure holds the next task back because the prefetched
    batches are not consumed yet, the steady state of an input pipeline that keeps up, the loop
    spins: up to ~60% of a core in the training worker, contending for the GIL with the training
    thread (the multi-node test trained at 0.4 steps/s instead of 2)."""
    import ray
    import torch

    build = ray.remote(_build_chunk).options(num_cpus=cpus_per_task, scheduling_strategy="SPREAD")
    todo, pending = iter(descriptors), collections.deque()  # (object ref, rows) in epoch order
    carry = None  # rows of the last chunk short of a micro batch
    try:
        while True:
            while len(pending) < 2 or sum(rows for _, rows in pending) - pending[0][1] < prefetch * micro_batch:
                descriptor = next(todo, None)
                if descriptor is None:
                    break
                pending.append((build.remote(descriptor, **build_kwargs), _rows(descriptor)))
            if not pending:
                break
            chunk = ray.get(pending.popleft()[0])
            if carry is not None:
                chunk = {k: np.concatenate([carry[k], v]) for k, v in chunk.items()}
            n = len(next(iter(chunk.values())))
            whole = n - n % micro_batch
            for i in range(0, whole, micro_batch):
                yield _tensors(chunk, i, i + micro_batch, device, torch)
            carry = {k: v[whole:] for k, v in chunk.items()} if whole < n else None
        if carry is not None:
            yield _tensors(carry, 0, len(next(iter(carry.values()))), device, torch)
    finally:
        for ref, _ in pending:  # a stream closed early (end of training, a new epoch) frees the cluster's CPUs
            ray.cancel(ref)


def _tensors(chunk: dict, lo: int, hi: int, device: str, torch) -> dict:
    """Rows [lo, hi) as torch tensors; copied, since arrays from the object store are read-only.
    On a GPU from pinned memory, so the copy overlaps the step."""
    out = {k: torch.from_numpy(np.array(v[lo:hi])) for k, v in chunk.items()}
    if device != "cpu":
        out = {k: t.pin_memory().to(device, non_blocking=True) for k, t in out.items()}
    return out


class TrainStream:
    """A worker's endless stream of training micro batches, epoch after epoch, with its position.

    position = {"epoch": e, "rows": rows of each data stream consumed in epoch e} (data.py), the
    same on every worker and for any worker count; it moves by a whole global batch when the
    worker has taken its block of one, so saving it after a step and restoring it resumes at the
    next unseen batch.
    """

    def __init__(self, dataset: data.Dataset, cfg, rank: int, world: int, position: dict | None = None,
                 num_hash_buckets: int = 0, device: str = "cpu"):
        self.shards = dataset.splits["train"]
        self.cfg, self.rank, self.world = cfg, rank, world
        # As config.resolve sets it (a config built in code may leave it 0): never the worker count.
        self.streams = cfg.data.streams or data.canonical_streams(
            cfg.train.global_batch, len(data.make_units(self.shards, cfg.data.unit_rows)))
        self.rows_per_step = cfg.train.global_batch // world  # this worker's block of a global batch
        self.position = dict(position or {"epoch": 0, "rows": 0})
        self.build_kwargs = {"seq_len": cfg.data.seq_len, "objective": cfg.train.objective, "num_hash_buckets": num_hash_buckets,
                             "noise_rate": cfg.data.noise_rate}  # training only: eval_batches stay clean
        self.device = device
        self.wait_s = 0.0  # time spent blocked on the input pipeline (data_wait_fraction)
        self._iter = None
        self._order = None
        self._step = 0  # global batches of the epoch this worker has fully taken
        self._taken = 0  # rows of the current batch taken so far

    def _start_epoch(self):
        d, t = self.cfg.data, self.cfg.train
        p = data.epoch_order(self.shards, d.unit_rows, t.seed, self.position["epoch"], self.streams, t.global_batch)
        step, rest = divmod(self.position["rows"], p.stream_rows)
        if rest:
            raise ValueError(f"data position {self.position} is not at a global batch boundary of {p.stream_rows} "
                             f"rows per stream (data.streams {self.streams}, train.global_batch {t.global_batch})")
        if step >= p.steps:  # saved exactly at the end of an epoch
            self.position = {"epoch": self.position["epoch"] + 1, "rows": 0}
            return self._start_epoch()
        self.close()  # the last epoch's tasks, if any, are cancelled before the next epoch's start
        self._order, self._step, self._taken = p, step, 0
        per_chunk = max(1, round(d.chunk_rows / self.rows_per_step))  # global batches per build task
        descriptors = chunk_descriptors(p, self.shards, step, self.rank, self.world, per_chunk, t.seed)
        self._iter = batches(descriptors, micro_batch=t.micro_batch, prefetch=d.prefetch_batches,
                             cpus_per_task=d.cpus_per_task, build_kwargs=self.build_kwargs, device=self.device)

    def next(self) -> dict:
        if self._iter is None or self._step >= self._order.steps:
            self._start_epoch()
        t0 = time.perf_counter()
        batch = next(self._iter)
        self.wait_s += time.perf_counter() - t0
        n = len(batch["input_ids"])
        if n != self.cfg.train.micro_batch:
            raise RuntimeError(f"input pipeline gave {n} rows, expected a micro batch of {self.cfg.train.micro_batch} "
                               f"(epoch {self.position['epoch']}, global batch {self._step})")
        self._taken += n
        if self._taken == self.rows_per_step:  # this worker's block of the batch is complete
            self._step, self._taken = self._step + 1, 0
            self.position = {"epoch": self._order.epoch, "rows": self._step * self._order.stream_rows}
        return batch

    def close(self) -> None:
        """Stop the stream: its build tasks still pending are cancelled (`batches`' finally)."""
        if self._iter is not None:
            self._iter.close()
            self._iter = None


def eval_batches(dataset: data.Dataset, cfg, rank: int, world: int, num_hash_buckets: int) -> list:
    """This worker's share of the first `data.eval_examples` validation rows, built once (the
    caller keeps them: validation is re-read never, evaluated every `eval_every` steps)."""
    shards = dataset.splits["validation"]
    units = data.make_units(shards, cfg.data.unit_rows)
    # Equal shares, so every worker runs the same number of forwards (ZeRO-3 gathers parameters
    # collectively in each one).
    share = min(cfg.data.eval_examples, sum(s.rows for s in shards)) // world
    lo, hi = rank * share, (rank + 1) * share
    if share == 0:
        return []
    # Offsets are relative to this worker's share: chunk the share from its own start.
    descriptors = [json.dumps({"segments": data.segments(units, shards, a, min(hi, a + cfg.data.chunk_rows),
                                                          cfg.train.seed, None),
                               "build_seed": build_seed(cfg.train.seed, None)})
                   for a in range(lo, hi, cfg.data.chunk_rows)]
    kwargs = {"seq_len": cfg.data.seq_len, "objective": cfg.train.objective, "num_hash_buckets": num_hash_buckets}
    return list(batches(descriptors, micro_batch=cfg.train.micro_batch, prefetch=cfg.data.prefetch_batches,
                        cpus_per_task=cfg.data.cpus_per_task, build_kwargs=kwargs))
