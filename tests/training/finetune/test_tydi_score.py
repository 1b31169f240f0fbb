"""training/finetune/tydi_score.py gives the official tydi_eval.py's own printed figures, line for line.

The expected outputs below were printed by the official script, run once by hand (never run by the
tests, never committed here): google-research-datasets/tydiqa at commit
43cde6d598c1cf88c1a8b9ed32e89263ffb5e03b, its tydi_eval.py and eval_utils.py exported with
`git show HEAD:tydi_eval.py` (Apache 2.0), run with Python 3.11 and absl-py from this venv; stdout
only (its absl log goes to stderr). Each output is pasted whole: the LaTeX lines and the macro lines
give the figures at the printed precision, the JSON lines at full float precision (json.dumps).
"""

import gzip
import json
import os

import pytest

from training.finetune.tydi_score import (Gold, Label, Prediction, format_scores, parse_prediction, read_gold,
                                          read_predictions, score_predictions, write_predictions)

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "tydiqa")
SMALL_GOLD = os.path.join(DATA, "small_gold_annotation.jsonl")
SAMPLE_PREDICTION = os.path.join(DATA, "sample_prediction.jsonl")
TINY_DEV = os.path.join(DATA, "tiny_dev.jsonl.gz")
MODEL_PREDICTION = os.path.join(DATA, "model_prediction.jsonl")

# python tydi_eval.py --gold_path=small_gold_annotation.jsonl --predictions_path=sample_prediction.jsonl
# (the repository's own sample pair; --passage_non_null_threshold / --minimal_non_null_threshold of 1
# and of 3 print the same figures on it: all three annotators agree on each of its examples)
OFFICIAL_SAMPLE = r"""
Passage & arabic & \fpr{100.0}{100.0}{100.0}
Minimal Answer & arabic & \fpr{57.1}{57.1}{57.1}
{"passage-best-threshold-f1": 1.0, "passage-best-threshold-precision": 1.0, "passage-best-threshold-recall": 1.0, "passage-best-threshold": 15.898082256317139, "passage-recall-at-precision>=0.5": 1.0, "passage-precision-at-precision>=0.5": 1.0, "passage-recall-at-precision>=0.75": 1.0, "passage-precision-at-precision>=0.75": 1.0, "passage-recall-at-precision>=0.9": 1.0, "passage-precision-at-precision>=0.9": 1.0, "minimal-best-threshold-f1": 0.5707656612529002, "minimal-best-threshold-precision": 0.5707656612529002, "minimal-best-threshold-recall": 0.5707656612529002, "minimal-best-threshold": 15.898082256317139, "minimal-recall-at-precision>=0.5": 0.5707656612529002, "minimal-precision-at-precision>=0.5": 0.5707656612529002, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & korean & \fpr{0.0}{0.0}{0.0}
Minimal Answer & korean & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & thai & \fpr{100.0}{100.0}{100.0}
Minimal Answer & thai & \fpr{100.0}{100.0}{100.0}
{"passage-best-threshold-f1": 1.0, "passage-best-threshold-precision": 1.0, "passage-best-threshold-recall": 1.0, "passage-best-threshold": 17.731379434466362, "passage-recall-at-precision>=0.5": 1.0, "passage-precision-at-precision>=0.5": 1.0, "passage-recall-at-precision>=0.75": 1.0, "passage-precision-at-precision>=0.75": 1.0, "passage-recall-at-precision>=0.9": 1.0, "passage-precision-at-precision>=0.9": 1.0, "minimal-best-threshold-f1": 1.0, "minimal-best-threshold-precision": 1.0, "minimal-best-threshold-recall": 1.0, "minimal-best-threshold": 17.731379434466362, "minimal-recall-at-precision>=0.5": 1.0, "minimal-precision-at-precision>=0.5": 1.0, "minimal-recall-at-precision>=0.75": 1.0, "minimal-precision-at-precision>=0.75": 1.0, "minimal-recall-at-precision>=0.9": 1.0, "minimal-precision-at-precision>=0.9": 1.0}
Total # examples in gold: 3, # ex. in pred: 3 (including english)
*** Macro Over 3 Languages, excluding English **
Passage F1:0.667 P:0.667 R:0.666667
\fpr{66.7}{66.7}{66.7}
Minimal F1:0.524 P:0.524 R:0.523589
\fpr{52.4}{52.4}{52.4}
*** / Aggregate Scores ****
{"avg_passage_f1": 0.6666666666666666, "avg_passage_recall": 0.6666666666666666, "avg_passage_precision": 0.6666666666666666, "avg_minimal_f1": 0.5235885537509667, "avg_minimal_recall": 0.5235885537509667, "avg_minimal_precision": 0.5235885537509667}
"""

