"""`canine pretrain --init PATH`: a new run that starts from weights instead of a fresh initialisation.

    canine pretrain --data out/shards --output runs/cont --config base --init /models/canine-c
    canine pretrain --data out/shards --output runs/cont --config tiny --init runs/tiny               # its final weights
    canine pretrain --data out/shards --output runs/cont --config tiny --init runs/tiny --init-step 50

PATH (a local path or any fsspec URL; never a hub name: nothing is downloaded) is one of
- a Hugging Face CANINE directory, as google/canine-c and google/canine-s ship: config.json and
  model.safetensors or pytorch_model.bin of a CanineModel (or a task model holding one as `canine.`);
- a `canine export` directory: the same, plus its pretraining head (pretraining_head.safetensors);
- a canine run (its config.yaml): its final weights, or with init.step the checkpoint of that step.

The encoder loads exactly (training/hf.py's conversion, a split / concatenation / reshape). A head
tensor or the sentence-order layer loads where the source has it with the same shape and meaning
(our exports and runs, same objective; CANINE-S only with the same subword vocabulary); every other
tensor keeps the fresh run's initialisation (the model is built under the same seed first). The
driver reads the source once before Ray starts (`prepare`): architecture fields that differ from
the --config are refused in one line, the activation and LayerNorm epsilon are taken from the
source (the weights were trained with them), and its lines say what loads and what is new. The
workers load it again (`load_into`), only on a run's first start: a resumption restores its
checkpoint. The optimizer and the schedule are the new run's own (warm-up applies).
"""

import dataclasses
import hashlib
import io
import json

import fsspec
import torch

from contract.files import redact
from training import hf
from training.canine_config import CanineConfig
from training.train import rundir

HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # what save_pretrained writes, newest first
# Fields of the architecture that must be equal: a tensor of another shape, or another hash
# (buckets, functions), rate or window, would not be the same model.
ARCHITECTURE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "num_hash_functions",
                "num_hash_buckets", "downsampling_rate", "upsampling_kernel_size", "local_transformer_stride",
                "type_vocab_size")
# Only a canine run can have these (a Hugging Face CanineModel has neither n-grams nor ALBERT's switches).
OWN_ARCHITECTURE = ("ngram_orders", "share_layers", "embedding_size")
# Taken from the source whatever the --config says: the weights were trained with them.
TAKEN = ("hidden_act", "layer_norm_eps")


class InitError(ValueError):
    """Why --init cannot start this run, in one line."""


@dataclasses.dataclass(frozen=True)
class Source:
    url: str  # what init.path names (absolute)
    kind: str  # "hf" (a CanineModel directory), "export" (ours, with its head) or "run"
    weights_url: str  # the file (or checkpoint directory) the tensors come from
    step: int  # a run's step (0: not a run)
    architecture: dict  # CanineConfig fields of the source
    positions: int  # rows of its position table that hold trained positions
    objective: str | None  # the objective of the head it holds, if any
    char_reveal: str | None
    subword_vocab: list | None  # CANINE-S: the head's tokens by id, where known
    has_sop: bool

    def describe(self) -> str:
        what = {"hf": "a Hugging Face CanineModel", "export": "a canine export",
                "run": f"step {self.step} of a canine run"}[self.kind]
        return f"{redact(self.url)} ({what})"


def _fs(url):
    return fsspec.core.url_to_fs(url)


def _join(url: str, name: str) -> str:
    return rundir.join(url, name)


