"""TyDi QA's primary tasks as a fine-tuning task (tasks.py's interface): the windows that
`canine finetune tydiqa` prepared with the pipeline (pipeline/downstream: Parquet rows of
contract/tydiqa.py's window schema, one folder per role with its _manifest.json), the heads of
training/downstream.py (start/end over characters, answer type from [CLS]), and predictions in
the official format scored as tydi_eval.py scores them (tydi_score.py).

Training windows are held by every worker (their columns only: codepoints and labels; the train
role keeps only 10% of the windows without an answer, so it is the smaller one: Google's CANINE
train records are 1.7 GB against 3.0 GB for dev). Evaluation windows are read shard by shard, each
shard cut into batches of the micro batch in row order and batch b on worker b mod W, so the
batches, and the logits (each window padded to downstream.min_padded_length: CANINE's encoding of
a window depends on its padding), are the same on any worker count, and memory is one shard's.

Prediction (Google's postproc.compute_predictions): per window, the best span of the best
`candidate_beam` starts x ends on document characters, at most max_answer_length characters,
scored start + end logit minus the [CLS] pair's; per example the best-scoring window's span. Its
passage is the candidate that contains the span, else candidate 0, as Google's does. Its answer
type head decides yes/no: a YES or NO argmax on that window gives yes_no_answer with no span (a
deviation: Google's default ignore_yes_no_answer=True never predicts yes/no). Every example of the
official file gets a prediction, a null one (-1) where no window gave a span or the reader
rejected the example (tydi_score.py: a missing prediction counts as a wrong answer).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import cached_property

import numpy as np

from contract.files import atomic_write, redact
from contract.tydiqa import WINDOWS_MANIFEST, AnswerType, read_examples, read_windows_manifest, to_bytes
from training.finetune import tydi_score
from training.train import rundir

TRAIN_COLUMNS = ("input_ids", "doc_start", "start", "end", "answer_type")
EVAL_COLUMNS = ("example_id", "language", "input_ids", "doc_chars", "doc_start", "start", "end", "answer_type")
LABELS = tuple(t.name.lower() for t in AnswerType)  # the type head's classes, in AnswerType's order
PREDICTIONS = "predictions/{role}.jsonl"  # OUTPUT/predictions/dev.jsonl: tydi_eval.py --predictions_path


class WindowsError(ValueError):
    """The prepared windows are missing, incomplete, or were made with other settings."""


def read_manifest(folder: str, role: str) -> dict:
    """The role's _manifest.json (contract/tydiqa.py checks its format), or a WindowsError saying
    the windows are not prepared there."""
    try:
        return read_windows_manifest(folder, role)
    except FileNotFoundError as e:
        raise WindowsError(f"{redact(rundir.join(folder, role))}: the {role} windows are not prepared there (no "
                           f"{WINDOWS_MANIFEST}; canine finetune tydiqa prepares them before training)") from e


def shard_urls(folder: str, role: str, manifest: dict) -> list[tuple[str, int]]:
    """(URL, rows) of each shard of a role, in the manifest's order (the rows' global order)."""
    return [(f"{folder.rstrip('/')}/{role}/{shard['path']}", int(shard["rows"])) for shard in manifest["shards"]]


def _read_table(url: str, columns):
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(url, "rb") as f:
        return pq.read_table(f, columns=list(columns))


def _ragged(column) -> tuple[np.ndarray, np.ndarray]:
    """A list<int32> column as (flat values, offsets): row i is values[offsets[i]:offsets[i+1]]."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = array.offsets.to_numpy().astype(np.int64)
    values = array.values.to_numpy()
    return values[offsets[0]:offsets[-1]], offsets - offsets[0]


