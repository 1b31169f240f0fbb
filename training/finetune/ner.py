"""NER as a fine-tuning task (tasks.py's interface): CoNLL files read whole on every worker
(data.py), the token classifier (training/downstream.py), conlleval's figures (score.py), the
predictions as conlleval's input.
"""

import dataclasses
import io

from contract.files import atomic_write, redact
from training import conll
from training.finetune import data, score
from training.train import rundir


class NerTask:
    kind = "ner"
    new_heads = {"classifier.": "the task's classifier is new (fine-tuning initialises it)"}

    # --- data ----------------------------------------------------------------------------------

    def read(self, cfg, labels: tuple[str, ...] | None = None) -> data.TaskData:
        return data.read_task(cfg.task, labels if labels is not None else cfg.labels)

    def labels(self, task: data.TaskData) -> tuple[str, ...]:
        return task.labels

    def train_count(self, task: data.TaskData) -> int:
        return len(task.splits["train"].windows)

    def eval_roles(self, task: data.TaskData) -> list[str]:
        return [role for role in ("dev", "test") if role in task.splits]

    def model(self, model_cfg, cfg):
        from training.downstream import CanineForTokenClassification

        return CanineForTokenClassification(model_cfg, len(cfg.labels) or 1)

    # --- training ------------------------------------------------------------------------------

    def denominator(self, task: data.TaskData, batch) -> int:
        """The labelled characters of a global batch: the loss is their mean (data.py)."""
        return data.labelled(task.splits["train"].windows, batch)

    def train_batch(self, task: data.TaskData, indices, multiple: int) -> dict:
        return data.collate(task.splits["train"].windows, indices, multiple)

    def sums(self, out, inputs) -> list:
        """[loss sum, correct, count] of a forward pass: the labelled characters'."""
        return [out.loss_sum.detach(), out.correct, out.count]

    # --- evaluation ----------------------------------------------------------------------------

    def eval_batches(self, task: data.TaskData, role: str, micro: int, rank: int, world: int):
        """(batch index, window indices, inputs) of this worker's share of a split's fixed batches."""
        windows = task.splits[role].windows
        for b, indices in enumerate(data.eval_batches(windows, micro)):
            if b % world == rank:
                yield indices, lambda multiple, indices=indices: data.collate(windows, indices, multiple)

    def collect(self, task: data.TaskData, role: str, indices, inputs, out, meta=None) -> dict:
        """window index -> its predicted label ids (the window's length)."""
        predicted = out.predictions.cpu().numpy()
        windows = task.splits[role].windows
        return {int(i): predicted[row, :len(windows[i].input_ids)] for row, i in enumerate(indices)}

    def score(self, cfg, task: data.TaskData, role: str, results: dict) -> tuple[dict, list]:
        """(conlleval's figures by language with "overall", every sentence's predicted tags)."""
        split = task.splits[role]
        predictions = [results[i] for i in range(len(split.windows))]
        predicted = conll.word_predictions(split.sentences, split.windows, predictions, dict(enumerate(cfg.labels)))
        by_lang_gold, by_lang_pred = {}, {}
        for sentence, tags in zip(split.sentences, predicted):
            by_lang_gold.setdefault(sentence.lang, []).append(list(sentence.tags))
            by_lang_pred.setdefault(sentence.lang, []).append(tags)
        return score.score_by_language(by_lang_gold, by_lang_pred), predicted

    def write_predictions(self, cfg, task: data.TaskData, role: str, predicted: list) -> None:
        """OUTPUT/predictions/ROLE-LANG.txt for each file of the role: its lines with the predicted
        tag as one more column, conlleval's input (`conlleval.pl < FILE`)."""
        split, at, seen = task.splits[role], 0, []
        for (lang, path), n in zip(split.files, split.counts):
            sentences, tags = split.sentences[at:at + n], predicted[at:at + n]
            at += n
            text = io.StringIO()
            conll.write_predictions(path, sentences, tags, text)
            name = rundir.prediction_file(role, lang, seen.count(lang))  # a second file of one language: -1-
            seen.append(lang)
            atomic_write(rundir.join(cfg.output, name), text.getvalue().encode())


    # --- the driver ----------------------------------------------------------------------------

    def absolute(self, cfg):
        """Every task file made absolute (LANG=PATH kept as LANG=/abs/PATH)."""
        def files(args):
            out = []
            for arg in args:
                lang, path = conll.parse_file_arg(arg)
                out.append(f"{lang}={rundir.absolute(path)}")
            return tuple(out)

        return dataclasses.replace(cfg, task=dataclasses.replace(
            cfg.task, **{role: files(getattr(cfg.task, role)) for role in data.ROLES}))

    def windows_summary(self, task: data.TaskData) -> dict:
        """Per role: sentences, windows, and the sentences longer than a window (read in several)."""
        out = {}
        for role, split in task.splits.items():
            per_sentence = {}
            for w in split.windows:
                per_sentence[w.sentence] = per_sentence.get(w.sentence, 0) + 1
            out[role] = {"sentences": len(split.sentences), "windows": len(split.windows),
                         "sentences_over_one_window": sum(1 for n in per_sentence.values() if n > 1)}
        return out

    def data_line(self, task: data.TaskData, cfg) -> str:
        """What was read: sentences and windows per role, languages, labels, how long sentences were cut."""
        parts = []
        for role, w in self.windows_summary(task).items():
            longer = w["sentences_over_one_window"]
            parts.append(f"{role} {w['sentences']} sentences ({', '.join(task.splits[role].languages())}) in "
                         f"{w['windows']} windows" + (f" ({longer} sentence{'s' * (longer != 1)} over "
                                                      f"{cfg.task.max_length - 2} characters in overlapping windows)"
                                                      if longer else ""))
        types = sorted({label[2:] for label in task.labels if label != "O"})
        return f"read {'; '.join(parts)}; entity types {', '.join(types)}"

    def export(self, model, cfg, target: str, scores: dict) -> str:
        """transformers' CanineForTokenClassification with the character-offset pipeline (training/hf.py)."""
        from training import hf

        hf.export_token_classifier(model, target, dict(enumerate(cfg.labels)), max_length=cfg.task.max_length,
                                   files={"README.md": model_card(cfg, scores).encode()})
        return "token classifier"


def model_card(cfg, scores: dict) -> str:
    lines = ["---", "pipeline_tag: token-classification", "tags: [canine, ner, character-level]", "---", "",
             "# CANINE fine-tuned for named-entity recognition", "",
             f"Fine-tuned with `canine finetune ner` from {redact(cfg.init.path) or 'a random initialisation'} "
             f"({cfg.train.max_steps} steps, batch {cfg.train.global_batch}, lr {cfg.optim.lr:g}); the weights of the "
             f"evaluation at step {scores.get('step')} ({scores.get('selection')}). "
             f"Labels: {', '.join(cfg.labels)}.", "",
             "Scores (conlleval's entity-level figures):", "", "```"]
    for role in ("dev", "test"):
        if scores.get(role):
            lines += score.format_scores(scores[role], role)
    lines += ["```", "", "Use (character offsets on a raw sentence):", "", "```python",
              "from transformers import pipeline",
              'ner = pipeline("token-classification", model="PATH", aggregation_strategy="simple", '
              'trust_remote_code=True)',
              'ner("Rais Samia Suluhu Hassan alizuru Dodoma.")  # [{"entity_group": "PER", "start": 5, ...}, ...]',
              "```", "", "`trust_remote_code` loads pipeline_canine_token.py beside the weights: transformers' own "
              "pipeline with each character's offsets (CANINE's tokenizer is a slow one, which gives none).", ""]
    return "\n".join(lines)