# python tydi_eval.py --gold_path=tiny_dev.jsonl.gz --predictions_path=model_prediction.jsonl
# (a prediction file made by this project's model: tests/data/tydiqa/README.md says how; the same
# official commit and command as above; thresholds of 1 print the same figures on it)
OFFICIAL_MODEL = r"""
Passage & english & \fpr{0.0}{0.0}{0.0}
Minimal Answer & english & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & arabic & \fpr{0.0}{0.0}{0.0}
Minimal Answer & arabic & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & bengali & \fpr{0.0}{0.0}{0.0}
Minimal Answer & bengali & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & finnish & \fpr{0.0}{0.0}{0.0}
Minimal Answer & finnish & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & indonesian & \fpr{100.0}{100.0}{100.0}
Minimal Answer & indonesian & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 1.0, "passage-best-threshold-precision": 1.0, "passage-best-threshold-recall": 1.0, "passage-best-threshold": -2.8769612908363342, "passage-recall-at-precision>=0.5": 1.0, "passage-precision-at-precision>=0.5": 1.0, "passage-recall-at-precision>=0.75": 1.0, "passage-precision-at-precision>=0.75": 1.0, "passage-recall-at-precision>=0.9": 1.0, "passage-precision-at-precision>=0.9": 1.0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & japanese & \fpr{0.0}{0.0}{0.0}
Minimal Answer & japanese & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & swahili & \fpr{0.0}{0.0}{0.0}
Minimal Answer & swahili & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & korean & \fpr{0.0}{0.0}{0.0}
Minimal Answer & korean & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & russian & \fpr{0.0}{0.0}{0.0}
Minimal Answer & russian & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & telugu & \fpr{0.0}{0.0}{0.0}
Minimal Answer & telugu & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & thai & \fpr{0.0}{0.0}{0.0}
Minimal Answer & thai & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Total # examples in gold: 11, # ex. in pred: 11 (including english)
*** Macro Over 10 Languages, excluding English **
Passage F1:0.100 P:0.100 R:0.100000
\fpr{10.0}{10.0}{10.0}
Minimal F1:0.000 P:0.000 R:0.000000
\fpr{0.0}{0.0}{0.0}
*** / Aggregate Scores ****
{"avg_passage_f1": 0.1, "avg_passage_recall": 0.1, "avg_passage_precision": 0.1, "avg_minimal_f1": 0.0, "avg_minimal_recall": 0.0, "avg_minimal_precision": 0.0}
"""

