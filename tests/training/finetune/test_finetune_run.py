"""`canine finetune ner` end to end on the session's local Ray cluster (127.0.0.1), from the
session's pretrained reference run (tests/training/conftest.py: one pretrained model for every
test): Ray Train workers, DeepSpeed ZeRO-2 over gloo, the tiny encoder, CoNLL files of two
languages written for the tests (ner_data.py; IOB2 and IOB1, sentences longer than the window).

One uninterrupted run on 1 worker is compared with a run on 2 workers whose rank 1 is killed at
step 35 and restarted from its step-20 checkpoint: same losses step by step, same scores, since the
order, the micro batches and the dropout depend on the seed and the data, not on the worker count
(training/finetune/data.py)."""

import json
import os

import pytest

from ner_data import write_task
from training.finetune import config, predict
from training.finetune.run import finetune
from training.train import rundir

pytestmark = pytest.mark.slow
STEPS = 60
SETTINGS = {"task.max_length": 128, "train.max_steps": STEPS, "train.global_batch": 16, "train.micro_batch": 8,
            "train.eval_every": 30, "checkpoint.every": 20, "optim.lr": 3e-3, "log.tensorboard": False}


@pytest.fixture(scope="module")
def task_files(tmp_path_factory) -> dict:
    """The task's files under ROOT/data/{swa,eng}/ (their folders name the languages), ROOT as "root"."""
    root = tmp_path_factory.mktemp("ner")
    return {**write_task(root / "data"), "root": root}


def _cfg(files, output, init, **extra):
    return config.load_config({**SETTINGS, "task.train": files["train"], "task.dev": files["dev"],
                               "task.test": files["test"], "init.path": init, "output": str(output), **extra})


def _readme_command(init: str) -> list[str]:
    """README's `canine finetune ner` line with relative paths, SETTINGS as flags, 1 worker, MLflow on."""
    return ["finetune", "ner", *[a for lang in ("swa", "eng") for role in ("train", "dev", "test")
                                 for a in (f"--{role}", f"data/{lang}/{role}.txt")],
            "--init", init, "--output", "runs/ner", "--workers", "1", "--mlflow", "on", "--json",
            *[a for key, value in SETTINGS.items() for a in ("--set", f"{key}={value}")]]


@pytest.fixture(scope="module")
def uninterrupted(task_files, reference_run, ray_local):
    """(output, summary, records) of README's command run from a working directory of its own
    (the task's root), relative paths, on the session's cluster, from the pretrained reference run."""
    from jobs import cli

    here = os.getcwd()
    os.chdir(task_files["root"])
    try:
        assert cli.main(_readme_command(reference_run[0])) == 0
    finally:
        os.chdir(here)
    output = str(task_files["root"] / "runs" / "ner")
    summary = json.loads(open(os.path.join(output, rundir.SUMMARY)).read())
    return output, summary, rundir.read_metrics(output)


def test_the_run_keeps_its_best_dev_evaluation_and_scores_it_like_conlleval(uninterrupted, task_files):
    output, summary, records = uninterrupted
    assert summary["finished"] and summary["steps"] == STEPS
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    evals = [r for r in records if "eval_f1" in r]
    assert [r["step"] for r in evals] == [30, 60]
    best = max(evals, key=lambda r: (r["eval_f1"], -r["step"]))  # ties: the earlier one
    assert summary["best_step"] == best["step"] and summary["selection"] == "best dev F1"
    assert summary["test"]["overall"]["f1"] == pytest.approx(best["test_f1"])
    assert set(summary["test"]["languages"]) == {"swa", "eng"} == set(summary["dev"]["languages"])
    # each test file's long sentence is read in overlapping windows, not truncated, and the summary says so
    assert summary["windows"]["test"]["sentences_over_one_window"] == 2 and summary["max_length"] == 128
    assert records[-1]["loss"] < records[0]["loss"] - 0.5
    # 60 steps from the pretrained tiny encoder find most entities of these regular sentences (0.68
    # dev / 0.73 test F1 when written; a model that found none scores 0)
    assert summary["test"]["overall"]["f1"] > 0.3 and summary["test"]["overall"]["predicted_entities"] > 0
    # The kept predictions are the input files with a tag column; tagging the test files again with
    # the kept weights (no Ray) gives the figures the run recorded for them.
    for lang, path in (("swa", task_files["test"][0]), ("eng", task_files["test"][1])):
        written = (open(os.path.join(output, rundir.prediction_file("test", lang))).read().splitlines())
        source = open(path).read().splitlines()
        assert [line.rsplit(" ", 1)[0] for line in written if line] == [
            " ".join(line.split()) for line in source if line]
        again = predict.predict_file(output, f"{lang}={path}", os.path.join(output, f"again-{lang}.txt"))
        recorded = summary["test"]["languages"][lang]
        assert (again["correct"], again["predicted_entities"], again["gold_entities"]) == (
            recorded["correct"], recorded["predicted_entities"], recorded["gold_entities"])


