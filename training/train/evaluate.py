"""Proof of learning (docs/pretraining.md): a finished run's encoder against the same encoder at its
initialization, on held-out data, by two measures:

1. Masked prediction on the validation split (the run's own objective, its stored mask plans and
   the evaluation seed): loss and accuracy of the pretrained model, of the initial one, and of a
   unigram baseline that predicts from the training split's target counts alone (add-one
   smoothed; its accuracy is always the most frequent target). A model that learned anything
   about context beats the unigram; one that learned nothing is at ~1/classes.
2. A linear probe of pooled outputs (`FEATURES`: the final character outputs averaged, and the
   CLS pooler) for language identification of short snippets: windows of `snippet_chars` characters cut
   from the shards' unmasked text, labelled with the row's `lang`. A multinomial logistic
   regression is fit on snippets of the train split and scored on snippets of the validation
   split, once on each encoder's features (frozen), beside the best constant answer. A small
   validation split may hold only some of the languages: the result says which. An encoder at
   initialization is already a fair language identifier (its random hash embeddings make a bag of
   characters, and scripts differ), so the margin is small early and grows with training
   (docs/pretraining.md has figures).

Both are also reported per language, so a user sees which languages learned: the
masked figures over each language's validation rows alone (batched apart: a row's figures do
not depend on its batch), the probe's accuracy on each language's snippets (its recall), and
the output's languages that had no validation example among those read. The overall masked
figures are the sums over the languages.

The initial model is the run's own: built from the saved config with torch seeded by
train.seed, exactly as every worker builds it before training (training/train/loop.py). A run
that started from weights (`--init`, init.path in its config.yaml) is also measured against
them, built as its first start built them (the same model, the init loaded over it: the heads
an init lacks as drawn): that is the baseline it must beat, since a continued run would
otherwise be credited with what it inherited (result "init" and "baseline"; `load_init`).
Runs on one CPU process, no Ray; the shards are read through fsspec and checked against the
manifest's hashes (training/train/data.py). The pretrained weights are the final ones by default,
or any saved checkpoint's (`evaluate_run(step=...)` / `checkpoint=...`, consolidated offline by
training/train/checkpoint.py `consolidate`), and the result names the step.
"""

import math

import fsspec
import numpy as np
import pyarrow as pa
import torch

from contract import holdout, schema
from contract.files import redact
from training.batch import build_batch
from training.heads import CaninePretrainingModel
from training.seeds import build_seed, seed_all, seed_probe, snippet_rng
from training.train import config
from training.train import data
from training.train.checkpoint import load_checkpoint_weights, load_consolidated


def read_rows(shards, limit: int, split: str = "", data_url: str = "", kept_pages=None) -> pa.Table:
    """The first `limit` rows of a split, in stored order (read only as far as needed). `split`
    and `data_url` name it in the error for a split without rows; `kept_pages` ({lang: kept pages},
    Dataset.kept_pages) sizes the --validation-fraction that error suggests."""
    tables, left = [], limit
    for shard in shards:
        if left <= 0:
            break
        n = min(left, shard.rows)
        if n:
            tables.append(data.read_unit(shard.url, shard.sha256, 0, n))
            left -= n
    if not tables:
        raise _no_rows(split, data_url, kept_pages)
    return pa.concat_tables(tables)


def _no_rows(split: str, data_url: str, kept_pages) -> ValueError:
    where = f"{redact(data_url)}: the {split or 'data'} split" if data_url else f"the {split or 'data'} split"
    fix = (f"nothing was held out to evaluate on (a language under {holdout.MIN_PAGES_FOR_VALIDATION} kept pages "
           f"gets only its share of them): {holdout.hint(kept_pages or {})}; pretrain on that output"
           if split == "validation" else "nothing to evaluate on; rerun `canine preprocess` with more input")
    return ValueError(f"{where} has no rows: {fix}")