# The constructed pair, written once by constructed_files(TINY_DEV, "/tmp/tydi_constructed") (below), then
# python tydi_eval.py --gold_path=/tmp/tydi_constructed/gold.jsonl --predictions_path=/tmp/tydi_constructed/predictions.jsonl
OFFICIAL_CONSTRUCTED = r"""
Passage & english & \fpr{0.0}{0.0}{0.0}
Minimal Answer & english & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & arabic & \fpr{80.0}{80.0}{80.0}
Minimal Answer & arabic & \fpr{52.5}{47.3}{59.1}
{"passage-best-threshold-f1": 0.8000000000000002, "passage-best-threshold-precision": 0.8, "passage-best-threshold-recall": 0.8, "passage-best-threshold": -1.0, "passage-recall-at-precision>=0.5": 0.8, "passage-precision-at-precision>=0.5": 0.8, "passage-recall-at-precision>=0.75": 0.8, "passage-precision-at-precision>=0.75": 0.8, "passage-recall-at-precision>=0.9": 0.2, "passage-precision-at-precision>=0.9": 1.0, "minimal-best-threshold-f1": 0.5252525252525253, "minimal-best-threshold-precision": 0.4727272727272728, "minimal-best-threshold-recall": 0.5909090909090909, "minimal-best-threshold": -1.0, "minimal-recall-at-precision>=0.5": 0.18181818181818182, "minimal-precision-at-precision>=0.5": 0.7272727272727273, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & bengali & \fpr{0.0}{0.0}{0.0}
Minimal Answer & bengali & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & finnish & \fpr{0.0}{0.0}{0.0}
Minimal Answer & finnish & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & indonesian & \fpr{50.0}{50.0}{50.0}
Minimal Answer & indonesian & \fpr{46.8}{46.8}{46.8}
{"passage-best-threshold-f1": 0.5, "passage-best-threshold-precision": 0.5, "passage-best-threshold-recall": 0.5, "passage-best-threshold": -3.0, "passage-recall-at-precision>=0.5": 0.5, "passage-precision-at-precision>=0.5": 0.5, "passage-recall-at-precision>=0.75": 0.25, "passage-precision-at-precision>=0.75": 1.0, "passage-recall-at-precision>=0.9": 0.25, "passage-precision-at-precision>=0.9": 1.0, "minimal-best-threshold-f1": 0.467741935483871, "minimal-best-threshold-precision": 0.467741935483871, "minimal-best-threshold-recall": 0.467741935483871, "minimal-best-threshold": -3.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & japanese & \fpr{0.0}{0.0}{0.0}
Minimal Answer & japanese & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & swahili & \fpr{0.0}{0.0}{0.0}
Minimal Answer & swahili & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & russian & \fpr{50.0}{50.0}{50.0}
Minimal Answer & russian & \fpr{50.0}{50.0}{50.0}
{"passage-best-threshold-f1": 0.5, "passage-best-threshold-precision": 0.5, "passage-best-threshold-recall": 0.5, "passage-best-threshold": 12.0, "passage-recall-at-precision>=0.5": 0.5, "passage-precision-at-precision>=0.5": 0.5, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.5, "minimal-best-threshold-precision": 0.5, "minimal-best-threshold-recall": 0.5, "minimal-best-threshold": 12.0, "minimal-recall-at-precision>=0.5": 0.5, "minimal-precision-at-precision>=0.5": 0.5, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & telugu & \fpr{0.0}{0.0}{0.0}
Minimal Answer & telugu & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Passage & thai & \fpr{0.0}{0.0}{0.0}
Minimal Answer & thai & \fpr{0.0}{0.0}{0.0}
{"passage-best-threshold-f1": 0.0, "passage-best-threshold-precision": 0.0, "passage-best-threshold-recall": 0.0, "passage-best-threshold": 0.0, "passage-recall-at-precision>=0.5": 0, "passage-precision-at-precision>=0.5": 0, "passage-recall-at-precision>=0.75": 0, "passage-precision-at-precision>=0.75": 0, "passage-recall-at-precision>=0.9": 0, "passage-precision-at-precision>=0.9": 0, "minimal-best-threshold-f1": 0.0, "minimal-best-threshold-precision": 0.0, "minimal-best-threshold-recall": 0.0, "minimal-best-threshold": 0.0, "minimal-recall-at-precision>=0.5": 0, "minimal-precision-at-precision>=0.5": 0, "minimal-recall-at-precision>=0.75": 0, "minimal-precision-at-precision>=0.75": 0, "minimal-recall-at-precision>=0.9": 0, "minimal-precision-at-precision>=0.9": 0}
Total # examples in gold: 21, # ex. in pred: 19 (including english)
*** Macro Over 9 Languages, excluding English **
Passage F1:0.200 P:0.200 R:0.200000
\fpr{20.0}{20.0}{20.0}
Minimal F1:0.166 P:0.160 R:0.173183
\fpr{16.6}{16.0}{17.3}
*** / Aggregate Scores ****
{"avg_passage_f1": 0.20000000000000004, "avg_passage_recall": 0.2, "avg_passage_precision": 0.2, "avg_minimal_f1": 0.16588827341515514, "avg_minimal_recall": 0.17318344737699576, "avg_minimal_precision": 0.16005213424568263}
"""