def _read_json(url: str) -> dict:
    fs, path = _fs(url)
    with fs.open(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"))


def _vocab_file(url: str) -> list | None:
    from training.hf_masked import SUBWORD_VOCAB_FILE

    fs, path = _fs(_join(url, SUBWORD_VOCAB_FILE))
    return _read_json(_join(url, SUBWORD_VOCAB_FILE)) if fs.isfile(path) else None


def open_source(url: str, step: int = 0) -> Source:
    """What init.path names, from its config files alone (no tensors read). A path that is none of
    the three kinds, a run without the weights asked for, or a hub name is an InitError."""
    url = rundir.absolute(url)
    fs, path = _fs(url)
    if not fs.isdir(path):
        raise InitError(f"--init {redact(url)}: no such directory (a Hugging Face CANINE directory, a canine export "
                        "or a canine run, a local path or fsspec URL; hub names are not downloaded: fetch the "
                        "directory first, e.g. huggingface-cli download google/canine-c --local-dir DIR)")
    if fs.isfile(f"{path.rstrip('/')}/{rundir.CONFIG}"):
        return _run_source(url, step)
    if step:
        raise InitError(f"--init-step {step}: {redact(url)} is not a canine run (no {rundir.CONFIG}); a step names "
                        "one of a run's checkpoints")
    if not fs.isfile(f"{path.rstrip('/')}/config.json"):
        raise InitError(f"--init {redact(url)}: neither a Hugging Face CANINE directory (config.json + "
                        f"{' or '.join(HF_WEIGHTS)}) nor a canine run ({rundir.CONFIG})")
    config = _read_json(_join(url, "config.json"))
    if config.get("model_type") != "canine":
        raise InitError(f"--init {redact(url)}: config.json says model_type {config.get('model_type')!r}, not a "
                        "CANINE model")
    weights = next((_join(url, n) for n in HF_WEIGHTS if fs.isfile(f"{path.rstrip('/')}/{n}")), None)
    if weights is None:
        raise InitError(f"--init {redact(url)}: config.json but no {' or '.join(HF_WEIGHTS)} (a sharded or "
                        "TensorFlow checkpoint: load it with transformers and save_pretrained it as one file)")
    from transformers import CanineConfig as HFConfig

    defaults = HFConfig().to_dict()  # a field config.json leaves out has transformers' default
    architecture = {name: config.get(name, defaults.get(name)) for name in hf.HF_CONFIG_FIELDS}
    head = config.get("pretraining_head") or {}
    return Source(url=url, kind="export" if head else "hf", weights_url=weights, step=0, architecture=architecture,
                  # HF sizes its table by num_hash_buckets whatever max_position_embeddings says (hf.config_from_hf)
                  positions=min(architecture["max_position_embeddings"], architecture["num_hash_buckets"]),
                  objective=head.get("objective"), char_reveal=head.get("char_reveal"),
                  subword_vocab=_vocab_file(url) if head.get("objective") == "subword" else None, has_sop=False)


def _run_source(url: str, step: int) -> Source:
    from training.hf import subword_vocab_of
    from training.train import config

    cfg = rundir.read_config(url)
    if step:
        try:
            w = rundir.weights(url, step, cfg=cfg)
        except ValueError as e:
            raise InitError(f"--init-step: {e}".replace("leave out --step", "leave out --init-step")) from None
    else:
        w = rundir.weights(url, cfg=cfg)
        if not rundir.exists(w.url):
            raise InitError(f"--init {redact(url)}: the run has no final weights ({rundir.CONSOLIDATED}, written after "
                            f"its last step); finish it, or start from a saved checkpoint with --init-step N (saved "
                            f"steps: {rundir.saved_steps(url)})")
    model = config.model_config(cfg)
    vocab = subword_vocab_of(cfg.data.path) if cfg.train.objective == "subword" else None
    return Source(url=url, kind="run", weights_url=w.url, step=w.step, architecture=dataclasses.asdict(model),
                  positions=model.max_position_embeddings, objective=cfg.train.objective, char_reveal=model.char_reveal,
                  subword_vocab=vocab, has_sop=bool(model.sop_loss_weight))


def fitted_config(source: Source, model: CanineConfig, seq_len: int, config_name: str = "") -> dict:
    """The model overrides a run from `source` needs on top of its --config's `model` (the
    activation and epsilon the source was trained with; a position table cut to the source's),
    or an InitError naming every architecture field that differs, with both values."""
    a = source.architecture
    fields = ARCHITECTURE + (OWN_ARCHITECTURE if source.kind == "run" else ())
    differ = []
    for name in fields:
        mine, theirs = getattr(model, name), a.get(name)
        if isinstance(mine, tuple):
            theirs = tuple(theirs or ())
        if mine != theirs:
            differ.append(f"{name} {theirs!r} (init) vs {mine!r} (config)")
    if seq_len and source.positions < seq_len:
        differ.append(f"position table {source.positions} rows (init) vs data.seq_len {seq_len} (the data)")
    if differ:
        raise InitError(f"--init {redact(source.url)}: its architecture differs from --config {config_name}: "
                        f"{'; '.join(differ)}; use the config that matches it (google/canine-c and -s: --config "
                        "base) or --set model.FIELD=VALUE")
    out = {name: a[name] for name in TAKEN if a.get(name) is not None and a[name] != getattr(model, name)}
    if source.positions < model.max_position_embeddings:  # still >= seq_len: every trained position loads
        out["max_position_embeddings"] = source.positions
    if source.kind == "run" or (source.kind == "export" and source.char_reveal):
        if source.char_reveal and source.char_reveal != model.char_reveal and source.objective == "char":
            out["char_reveal"] = source.char_reveal  # the head's tensors mean what the source trained them for
    return out


def _read_bytes(url: str) -> bytes:
    fs, path = _fs(url)
    with fs.open(path, "rb") as f:
        return f.read()


def source_tensors(source: Source) -> tuple[dict[str, torch.Tensor], str]:
    """(the source's tensors under its own names, the sha256 of its weights): a file's bytes as
    sha256sum gives them; a checkpoint's consolidated fp32 tensors (name, dtype, shape, bytes, in
    order), a directory of many files having no one file to hash."""
    if source.kind == "run" and source.weights_url.rstrip("/").endswith(rundir.CONSOLIDATED):
        raw = _read_bytes(source.weights_url)
        return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True), hashlib.sha256(raw).hexdigest()
    if source.kind == "run":
        from training.train.checkpoint import consolidate

        _, tensors = consolidate(source.weights_url)
        h = hashlib.sha256()
        for name, t in tensors.items():
            h.update(f"{name}:{t.dtype}:{list(t.shape)};".encode())
            h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
        return tensors, h.hexdigest()
    raw = _read_bytes(source.weights_url)
    if source.weights_url.endswith(".safetensors"):
        from safetensors.torch import load

        tensors = load(raw)
    else:  # pytorch_model.bin: tensors only (weights_only), as transformers itself loads it
        tensors = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    if source.kind == "export":  # the head, beside (an older export kept it in model.safetensors)
        from safetensors.torch import load

        from training import hf_masked

        head_url = _join(source.url, hf_masked.HEAD_FILE)
        fs, path = _fs(head_url)
        if fs.isfile(path):
            tensors = {**tensors, **load(_read_bytes(head_url))}
    return tensors, hashlib.sha256(raw).hexdigest()


