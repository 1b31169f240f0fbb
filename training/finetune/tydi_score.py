"""TyDi QA's official primary-task figures (SelectP and MinSpan), computed in-house.

    gold = read_gold("tydiqa-v1.0-dev.jsonl.gz")          # example_id -> Gold (labels only, streamed)
    preds = read_predictions("predictions.jsonl")         # example_id -> Prediction
    s = score_predictions(gold, preds)
    s["macro"]["passage"]["f1"], s["macro"]["minimal"]["f1"]      # the paper's headline figures, 0..1
    s["languages"]["thai"]["minimal"]                              # f1, precision, recall, threshold, ...
    print("\\n".join(format_scores(s)))                             # tydi_eval.py's stdout, line for line

The CANINE paper reports TyDi QA as the official tydi_eval.py scores it (google-research-datasets/
tydiqa, tydi_eval.py and eval_utils.py). This module is that definition, rewritten, so a run's
scores need neither absl nor the script; tests/training/finetune/test_tydi_score.py holds the
official script's own printed figures on two gold/prediction pairs and checks these equal them.
What it defines, and what a driver must respect:

  * Gold by vote (eval_utils.gold_has_passage_answer, gold_has_minimal_answer): an example has a
    gold passage only if at least PASSAGE_NON_NULL_THRESHOLD (2) annotators chose one, and a gold
    minimal answer only if at least MINIMAL_NON_NULL_THRESHOLD (2) gave a span or YES/NO. The
    train file has ONE annotation per example, so scored with the defaults nothing in it has an
    answer: score train-like data with thresholds of 1, or not at all.
  * A predicted passage is correct if it equals any annotator's non-null passage index. A minimal
    answer scores the best F1 over annotators of byte-overlap partial credit (precision = shared
    bytes / predicted bytes, recall = shared / gold); a YES/NO prediction scores 1 if any
    annotator gave that answer, else 0 (tydi_eval.score_minimal_answer).
  * Each example counts once per task: has_gold, has_pred (a passage index >= 0; a minimal span
    or YES/NO), credit, and the prediction's score. Precision = credit / has_pred, recall =
    credit / has_gold, over the examples whose score is >= a threshold; the threshold reported is
    the one with the best F1 over every distinct score, highest first, the first one on ties
    (compute_pr_curves). A language with no gold answer at all scores 0 whatever is predicted.
  * A gold example with NO prediction in its language counts has_pred = NOT has_gold with credit
    0 and score 0: a missing prediction on a no-answer example is a wrong answer, not a correct
    null (tydi_eval.score_passage_answer's `pred_label is None` branch). Write a prediction for
    every example, a null one (-1) where the model answers nothing.
  * Languages come from the PREDICTIONS' "language" field: a language is scored only if some
    prediction names it (its gold examples without one then count as above), and a language no
    prediction names is left out of the macro average silently ("unscored_languages" below).
  * The macro average is the plain mean over the scored languages other than English of each
    language's F1, precision and recall at its own best threshold (main()).
  * Spans are UTF-8 byte offsets, end exclusive, -1/-1 for none (contract/tydiqa.py to_bytes).
    An empty span (start == end) strictly inside another fails the official script's assertion
    (eval_utils.compute_partial_match_scores: `assert in_both > 0`); it raises here too.
  * tydi_eval.py --pretty_print stops with a TypeError when a recall-at-precision target is never
    reached (it formats a None threshold with {:.4}), so only the default layout is reproduced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import fsspec

# tydi_eval.py main()'s language_list, in its order (the order scores are printed in).
LANGUAGES = ("english", "arabic", "bengali", "finnish", "indonesian", "japanese",
             "swahili", "korean", "russian", "telugu", "thai")
EXCLUDED_FROM_MACRO = "english"  # main(): "Macro Over %d Languages, excluding English"
PASSAGE_NON_NULL_THRESHOLD = 2  # tydi_eval.py flag passage_non_null_threshold's default
MINIMAL_NON_NULL_THRESHOLD = 2  # tydi_eval.py flag minimal_non_null_threshold's default
TARGETS = (0.5, 0.75, 0.9)  # recall at precision >= these (get_metrics_with_answer_stats)

NULL_SPAN = (-1, -1)


@dataclass(frozen=True)
class Label:
    """One annotator's answer, in the files' bytes."""
    passage_index: int  # -1: no passage
    minimal: tuple[int, int]  # (start_byte, end_byte), end exclusive; both < 0: no span
    yes_no: str  # "yes", "no" or "none", lower-cased as eval_utils reads it


@dataclass(frozen=True)
class Gold:
    example_id: int
    language: str
    labels: tuple[Label, ...]  # one per annotator


@dataclass(frozen=True)
class Prediction:
    """One line of the official prediction format (tydi_eval.py's docstring)."""
    example_id: int
    language: str  # decides which language's figures the example counts in (see above)
    passage_index: int  # -1: no passage
    passage_score: float
    minimal: tuple[int, int]  # (start_byte, end_byte), end exclusive; (-1, -1): no span
    minimal_score: float
    yes_no: str = "none"  # yes / no / none; a yes or no comes with no span

    def to_json(self) -> str:
        return json.dumps({
            "example_id": self.example_id, "language": self.language,
            "passage_answer_index": self.passage_index, "passage_answer_score": self.passage_score,
            "minimal_answer": {"start_byte_offset": self.minimal[0], "end_byte_offset": self.minimal[1]},
            "minimal_answer_score": self.minimal_score, "yes_no_answer": self.yes_no.upper()})


def _is_null(span: tuple[int, int]) -> bool:
    return span[0] < 0 and span[1] < 0  # eval_utils.Span.is_null_span


def _check_span(span: tuple[int, int], where: str) -> tuple[int, int]:
    """eval_utils.Span's checks: both ends null or neither, and start <= end."""
    start, end = span
    if (start < 0) != (end < 0):
        raise ValueError(f"{where}: inconsistent null span ({start}, {end})")
    if start >= 0 and start > end:
        raise ValueError(f"{where}: span ({start}, {end}) starts after its end")
    return start, end


def _check_id(value, where: str) -> int:
    # The files' ids are JSON integers. A string id would never match the gold's (the official
    # script would score every example as unpredicted), so it is refused instead.
    if type(value) is not int:
        raise ValueError(f"{where}: example_id {value!r} is not an integer")
    return value


def _lines(path: str):
    with fsspec.open(path, "rt", compression="infer", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                yield f"{path}:{line_no}", json.loads(line)


def read_gold(path: str) -> dict[int, Gold]:
    """The annotations of an official file (the dev file, tiny_dev, or small_gold_annotation),
    keyed by example_id in file order, streamed: documents are not kept."""
    gold: dict[int, Gold] = {}
    for where, r in _lines(path):
        labels = tuple(
            Label(a["passage_answer"]["candidate_index"],
                  _check_span((a["minimal_answer"]["plaintext_start_byte"], a["minimal_answer"]["plaintext_end_byte"]),
                              where),
                  a["yes_no_answer"].lower())
            for a in r["annotations"])
        if not labels:  # main() reads ex[0].language; the vote needs a list
            raise ValueError(f"{where}: example {r['example_id']} has no annotations")
        example_id = _check_id(r["example_id"], where)
        gold[example_id] = Gold(example_id, r["language"], labels)  # a repeated id: the last wins, as there
    return gold


def read_predictions(path: str) -> dict[int, Prediction]:
    """An official prediction file, keyed by example_id in file order (a repeated id: the last
    wins, as in eval_utils.read_prediction_jsonl). Every field is required but passage_answer_index
    (-1) and yes_no_answer (NONE): the official reader fails without the scores or the language,
    and without minimal_answer it reuses the previous line's span."""
    predictions: dict[int, Prediction] = {}
    for where, r in _lines(path):
        missing = [k for k in ("example_id", "language", "passage_answer_score", "minimal_answer",
                               "minimal_answer_score") if k not in r]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        p = parse_prediction(r, where)
        predictions[p.example_id] = p
    return predictions


def parse_prediction(r: dict, where: str = "prediction") -> Prediction:
    span = _check_span((r["minimal_answer"]["start_byte_offset"], r["minimal_answer"]["end_byte_offset"]), where)
    yes_no = r.get("yes_no_answer", "none").lower()
    if yes_no not in ("yes", "no", "none"):
        raise ValueError(f"{where}: yes_no_answer {r['yes_no_answer']!r} is not YES, NO or NONE")
    if yes_no != "none" and not _is_null(span):
        raise ValueError(f"{where}: a yes/no answer with a minimal span {span}")
    return Prediction(example_id=_check_id(r["example_id"], where), language=r["language"],
                      passage_index=r.get("passage_answer_index", -1),
                      passage_score=float(r["passage_answer_score"]), minimal=span,
                      minimal_score=float(r["minimal_answer_score"]), yes_no=yes_no)


def write_predictions(path: str, predictions: Iterable[Prediction]) -> None:
    with fsspec.open(path, "wt", encoding="utf-8") as f:
        for p in predictions:
            f.write(p.to_json() + "\n")


def _divide(x, y):
    # eval_utils.safe_divide: the INTEGER 0 on a zero denominator. Kept an int, because the
    # official per-language JSON line prints it as 0, not 0.0.
    return 0 if y == 0 else x / y


def _partial_f1(gold: tuple[int, int], pred: tuple[int, int]) -> float:
    """eval_utils.compute_partial_match_scores' F1 of two non-null byte spans."""
    (gs, ge), (ps, pe) = gold, pred
    if ge <= ps or pe <= gs:
        return _divide(0.0, 0.0)  # no overlap: precision = recall = 0.0, F1 safe_divide's 0
    shared = min(ge, pe) - max(gs, ps)
    if shared <= 0:  # an empty span strictly inside the other
        raise ValueError(f"gold span {gold} and predicted span {pred}: an empty span inside the other "
                         "(tydi_eval.py fails here: eval_utils.compute_partial_match_scores asserts in_both > 0)")
    precision = shared / (pe - ps)  # the official only_in_* sums add up to these lengths
    recall = shared / (ge - gs)
    return _divide(2 * precision * recall, precision + recall)


def _score_passage(labels: tuple[Label, ...], pred: Prediction | None, threshold: int):
    """(has_gold, has_pred, credit, score): tydi_eval.score_passage_answer."""
    has_gold = sum(label.passage_index >= 0 for label in labels) >= threshold
    if pred is None:
        return has_gold, not has_gold, False, 0
    has_pred = pred.passage_index >= 0
    correct = has_gold and has_pred and any(
        label.passage_index >= 0 and label.passage_index == pred.passage_index for label in labels)
    return has_gold, has_pred, correct, pred.passage_score


def _score_minimal(labels: tuple[Label, ...], pred: Prediction | None, threshold: int):
    """(has_gold, has_pred, credit, score): tydi_eval.score_minimal_answer, its F1 only (the
    official returns (precision, recall, F1) and compute_pr_curves reads only the F1)."""
    has_gold = sum(not _is_null(label.minimal) or label.yes_no != "none" for label in labels) >= threshold
    if pred is None:
        return has_gold, not has_gold, 0, 0
    has_pred = not _is_null(pred.minimal) or pred.yes_no != "none"
    best = 0.0
    if has_gold and has_pred:
        if pred.yes_no != "none":
            best = 1.0 if any(pred.yes_no == label.yes_no for label in labels) else 0.0
        else:
            for label in labels:
                if not _is_null(label.minimal):
                    best = max(best, _partial_f1(label.minimal, pred.minimal))
    return has_gold, has_pred, best, pred.minimal_score


def _best_threshold(stats: list[tuple], targets=TARGETS) -> dict:
    """tydi_eval.compute_pr_curves: precision and recall over the examples scored at or above
    each distinct score, the best F1's point, and the highest recall at each precision target."""
    total_gold = sum(s[0] for s in stats)
    credit, predicted = 0, 0
    at_score: dict = {}  # score -> (precision, recall), in descending score order
    for _, has_pred, c, score in stats:
        credit += c
        predicted += has_pred
        # Ties share one entry, overwritten until the last of them: a threshold admits all of them.
        at_score[score] = (_divide(credit, predicted), _divide(credit, total_gold))
    best = {"f1": 0.0, "precision": 0.0, "recall": 0.0, "threshold": 0.0}
    reach = [{"target": t, "recall": 0, "precision": 0, "threshold": None} for t in targets]
    for score, (p, r) in at_score.items():
        for row in reach:
            if p >= row["target"] and r > row["recall"]:
                row.update(recall=r, precision=p, threshold=score)
        f1 = _divide(2 * p * r, p + r)
        if f1 > best["f1"]:  # strictly: on ties the highest threshold stays
            best = {"f1": f1, "precision": p, "recall": r, "threshold": score}
    return {**best, "at_precision": reach}


def _by_id(items) -> dict:
    if isinstance(items, Mapping):
        return dict(items)
    out = {}
    for x in items:
        out[x.example_id] = x  # a repeated id: the last wins, as in the official readers
    return out


def score_predictions(gold: Mapping[int, Gold] | Iterable[Gold],
                      predictions: Mapping[int, Prediction] | Iterable[Prediction],
                      passage_non_null_threshold: int = PASSAGE_NON_NULL_THRESHOLD,
                      minimal_non_null_threshold: int = MINIMAL_NON_NULL_THRESHOLD) -> dict:
    """tydi_eval.py's figures for `predictions` against `gold` (read_gold's dict, or Gold records):

        {"languages": {lang: {"examples", "predictions", "missing",
                              "passage": {"f1", "precision", "recall", "threshold",
                                          "at_precision": [{"target", "recall", "precision", "threshold"}]},
                              "minimal": {... the same}}},          # scored languages, LANGUAGES' order
         "macro": {"languages": [...], "passage": {"f1", "precision", "recall"}, "minimal": {...}},
         "gold_examples", "predicted_examples", "missing_predictions", "unexpected_predictions",
         "unscored_languages": gold languages no prediction names (the official skips them)}

    Figures are fractions (0..1). Score every gold example (read_gold of the whole file), not
    only those a reader kept: the official script does."""
    gold, predictions = _by_id(gold), _by_id(predictions)
    gold_by_lang: dict[str, dict] = {}
    pred_by_lang: dict[str, dict] = {}
    for example_id, g in gold.items():
        gold_by_lang.setdefault(g.language, {})[example_id] = g.labels
    for example_id, p in predictions.items():
        pred_by_lang.setdefault(p.language, {})[example_id] = p

    languages = {}
    for lang in LANGUAGES:
        if lang not in pred_by_lang:
            continue
        lang_gold, lang_pred = gold_by_lang.get(lang, {}), pred_by_lang[lang]
        passage, minimal = [], []
        # The official walks set(gold ids); the same set built the same way walks in the same
        # order, so the stable sort below leaves ties (and their float sums) in its order.
        for example_id in set(lang_gold.keys()):
            labels, pred = lang_gold[example_id], lang_pred.get(example_id)
            passage.append(_score_passage(labels, pred, passage_non_null_threshold))
            minimal.append(_score_minimal(labels, pred, minimal_non_null_threshold))
        passage.sort(key=lambda s: s[-1], reverse=True)
        minimal.sort(key=lambda s: s[-1], reverse=True)
        languages[lang] = {"examples": len(lang_gold), "predictions": len(lang_pred),
                           "missing": len(lang_gold.keys() - lang_pred.keys()),
                           "passage": _best_threshold(passage), "minimal": _best_threshold(minimal)}

    averaged = [lang for lang in languages if lang != EXCLUDED_FROM_MACRO]
    macro = {"languages": averaged}
    for task in ("passage", "minimal"):
        macro[task] = {k: _divide(sum(languages[lang][task][k] for lang in averaged), len(averaged))
                       for k in ("f1", "precision", "recall")}  # eval_utils.safe_average
    return {"languages": languages, "macro": macro,
            "gold_examples": len(gold), "predicted_examples": len(predictions),
            "missing_predictions": len(gold.keys() - predictions.keys()),
            "unexpected_predictions": len(predictions.keys() - gold.keys()),
            "unscored_languages": sorted(set(gold_by_lang) - set(languages))}


def _latex(f: dict) -> str:
    # tydi_eval.get_latex_str: percentages with one decimal
    return "\\fpr{%.1f}{%.1f}{%.1f}" % (f["f1"] * 100, f["precision"] * 100, f["recall"] * 100)


def _metrics_line(s: dict) -> str:
    """The per-language JSON line (get_metrics_with_answer_stats), keys in its order."""
    metrics = {}
    for task in ("passage", "minimal"):
        f = s[task]
        metrics[f"{task}-best-threshold-f1"] = f["f1"]
        metrics[f"{task}-best-threshold-precision"] = f["precision"]
        metrics[f"{task}-best-threshold-recall"] = f["recall"]
        metrics[f"{task}-best-threshold"] = f["threshold"]
        for row in f["at_precision"]:
            metrics[f"{task}-recall-at-precision>={row['target']:.2}"] = row["recall"]
            metrics[f"{task}-precision-at-precision>={row['target']:.2}"] = row["precision"]
    return json.dumps(metrics)


def format_scores(scores: dict) -> list[str]:
    """tydi_eval.py's stdout (its default layout), line for line."""
    lines = []
    for lang, s in scores["languages"].items():
        lines.append(f"Passage & {lang} & {_latex(s['passage'])}")
        lines.append(f"Minimal Answer & {lang} & {_latex(s['minimal'])}")
        lines.append(_metrics_line(s))
    macro = scores["macro"]
    lines.append("Total # examples in gold: %d, # ex. in pred: %d (including english)"
                 % (scores["gold_examples"], scores["predicted_examples"]))
    lines.append("*** Macro Over %d Languages, excluding English **" % len(macro["languages"]))
    for task, name in (("passage", "Passage"), ("minimal", "Minimal")):
        m = macro[task]
        # "R:%3f" (width 3, six decimals), not "%.3f": the official format string, kept as printed.
        lines.append("%s F1:%.3f P:%.3f R:%3f" % (name, m["f1"], m["precision"], m["recall"]))
        lines.append(_latex(m))
    lines.append("*** / Aggregate Scores ****")
    lines.append(json.dumps({
        "avg_passage_f1": macro["passage"]["f1"], "avg_passage_recall": macro["passage"]["recall"],
        "avg_passage_precision": macro["passage"]["precision"],
        "avg_minimal_f1": macro["minimal"]["f1"], "avg_minimal_recall": macro["minimal"]["recall"],
        "avg_minimal_precision": macro["minimal"]["precision"]}))
    return lines
