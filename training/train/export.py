"""A finished run -> a Hugging Face CANINE directory: weights, config, tokenizer config, model card.

    canine export runs/tiny                                   # -> runs/tiny/hf
    canine export runs/tiny --step 8                          # -> runs/tiny/hf-step8
    canine export gs://bucket/runs/base --to /data/canine-c-base
    from training.train.export import export_run; export_run("runs/tiny")

What it reads from the run (any fsspec URL): config.yaml (the resolved config), the consolidated
fp32 weights (final/model_fp32.pt, written after the last step) or a saved checkpoint's
(`step` / `checkpoint`: rundir.weights, consolidated offline by training/train/checkpoint.py
`consolidate`), metrics.jsonl (steps, losses, evaluations, up to the weights' step) and the
shard manifest the config names (its hash, languages, examples). What it
writes (training/hf.py `export_hf`, published whole): config.json + model.safetensors
(`AutoModel` gives a `CanineModel`), tokenizer_config.json (`AutoTokenizer` gives a
`CanineTokenizer`: CANINE has no vocabulary, only its special codepoints and a length),
the pretraining head (its tensors, under `pretraining_head.`, in pretraining_head.safetensors,
modeling_canine_masked.py and `auto_map`: `AutoModelForMaskedLM` with trust_remote_code=True
fills in masked characters; CANINE-S adds subword_vocab.json from the data's tokenizer) and
README.md, the model card. `canine pretrain` calls it when a run finishes; `canine export` redoes
it, e.g. once the `[hf]` extra is installed.
"""

import contextlib
import dataclasses
import os
import pickle
import re

import fsspec
import yaml

from contract import schema
from contract.extras import install_hint
from contract.files import is_local, redact
from training.train import rundir


class ExportError(RuntimeError):
    """Why a run cannot be exported, in one sentence. `whole_error`: the sentence stands for an
    OSError whose whole text the CLI writes to a file and names (jobs/errors.py)."""

    whole_error = False


def missing_extra() -> str | None:
    """Why this install cannot export (None if it can)."""
    try:
        import safetensors  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed ({install_hint('hf')})"
    return None


def _dataset(data_path: str):
    """(data.Dataset, why it is missing) of the shards a run trained on: their manifest as the
    trainer read it (training/train/data.py open_dataset)."""
    from contract.manifest import ManifestError, manifest_url
    from training.train import data

    if not data_path:
        return None, "the config names no data.path"
    try:
        return data.open_dataset(data_path), ""
    except FileNotFoundError:
        return None, f"{schema.MANIFEST} not found"
    except (ValueError, ManifestError) as e:  # the file's own name, not this machine's path: the card is published
        return None, f"unreadable ({str(e).replace(manifest_url(data_path), schema.MANIFEST)})"
    except OSError as e:
        return None, f"unreadable here ({type(e).__name__})"


# The model card's fill-in line per objective (training/hf_masked.py `fill`).
FILL_EXAMPLE = {"char": 'print(model.fill("The capital of France is P____."))  # a character for each _',
                "subword": 'print(model.fill("The capital of France is _____."))  # a subword for each run of _'}
# ... and its pipeline call (hf_masked.CanineFillMaskPipeline, config.json's custom_pipelines).
PIPELINE_EXAMPLE = {
    "char": 'fill(f"The capital of France is P{fill.tokenizer.mask_token * 4}.", top_k=3)  # top 3 per masked character',
    "subword": 'fill(f"The capital of France is {fill.tokenizer.mask_token * 5}.", top_k=3)  # a run of masks: a subword'}

# A Wikimedia dump's file (pipeline/sources/dumps.py: <wiki>-<date>-pages-articles[-multistream].xml...).
_WIKIMEDIA_DUMP = re.compile(r"(^|/)[a-z0-9_]+wiki-(\d{8}|latest)-pages-articles")
# Wikipedia's text licence, as Wikimedia states it for its dumps.
WIKIPEDIA_LICENCE = ("Wikipedia's pages, by Wikipedia's contributors, under the Creative Commons Attribution-ShareAlike "
                     "licence (CC BY-SA) and, most of it, the GNU Free Documentation License (GFDL): "
                     "https://dumps.wikimedia.org/legal.html")


