"""Checkpoints: what a resumed run needs to continue exactly, and the consolidated fp32 weights.

A checkpoint directory (one per reported step, merged by Ray Train from every rank's files):
    deepspeed/stepNNNNNNNN/...   DeepSpeed's checkpoint: module, ZeRO optimizer shards, LR schedule
    train_state.json             step, data position (epoch, rows), data identity, world size (rank 0)
    shapes.json                  parameter name -> shape, checked before DeepSpeed loads anything
    rng/rank{r}.pt               each rank's torch / CUDA / numpy / python RNG state (dropout)

    universal/stepNNNNNNNN/...   the same state in DeepSpeed's universal form, made once, at the
                                 first resume on another worker count (below)

Resuming from an object store, each rank downloads only the files it loads (`rank_files`), not
the whole folder as Ray's Checkpoint.as_directory does (once per node): under ZeRO most of a
checkpoint is the other ranks' optimizer partitions.

Resuming on another worker count (elastic): ZeRO's files hold each rank's slice of the flattened
optimizer state, so they only load into the same count. DeepSpeed's universal checkpointing
(deepspeed/checkpoint/ds_to_universal.py; its load_universal config) turns them into one file per
parameter and state, which any count loads. Rank 0 converts the checkpoint it resumes from once
and stores the result beside it (`make_universal`); every rank then loads that. Without ZeRO the
optimizer state is not partitioned and loads into any count as it is. A bf16 run writes the files
an fp32 run does: bf16 is autocast over the same fp32 weights and optimizer (engine.py).

Nothing is unpickled beyond plain data. Our own files are JSON or tensors-only, read with
`torch.load(weights_only=True)`; DeepSpeed's loader asks torch for `weights_only=False`, so its
loads are forced to weights_only=True too, with only the few DeepSpeed classes its files hold
allowed (`_weights_only_loads`). A file holding anything else (a planted `os.system`) is refused
before any of it runs. Shapes are checked first (shapes.json).

Any checkpoint's weights, offline (`consolidate`: no Ray, no GPU, no process group), for `canine
evaluate --step` and `canine export --step`: DeepSpeed's own zero_to_fp32 rebuilds the fp32 master
weights from the ZeRO >= 1 optimizer partitions; at stage 0 they are the module's weights, saved
whole. The result equals what `gather_fp32` gives at that step, tensor for tensor (the final
step's checkpoint holds final/model_fp32.pt's weights).
"""

import contextlib
import glob
import io
import json
import os
import pickle
import random
import re
import tempfile

import fsspec
import numpy as np
import torch

from contract.files import atomic_write, is_local, redact

DS_DIR = "deepspeed"
STATE_FILE = "train_state.json"
SHAPES_FILE = "shapes.json"
RNG_DIR = "rng"
UNIVERSAL_DIR = "universal"
UNIVERSAL_DONE = "COMPLETE"  # written last into UNIVERSAL_DIR: the conversion is whole


def tag(step: int) -> str:
    return f"step{step:08d}"


def model_shapes(model: torch.nn.Module) -> dict[str, list[int]]:
    """Every state-dict entry's shape, taken from the plain model before DeepSpeed partitions it."""
    return {name: list(t.shape) for name, t in model.state_dict().items()}