def check_data(cfg, dataset: data.Dataset) -> None:
    """What the run's data must give an evaluation, from its manifest, before any weights are read
    (a checkpoint's are consolidated first: minutes for a large run): validation rows, and
    examples no longer than the run's data.seq_len (the data rewritten since the run trained)."""
    if not sum(s.rows for s in dataset.splits.get("validation", ())):
        raise _no_rows("validation", dataset.url, dataset.kept_pages)
    if cfg.data.seq_len and dataset.seq_len > cfg.data.seq_len:
        raise ValueError(f"{redact(dataset.url)}: the shards hold examples of up to {dataset.seq_len} characters; "
                         f"the run trained at data.seq_len {cfg.data.seq_len} (the data was rewritten since): "
                         "evaluate on the data the run trained on")


def load_run(run: str, weights=None):
    """(config, dataset, pretrained model, initial model) of a run, both in eval mode. `weights`
    (rundir.weights): the pretrained model's, by default the final ones (a finished run)."""
    from training.train import rundir

    cfg = rundir.read_config(run)
    weights = weights or rundir.weights(run, cfg=cfg)
    dataset = data.open_dataset(cfg.data.path)
    check_data(cfg, dataset)
    model_cfg = config.model_config(cfg)
    if cfg.train.objective == "subword" and not model_cfg.num_subword_vocab:
        model_cfg = config.model_config(cfg, data.vocab_size(dataset.tokenizer_url))
    seed_all(cfg.train.seed)  # as loop.train_loop_per_worker: the run's own starting point
    initial = CaninePretrainingModel(model_cfg, cfg.train.objective).eval()
    pretrained = CaninePretrainingModel(model_cfg, cfg.train.objective)
    if weights.checkpoint:
        load_checkpoint_weights(pretrained, weights.url)
        return cfg, dataset, pretrained.eval(), initial
    fs, path = fsspec.core.url_to_fs(weights.url)
    if not fs.exists(path):
        raise FileNotFoundError(f"{redact(run)} has no consolidated weights ({redact(weights.url)}): "
                                "they are written after the run's last step; finish the run, or evaluate a saved "
                                f"checkpoint with --step (saved steps: {rundir.saved_steps(run)})")
    load_consolidated(pretrained, weights.url)
    return cfg, dataset, pretrained.eval(), initial


def load_init(cfg, model_cfg):
    """The model an --init run started from, in eval mode: seeded and built as its workers built
    it at the first start, then the init's weights loaded over it (training/train/init.py
    load_into, which checks they are still those the run recorded by sha256)."""
    from training.hf import subword_vocab_of
    from training.train import init

    seed_all(cfg.train.seed)
    model = CaninePretrainingModel(model_cfg, cfg.train.objective)
    init.load_into(model, cfg, subword_vocab_of(cfg.data.path) if cfg.train.objective == "subword" else None)
    return model.eval()


def _init_or_why(cfg, model_cfg) -> tuple[object, str | None]:
    """(load_init's model, None), or (None, why it cannot be read): the init moved, deleted or
    changed since the run started. The run is still evaluated without it."""
    try:
        return load_init(cfg, model_cfg), None
    except (OSError, ValueError) as e:  # InitError is a ValueError; a missing file an OSError
        return None, redact(" ".join(str(e).split()))


def _batches(rows: pa.Table, cfg, model_cfg, batch_size: int):
    seed = build_seed(cfg.train.seed, None)  # the run's evaluation seed: its validation figures
    for start in range(0, rows.num_rows, batch_size):
        yield build_batch(rows.slice(start, batch_size), cfg.data.seq_len, cfg.train.objective, seed,
                          num_hash_buckets=model_cfg.num_hash_buckets)


def _target_key(objective: str) -> tuple[str, str]:
    return ("char_targets", "char_weights") if objective == "char" else ("subword_labels", "subword_weights")


