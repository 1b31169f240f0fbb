"""Every random decision of training, and the one module that seeds or draws them.

A run is reproducible and elastic: fresh runs on 1, 2 or 4 workers, and a run resumed on another
worker count, read the same examples in the same order and draw the same masks, dropout and
noise (README "Preprocessing a real dump", tests/training/train/test_train_e2e.py). So every
decision below is a pure function of its inputs, never of the worker that makes it, the
process, or how rows were grouped into chunks. Three mixes:
  * counter streams: the batch builder's draws per (build seed, example key, index, `Stream`),
    SplitMix64 (contract/splitmix.py, the mix the pipeline's mask plans also draw from) of one
    sum of them; a new decision takes a new `Stream`, and the others do not move;
  * numpy SeedSequences of the inputs listed, for the data order and the dropout seed;
  * torch's, numpy's and Python's global generators, seeded here for what draws from them:
    the model's initialization (nn.init, training/model.py) and dropout (training/kernels.py).

Inputs: seed = train.seed; step = optimizer steps done before it; micro = a micro batch's index in
the global batch (rank x accumulation + i); build seed = `build_seed`; key = crc32 of the example id;
index = a span's rank in its row (identity), a prediction slot (order) or a character's
position in its row (noise).

decision                   inputs                   function        mix                used in
-------------------------  -----------------------  --------------  -----------------  --------------------------
initial weights            seed                     seed_all        global generators  loop._set_up, evaluate.py
what else a worker draws   seed, rank               seed_worker     global generators  loop._set_up
dropout of a micro batch   seed, step, micro        dropout_seed,   SeedSequence,      loop._train_step
                                                    seed_dropout    DROPOUT 1
unit order (data streams)  seed, epoch              unit_order      SeedSequence,      data.deal_units
                                                                    UNIT_ORDER 2
rows within a unit         seed, epoch, shard, row  row_order_seed  SeedSequence,      data.segments,
                                                    row_order       ROW_ORDER 3        data.read_segments
fine-tuning window order   seed, epoch              window_order    SeedSequence,      finetune/data.py
                                                                    WINDOW_ORDER 4     step_windows
a batch's build seed       seed, epoch or "eval"    build_seed      crc32 of JSON      stream.py, evaluate.py
example key                example id               example_keys    crc32              batch.build_batch_numpy
CANINE-C identity span     build seed, key, index   batch_uniform   IDENTITY 1         batch._char_plan
CANINE-C prediction order  build seed, key, index   batch_uniform   CHAR_ORDER 2       batch._char_plan
noise: edit site           build seed, key, index   batch_uniform   NOISE_SITE 3       noise.add_noise
noise: edit kind           build seed, key, index   batch_uniform   NOISE_KIND 4       noise.add_noise
noise: inserted character  build seed, key, index   batch_uniform   NOISE_SOURCE 5     noise._sources
made-up probe rows         (none: fixed)            probe_rng       numpy, call order  autobatch.probe_rows
evaluation snippets        seed                     snippet_rng     numpy, call order  evaluate.snippets
linear probe's init        seed                     seed_probe      torch global       evaluate.probe_predictions

training/train/evaluate.py draws the last two through these functions (snippet_rng, seed_probe),
like every other module. training/train/checkpoint.py saves and restores the global
generators' states with a checkpoint (a resume continues them); it seeds nothing.

The SeedSequence decisions each lead their entropy with a `Tag` of their own. A SeedSequence
pads its entropy with zeros, so without one [seed, epoch] (an epoch's unit order) and
[seed, epoch, 0, 0] (the rows of the unit at row 0 of shard 0) were one entropy, and dropout's
[seed, step, 0] another's: permutations of one PCG64 stream. The tags changed every run's data
order and dropout once (CHANGELOG.md); a run started before resumes with the new order.
"""

import enum
import json
import random
import zlib

import numpy as np

from contract.splitmix import GOLDEN, MIX1, MIX2, splitmix64, unit_floats


class Stream(enum.IntEnum):
    """The batch builder's counter streams (training/batch.py, training/noise.py): one per decision."""

    IDENTITY = 1
    CHAR_ORDER = 2
    NOISE_SITE = 3
    NOISE_KIND = 4
    NOISE_SOURCE = 5