def data_licence(inputs: list[str] | None) -> str:
    """The model card's line on the licence of the text the shards hold, from the manifest's
    inputs (`inputs`: their URLs; None where the manifest could not be read): Wikipedia's for
    Wikimedia dumps; no other licence is recorded anywhere, and none is guessed."""
    if not inputs:
        return "not recorded: the manifest names no input files"
    wiki = sum(1 for url in inputs if _WIKIMEDIA_DUMP.search(url))
    if wiki == len(inputs):
        return (f"the inputs are Wikimedia dumps (by their file names): {WIKIPEDIA_LICENCE}; reusing the text "
                "means crediting them and sharing alike")
    return (f"{wiki} of {len(inputs)} input files are Wikimedia dumps ({WIKIPEDIA_LICENCE}); the others' licence is "
            "not recorded: see where they came from")


def _inputs(data_path: str) -> list[str] | None:
    """The input files the shards at `data_path` were made from (the manifest's config), or None."""
    from contract.manifest import open_manifest

    try:
        m, _ = open_manifest(data_path)
    except Exception:  # noqa: BLE001 (missing or unreadable: _dataset says why, in the card)
        return None
    return [str(f[0]) for f in m.config.get("input_fingerprints") or []] or list(m.config.get("inputs") or [])


def model_card(cfg, encoder_config, records: list[dict], dataset, manifest_missing: str = "",
               weights: rundir.Weights | None = None, inputs: list[str] | None = None) -> str:
    """README.md of an export: what was trained, on what (`inputs`: the data's input files, for
    its licence), for how long, and how well. `weights` (rundir.weights; default the final ones):
    a checkpoint's are described by the records up to its step, and the card says which step of
    how many it holds. Its pipeline_tag is fill-mask: the export answers transformers' fill-mask
    pipeline (training/hf_masked.py), shown with its call."""
    from training.train import config

    if weights is not None and weights.checkpoint:
        records = [r for r in records if r["step"] <= weights.step]  # what these weights were trained through

    objective = {"char": "CANINE-C (autoregressive character loss)", "subword": "CANINE-S (subword loss)"}
    langs = sorted(dataset.languages) if dataset else []
    front = {"library_name": "transformers", "pipeline_tag": "fill-mask",
             "tags": ["canine", "character-level", "tokenization-free", "canine-pretrain"]}
    if langs:
        front["language"] = langs
    lines = ["---", yaml.safe_dump(front, sort_keys=False).strip(), "---", "",
             f"# CANINE encoder ({cfg.model.size} size), pretrained with canine-pretrain", "",
             *([f"The weights of step {weights.step} of {weights.max_steps}: a checkpoint of the run, not its final "
                "weights.", ""] if weights is not None and weights.checkpoint else []),
             f"A `CanineModel` (Clark et al., TACL 2022) pretrained with the {objective[cfg.train.objective]} "
             "objective. It reads Unicode codepoints, so the tokenizer has no vocabulary. The pretraining "
             "head is here too, for a fill-in query (below), in a file of its own (pretraining_head.safetensors): "
             "`AutoModel` loads the encoder alone from model.safetensors.", "",
             "```python",
             "from transformers import AutoModel, AutoTokenizer",
             "tokenizer = AutoTokenizer.from_pretrained(PATH)  # this directory",
             "model = AutoModel.from_pretrained(PATH)",
             'batch = tokenizer(["Hello, world", "안녕하세요"], padding=True, return_tensors="pt")',
             "characters = model(**batch).last_hidden_state  # (batch, characters, hidden_size)",
             "```", "",
             "A fill-in query with the pretraining head (its code is modeling_canine_masked.py, here), with "
             "transformers' fill-mask pipeline or in a line:", "",
             "```python",
             "from transformers import pipeline",
             'fill = pipeline("fill-mask", model=PATH, trust_remote_code=True)',
             PIPELINE_EXAMPLE[cfg.train.objective],
             "",
             "from transformers import AutoModelForMaskedLM",
             "model = AutoModelForMaskedLM.from_pretrained(PATH, trust_remote_code=True)",
             FILL_EXAMPLE[cfg.train.objective],
             "```", "",
             "## Model", "",
             f"- hidden size {encoder_config.hidden_size}, {encoder_config.num_hidden_layers} deep layers, "
             f"{encoder_config.num_attention_heads} heads, downsampling rate {encoder_config.downsampling_rate}, "
             f"{encoder_config.num_hash_functions} hash functions x {encoder_config.num_hash_buckets} buckets",
             f"- activation `{encoder_config.hidden_act}` (the GELU variant it was trained with)",
             f"- trained on sequences of {cfg.data.seq_len} characters: the tokenizer's `model_max_length`; "
             "positions past it were never trained", "",
             "## Data", ""]
    if dataset:
        splits = ", ".join(f"{k} {v} examples" for k, v in dataset.split_rows().items())
        lines += [f"- shards: `{redact(cfg.data.path)}` ({splits})",
                  f"- manifest: `{schema.MANIFEST}` sha256 `{dataset.manifest_sha256}`, "
                  f"config sha256 `{dataset.config_sha256}`",
                  f"- languages: {' '.join(langs)}"]
        if dataset.trial_slice:
            lines.append(f"- trial slice: {dataset.trial_slice}")
    else:
        lines.append(f"- shards: `{redact(cfg.data.path)}` (manifest: {manifest_missing})")
    lines.append(f"- licence of the text: {data_licence(inputs)}")
    lines += ["", "## Training", ""]
    if records:
        summary = rundir.run_figures(records)
        lines += [f"- steps: {summary['steps']} of {cfg.train.max_steps}, global batch {cfg.train.global_batch}, "
                  f"{cfg.optim.name} lr {cfg.optim.lr}, {cfg.parallel.workers} {cfg.parallel.device} workers, "
                  f"DeepSpeed ZeRO-{cfg.parallel.zero_stage}, {cfg.parallel.precision}"]
        lines += [f"- {label}: {text}" for label, text in rundir.figures(summary)]
    else:
        lines.append("- no metrics.jsonl found")
    if cfg.init.path:
        step = f" (its step {cfg.init.step})" if cfg.init.step else ""
        lines.append(f"- initialised from `{redact(cfg.init.path)}`{step}, weights sha256 `{cfg.init.sha256}`; "
                     "the optimizer and schedule started fresh")
    if weights is not None:
        lines.append(f"- weights: {weights.describe()}")
    evals = [r for r in records if "eval_loss" in r]
    lines += ["", "## Evaluation", ""]
    if evals:
        lines += ["Masked-prediction loss and accuracy on the held-out validation split:", "",
                  "| step | loss | accuracy |", "| ---: | ---: | ---: |"]
        lines += [f"| {r['step']} | {r['eval_loss']:.4f} | {r['eval_accuracy']:.4f} |" for r in evals]
    else:
        lines.append("No evaluation was recorded.")
    config_text = redact(config.to_yaml(cfg)).strip()
    lines += ["", "## Run configuration", "", "```yaml", config_text, "```", ""]
    return "\n".join(lines)


