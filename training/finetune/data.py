"""The task's examples on every worker: the CoNLL files read whole (a NER corpus is megabytes:
MasakhaNER's largest training file is 1.3 MB), checked, cut into windows (training/conll.py), and
each step's batch chosen by the seed alone.

Order: an epoch is one seeded permutation of the training windows (seeds.window_order); the run
reads them as one stream, global batch after global batch across epoch ends, so step s takes
stream positions [s*G, (s+1)*G). Worker r takes the r-th contiguous block of that batch, cut into
its micro batches, as pretraining's data does (train/data.py): with the same micro batch, 1 or 2
workers see the same micro batches (dropout is seeded per micro batch), so the order and the
arithmetic do not depend on the worker count.

Loss: the summed cross-entropy of a micro batch is scaled by W x A / T, T the labelled characters
of the whole global batch (W workers, A accumulation steps): DeepSpeed divides by A and averages
over W, so the gradient is the mean over every labelled character of the step, whatever the split.

Evaluation batches are fixed too: a split's windows sorted by length (then index), cut into
batches of the micro batch, batch b on worker b mod W. A window's encoding depends a little on
the padding of its batch (the padding's molecules reach the upsampling conv), so the batches, not
only the windows, must be the same on any worker count for the scores to be.
"""

import dataclasses
import hashlib
import math

import fsspec
import numpy as np

from contract.files import redact
from training import conll, seeds

ROLES = ("train", "dev", "test")


@dataclasses.dataclass
class Split:
    """One role's sentences (every file of it, in the order given) and their windows."""

    sentences: list
    windows: list
    files: list  # (lang, path)
    counts: list  # sentences of each file, in order

    def languages(self) -> list[str]:
        return list(dict.fromkeys(s.lang for s in self.sentences))


@dataclasses.dataclass
class TaskData:
    labels: tuple[str, ...]
    splits: dict  # role -> Split (dev and test may be absent)
    sha256: str  # of every file's bytes with its role and language: a resume must read the same data


def files_of(task) -> dict[str, list[tuple[str, str]]]:
    """role -> [(lang, path)] of the task config (LANG=PATH or PATH named by its folder)."""
    return {role: [conll.parse_file_arg(a) for a in getattr(task, role)] for role in ROLES if getattr(task, role)}


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with fsspec.open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def data_sha256(files: dict) -> str:
    h = hashlib.sha256()
    for role, pairs in files.items():
        for lang, path in pairs:
            h.update(f"{role}:{lang}:{_sha256(path)};".encode())
    return h.hexdigest()


def read_sentences(files: dict) -> dict[str, list[list]]:
    """role -> the sentences of each of its files (a ConllError names FILE:LINE; a missing file its path)."""
    return {role: [conll.read_conll(path, lang) for lang, path in pairs] for role, pairs in files.items()}


def check_labels(sentences: dict, labels: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The run's label set: `labels` (a resumed run's, from its config.yaml) or the training files'.
    Entity types of dev or test that training lacks are refused, listed with where each first
    occurs: the classifier has no row for them, so they could only count as misses."""
    found = tuple(conll.label_list(sentences["train"]))
    others = [s for role in ("dev", "test") for s in sentences.get(role, ())]
    unseen = conll.unseen_labels(sentences["train"], others)
    if unseen:
        listed = ", ".join(f"{t} ({redact(w)})" for t, w in sorted(unseen.items()))
        raise ValueError(f"entity types in --dev/--test that no --train file has: {listed}; the model cannot "
                         "predict them (add training data with them, or leave those files out)")
    if labels and tuple(labels) != found:
        raise ValueError(f"the training files give the labels {list(found)}, the run was started with "
                         f"{list(labels)}: resume with the files it was trained on, or start a new --output")
    return found


def read_task(task, labels: tuple[str, ...] | None = None) -> TaskData:
    """Every file of the task read, checked and windowed (the driver before Ray; each worker again)."""
    files = files_of(task)
    if "train" not in files:
        raise ValueError("fine-tuning needs --train (CoNLL files)")
    per_file = read_sentences(files)
    sentences = {role: [s for part in parts for s in part] for role, parts in per_file.items()}
    found = check_labels(sentences, labels)
    label2id = {label: i for i, label in enumerate(found)}
    splits = {role: Split(sents, conll.windows(sents, label2id, task.max_length, task.stride), files[role],
                          [len(part) for part in per_file[role]])
              for role, sents in sentences.items()}
    return TaskData(found, splits, data_sha256(files))


# --- training order -------------------------------------------------------------------------------


def steps_for(epochs: float, windows: int, global_batch: int) -> int:
    """Optimizer steps of `epochs` passes over `windows` training windows (at least one)."""
    return max(1, math.ceil(epochs * windows / global_batch))


def step_windows(seed: int, step: int, global_batch: int, windows: int) -> np.ndarray:
    """The training windows of the global batch of optimizer step `step` (0-based: steps done)."""
    positions = np.arange(step * global_batch, (step + 1) * global_batch)
    epochs, offsets = np.divmod(positions, windows)
    out = np.empty(global_batch, dtype=np.int64)
    for epoch in np.unique(epochs):
        order = seeds.window_order(seed, int(epoch), windows)
        out[epochs == epoch] = order[offsets[epochs == epoch]]
    return out


def epoch_of(step: int, global_batch: int, windows: int) -> float:
    """Epochs done after `step` optimizer steps."""
    return step * global_batch / windows


def rank_micro_batches(batch: np.ndarray, rank: int, world: int, micro: int) -> list[np.ndarray]:
    """Worker `rank`'s contiguous block of a global batch, cut into its micro batches."""
    share = len(batch) // world
    block = batch[rank * share:(rank + 1) * share]
    return [block[i:i + micro] for i in range(0, share, micro)]


def labelled(windows: list, indices) -> int:
    """Characters with a label in these windows (the loss's denominator)."""
    return int(sum(int((windows[i].labels != conll.IGNORE).sum()) for i in indices))


# --- batches --------------------------------------------------------------------------------------


def collate(windows: list, indices, multiple: int = 4) -> dict:
    """Padded arrays of some windows: input_ids, attention_mask, labels (IGNORE at padding), the
    length rounded up to `multiple` (the downsampling rate: whole molecules)."""
    import torch

    longest = max(len(windows[i].input_ids) for i in indices)
    length = max(multiple, -(-longest // multiple) * multiple)
    ids = np.zeros((len(indices), length), dtype=np.int64)
    labels = np.full((len(indices), length), conll.IGNORE, dtype=np.int64)
    mask = np.zeros((len(indices), length), dtype=np.int64)
    for row, i in enumerate(indices):
        w = windows[i]
        ids[row, :len(w.input_ids)] = w.input_ids
        labels[row, :len(w.labels)] = w.labels
        mask[row, :len(w.input_ids)] = 1
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask),
            "labels": torch.from_numpy(labels)}


def eval_batches(windows: list, batch_size: int) -> list[np.ndarray]:
    """A split's evaluation batches: windows by length (then index), `batch_size` a batch; the
    same on any worker count (module docstring)."""
    order = sorted(range(len(windows)), key=lambda i: (len(windows[i].input_ids), i))
    return [np.array(order[i:i + batch_size]) for i in range(0, len(order), batch_size)]
