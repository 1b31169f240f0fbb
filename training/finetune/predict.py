"""`canine finetune ner --output RUN --predict FILE`: a finished run's kept (best-dev) weights tag
a CoNLL file in this process (no Ray: a test file is seconds of forward passes), written back as
the file with one more column, the predicted tag, which is what conlleval reads.

The windows and batches are the run's evaluation's (data.py: same length, stride and fixed
batches), so tagging the run's own test file gives the figures its scores.json holds.
"""

import contextlib
import json
import sys

import fsspec

from contract.files import redact
from training import conll
from training.finetune import config, data, score
from training.train import rundir


def load_run(output: str):
    """(the run's config, its classifier with the kept weights, in eval mode)."""
    from training.finetune import tasks
    from training.train import checkpoint

    cfg = run_config(output)
    model = tasks.of(cfg).model(config.model_config(cfg), cfg)
    checkpoint.load_consolidated(model, rundir.join(rundir.absolute(output), rundir.BEST))
    return cfg, model.eval()


def run_config(output: str):
    """A fine-tuning run's config, once it has kept weights (NotARun saying why not)."""
    output = rundir.absolute(output)
    saved = rundir.read_saved_config(output)
    if saved is None or "task" not in saved:
        raise rundir.NotARun(f"{redact(output)}: not a fine-tuning run (no {rundir.CONFIG} with a task section); "
                             "give the --output of canine finetune")
    cfg = config.from_dict(saved, rundir.join(output, rundir.CONFIG))
    best = rundir.join(output, rundir.BEST)
    if not rundir.exists(best):
        raise rundir.NotARun(f"{redact(output)}: the run has no kept weights yet ({rundir.BEST}, written at its "
                             "first evaluation); run it further with the same command")
    return cfg


def predict_sentences(cfg, model, sentences: list) -> list[list[str]]:
    """Every sentence's predicted IOB2 tags."""
    import torch

    label2id = {label: i for i, label in enumerate(cfg.labels)}
    windows = conll.windows(sentences, label2id, cfg.task.max_length, cfg.task.stride)
    predictions = [None] * len(windows)
    with torch.no_grad():
        for indices in data.eval_batches(windows, cfg.train.micro_batch):
            batch = data.collate(windows, indices, model.config.downsampling_rate)
            out = model(batch)
            for row, i in enumerate(indices):
                predictions[i] = out.predictions[row, :len(windows[i].input_ids)].numpy()
    return conll.word_predictions(sentences, windows, predictions, dict(enumerate(cfg.labels)))


def predict_file(output: str, path: str, to: str = "-") -> dict:
    """Tag `path` (CoNLL with gold tags) into `to` ('-': stdout); returns conlleval's figures of
    the predictions against the file's tags."""
    cfg, model = load_run(output)
    lang, path = conll.parse_file_arg(path)
    sentences = conll.read_conll(path, lang)
    # Types the run has no row for cannot be predicted: said, as the driver says before training.
    known = [conll.Sentence((t,), (f"B-{t}",), "", "") for t in {label[2:] for label in cfg.labels if label != "O"}]
    unseen = conll.unseen_labels(known, sentences)
    if unseen:
        listed = ", ".join(f"{t} ({redact(w)})" for t, w in sorted(unseen.items()))
        raise ValueError(f"--predict {redact(path)}: entity types the run was not trained on: {listed}")
    predicted = predict_sentences(cfg, model, sentences)
    with contextlib.ExitStack() as stack:
        out = sys.stdout if to == "-" else stack.enter_context(fsspec.open(rundir.absolute(to), "w", encoding="utf-8"))
        conll.write_predictions(path, sentences, predicted, out)
    return score.score([list(s.tags) for s in sentences], predicted)


def scores_of(output: str) -> dict:
    """The run's scores.json (the kept evaluation's dev and test figures)."""
    raw = rundir.read(rundir.join(rundir.absolute(output), rundir.SCORES))
    if raw is None:
        raise rundir.NotARun(f"{redact(output)}: no {rundir.SCORES} (the run has not evaluated yet)")
    return json.loads(raw)