# The same pair with --passage_non_null_threshold=N --minimal_non_null_threshold=N: the printed
# figures (the per-language JSON lines left out; they are the same figures at full precision).
OFFICIAL_CONSTRUCTED_THRESHOLD = {
    1: r"""
Passage & english & \fpr{100.0}{100.0}{100.0}
Minimal Answer & english & \fpr{100.0}{100.0}{100.0}
Passage & arabic & \fpr{80.0}{80.0}{80.0}
Minimal Answer & arabic & \fpr{52.5}{47.3}{59.1}
Passage & bengali & \fpr{0.0}{0.0}{0.0}
Minimal Answer & bengali & \fpr{0.0}{0.0}{0.0}
Passage & finnish & \fpr{0.0}{0.0}{0.0}
Minimal Answer & finnish & \fpr{0.0}{0.0}{0.0}
Passage & indonesian & \fpr{50.0}{50.0}{50.0}
Minimal Answer & indonesian & \fpr{46.8}{46.8}{46.8}
Passage & japanese & \fpr{0.0}{0.0}{0.0}
Minimal Answer & japanese & \fpr{0.0}{0.0}{0.0}
Passage & swahili & \fpr{0.0}{0.0}{0.0}
Minimal Answer & swahili & \fpr{0.0}{0.0}{0.0}
Passage & russian & \fpr{50.0}{50.0}{50.0}
Minimal Answer & russian & \fpr{50.0}{50.0}{50.0}
Passage & telugu & \fpr{100.0}{100.0}{100.0}
Minimal Answer & telugu & \fpr{100.0}{100.0}{100.0}
Passage & thai & \fpr{0.0}{0.0}{0.0}
Minimal Answer & thai & \fpr{0.0}{0.0}{0.0}
Total # examples in gold: 21, # ex. in pred: 19 (including english)
*** Macro Over 9 Languages, excluding English **
Passage F1:0.311 P:0.311 R:0.311111
\fpr{31.1}{31.1}{31.1}
Minimal F1:0.277 P:0.271 R:0.284295
\fpr{27.7}{27.1}{28.4}
*** / Aggregate Scores ****
{"avg_passage_f1": 0.3111111111111111, "avg_passage_recall": 0.3111111111111111, "avg_passage_precision": 0.3111111111111111, "avg_minimal_f1": 0.2769993845262662, "avg_minimal_recall": 0.28429455848810686, "avg_minimal_precision": 0.27116324535679376}
""",
    3: r"""
Passage & english & \fpr{0.0}{0.0}{0.0}
Minimal Answer & english & \fpr{0.0}{0.0}{0.0}
Passage & arabic & \fpr{57.1}{50.0}{66.7}
Minimal Answer & arabic & \fpr{31.8}{21.2}{63.6}
Passage & bengali & \fpr{0.0}{0.0}{0.0}
Minimal Answer & bengali & \fpr{0.0}{0.0}{0.0}
Passage & finnish & \fpr{0.0}{0.0}{0.0}
Minimal Answer & finnish & \fpr{0.0}{0.0}{0.0}
Passage & indonesian & \fpr{57.1}{50.0}{66.7}
Minimal Answer & indonesian & \fpr{28.6}{25.0}{33.3}
Passage & japanese & \fpr{0.0}{0.0}{0.0}
Minimal Answer & japanese & \fpr{0.0}{0.0}{0.0}
Passage & swahili & \fpr{0.0}{0.0}{0.0}
Minimal Answer & swahili & \fpr{0.0}{0.0}{0.0}
Passage & russian & \fpr{50.0}{50.0}{50.0}
Minimal Answer & russian & \fpr{66.7}{50.0}{100.0}
Passage & telugu & \fpr{0.0}{0.0}{0.0}
Minimal Answer & telugu & \fpr{0.0}{0.0}{0.0}
Passage & thai & \fpr{0.0}{0.0}{0.0}
Minimal Answer & thai & \fpr{0.0}{0.0}{0.0}
Total # examples in gold: 21, # ex. in pred: 19 (including english)
*** Macro Over 9 Languages, excluding English **
Passage F1:0.183 P:0.167 R:0.203704
\fpr{18.3}{16.7}{20.4}
Minimal F1:0.141 P:0.107 R:0.218855
\fpr{14.1}{10.7}{21.9}
*** / Aggregate Scores ****
{"avg_passage_f1": 0.18253968253968256, "avg_passage_recall": 0.2037037037037037, "avg_passage_precision": 0.16666666666666666, "avg_minimal_f1": 0.14117364117364117, "avg_minimal_recall": 0.21885521885521886, "avg_minimal_precision": 0.1069023569023569}
""",
}