class Tag(enum.IntEnum):
    """The leading word of each SeedSequence decision's entropy: one per decision, so that no two
    share a stream through the zero padding of their entropy."""

    DROPOUT = 1
    UNIT_ORDER = 2
    ROW_ORDER = 3
    WINDOW_ORDER = 4


# --- global generators: the model's initialization, dropout -----------------------------------
def seed_all(seed: int) -> None:
    """torch's, numpy's and Python's global generators: the same initial weights on every rank."""
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def seed_worker(seed: int, rank: int) -> None:
    """After the model is built: anything else drawing from the global generators differs per rank."""
    seed_all(seed * 1_000_003 + rank + 1)


def dropout_seed(seed: int, step: int, micro: int) -> int:
    """The generator seed of micro batch `micro` (its index in the global batch) of optimizer step
    `step`: dropout depends on which examples a forward sees, not on which worker runs it, so a
    run resumed on another worker count draws the same masks (elastic determinism)."""
    return int(np.random.SeedSequence([int(Tag.DROPOUT), seed, step, micro]).generate_state(1, np.uint64)[0] >> 1)


def seed_dropout(seed: int, step: int, micro: int) -> None:
    """Seed torch's generator, which dropout draws from, for one micro batch's forward."""
    import torch

    torch.manual_seed(dropout_seed(seed, step, micro))


# --- data order ---------------------------------------------------------------------------------
def unit_order(seed: int, epoch: int, units: int) -> np.ndarray:
    """The order the epoch's `units` work units are dealt to the data streams in."""
    return np.random.default_rng([int(Tag.UNIT_ORDER), seed, epoch]).permutation(units)


def row_order_seed(seed: int, epoch: int, shard: int, start: int) -> list[int]:
    """What orders the rows of the unit at row `start` of shard `shard` in an epoch (JSON: a chunk
    descriptor carries it to the Ray task that reads the unit)."""
    return [int(Tag.ROW_ORDER), seed, epoch, shard, start]


def window_order(seed: int, epoch: int, windows: int) -> np.ndarray:
    """The order of a fine-tuning run's training windows in an epoch (training/finetune/data.py):
    the whole epoch is one permutation, cut into global batches, so the order depends on the seed
    and the data alone, never on the worker count."""
    return np.random.default_rng([int(Tag.WINDOW_ORDER), seed, epoch]).permutation(windows)


def row_order(order_seed, rows: int) -> np.ndarray:
    """The order of a unit's `rows` rows, from its `row_order_seed`."""
    return np.random.default_rng(list(order_seed)).permutation(rows)


# --- the batch builder ----------------------------------------------------------------------------
def build_seed(seed: int, epoch: int | None) -> int:
    """The batch builder's seed (identity spans, CANINE-C order, noise): new each epoch, fixed for eval."""
    return zlib.crc32(json.dumps([seed, "eval" if epoch is None else epoch]).encode())


def example_keys(example_ids) -> np.ndarray:
    """uint64 key of each example id: its draws do not depend on where the row is in a batch."""
    return np.array([zlib.crc32(i.encode("utf-8")) for i in example_ids], dtype=np.uint64)


def batch_uniform(seed: int, keys: np.ndarray, index: np.ndarray, stream: Stream) -> np.ndarray:
    """Deterministic U[0, 1) per (build seed, example key, index, stream): splitmix64 of their mix."""
    with np.errstate(over="ignore"):
        x = (np.uint64(seed & (2**64 - 1)) * GOLDEN + keys.astype(np.uint64) * MIX1
             + index.astype(np.uint64) * MIX2 + np.uint64(stream))
        return unit_floats(splitmix64(x))


# --- made-up rows and evaluation ------------------------------------------------------------------
def probe_rng() -> np.random.Generator:
    """The letters and subword ids of autobatch's probe rows (only their shapes matter)."""
    return np.random.default_rng(0)


def snippet_rng(seed: int) -> np.random.Generator:
    """Which windows of each validation row `canine evaluate` probes (evaluate.snippets)."""
    return np.random.default_rng(seed)


def seed_probe(seed: int) -> None:
    """torch's generator before the linear probe is built (evaluate.probe_predictions)."""
    import torch

    torch.manual_seed(seed)