@dataclasses.dataclass
class Windows:
    """Some windows' columns as arrays (a split held whole, or one evaluation shard)."""
    ids: np.ndarray
    offsets: np.ndarray
    doc_start: np.ndarray
    start: np.ndarray
    end: np.ndarray
    answer_type: np.ndarray
    doc_chars: np.ndarray | None = None  # evaluation only, aligned with ids
    example_id: np.ndarray | None = None
    language: list | None = None

    @classmethod
    def of_table(cls, table) -> "Windows":
        ids, offsets = _ragged(table.column("input_ids"))
        extra = {}
        if "doc_chars" in table.column_names:
            extra["doc_chars"], _ = _ragged(table.column("doc_chars"))
            extra["example_id"] = table.column("example_id").to_numpy()
            extra["language"] = table.column("language").to_pylist()
        return cls(ids=ids, offsets=offsets, doc_start=table.column("doc_start").to_numpy(),
                   start=table.column("start").to_numpy(), end=table.column("end").to_numpy(),
                   answer_type=table.column("answer_type").to_numpy(), **extra)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def length(self, i: int) -> int:
        return int(self.offsets[i + 1] - self.offsets[i])

    def collate(self, rows, model_cfg) -> dict:
        """Padded tensors of some rows: input_ids, attention_mask, token_type_ids (1 from doc_start),
        start/end positions and answer types; with doc_chars (-1 at padding) for evaluation rows.
        Each row is padded at least to downstream.min_padded_length of its own length, from which
        CANINE's encoding of it no longer changes with more padding: a window's logits are the same
        in any batch, on any worker count, and in the export's answer()."""
        import torch

        from training.downstream import min_padded_length

        rows = np.asarray(rows)
        length = max(min_padded_length(model_cfg, self.length(int(i))) for i in rows)
        ids = np.zeros((len(rows), length), dtype=np.int64)
        mask = np.zeros((len(rows), length), dtype=np.int64)
        doc = np.full((len(rows), length), -1, dtype=np.int64)
        for r, i in enumerate(rows):
            a, b = self.offsets[i], self.offsets[i + 1]
            ids[r, :b - a] = self.ids[a:b]
            mask[r, :b - a] = 1
            if self.doc_chars is not None:
                doc[r, :b - a] = self.doc_chars[a:b]
        types = (np.arange(length)[None, :] >= self.doc_start[rows][:, None]) & (mask == 1)
        out = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask),
               "token_type_ids": torch.from_numpy(types.astype(np.int64)),
               "start_positions": torch.from_numpy(self.start[rows].astype(np.int64)),
               "end_positions": torch.from_numpy(self.end[rows].astype(np.int64)),
               "answer_types": torch.from_numpy(self.answer_type[rows].astype(np.int64))}
        if self.doc_chars is not None:
            out["_meta"] = doc  # the batch's document offsets: the prediction's, not the model's
        return out


def _eval_batch(shard: Windows, local: np.ndarray, model_cfg) -> dict:
    batch = shard.collate(local, model_cfg)
    batch["_meta"] = (shard, local, batch["_meta"])
    return batch


@dataclasses.dataclass
class TydiData:
    folder: str  # the prepared windows (task.windows)
    manifests: dict  # role -> its _manifest.json
    files: dict  # role -> the official files it was made from (the task's train / dev)
    sha256: str  # of the manifests: a resume must read the same windows

    @cached_property
    def train(self) -> Windows:
        """The training windows, every shard in the manifest's order (read on first use: the driver
        needs only the manifests)."""
        import pyarrow as pa

        tables = [_read_table(url, TRAIN_COLUMNS) for url, _ in shard_urls(self.folder, "train", self.manifests["train"])]
        return Windows.of_table(pa.concat_tables(tables))

    def rows(self, role: str) -> int:
        return int(self.manifests[role]["rows"])


def _settings_of(task) -> dict:
    """The window settings of the task config, under the pipeline's names (WindowSettings)."""
    return {"max_length": task.max_length, "stride": task.stride, "max_question": task.max_question,
            "include_unknowns": task.include_unknowns, "max_passages": task.max_passages}


def check_settings(task, role: str, manifest: dict) -> None:
    made = manifest.get("settings", {})
    differ = [f"{k} {made[k]} (windows) vs {v} (this run)" for k, v in _settings_of(task).items()
              if k in made and made[k] != v and not (k == "include_unknowns" and role != "train")]
    if differ:
        raise WindowsError(f"{redact(rundir.join(task.windows, role))}: prepared with other settings: "
                           f"{'; '.join(differ)}")