def _figures(sums) -> dict:
    """(loss x predictions, correct, predictions), summed -> the reported figures."""
    loss, correct, count = (float(x) for x in sums)
    return {"loss": loss / max(count, 1.0), "accuracy": correct / max(count, 1.0), "predictions": int(count)}


@torch.no_grad()
def _masked_sums(model, batches) -> np.ndarray:
    """The objective's weighted loss and accuracy over the batches (dropout off), as _figures' sums."""
    sums = np.zeros(3)
    for batch in batches:
        out = model(batch)
        sums += (float(out.objective_loss) * float(out.count), float(out.correct), float(out.count))
    return sums


def _unigram_model(train_batches, objective: str, classes: int) -> tuple[np.ndarray, int]:
    """(log-probability of each target, the most frequent one) from the train split's targets."""
    targets, weights = _target_key(objective)
    counts = np.ones(classes)  # add-one smoothing: a target never seen in training is not -inf
    for b in train_batches:
        np.add.at(counts, b[targets].numpy().ravel(), b[weights].numpy().ravel())
    return np.log(counts / counts.sum()), int(counts.argmax())


def _unigram_sums(unigram: tuple[np.ndarray, int], eval_batches, objective: str) -> np.ndarray:
    (log_p, best), (targets, weights) = unigram, _target_key(objective)
    sums = np.zeros(3)
    for b in eval_batches:
        t, w = b[targets].numpy().ravel(), b[weights].numpy().ravel()
        sums += (-float((log_p[t] * w).sum()), float(((t == best) * w).sum()), float(w.sum()))
    return sums


def unigram_baseline(train_batches, eval_batches, objective: str, classes: int) -> dict:
    """Loss and accuracy of predicting every target from the train split's target frequencies."""
    return _figures(_unigram_sums(_unigram_model(train_batches, objective, classes), eval_batches, objective))


def by_language(rows: pa.Table) -> dict[str, pa.Table]:
    """Each language's rows, in stored order, languages sorted."""
    langs = np.asarray(rows["lang"].to_pylist(), dtype=object)
    return {lang: rows.take(np.flatnonzero(langs == lang)) for lang in sorted(set(langs))}