# --- The constructed pair: tiny_dev's 11 examples (one per language) plus variants of the arabic,
# indonesian and russian ones with new ids and annotations, so languages hold several examples with
# tied, negative and integer scores, partial and adjacent spans, yes/no, missing predictions.

# (passage index, minimal start byte, minimal end byte, yes_no) for each of three annotators
NULL = (-1, -1, -1, "NONE")
VARIANTS = {  # new id: (tiny_dev language to copy, annotations)
    101: ("arabic", [(2, 2000, 2010, "NONE"), (2, 2000, 2012, "NONE"), (2, 1998, 2010, "NONE")]),
    102: ("arabic", [NULL, NULL, NULL]),
    103: ("arabic", [(3, -1, -1, "YES"), (3, -1, -1, "YES"), NULL]),
    104: ("arabic", [(0, 10, 20, "NONE"), (0, 10, 20, "NONE"), (0, -1, -1, "NONE")]),
    105: ("arabic", [(1, -1, -1, "NONE"), (1, -1, -1, "NONE"), (1, -1, -1, "NONE")]),
    201: ("indonesian", [(0, 5, 10, "NONE"), (0, 5, 10, "NONE"), (1, 5, 10, "NONE")]),
    202: ("indonesian", [(0, 5, 10, "NONE"), (0, 5, 10, "NONE"), (1, 5, 10, "NONE")]),
    203: ("indonesian", [NULL, NULL, NULL]),
    204: ("indonesian", [(2, 700, 720, "NONE"), (2, 700, 720, "NONE"), (2, 700, 720, "NONE")]),
    301: ("russian", [(75, -1, -1, "YES"), (75, -1, -1, "YES"), (75, -1, -1, "NONE")]),
}


def _pred(example_id, language, passage, score, span=(-1, -1), minimal_score=None, yes_no="NONE", **drop):
    """A prediction line; the keys named in `drop` left out."""
    r = {"example_id": example_id, "language": language, "passage_answer_index": passage,
         "passage_answer_score": score, "minimal_answer": {"start_byte_offset": span[0], "end_byte_offset": span[1]},
         "minimal_answer_score": score if minimal_score is None else minimal_score, "yes_no_answer": yes_no}
    for k in drop:
        del r[k]
    return r