class TydiTask:
    kind = "tydiqa"
    new_heads = {"qa_outputs.": "the span head is new (fine-tuning initialises it)",
                 "answer_type_output.": "the answer-type head is new (fine-tuning initialises it)"}

    # --- data ----------------------------------------------------------------------------------

    def read(self, cfg, labels: tuple[str, ...] | None = None) -> TydiData:
        task = cfg.task
        if not task.windows:
            raise WindowsError("task.windows is not set: canine finetune tydiqa prepares the windows first")
        manifests, files = {}, {}
        for role in ("train", "dev"):
            if getattr(task, role):
                manifests[role] = read_manifest(task.windows, role)
                check_settings(task, role, manifests[role])
                files[role] = tuple(getattr(task, role))
        if labels and tuple(labels) != LABELS:
            raise ValueError(f"the run's labels {list(labels)} are not TyDi QA's answer types {list(LABELS)}")
        h = hashlib.sha256()
        for role, m in manifests.items():
            h.update(f"{role}:{json.dumps([s.get('sha256', s['rows']) for s in m['shards']])};".encode())
        return TydiData(task.windows, manifests, files, h.hexdigest())

    def labels(self, data: TydiData) -> tuple[str, ...]:
        return LABELS

    def train_count(self, data: TydiData) -> int:
        n = data.rows("train")
        if n < 1:
            raise WindowsError(f"{redact(rundir.join(data.folder, 'train'))}: no training windows (every example "
                               "rejected, or none has an answer: see its _manifest.json)")
        return n

    def eval_roles(self, data: TydiData) -> list[str]:
        return ["dev"] if "dev" in data.manifests else []

    def model(self, model_cfg, cfg):
        from training.downstream import CanineForTydiQA

        return CanineForTydiQA(model_cfg)

    # --- training ------------------------------------------------------------------------------

    def denominator(self, data: TydiData, batch) -> int:
        return len(batch)  # every window is labelled: the loss is the mean over the step's windows

    def train_batch(self, data: TydiData, indices, multiple: int) -> dict:
        return data.train.collate(indices, self.model_cfg)

    def sums(self, out, inputs) -> list:
        """[loss sum, windows whose answer type is right, windows]."""
        correct = (out.type_logits.argmax(-1) == inputs["answer_types"]).sum()
        return [out.loss_sum.detach(), correct, out.count]

    # --- evaluation ----------------------------------------------------------------------------

    def eval_batches(self, data: TydiData, role: str, micro: int, rank: int, world: int):
        """This worker's share of the role's batches: every shard cut into batches of `micro`
        rows in row order, batch b (counted over the shards in the manifest's order) on worker
        b mod W, so the batches do not depend on the worker count and every worker has work however
        few the shards. A shard is read only by a worker with a batch in it, one shard at a time;
        the indices are the rows' global numbers."""
        first, b = 0, 0
        for url, rows in shard_urls(data.folder, role, data.manifests[role]):
            starts = range(0, rows, micro)
            mine = [a for i, a in enumerate(starts) if (b + i) % world == rank]
            if mine:
                shard = Windows.of_table(_read_table(url, EVAL_COLUMNS))
                for a in mine:
                    local = np.arange(a, min(rows, a + micro))
                    yield first + local, (lambda multiple, shard=shard, local=local:
                                          _eval_batch(shard, local, self.model_cfg))
            first, b = first + rows, b + len(starts)

    def collect(self, data: TydiData, role: str, indices, inputs, out, meta) -> dict:
        """row -> (example_id, language, (score, start_char, end_char) or None, answer type argmax)."""
        from training.tydi_heads import best_spans

        shard, local, doc = meta
        spans = best_spans(out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy(), doc >= 0,
                           max_answer_length=self.max_answer_length, beam=self.candidate_beam)
        types = out.type_logits.argmax(-1).tolist()
        result = {}
        for r, (row, i) in enumerate(zip(indices, local)):
            best = spans[r]
            span = None if best is None else (float(best[0]), int(doc[r, best[1]]), int(doc[r, best[2]]) + 1)
            result[int(row)] = (int(shard.example_id[i]), shard.language[i], span, types[r])
        return result

    def __init__(self, cfg):
        from training.finetune import config

        self.max_answer_length, self.candidate_beam = cfg.task.max_answer_length, cfg.task.candidate_beam
        self.model_cfg = config.model_config(cfg)  # the padding rule is the architecture's

    def score(self, cfg, data: TydiData, role: str, results: dict) -> tuple[dict, list]:
        gold = read_gold(data.files[role])  # the files read twice an evaluation: their examples, their labels
        predictions = predictions_of(results, data.files[role], gold)
        return score_files(data.files[role], predictions, gold), predictions

    def write_predictions(self, cfg, data: TydiData, role: str, predictions: list) -> None:
        write_official(rundir.join(cfg.output, PREDICTIONS.format(role=role)), predictions)

    # --- the driver ----------------------------------------------------------------------------

    def absolute(self, cfg):
        task = cfg.task
        return dataclasses.replace(cfg, task=dataclasses.replace(
            task, train=tuple(rundir.absolute(p) for p in task.train), dev=tuple(rundir.absolute(p) for p in task.dev),
            windows=rundir.absolute(task.windows) if task.windows else ""))

    def windows_summary(self, data: TydiData) -> dict:
        return {role: {"rows": m["rows"], **m.get("counts", {})} for role, m in data.manifests.items()}

    def data_line(self, data: TydiData, cfg) -> str:
        parts = [f"{role} {m['rows']:,} windows" for role, m in data.manifests.items()]
        return (f"read the prepared windows of {redact(data.folder)}: {'; '.join(parts)} ({cfg.task.max_length} "
                f"characters, stride {cfg.task.stride})")

    def export(self, model, cfg, target: str, scores: dict) -> str:
        from training import hf

        hf.export_question_answerer(model, target, max_length=cfg.task.max_length,
                                    files={"README.md": model_card(cfg, scores).encode()})
        return "question answerer"