def snippets(rows: pa.Table, chars: int, per_row: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """Up to `per_row` non-overlapping windows of `chars` text characters per row (no special
    codepoint inside), each as CLS window SEP: ((N, chars + 2) int64 ids, their languages)."""
    rng = snippet_rng(seed)
    out, langs = [], []
    for cps, lang in zip(rows["codepoints"].to_pylist(), rows["lang"].to_pylist()):
        cps = np.asarray(cps, dtype=np.int64)
        special = (cps == schema.PAD) | ((cps >= schema.ALIASED_RANGE[0]) & (cps <= schema.ALIASED_RANGE[1]))
        # Runs of text between specials, cut into whole windows; a few of them, at random.
        bounds = np.flatnonzero(np.diff(np.concatenate([[1], special.astype(np.int8), [1]])))
        windows = [s for a, b in zip(bounds[::2], bounds[1::2]) for s in range(a, b - chars + 1, chars)]
        for s in rng.permutation(len(windows))[:per_row]:
            start = windows[s]
            out.append(np.concatenate([[schema.CLS], cps[start : start + chars], [schema.SEP]]))
            langs.append(lang)
    return (np.stack(out) if out else np.zeros((0, chars + 2), np.int64)), langs


# Probe features: a snippet's final character outputs averaged (what CANINE-C trains: the head
# reads them), and the CLS pooler (HF's pooler_output, what a classifier fine-tunes), which only
# a sentence-order loss trains: without SOP it stays as initialized, on top of a trained stack.
FEATURES = {"mean": "final character outputs, averaged", "cls": "CLS pooler (tanh(dense(molecule 0)))"}


@torch.no_grad()
def features(encoder, ids: np.ndarray, batch_size: int = 64) -> dict[str, torch.Tensor]:
    """Both probe features (FEATURES), (N, d) each, of full-length snippets (no padding, one segment)."""
    parts = {name: [] for name in FEATURES}
    for start in range(0, len(ids), batch_size):
        x = torch.from_numpy(ids[start : start + batch_size])
        out = encoder(x, torch.ones_like(x))
        parts["mean"].append(out.sequence_output.float().mean(1))
        parts["cls"].append(out.pooled_output.float())
    return {name: torch.cat(p) for name, p in parts.items()}


def probe_predictions(train_x, train_y, test_x, classes: int, l2: float = 1e-3, seed: int = 0) -> torch.Tensor:
    """The test classes a multinomial logistic regression (L-BFGS, L2 `l2`) fit on standardized
    frozen features predicts."""
    mean, std = train_x.mean(0), train_x.std(0).clamp(min=1e-6)
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    seed_probe(seed)
    probe = torch.nn.Linear(train_x.shape[1], classes)
    torch.nn.init.zeros_(probe.weight)
    torch.nn.init.zeros_(probe.bias)
    opt = torch.optim.LBFGS(probe.parameters(), lr=1.0, max_iter=200, history_size=20, line_search_fn="strong_wolfe")
    y = torch.as_tensor(train_y)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(probe(train_x), y) + l2 * probe.weight.square().sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        return probe(test_x).argmax(1)


def linear_probe(train_x, train_y, test_x, test_y, classes: int, l2: float = 1e-3, seed: int = 0) -> float:
    """Test accuracy of probe_predictions."""
    predicted = probe_predictions(train_x, train_y, test_x, classes, l2, seed)
    return float((predicted == torch.as_tensor(test_y)).float().mean())


def evaluate_run(run: str, examples: int = 1024, train_examples: int = 2048, snippet_chars: int = 32,
                 snippets_per_row: int = 4, batch_size: int = 16, step: int | None = None,
                 checkpoint: str | None = None) -> dict:
    """Both measures (module docstring) for the run at `run`, as a JSON-ready dict. The pretrained
    weights: the final ones, or a saved checkpoint's (`step` / `checkpoint`: rundir.weights);
    "step", "max_steps", "weights" (their URL) and "checkpoint" say which."""
    from training.train import rundir

    weights = rundir.weights(run, step, checkpoint)
    cfg, dataset, pretrained, initial = load_run(run, weights)
    model_cfg = pretrained.config  # cfg is the run's resolved config: data.seq_len is the one it trained with
    val_rows = read_rows(dataset.splits["validation"], examples, "validation", dataset.url, dataset.kept_pages)
    train_rows = read_rows(dataset.splits["train"], train_examples, "train", dataset.url)
    objective = cfg.train.objective
    classes = model_cfg.num_hash_buckets if objective == "char" else model_cfg.num_subword_vocab

    def batches(rows):
        return list(_batches(rows, cfg, model_cfg, batch_size))

    # Masked prediction per language; the overall figures are the sums (in sorted order: the same every time).
    unigram = _unigram_model(batches(train_rows), objective, classes)
    models = {"pretrained": pretrained, "initial": initial}
    start, why = _init_or_why(cfg, model_cfg) if cfg.init.path else (None, None)
    if start is not None:
        models["init"] = start  # measured like the others, then moved under result["init"]
    sums, languages = {}, {}
    for lang, rows in by_language(val_rows).items():
        b = batches(rows)
        sums[lang] = {name: _masked_sums(model, b) for name, model in models.items()}
        sums[lang]["unigram"] = _unigram_sums(unigram, b, objective)
        languages[lang] = {"validation_examples": rows.num_rows,
                           "masked": {name: _figures(x) for name, x in sums[lang].items()}}
    result = {
        "run": run, "step": weights.step, "max_steps": weights.max_steps, "weights": redact(weights.url),
        "checkpoint": weights.checkpoint, "objective": objective, "validation_examples": val_rows.num_rows,
        "masked": {name: _figures(sum((x[name] for x in sums.values()), np.zeros(3)))
                   for name in (*models, "unigram")},
        # What the pretrained weights must beat: those the run started from.
        "baseline": "init" if start is not None else "initial",
    }
    snippet_chars = min(snippet_chars, cfg.data.seq_len - 2)
    train_ids, train_langs = snippets(train_rows, snippet_chars, snippets_per_row, cfg.train.seed)
    test_ids, test_langs = snippets(val_rows, snippet_chars, snippets_per_row, cfg.train.seed + 1)
    probe_languages = sorted(set(train_langs))
    index = {lang: i for i, lang in enumerate(probe_languages)}
    keep = [i for i, lang in enumerate(test_langs) if lang in index]  # a language only in validation: unscorable
    test_ids, test_langs = test_ids[keep], [test_langs[i] for i in keep]
    probe = {"languages": probe_languages, "test_languages": sorted(set(test_langs)), "snippet_chars": snippet_chars,
             "train_snippets": len(train_langs), "test_snippets": len(test_langs)}
    if len(probe_languages) >= 2 and test_langs:
        train_y, test_y = [index[x] for x in train_langs], torch.as_tensor([index[x] for x in test_langs])
        # The best constant answer on these test snippets: the floor any feature must clear.
        probe["majority"] = float(torch.bincount(test_y).max()) / len(test_y)
        of_lang = {lang: test_y == index[lang] for lang in probe["test_languages"]}
        for lang, mask in of_lang.items():
            languages[lang]["probe"] = {"test_snippets": int(mask.sum())}
        for name, model in models.items():
            train_x, test_x = features(model.encoder, train_ids), features(model.encoder, test_ids)
            right = {kind: probe_predictions(train_x[kind], train_y, test_x[kind], len(probe_languages)) == test_y
                     for kind in FEATURES}
            probe[name] = {kind: float(r.float().mean()) for kind, r in right.items()}
            for lang, mask in of_lang.items():  # the language's own snippets: its recall
                languages[lang]["probe"][name] = {kind: float(r[mask].float().mean()) for kind, r in right.items()}
    result["probe"] = probe
    result["languages"] = languages
    if cfg.init.path:
        result["init"] = _init_figures(result, cfg, why)
    # The output's languages that could not be scored: none of their validation examples was read.
    result["unscored_languages"] = [lang for lang, n in dataset.languages.items() if n and lang not in languages]
    return result


def _init_figures(result: dict, cfg, why: str | None) -> dict:
    """The init's figures taken out of `result` (masked, probe, each language's) into their own
    key, with what names the init (path, step, sha256), or why it was not scored."""
    out = {"path": redact(cfg.init.path), "step": cfg.init.step, "sha256": cfg.init.sha256}
    if why is not None:
        return {**out, "error": why}
    out["masked"] = result["masked"].pop("init")
    if "init" in result["probe"]:
        out["probe"] = result["probe"].pop("init")
    out["languages"] = {}
    for lang, x in result["languages"].items():
        out["languages"][lang] = {"masked": x["masked"].pop("init")}
        if "init" in x.get("probe", {}):
            out["languages"][lang]["probe"] = x["probe"].pop("init")
    return out


def _with_init(r: dict, key: str, table: dict) -> dict:
    """`table` ({model: figures}) with the init's row after the pretrained one, where it was scored."""
    start = (r.get("init") or {}).get(key)
    if start is None:
        return table
    return {name: x for name, x in table.items() if name == "pretrained"} | {"init": start} | {
        name: x for name, x in table.items() if name != "pretrained"}


def format_evaluation(r: dict) -> str:
    m, p = r["masked"], r["probe"]
    what = "masked characters (CANINE-C)" if r["objective"] == "char" else "masked subwords (CANINE-S)"
    which = f"checkpoint {r['weights']}" if r["checkpoint"] else "the final weights"
    lines = [f"{'weights':<15}step {r['step']} of {r['max_steps']} ({which})"]
    start = r.get("init")
    if start and "error" in start:
        lines.append(f"{'baseline':<15}initial; the init this run started from ({start['path']}) not scored: "
                     f"{start['error']}")
    elif start:
        lines.append(f"{'baseline':<15}init, the weights this run started from ({start['path']}): the pretrained "
                     "weights must beat it; initial is a fresh initialization")
    lines += [f"held-out       {r['validation_examples']} validation examples, {m['pretrained']['predictions']} {what}",
              f"{'':15}{'accuracy':>10}{'loss':>9}"]
    for name, x in _with_init(r, "masked", {k: m[k] for k in ("pretrained", "initial", "unigram")}).items():
        lines.append(f"  {name:<13}{x['accuracy']:>10.3f}{x['loss']:>9.3f}")
    if "pretrained" in p:
        lines.append(f"language probe {len(p['languages'])} languages, snippets of {p['snippet_chars']} characters: "
                     f"{p['train_snippets']} from train, {p['test_snippets']} held out "
                     f"({' '.join(p['test_languages'])}); linear, accuracy on")
        lines.append(f"{'':15}{'mean':>10}{'cls':>9}   (mean: {FEATURES['mean']}; cls: {FEATURES['cls']})")
        for name, x in _with_init(r, "probe", {k: p[k] for k in ("pretrained", "initial")}).items():
            lines.append(f"  {name:<13}{x['mean']:>10.3f}{x['cls']:>9.3f}")
        lines.append(f"  {'majority':<13}{p['majority']:>10.3f}   (the most frequent held-out language, always)")
    else:
        lines.append(f"language probe skipped: {len(p['languages'])} language(s) in the train snippets, "
                     f"{p['test_snippets']} test snippets")
    return "\n".join(lines + _language_lines(r))


def _language_lines(r: dict) -> list[str]:
    """The per-language table: masked accuracy of each model, probe accuracy on the language's
    own snippets (mean features; "-" where the probe could not score it); an init column after
    the pretrained one where the run's init was scored."""
    of_init = (r.get("init") or {}).get("languages")
    init = [("init", 9)] if of_init is not None else []
    masked = [("pretrained", 11), *init, ("initial", 9), ("unigram", 9)]
    probe = [("pretrained", 12), *init, ("initial", 9)]
    width = {name: sum(w for _, w in columns) for name, columns in (("masked", masked), ("probe", probe))}
    lines = [f"{'by language':<24}{'masked accuracy':^{width['masked']}}{'probe (mean)':^{width['probe']}}".rstrip(),
             f"{'':15}{'examples':>9}" + "".join(f"{n:>{w}}" for n, w in masked + probe)]
    for lang, x in r["languages"].items():
        m, p = dict(x["masked"]), dict(x.get("probe", {}))
        if of_init is not None and lang in of_init:
            m["init"] = of_init[lang]["masked"]
            if "probe" in of_init[lang]:
                p["init"] = of_init[lang]["probe"]
        lines.append(f"  {lang:<13}{x['validation_examples']:>9}"
                     + "".join(f"{m[n]['accuracy']:>{w}.3f}" for n, w in masked)
                     + "".join(f"{p[n]['mean']:>{w}.3f}" if n in p else f"{'-':>{w}}" for n, w in probe))
    if r["unscored_languages"]:
        lines.append(f"  no validation examples read, not scored: {' '.join(r['unscored_languages'])}")
    return lines


def beats_initialization(r: dict) -> bool:
    """Whether the pretrained encoder predicts held-out masked targets better than the weights it
    started from (r["baseline"]: its initialization, or an --init run's init), in accuracy and in
    loss. (The unigram is the next bar: a short run reaches it first in accuracy, since both
    predict the most frequent characters.)"""
    pre = r["masked"]["pretrained"]
    init = r["init"]["masked"] if r.get("baseline") == "init" else r["masked"]["initial"]
    return math.isfinite(pre["loss"]) and pre["accuracy"] > init["accuracy"] and pre["loss"] < init["loss"]