def check_shapes(saved: dict, expected: dict, where: str) -> None:
    """Raise one clear error listing every tensor whose name or shape differs."""
    problems = [f"{k}: {saved[k]} in the checkpoint, the model has {expected[k]}"
                for k in sorted(set(saved) & set(expected)) if list(saved[k]) != list(expected[k])]
    if missing := sorted(set(expected) - set(saved)):
        problems.append(f"missing from the checkpoint: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if unexpected := sorted(set(saved) - set(expected)):
        problems.append(f"not in the model: {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}")
    if problems:
        raise ValueError(f"{where} does not match the model (another model size or overrides?): "
                         + "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else ""))


def _rng_state() -> dict:
    np_state = np.random.get_state()
    py_state = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64)),
        "numpy_rest": [int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "python_keys": torch.tensor(py_state[1], dtype=torch.int64),
        "python_gauss": py_state[2],
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    pos, has_gauss, cached = state["numpy_rest"]
    np.random.set_state(("MT19937", state["numpy_keys"].numpy().astype(np.uint32), pos, has_gauss, cached))
    random.setstate((3, tuple(int(x) for x in state["python_keys"].tolist()), state["python_gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(engine, directory: str, state: dict, shapes: dict, rank: int) -> None:
    """Write this rank's part of the checkpoint of `state["step"]` into a local directory."""
    engine.save_checkpoint(os.path.join(directory, DS_DIR), tag=tag(state["step"]))
    os.makedirs(os.path.join(directory, RNG_DIR), exist_ok=True)
    torch.save(_rng_state(), os.path.join(directory, RNG_DIR, f"rank{rank}.pt"))
    if rank == 0:
        with open(os.path.join(directory, STATE_FILE), "w") as f:
            json.dump(state, f, indent=1)
        with open(os.path.join(directory, SHAPES_FILE), "w") as f:
            json.dump(shapes, f)


# DeepSpeed 0.19 names a rank's partition "zero_pp_rank_R_mp_rank_XX_{optim,model}_states.pt"
# (engine.py _get_rank_zero_ckpt_name, _get_ckpt_name); the other files of a tag folder,
# "mp_rank_XX_model_states.pt" (ZeRO 0-2: the module, and at stage 0 the optimizer too), every
# rank loads. A rank reads only its own partition: _get_all_zero_checkpoint_state_dicts loads
# file i on dp rank i alone (zero_optimization.elastic_checkpoint is off, its default).
_PARTITION = re.compile(r"zero_pp_rank_(\d+)_")


def loaded_by(relpath: str, rank: int, universal: bool = False) -> bool:
    """Whether `rank` reads this file of a checkpoint (a path relative to it) in `restore`."""
    if relpath in (STATE_FILE, SHAPES_FILE):
        return True
    if universal:  # every rank reads every parameter's full state and keeps its slice
        return relpath.startswith(UNIVERSAL_DIR + "/")
    if relpath.startswith(RNG_DIR + "/"):
        return relpath == f"{RNG_DIR}/rank{rank}.pt"
    # DS_DIR/TAG/*.pt; not DS_DIR/latest nor DeepSpeed's zero_to_fp32.py (restore names the tag)
    parts = relpath.split("/")
    if len(parts) != 3 or parts[0] != DS_DIR or not parts[2].endswith(".pt"):
        return False
    partition = _PARTITION.search(parts[2])
    return partition is None or int(partition[1]) == rank


@contextlib.contextmanager
def _local_copy(ckpt, wanted):
    """A local directory holding the files of a Ray Train checkpoint for which `wanted(relpath)`
    holds: the checkpoint itself when it is on a local disk, else a temporary copy of those."""
    import pyarrow.fs as pafs

    if isinstance(ckpt.filesystem, pafs.LocalFileSystem):
        yield ckpt.path
        return
    root = ckpt.path.rstrip("/")
    infos = ckpt.filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    with tempfile.TemporaryDirectory(prefix="canine-restore-") as local:
        for info in infos:
            relpath = info.path[len(root) + 1:]  # the selector lists paths under root
            if info.type == pafs.FileType.File and wanted(relpath):
                os.makedirs(os.path.dirname(os.path.join(local, relpath)), exist_ok=True)
                pafs.copy_files(info.path, os.path.join(local, relpath), source_filesystem=ckpt.filesystem,
                                destination_filesystem=pafs.LocalFileSystem())
        yield local


def rank_files(ckpt, rank: int, universal: bool = False):
    """A local directory holding the files of a checkpoint that `rank` loads (see `loaded_by`)."""
    return _local_copy(ckpt, lambda relpath: loaded_by(relpath, rank, universal))


def saved_state(ckpt) -> dict:
    """train_state.json of a Ray Train checkpoint, wherever it is stored."""
    with ckpt.filesystem.open_input_stream(f"{ckpt.path.rstrip('/')}/{STATE_FILE}") as f:
        return json.loads(f.read())


def resharded(cfg) -> bool:
    """Whether a run's optimizer state is partitioned by rank: under ZeRO >= 1, in either precision."""
    return cfg.parallel.zero_stage >= 1


def _convert_to_universal(src: str, dst: str) -> None:
    """DeepSpeed's ds_to_universal on one tag folder, in this process (one extract and one merge
    worker: no process pool), its loads forced to weights_only like ours. --inject_missing_state:
    our checkpoints lack the Megatron-style metadata it otherwise requires (a plain data-parallel
    model has none to give)."""
    import argparse

    from deepspeed.checkpoint import ds_to_universal

    args = argparse.Namespace(input_folder=src, output_folder=dst, num_extract_workers=1, num_merge_workers=1,
                              keep_temp_folder=False, strict=True, inject_missing_state=True)
    with _weights_only_loads(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        ds_to_universal.main(args)


def make_universal(ckpt, rank: int) -> None:
    """Rank 0 converts the checkpoint's DeepSpeed state to the universal form and stores it in the
    checkpoint (once: a later elastic resume from it reuses the result); all ranks wait for it."""
    import pyarrow.fs as pafs
    import torch.distributed as dist

    root = ckpt.path.rstrip("/")
    done = f"{root}/{UNIVERSAL_DIR}/{UNIVERSAL_DONE}"
    if rank == 0 and ckpt.filesystem.get_file_info(done).type == pafs.FileType.NotFound:
        step_tag = tag(saved_state(ckpt)["step"])
        with _local_copy(ckpt, lambda relpath: relpath.startswith(f"{DS_DIR}/{step_tag}/")) as local, \
                tempfile.TemporaryDirectory(prefix="canine-universal-") as out:
            _convert_to_universal(os.path.join(local, DS_DIR, step_tag), os.path.join(out, step_tag))
            with open(os.path.join(out, UNIVERSAL_DONE), "w") as f:
                f.write(f"{step_tag}\n")
            # Files first, the marker last: a conversion cut short is redone, never half used.
            ckpt.filesystem.create_dir(f"{root}/{UNIVERSAL_DIR}")
            pafs.copy_files(os.path.join(out, step_tag), f"{root}/{UNIVERSAL_DIR}/{step_tag}",
                            source_filesystem=pafs.LocalFileSystem(), destination_filesystem=ckpt.filesystem)
            pafs.copy_files(os.path.join(out, UNIVERSAL_DONE), done, source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=ckpt.filesystem)
    dist.barrier()


def _deepspeed_globals() -> list:
    """The classes besides tensors and containers that DeepSpeed 0.19 pickles into its files: the
    ZeRO >= 1 optimizer states (torch.serialization.
    get_unsafe_globals_in_checkpoint on checkpoints of ZeRO 0-3; stage 0 files need none). Each
    is rebuilt from its pickled attributes; none runs code of its own while loading."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, ZeroStageEnum, fragment_address]


@contextlib.contextmanager
def _weights_only_loads():
    """Every torch.load inside runs with weights_only=True, DeepSpeed's too. Relies on:
    - deepspeed 0.19.8 runtime/checkpoint_engine/torch_checkpoint_engine.py, TorchCheckpointEngine.load:
      `torch.load(path, map_location=map_location, weights_only=False)`, which engine.load_checkpoint
      uses for the module, optimizer and ZeRO files;
    - torch's documented TORCH_FORCE_WEIGHTS_ONLY_LOAD, which overrides an explicit weights_only=False
      (torch/serialization.py, load()).
    tests/training/train/test_train_checkpoint.py fails if either changes. Both settings are process-wide
    for the duration: restore runs before the worker's training starts, alone in its process."""
    keys = ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")  # torch refuses both set
    saved = {k: os.environ.pop(k, None) for k in keys}
    os.environ[keys[0]] = "1"
    try:
        with torch.serialization.safe_globals(_deepspeed_globals()):
            yield
    finally:
        os.environ.pop(keys[0])
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def _unsafe_files(tag_dir: str) -> str:
    """Which files of a DeepSpeed checkpoint reference globals outside the allowed ones, and which
    globals (read from the pickle opcodes; nothing is run): for the error message."""
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in _deepspeed_globals()}
    found = []
    for name in sorted(os.listdir(tag_dir)):
        if os.path.isdir(os.path.join(tag_dir, name)):  # a universal checkpoint's zero/ folder
            continue
        try:
            bad = set(torch.serialization.get_unsafe_globals_in_checkpoint(os.path.join(tag_dir, name))) - allowed
        except ValueError:  # not torch.save's zip format
            bad = {"not a torch.save zip file"}
        if bad:
            found.append(f"{name} ({', '.join(sorted(bad))})")
    return "; ".join(found) or "its DeepSpeed files"


def read_state(directory: str) -> dict:
    with open(os.path.join(directory, STATE_FILE)) as f:
        return json.load(f)


def check_same_data(state: dict, data_sha256: str, where: str) -> None:
    """A checkpoint (its train_state.json, `state`) resumes only on the data it was trained on:
    its position (epoch, rows per stream) names rows of that data. The driver checks it before
    Ray starts (run.check_data), a worker again as it restores."""
    if state.get("data_sha256") and data_sha256 and state["data_sha256"] != data_sha256:
        raise ValueError(f"{where} was trained on data with config_sha256 {state['data_sha256']}, "
                         f"--data has {data_sha256}: the data position would not mean the same rows; resume with "
                         "the --data it was trained on, or start a new --output")


def restore(engine, directory: str, shapes: dict, rank: int, world: int, data_sha256: str) -> dict:
    """Load the checkpoint in `directory` into the engine and this process; returns the train
    state. A checkpoint of another worker count loads from its universal form (`make_universal`,
    and the engine built with load_universal) or, unpartitioned, as it is."""
    state = read_state(directory)
    with open(os.path.join(directory, SHAPES_FILE)) as f:
        check_shapes(json.load(f), shapes, f"checkpoint {directory}")
    check_same_data(state, data_sha256, f"checkpoint {directory}")
    universal = bool(getattr(engine, "load_universal_checkpoint", lambda: False)())
    load_dir = os.path.join(directory, UNIVERSAL_DIR if universal else DS_DIR)
    try:
        with _weights_only_loads():
            path, _ = engine.load_checkpoint(load_dir, tag=tag(state["step"]),
                                             load_optimizer_states=True, load_lr_scheduler_states=True)
    except pickle.UnpicklingError as e:
        files_named = _unsafe_files(os.path.join(load_dir, tag(state["step"])))
        raise ValueError(f"checkpoint {directory}: refused to load {files_named}: they hold objects other than "
                         "tensors and DeepSpeed's own state (a tampered or foreign checkpoint); nothing in them "
                         "was run") from e
    if path is None:
        raise FileNotFoundError(f"checkpoint {directory}: no DeepSpeed checkpoint {load_dir}/{tag(state['step'])}")
    if state["world"] == world:  # a rank of another count has no saved generator state of its own
        _set_rng_state(torch.load(os.path.join(directory, RNG_DIR, f"rank{rank}.pt"), weights_only=True))
    return state


def _fp32_master(param: torch.nn.Parameter):
    """The fp32 value of a parameter, wherever DeepSpeed keeps it (a collective under ZeRO >= 1)."""
    from deepspeed.utils import safe_get_full_fp32_param

    full = safe_get_full_fp32_param(param)  # ZeRO-1/2/3: gathered from the partitions
    return param if full is None else full  # no ZeRO: the module's weights are the fp32 master weights


def gather_fp32(engine, shapes: dict, rank: int) -> dict | None:
    """The full fp32 state dict, gathered from the ZeRO shards; every rank must call, rank 0 gets it."""
    params = dict(engine.module.named_parameters())
    buffers = dict(engine.module.named_buffers())
    out = {}
    for name in shapes:  # same order on every rank: the gathers are collectives
        value = _fp32_master(params[name]) if name in params else buffers[name]
        if rank == 0:
            out[name] = value.detach().to("cpu", torch.float32).clone().reshape(shapes[name])
    return out if rank == 0 else None


def save_consolidated(state_dict: dict, url: str) -> None:
    """torch.save a tensors-only state dict to any fsspec URL, whole or not at all."""
    buf = io.BytesIO()
    torch.save(state_dict, buf)
    atomic_write(url, buf.getvalue())


def load_consolidated(model: torch.nn.Module, url: str) -> torch.nn.Module:
    """Load consolidated weights (weights_only=True) into `model`, checking every shape first."""
    with fsspec.open(url, "rb") as f:
        state = torch.load(f, map_location="cpu", weights_only=True)
    check_shapes({k: list(v.shape) for k, v in state.items()}, model_shapes(model), f"consolidated weights {url}")
    model.load_state_dict(state, strict=True)
    return model


def saved_step(url: str) -> int:
    """The step of the checkpoint directory at `url` (local or any fsspec URL): its train_state.json."""
    fs, path = fsspec.core.url_to_fs(url)
    state = f"{path.rstrip('/')}/{STATE_FILE}"
    if not fs.isfile(state):
        raise FileNotFoundError(f"{redact(url)} has no {STATE_FILE}: not a checkpoint directory (a run's "
                                "ray_train/checkpoint_stepNNNNNNNN folder); check the path, or name a step with --step")
    return int(json.loads(fs.cat_file(state))["step"])


@contextlib.contextmanager
def _local_folder(fs, path: str):
    """A local directory holding the files of the folder `path` on `fs`: the folder itself on a
    local disk, else a temporary copy."""
    if is_local(fs):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="canine-consolidate-") as local:
        for remote in fs.find(path):
            target = os.path.join(local, os.path.relpath(remote, path))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fs.get_file(remote, target)
        yield local


def _module_fp32(tag_dir: str, where: str) -> dict:
    """The fp32 weights in one DeepSpeed tag folder. ZeRO >= 1 (its *_optim_states.pt hold the fp32
    master partitions): DeepSpeed's get_fp32_state_dict_from_zero_checkpoint, which merges every
    rank's partition (stages 1-2) or flat group (stage 3). Stage 0 writes no such file: the module
    state in mp_rank_00_model_states.pt is the fp32 master (as `_fp32_master` reads it in training).
    Loaded weights_only, as `restore` loads (`_weights_only_loads`); DeepSpeed's progress lines
    are dropped."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    try:
        with _weights_only_loads(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            if glob.glob(os.path.join(tag_dir, "*_optim_states.pt")):
                return get_fp32_state_dict_from_zero_checkpoint(os.path.dirname(tag_dir), tag=os.path.basename(tag_dir))
            states = torch.load(os.path.join(tag_dir, "mp_rank_00_model_states.pt"), map_location="cpu",
                                weights_only=True)
            return states["module"]
    except pickle.UnpicklingError as e:
        raise ValueError(f"checkpoint {where}: refused to load {_unsafe_files(tag_dir)}: they hold objects other "
                         "than tensors and DeepSpeed's own state (a tampered or foreign checkpoint); nothing in "
                         "them was run") from e


def consolidate(url: str) -> tuple[int, dict]:
    """(step, the fp32 state dict) of the checkpoint directory at `url` (local or any fsspec URL),
    offline: the state dict `gather_fp32` gives at that step, in its order and its dtype (every
    entry fp32: it writes buffers so too), its shapes checked against the checkpoint's shapes.json."""
    step = saved_step(url)
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    where = redact(url)
    with fs.open(f"{root}/{SHAPES_FILE}", "rb") as f:
        shapes = json.load(f)
    tag_path = f"{root}/{DS_DIR}/{tag(step)}"
    if not fs.isdir(tag_path):
        raise FileNotFoundError(f"checkpoint {where}: no DeepSpeed checkpoint {DS_DIR}/{tag(step)} in it (a copy cut "
                                "short?); copy the checkpoint folder again, or name another step")
    with _local_folder(fs, tag_path) as tag_dir:
        try:
            weights = _module_fp32(tag_dir, where)
        except (RuntimeError, EOFError) as e:  # torch.load of a cut or damaged file, DeepSpeed's merge of one
            first = str(e).strip().splitlines()[0].split(". ")[0][:160] if str(e).strip() else "no detail"
            raise ValueError(f"checkpoint {where}: unreadable DeepSpeed checkpoint ({type(e).__name__}: {first}); "
                             "a damaged or partly copied folder: copy it again, or name another step") from e
    check_shapes({k: list(v.shape) for k, v in weights.items()}, shapes, f"checkpoint {where}")
    return step, {name: weights[name].detach().to("cpu", torch.float32).clone().reshape(shapes[name])
                  for name in shapes}


def load_checkpoint_weights(model: torch.nn.Module, url: str) -> int:
    """Load the fp32 weights of the checkpoint directory at `url` into `model` (`consolidate`),
    checking every shape first; returns the checkpoint's step."""
    step, state = consolidate(url)
    check_shapes({k: list(v.shape) for k, v in state.items()}, model_shapes(model), f"checkpoint {redact(url)}")
    model.load_state_dict(state, strict=True)
    return step