# --- predictions and scores ---------------------------------------------------------------------


def read_gold(files) -> dict:
    """example_id -> tydi_score.Gold of every example of the files (labels only, streamed)."""
    gold = {}
    for path in files:
        gold.update(tydi_score.read_gold(path))
    return gold


def predictions_of(results: dict, files, gold: dict | None = None) -> list[tydi_score.Prediction]:
    """One official prediction for every example of `files` (in file order; `gold`: read_gold's of
    them, read here if not given): the best window's span per example (module docstring), byte
    offsets by the example's own UTF-8 encoding."""
    gold = read_gold(files) if gold is None else gold
    best = {}  # example_id -> (score, start, end, type)
    for example_id, _, span, kind in results.values():
        if span is not None and (example_id not in best or span[0] > best[example_id][0]):
            best[example_id] = (*span, kind)
    out, seen = [], set()
    for path in files:
        for ex in read_examples(path):
            seen.add(ex.example_id)
            if ex.example_id not in best:
                out.append(_null(ex.example_id, ex.language))
                continue
            score, start, end, kind = best[ex.example_id]
            passage = next((i for i, (a, b) in enumerate(ex.passages) if a <= start and end <= b), 0)
            if kind in (AnswerType.YES, AnswerType.NO):
                out.append(tydi_score.Prediction(ex.example_id, ex.language, passage, score, (-1, -1), score,
                                                 AnswerType(kind).name.lower()))
            else:
                out.append(tydi_score.Prediction(ex.example_id, ex.language, passage, score, to_bytes(ex, start, end),
                                                 score))
    for example_id, g in gold.items():  # the examples the reader rejected
        if example_id not in seen:
            seen.add(example_id)
            out.append(_null(example_id, g.language))
    return out


def _null(example_id: int, language: str) -> tydi_score.Prediction:
    return tydi_score.Prediction(example_id, language, -1, 0.0, (-1, -1), 0.0)


def thresholds(gold: dict) -> tuple[int, int]:
    """tydi_eval.py's non-null thresholds: its defaults (2 of the dev file's 3 annotators), or 1
    for a file with one annotation per example (the train file's): with 2 nothing in it has an
    answer (tydi_score.py)."""
    most = max((len(g.labels) for g in gold.values()), default=0)
    if most >= 2:
        return tydi_score.PASSAGE_NON_NULL_THRESHOLD, tydi_score.MINIMAL_NON_NULL_THRESHOLD
    return 1, 1