def constructed_files(tiny_dev_path, out_dir):
    """Writes gold.jsonl and predictions.jsonl into out_dir; returns their paths."""
    with gzip.open(tiny_dev_path, "rt", encoding="utf-8") as f:
        base = [json.loads(line) for line in f]
    ids = {r["language"]: r["example_id"] for r in base}
    gold = list(base)
    for new_id, (lang, annotations) in VARIANTS.items():
        r = dict(next(b for b in base if b["language"] == lang), example_id=new_id)
        r["annotations"] = [{"annotation_id": k, "passage_answer": {"candidate_index": p},
                             "minimal_answer": {"plaintext_start_byte": s, "plaintext_end_byte": e,
                                                "html_start_byte": -1, "html_end_byte": -1},
                             "yes_no_answer": yn} for k, (p, s, e, yn) in enumerate(annotations)]
        gold.append(r)
    predictions = [
        # arabic: gold passage 1 (2 of 3), minimal (1862, 1876) twice; a partial span
        _pred(ids["arabic"], "arabic", 1, 9.0, (1862, 1870)),
        _pred(101, "arabic", 2, 3.5, (2005, 2015)),  # partial against three different spans
        _pred(102, "arabic", 0, 3.5, (100, 120)),  # tied with 101; gold has nothing: false positives
        _pred(103, "arabic", 3, -1.0, yes_no="yes"),  # lower-case yes, right, at a negative score
        _pred(104, "arabic", -1, 7.0, minimal_score=0.25),  # predicts nothing where gold has both
        _pred(105, "arabic", 1, 2.0, (1862, 1876)),  # right passage, a span where gold has none
        # indonesian: gold passage 1 twice, minimal (652, 670) and (652, 687): the best annotator counts
        _pred(ids["indonesian"], "indonesian", 2, 4.0, (660, 687), minimal_score=6.0),  # ties 201's span
        _pred(201, "indonesian", 1, 6.0, (10, 20)),  # passage right by the third annotator; span adjacent: 0
        # 202 (gold has answers) and 203 (gold has none) have no prediction
        _pred(204, "indonesian", 2, -3.0, (700, 720)),  # all right, lowest score
        # russian: NO three times; passage 75, 75, 79
        _pred(ids["russian"], "russian", 79, 12.0, yes_no="NO"),
        _pred(301, "russian", 80, 12.0, yes_no="no"),  # gold YES twice: wrong; tied score
        # thai's gold example gets none, but a prediction for an id not in gold names thai
        _pred(1234567, "thai", 0, 1.0, (0, 5)),
        _pred(ids["swahili"], "swahili", 0, 5, (1, 10)),  # integer scores; gold null
        _pred(ids["telugu"], "telugu", 27, 8.0, (39087, 39089)),  # one annotator agrees: null gold at 2
        _pred(ids["finnish"], "finnish", -1, 1.0),  # one annotator has an answer
        # bengali: no passage_answer_index, no yes_no_answer: the defaults -1 and NONE; gold null
        _pred(ids["bengali"], "bengali", 0, 0.5, passage_answer_index=True, yes_no_answer=True),
        _pred(ids["japanese"], "japanese", 3, 2.0, yes_no="YES"),  # gold null
        _pred(ids["korean"], "KOREAN", 0, 2.0, (0, 9)),  # not a language_list name: korean is not scored
        _pred(ids["english"], "english", 5, 1.0, yes_no="YES"),  # one annotator: P5 YES; not in the macro
    ]
    gold_path, pred_path = os.path.join(out_dir, "gold.jsonl"), os.path.join(out_dir, "predictions.jsonl")
    with open(gold_path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in gold)
    with open(pred_path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in predictions)
    return gold_path, pred_path


def _lines(text):
    return text.strip("\n").split("\n")


def _printed(lines):
    return [line for line in lines if not line.startswith('{"passage-')]


def test_official_sample():
    s = score_predictions(read_gold(SMALL_GOLD), read_predictions(SAMPLE_PREDICTION))
    assert format_scores(s) == _lines(OFFICIAL_SAMPLE)
    assert s["macro"]["languages"] == ["arabic", "korean", "thai"]
    assert round(s["macro"]["passage"]["f1"], 3) == 0.667 and round(s["macro"]["minimal"]["f1"], 3) == 0.524
    # korean: gold has no passage, the prediction one: no gold answers, so 0 whatever is predicted
    assert s["languages"]["korean"]["passage"]["f1"] == 0.0
    assert s["languages"]["arabic"]["minimal"]["threshold"] == 15.898082256317139
    for n in (1, 3):
        same = score_predictions(read_gold(SMALL_GOLD), read_predictions(SAMPLE_PREDICTION), n, n)
        assert format_scores(same) == _lines(OFFICIAL_SAMPLE)