def as_ours(source: Source, tensors: dict, config: CanineConfig, objective: str,
          subword_vocab: list | None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The source's tensors under CaninePretrainingModel's names and layouts, and why each of the
    heads' tensors it cannot give is missing ({prefix: reason})."""
    why = {}
    if source.kind == "run":
        out = {k: v for k, v in tensors.items() if k.startswith("encoder.")}
        position = "encoder.embeddings.position.weight"
        out[position] = out[position][: config.max_position_embeddings]
        head = {k: v for k, v in tensors.items() if k.startswith("head.")}
        if source.has_sop:
            out.update({k: v for k, v in tensors.items() if k.startswith("sop.")})
        else:
            why["sop."] = "the source run trained without the sentence-order loss"
    else:
        out = {f"encoder.{k}": v for k, v in hf.from_hf_state_dict(tensors, config).items()}
        head = {"head." + k.removeprefix(hf.HEAD_PREFIX): v for k, v in tensors.items() if k.startswith(hf.HEAD_PREFIX)}
        why["sop."] = ("an export holds no sentence-order layer" if source.kind == "export"
                       else "a CanineModel has no sentence-order layer")
    if not head:
        why["head."] = "a CanineModel has no pretraining head"
    elif source.objective != objective:
        why["head."] = f"the source's head is the {source.objective} objective's, this run trains {objective}"
    else:
        if objective == "subword" and source.subword_vocab != subword_vocab:
            what = "unknown" if source.subword_vocab is None or subword_vocab is None else "another"
            why["head.output."] = f"the source's subword vocabulary is {what} (this data's tokenizer differs)"
            head = {k: v for k, v in head.items() if not k.startswith("head.output.")}
        out.update(head)
    return out, why


def merge(model: torch.nn.Module, ours: dict[str, torch.Tensor], why: dict[str, str]) -> tuple[list, dict]:
    """Load every tensor of `ours` that `model` has with the same shape (the rest of `model` keeps
    its initialisation); returns (loaded names, {new name: why})."""
    state = model.state_dict()
    loaded, new = [], {}
    for name, tensor in state.items():
        got = ours.get(name)
        if got is not None and list(got.shape) == list(tensor.shape):
            state[name] = got.to(tensor.dtype)
            loaded.append(name)
        else:
            reason = next((r for p, r in sorted(why.items(), key=lambda kv: -len(kv[0])) if name.startswith(p)), None)
            if got is not None:
                reason = f"shape {list(got.shape)} in the source, {list(tensor.shape)} here"
            new[name] = reason or "not in the source"
    model.load_state_dict(state, strict=True)
    return loaded, new


def describe(source: Source, sha256: str, loaded: list, new: dict, taken: dict, model_cfg: CanineConfig) -> list[str]:
    """The driver's lines: where the weights come from, what loads, what is new and why."""
    def groups(names):  # the encoder whole, a head's modules one by one: "head.output.* (2)"
        counts = {}
        for n in names:
            parts = n.split(".")
            top = "encoder" if parts[0] == "encoder" else ".".join(parts[:2 if len(parts) > 2 else 1])
            counts[top] = counts.get(top, 0) + 1
        return ", ".join(f"{k}.* ({v})" for k, v in counts.items())

    lines = [f"init from {source.describe()}, weights {redact(source.weights_url)} sha256 {sha256}",
             f"init: loaded {len(loaded)} tensors: {groups(loaded) or 'none'}"]
    if new:
        reasons = {}
        for name, reason in new.items():
            reasons.setdefault(reason, []).append(name)
        lines.append(f"init: new, initialised as in a fresh run, {len(new)} tensors: "
                     + "; ".join(f"{groups(names)}: {reason}" for reason, names in reasons.items()))
    else:
        lines.append("init: new tensors: none")
    if taken:
        lines.append("init: taken from the source: " + ", ".join(
            f"{k} {v!r} (the config has {getattr(model_cfg, k)!r})" for k, v in taken.items()))
    lines.append("init: the optimizer and the learning-rate schedule start fresh (warm-up applies)")
    return lines


def weights_size(source: Source) -> str:
    """The source's weights in words: "528 MB", or "a checkpoint to consolidate, 12 MB"."""
    fs, path = _fs(source.weights_url)
    directory = fs.isdir(path)
    n = fs.du(path, total=True) if directory else fs.size(path)
    return ("a checkpoint to consolidate, " if directory else "") + (f"{n / 1e6:.1f} MB" if n < 10e6 else
                                                                     f"{n / 1e6:,.0f} MB")


def prepare(cfg, model_cfg: CanineConfig, subword_vocab: list | None, seq_len: int = 0,
            say=None) -> tuple[object, list[str]]:
    """The driver's check of cfg.init before Ray starts: (cfg with init.sha256 and the source's
    activation / epsilon / positions in model.overrides, the lines to print). The tensors are read
    once here (their hash, what loads); an InitError says what is wrong in one line. `seq_len`:
    the data's example length (default data.seq_len). `say` is told before the weights are read:
    an --init run was silent 52 s before its first line. Measured here for a 528 MB base-size
    Hugging Face directory (2 loaded cores): 1 s to read, hash and load the file, 26 s to build the
    base model it loads into (torch's trunc_normal_ initialisation, 131 tensors)."""
    from training.heads import CaninePretrainingModel
    from training.train import config

    source = open_source(cfg.init.path, cfg.init.step)
    taken = fitted_config(source, model_cfg, seq_len or cfg.data.seq_len, cfg.model.size if not cfg.model.overrides else
                          f"{cfg.model.size} (with model overrides)")
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, overrides={**cfg.model.overrides, **taken}))
    fitted = model_cfg.replace(**taken)
    if say is not None:
        say(f"init: reading the init weights ({weights_size(source)}) from {redact(source.weights_url)} and building "
            "the model to load them into ...")
    tensors, sha256 = source_tensors(source)
    ours, why = as_ours(source, tensors, fitted, cfg.train.objective, subword_vocab)
    model = CaninePretrainingModel(fitted, cfg.train.objective)
    loaded, new = merge(model, ours, why)
    if not any(n.startswith("encoder.") for n in loaded):
        raise InitError(f"--init {redact(source.url)}: no encoder tensor of it loads")
    cfg = dataclasses.replace(cfg, init=dataclasses.replace(cfg.init, sha256=sha256))
    config.validate(cfg)
    return cfg, describe(source, sha256, loaded, new, taken, model_cfg)