def export_run(run: str, to: str | None = None, cfg=None, consolidated: str | None = None,
               step: int | None = None, checkpoint: str | None = None) -> str:
    """Export the run at `run` to `to` (default RUN/hf, or RUN/hf-stepN for a checkpoint:
    rundir.export_dir); returns the target URL. `cfg` (the resolved config) and `consolidated`
    (the final weights' URL) default to what the run holds; `step` or `checkpoint` export a saved
    checkpoint's weights instead (rundir.weights). Raises ExportError when the extra is missing,
    the run is not finished or the model has no Hugging Face equivalent."""
    why = missing_extra()
    if why:
        raise ExportError(why)
    from training.heads import CaninePretrainingModel
    from training.hf import export_hf, subword_vocab_of
    from training.train import config
    from training.train.checkpoint import load_checkpoint_weights
    if cfg is None:
        cfg = rundir.read_config(run)
    weights = rundir.weights(run, step, checkpoint, cfg)
    if not weights.checkpoint and consolidated:
        weights = dataclasses.replace(weights, url=consolidated)
    target = to or rundir.join(run, rundir.export_dir(weights))
    target_fs, target_path = fsspec.core.url_to_fs(target)
    if target_fs.isfile(target_path):
        raise ExportError(f"{redact(target)}: a file, and an export is a directory; choose another --to, "
                          "or remove the file")
    fs, path = fsspec.core.url_to_fs(weights.url)
    if not fs.exists(path):
        raise ExportError(f"{redact(run)} has no consolidated weights ({redact(weights.url)}): "
                          "they are written after the run's last step; finish the run first (canine pretrain with "
                          "the same --output resumes it from its last checkpoint), then export, or export a saved "
                          f"checkpoint with --step (saved steps: {rundir.saved_steps(run)})")
    model = CaninePretrainingModel(config.model_config(cfg), cfg.train.objective)
    if weights.checkpoint:  # its own messages: a bad checkpoint names the checkpoint and what to do
        load_checkpoint_weights(model, weights.url)
    else:
        _load_final(model, weights.url)
    records = rundir.read_metrics(run)
    dataset, missing = _dataset(cfg.data.path)
    card = model_card(cfg, model.encoder.config, records, dataset, missing, weights, _inputs(cfg.data.path))
    try:
        vocab = subword_vocab_of(cfg.data.path) if cfg.train.objective == "subword" else None
        export_hf(model, target, max_length=cfg.data.seq_len, files={"README.md": card.encode("utf-8")},
                  subword_vocab=vocab, char_inventory=char_inventory(dataset) if dataset else None)
    except ValueError as e:  # no HF equivalent (n-grams), or the target is a file or holds other things
        raise ExportError(str(e)) from e
    except OSError as e:
        # The files are written into a hidden folder beside the target, renamed into place at the
        # end (training/hf.py publish): the error names that folder, which the user never gave.
        error = ExportError(f"{redact(target)}: the export could not be written there: "
                            f"{e.strerror or type(e).__name__}; check the permissions and the free space there, "
                            "or choose another --to")
        error.whole_error = True  # the CLI names the file with the whole error (jobs/errors.py)
        raise error from e
    _modes_as_umask(target)
    return target