def test_official_on_our_models_predictions():
    """The official script read a prediction file our fine-tuned model wrote (canine finetune tydiqa)
    without error, and printed what our scorer prints."""
    s = score_predictions(read_gold(TINY_DEV), read_predictions(MODEL_PREDICTION))
    assert format_scores(s) == _lines(OFFICIAL_MODEL)
    assert s["predicted_examples"] == s["gold_examples"] == 11 and s["missing_predictions"] == 0
    assert format_scores(score_predictions(read_gold(TINY_DEV), read_predictions(MODEL_PREDICTION), 1, 1)) == \
        _lines(OFFICIAL_MODEL)


def test_official_constructed(tmp_path):
    gold_path, pred_path = constructed_files(TINY_DEV, str(tmp_path))
    gold, preds = read_gold(gold_path), read_predictions(pred_path)
    s = score_predictions(gold, preds)
    assert format_scores(s) == _lines(OFFICIAL_CONSTRUCTED)
    assert "korean" not in s["languages"] and s["unscored_languages"] == ["korean"]
    assert s["languages"]["indonesian"]["missing"] == 2 and s["languages"]["thai"]["missing"] == 1
    # thai's, 202 and 203 have none (korean's has one, under another language); 1234567 is not in gold
    assert (s["missing_predictions"], s["unexpected_predictions"]) == (3, 1)
    for n, expected in OFFICIAL_CONSTRUCTED_THRESHOLD.items():
        assert _printed(format_scores(score_predictions(gold, preds, n, n))) == _lines(expected)


def test_prediction_round_trip(tmp_path):
    preds = [Prediction(5, "thai", 2, 1.5, (10, 20), 0.5), Prediction(-6, "english", -1, 0.0, (-1, -1), 2.0, "yes")]
    path = str(tmp_path / "p.jsonl")
    write_predictions(path, preds)
    back = read_predictions(path)
    assert list(back.values()) == preds
    assert json.loads(open(path).readline())["yes_no_answer"] == "NONE"


@pytest.mark.parametrize("record, message", [
    (_pred(1, "thai", 0, 1.0, (5, -1)), "inconsistent null span"),
    (_pred(1, "thai", 0, 1.0, (9, 5)), "starts after its end"),
    (_pred(1, "thai", 0, 1.0, (5, 9), yes_no="YES"), "yes/no answer with a minimal span"),
    (_pred(1, "thai", 0, 1.0, yes_no="MAYBE"), "is not YES, NO or NONE"),
    (_pred("1", "thai", 0, 1.0), "is not an integer"),
])
def test_bad_predictions_refused(record, message):
    with pytest.raises(ValueError, match=message):
        parse_prediction(record)


def test_missing_fields_refused(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(_pred(1, "thai", 0, 1.0, minimal_answer=1)) + "\n")
    with pytest.raises(ValueError, match=r"p.jsonl:1: missing minimal_answer"):
        read_predictions(str(path))


def test_empty_span_inside_gold_fails_as_the_official_does():
    gold = [Gold(1, "thai", (Label(0, (10, 20), "none"),) * 3)]
    with pytest.raises(ValueError, match="in_both > 0"):
        score_predictions(gold, [Prediction(1, "thai", 0, 1.0, (15, 15), 1.0)])
    # at either end it does not overlap: 0, as there
    s = score_predictions(gold, [Prediction(1, "thai", 0, 1.0, (20, 20), 1.0)])
    assert s["languages"]["thai"]["minimal"]["f1"] == 0.0 and s["languages"]["thai"]["passage"]["f1"] == 1.0
