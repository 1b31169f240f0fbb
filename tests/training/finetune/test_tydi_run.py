"""`canine finetune tydiqa` end to end on the session's local Ray cluster (127.0.0.1), from the
session's pretrained reference run (tests/training/conftest.py), on TyDi QA's own tiny_dev.jsonl.gz
(tests/data/tydiqa: eleven real dev examples, one per language, three annotations each) as both
the training and the dev file: the pipeline's Beam job windows it (pipeline/downstream), Ray Train
workers fine-tune the span and answer-type heads with DeepSpeed, every evaluation writes the
official prediction file and scores it as tydi_eval.py does (tydi_score.py), and the kept weights
export for transformers. A few steps: any score; what is checked is that every piece is there
and right.

The reference run was pretrained at 256 characters, so its position table has 256 rows: the
windows here are 256 characters (question at most 64, stride 128), not Google's 2048.
"""

import json
import os
import shutil

import pytest

from training.finetune import tydi, tydi_score
from training.train import rundir

pytestmark = pytest.mark.slow
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "tydiqa")
TINY_DEV = os.path.abspath(os.path.join(DATA, "tiny_dev.jsonl.gz"))
STEPS = 6
FLAGS = ["--max-length", "256", "--stride", "128", "--set", "task.max_question=64", "--max-steps", str(STEPS),
         "--global-batch", "8", "--micro-batch", "4", "--eval-every", "3", "--checkpoint-every", "3", "--lr", "3e-3",
         "--set", "log.tensorboard=false"]


@pytest.fixture(scope="module")
def tydi_run(reference_run, ray_local, tmp_path_factory):
    """(output, summary, exit code, root) of README's command from a working directory of its own,
    relative paths, 2 workers: stopped at step 3 (a checkpoint), then the same command again, which
    finds the windows prepared and resumes."""
    from jobs import cli

    root = tmp_path_factory.mktemp("tydi")
    shutil.copy(TINY_DEV, root / "tiny_dev.jsonl.gz")
    command = ["finetune", "tydiqa", "--train", "tiny_dev.jsonl.gz", "--dev", "tiny_dev.jsonl.gz",
               "--init", reference_run[0], "--output", "runs/tydi", "--workers", "2", "--json", *FLAGS]
    here = os.getcwd()
    os.chdir(root)
    try:
        assert cli.main([*command, "--stop-at-step", "3"]) == 0
        output = str(root / "runs" / "tydi")
        stopped = json.loads(open(os.path.join(output, rundir.SUMMARY)).read())
        assert not stopped["finished"] and [r["step"] for r in rundir.read_metrics(output)] == [1, 2, 3]
        manifest = os.path.join(output, "windows", "dev", "_manifest.json")
        written = os.stat(manifest).st_mtime_ns
        code = cli.main(command)
        assert os.stat(manifest).st_mtime_ns == written  # prepared once: the second start found them
    finally:
        os.chdir(here)
    return output, json.loads(open(os.path.join(output, rundir.SUMMARY)).read()), code, root


def test_the_run_trains_scores_and_keeps_its_best_evaluation(tydi_run):
    output, summary, code, _ = tydi_run
    assert code == 0 and summary["finished"] and summary["task"] == "tydiqa"
    records = rundir.read_metrics(output)
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    evals = [r for r in records if "eval_f1" in r]
    assert [r["step"] for r in evals] == [3, 6]
    best = max(evals, key=lambda r: (r["eval_f1"], -r["step"]))
    assert summary["best_step"] == best["step"]
    dev = summary["dev"]
    # every language of tiny_dev is scored, and the macro average leaves English out (tydi_eval.py)
    assert set(dev["languages"]) == set(tydi_score.LANGUAGES)
    assert "english" not in dev["macro"]["languages"] and len(dev["macro"]["languages"]) == 10
    assert dev["overall"]["thresholds"] == {"passage": 2, "minimal": 2}  # tiny_dev has 3 annotators
    assert dev["overall"]["f1"] == pytest.approx((dev["macro"]["passage"]["f1"] + dev["macro"]["minimal"]["f1"]) / 2)
    assert summary["windows"]["train"]["rows"] > 0 and summary["windows"]["dev"]["rows"] > summary["windows"]["train"]["rows"]
    assert all(r["loss"] == r["loss"] for r in records)  # finite losses


def test_the_predictions_are_the_official_format_one_per_example(tydi_run):
    output, summary, _, _ = tydi_run
    path = rundir.join(output, tydi.PREDICTIONS.format(role="dev"))
    lines = [json.loads(line) for line in open(path, encoding="utf-8")]
    gold = tydi_score.read_gold(TINY_DEV)
    assert sorted(p["example_id"] for p in lines) == sorted(gold)  # every gold example, once
    predictions = tydi_score.read_predictions(path)  # the official reader's checks (tydi_score.parse_prediction)
    for p in lines:
        assert p["language"] == gold[p["example_id"]].language
        start, end = p["minimal_answer"]["start_byte_offset"], p["minimal_answer"]["end_byte_offset"]
        if p["yes_no_answer"] != "NONE":
            assert (start, end) == (-1, -1)
        else:
            assert (start, end) == (-1, -1) or end > start  # never an empty span
    # the figures kept with the run are the scorer's on the kept prediction file
    again = tydi.score_files([TINY_DEV], list(predictions.values()))
    assert again["macro"] == summary["dev"]["macro"]


def test_predict_writes_the_same_predictions_and_figures(tydi_run, capsys):
    """`--predict` with the kept weights in this process (no Ray) gives the kept evaluation's file."""
    from jobs import cli

    output, summary, _, root = tydi_run
    to = root / "again.jsonl"
    assert cli.main(["finetune", "tydiqa", "--output", output, "--predict", TINY_DEV, "--to", str(to)]) == 0
    kept = open(rundir.join(output, tydi.PREDICTIONS.format(role="dev")), encoding="utf-8").read().splitlines()
    ours = open(to, encoding="utf-8").read().splitlines()
    by_id = lambda lines: {json.loads(x)["example_id"]: json.loads(x) for x in lines}  # noqa: E731
    a, b = by_id(kept), by_id(ours)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k]["passage_answer_index"] == b[k]["passage_answer_index"]
        assert a[k]["minimal_answer"] == b[k]["minimal_answer"] and a[k]["yes_no_answer"] == b[k]["yes_no_answer"]
        assert a[k]["passage_answer_score"] == pytest.approx(b[k]["passage_answer_score"], abs=1e-3)
    assert "passage (SelectP) F1" in capsys.readouterr().err


def test_the_export_answers_a_question_on_a_raw_document(tydi_run):
    output, summary, _, _ = tydi_run
    from transformers import AutoModelForQuestionAnswering

    assert summary["hf_export"]
    model = AutoModelForQuestionAnswering.from_pretrained(summary["hf_export"], trust_remote_code=True)
    document = "Dodoma ni mji mkuu wa Tanzania.\n\nUnapatikana katikati ya nchi."
    answer = model.answer("Mji mkuu wa Tanzania ni upi?", document)
    assert answer["type"] in ("minimal", "passage", "yes", "no", "null", "unknown")
    if answer.get("start") is not None:
        assert document[answer["start"]:answer["end"]] == answer["answer"]


def test_evaluate_reprints_the_kept_figures(tydi_run, capsys):
    from jobs import cli

    output, summary, _, _ = tydi_run
    assert cli.main(["evaluate", output]) == 0
    printed = capsys.readouterr().out
    assert f"step {summary['best_step']}" in printed and "passage (SelectP) F1" in printed and "thai" in printed