def test_the_export_is_a_transformers_token_classifier(uninterrupted):
    import torch
    from transformers import AutoModelForTokenClassification

    output, summary, _ = uninterrupted
    model, info = AutoModelForTokenClassification.from_pretrained(summary["hf_export"], output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert model.config.id2label == dict(enumerate(summary["labels"]))
    cfg, ours = predict.load_run(output)
    ids = torch.tensor([[0xE000, *map(ord, "Amina alikwenda Dodoma."), 0xE001]])
    with torch.no_grad():
        theirs = model(input_ids=ids).logits
        mine = ours.logits(ids)
    torch.testing.assert_close(theirs, mine, atol=1e-4, rtol=1e-4)


def test_a_killed_run_on_two_workers_resumes_to_the_same_run(uninterrupted, task_files, reference_run, tmp_path,
                                                            monkeypatch):
    monkeypatch.setenv("CANINE_FAULT_STEP", "35")  # rank 1 kills its process after step 35 (training/train/failures.py)
    summary = finetune(_cfg(task_files, tmp_path, reference_run[0], **{"parallel.workers": 2,
                                                                       "parallel.max_failures": 1}))
    assert "killed itself at step 35" in (tmp_path / ".fault_injected").read_text()
    records = rundir.read_metrics(str(tmp_path))
    reference = uninterrupted[2]
    assert [r["step"] for r in records] == [r["step"] for r in reference]
    for got, want in zip(records, reference):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), got["step"]
    assert summary["best_step"] == uninterrupted[1]["best_step"]
    # the same predictions but where a float summation order moved an argmax (none when written)
    assert summary["test"]["overall"]["f1"] == pytest.approx(uninterrupted[1]["test"]["overall"]["f1"], abs=0.01)


def test_ctrl_c_leaves_the_line_that_says_the_same_command_resumes(task_files, reference_run, ray_local, tmp_path,
                                                                   monkeypatch):
    from contract.interrupted import Interrupted
    from training.train import run

    def interrupted_fit(cfg, progress, before_restart, loop):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "fit", interrupted_fit)
    with pytest.raises(Interrupted, match="the same command starts the run again"):
        finetune(_cfg(task_files, tmp_path, reference_run[0]))
    saved = json.loads(json.dumps(rundir.read_saved_config(str(tmp_path))))
    assert saved["labels"] == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_readme_commands_json_mlflow_evaluate_and_predict(uninterrupted, task_files, reference_run, monkeypatch,
                                                         capsys):
    """The finished run again (no Ray: its summary, stdout the JSON document alone), its MLflow run,
    `canine evaluate` reprinting the scores, --predict tagging a file for conlleval, all from the
    task's root with relative paths."""
    import mlflow

    from jobs import cli
    from training.train import tracking

    output, summary, _ = uninterrupted
    monkeypatch.chdir(task_files["root"])
    capsys.readouterr()
    assert cli.main(_readme_command(reference_run[0])) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == summary and "finished at step 60; nothing to do" in err
    assert summary["hf_export"] == os.path.join(output, "hf") and summary["init"]["path"] == reference_run[0]
    client = mlflow.MlflowClient(tracking_uri=tracking.tracking_uri("on", output))
    run_id = json.loads(open(os.path.join(output, tracking.RECORD)).read())["run_id"]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and "eval_f1" in run.data.metrics and "test_f1" in run.data.metrics
    assert {"summary.json", "scores.json", "README.md"} <= {a.path for a in client.list_artifacts(run_id)}

    assert cli.main(["evaluate", "runs/ner", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["test"] == summary["test"]
    assert cli.main(["evaluate", "runs/ner"]) == 0
    assert "test: processed" in capsys.readouterr().out
    assert cli.main(["finetune", "ner", "--output", "runs/ner", "--predict", "eng=data/eng/test.txt",
                     "--to", "eng.pred"]) == 0
    tagged = (task_files["root"] / "eng.pred").read_text().splitlines()
    assert tagged[0] == "-DOCSTART- -X- O O" and all(len(line.split()) == 4 for line in tagged if line)
    found = summary["test"]["languages"]["eng"]["predicted_entities"]
    assert f"found: {found} phrases" in capsys.readouterr().err