# Codepoints read for an export's character inventory: every one of a run on the sample or a few
# GB of shards; past it (a Wikipedia-scale run) the row groups read first, taken from every shard
# in turn, so rare characters of a language may be missing: `complete` says so.
INVENTORY_CODEPOINTS = 1 << 28


def char_inventory(dataset, budget: int = INVENTORY_CODEPOINTS) -> dict | None:
    """The characters of the train split, most frequent first, for the export's
    char_inventory.json (training/hf_masked.py answers a CANINE-C hash bucket with one of them):
    {"split": "train", "codepoints": read, "complete": all read, "counts": [[codepoint, count], ...]}.
    Special codepoints (PAD, CLS, SEP, BOS, MASK, RESERVED) are left out. None where the shards
    cannot be read here."""
    import numpy as np
    import pyarrow.parquet as pq

    counts = np.zeros(0x110000, dtype=np.int64)
    total, complete = 0, True
    try:
        with contextlib.ExitStack() as stack:
            files = [pq.ParquetFile(stack.enter_context(fsspec.open(s.url, "rb")))
                     for s in dataset.splits.get("train") or ()]
            # Round robin over the shards' row groups: a read cut short by the budget still spans all of them.
            queues = [[(f, g) for g in range(f.num_row_groups)] for f in files]
            groups = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
            for f, g in groups:
                if total >= budget:
                    complete = False
                    break
                column = f.read_row_group(g, columns=["codepoints"]).column("codepoints").combine_chunks()
                values = np.asarray(column.flatten())
                counts += np.bincount(values, minlength=counts.size)[: counts.size]
                total += len(values)
    except (OSError, ValueError):  # unreadable here (credentials, a moved bucket): the export goes on without it
        return None
    counts[[0, *range(schema.CLS, schema.RESERVED + 1)]] = 0
    seen = np.flatnonzero(counts)
    order = seen[np.lexsort((seen, -counts[seen]))]  # most frequent first, then by codepoint
    return {"split": "train", "codepoints": int(total), "complete": complete,
            "counts": [[int(c), int(counts[c])] for c in order]}


def _load_final(model, consolidated: str) -> None:
    """The final consolidated weights into `model`, an unreadable file in one sentence."""
    from training.train.checkpoint import load_consolidated

    try:
        load_consolidated(model, consolidated)
    # torch.load of a cut, damaged or foreign file (weights_only refuses anything but tensors with
    # an UnpicklingError); a shape mismatch is a ValueError that names the tensors, passed as it is.
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as e:
        first = str(e).strip().splitlines()[0].split(". ")[0][:160] if str(e).strip() else "no detail"
        raise ExportError(f"{redact(consolidated)}: unreadable consolidated weights ({type(e).__name__}: "
                          f"{first}); a damaged, partly copied or foreign file: copy it again, or finish the run "
                          "again from its last checkpoint") from e


def _modes_as_umask(target: str) -> None:
    """Every file of a local export with the mode the umask allows (0644 under umask 022), as
    the files written with open() have: safetensors 0.8's save_file creates model.safetensors
    0600, which would hide the weights alone from the other users who can read the rest. An
    object store has no modes."""
    fs, path = fsspec.core.url_to_fs(target)
    if not is_local(fs):
        return
    mask = os.umask(0)  # the only way to read it; set back at once
    os.umask(mask)
    for name in os.listdir(path):
        file = os.path.join(path, name)
        if os.path.isfile(file):
            os.chmod(file, 0o666 & ~mask)