def score_files(files, predictions: list, gold: dict | None = None) -> dict:
    """tydi_eval.py's figures of `predictions` against the official files (`gold`: read_gold's of
    them, read here if not given), with "overall": the selection figure (the mean of the macro
    passage and minimal F1) and the thresholds used."""
    gold = read_gold(files) if gold is None else gold
    passage_t, minimal_t = thresholds(gold)
    scores = tydi_score.score_predictions(gold, predictions, passage_t, minimal_t)
    macro = scores["macro"]
    scores["overall"] = {"f1": (macro["passage"]["f1"] + macro["minimal"]["f1"]) / 2,
                         "passage_f1": macro["passage"]["f1"], "minimal_f1": macro["minimal"]["f1"],
                         "thresholds": {"passage": passage_t, "minimal": minimal_t}}
    return scores


def write_official(url: str, predictions: list) -> None:
    """The predictions as tydi_eval.py's --predictions_path file (one JSON object a line)."""
    atomic_write(url, "".join(p.to_json() + "\n" for p in predictions).encode("utf-8"))


def format_scores(scores: dict, role: str) -> list[str]:
    """A few lines for the console and the model card: the macro figures, then each language's."""
    o, macro = scores["overall"], scores["macro"]
    lines = [f"{role}: passage (SelectP) F1 {macro['passage']['f1'] * 100:.2f}, minimal (MinSpan) F1 "
             f"{macro['minimal']['f1'] * 100:.2f}, macro over {len(macro['languages'])} languages without english "
             f"(non-null thresholds {o['thresholds']['passage']}/{o['thresholds']['minimal']})"]
    for lang, s in scores["languages"].items():
        lines.append(f"  {lang:<11} passage F1 {s['passage']['f1'] * 100:6.2f}  minimal F1 {s['minimal']['f1'] * 100:6.2f}"
                     f"  ({s['examples']} examples)")
    return lines


def model_card(cfg, scores: dict) -> str:
    lines = ["---", "pipeline_tag: question-answering", "tags: [canine, tydiqa, character-level]", "---", "",
             "# CANINE fine-tuned on TyDi QA's primary tasks", "",
             f"Fine-tuned with `canine finetune tydiqa` from {redact(cfg.init.path) or 'a random initialisation'} "
             f"({cfg.train.max_steps} steps, batch {cfg.train.global_batch}, lr {cfg.optim.lr:g}, windows of "
             f"{cfg.task.max_length} characters); the weights of the evaluation at step {scores.get('step')} "
             f"({scores.get('selection')}).", ""]
    if scores.get("dev"):
        lines += ["Scores (tydi_eval.py's definitions):", "", "```", *format_scores(scores["dev"], "dev"), "```", ""]
    lines += ["Use (a question on a raw document, offline):", "", "```python",
              "from transformers import AutoModelForQuestionAnswering",
              'model = AutoModelForQuestionAnswering.from_pretrained("PATH", trust_remote_code=True)',
              'model.answer("Where is Dodoma?", "Dodoma is the capital of Tanzania.\\n\\nIt lies in the centre.")',
              "```", ""]
    return "\n".join(lines)


# --- --predict ------------------------------------------------------------------------------------


def predict_file(output: str, windows: str, role: str, files, to: str) -> dict:
    """A finished run's kept weights predict every example of `files`, whose windows were
    prepared under windows/ROLE, in this process (no Ray); the official prediction file is
    written to `to` ('-': stdout) and its figures against the files' annotations returned."""
    import sys

    import torch

    from training.finetune import predict

    cfg, model = predict.load_run(output)
    if cfg.kind != "tydiqa":
        raise ValueError(f"{redact(output)}: a canine finetune {cfg.kind} run, not a tydiqa one")
    manifest = read_manifest(windows, role)
    check_settings(cfg.task, role, manifest)
    tk, data = TydiTask(cfg), TydiData(windows, {role: manifest}, {role: tuple(files)}, "")
    results = {}
    with torch.no_grad():
        for indices, make in tk.eval_batches(data, role, cfg.train.micro_batch, 0, 1):
            batch = make(model.config.downsampling_rate)
            meta = batch.pop("_meta")
            results.update(tk.collect(data, role, indices, batch, model(batch), meta))
    gold = read_gold(files)
    predictions = predictions_of(results, files, gold)
    if to == "-":
        sys.stdout.write("".join(p.to_json() + "\n" for p in predictions))
    else:
        write_official(rundir.absolute(to), predictions)
    return score_files(files, predictions, gold)