def load_into(model, cfg, subword_vocab: list | None) -> tuple[list, dict]:
    """A worker's load of cfg.init into the freshly initialised `model` (the run's first start);
    the weights must still be those the driver hashed."""
    source = open_source(cfg.init.path, cfg.init.step)
    tensors, sha256 = source_tensors(source)
    if cfg.init.sha256 and sha256 != cfg.init.sha256:
        raise InitError(f"--init {redact(source.url)}: its weights changed since the run started (sha256 {sha256}, "
                        f"the run recorded {cfg.init.sha256}); start a new run")
    ours, why = as_ours(source, tensors, model.config, cfg.train.objective, subword_vocab)
    return merge(model, ours, why)


# Model overrides `prepare` may add (fitted_config): a resumption takes them from the run's config.yaml.
FITTED = TAKEN + ("max_position_embeddings", "char_reveal")


def resumed(cfg, saved: dict | None):
    """A resumption (or a finished run) of an --init run: its init and what the init set in
    model.overrides come from its config.yaml (`saved`), so the same command, with or without
    --init, continues it; it never loads the init again (the checkpoint holds the weights). Another
    init.path is left as given, for the resume check to refuse."""
    first = (saved or {}).get("init") or {}
    if not first.get("path") or cfg.init.path not in ("", first["path"]):
        return cfg
    from training.train.schema import InitConfig

    init = InitConfig(path=first["path"], step=int(first.get("step") or 0), sha256=first.get("sha256") or "")
    if cfg.init.path and cfg.init.step != init.step:
        init = dataclasses.replace(init, step=cfg.init.step)  # a change the resume check refuses
    fitted = {k: v for k, v in ((saved.get("model") or {}).get("overrides") or {}).items()
              if k in FITTED and k not in cfg.model.overrides}
    return dataclasses.replace(cfg, init=init,
                               model=dataclasses.replace(cfg.model, overrides={**cfg.model.overrides, **fitted}))
