"""`canine smoke` end to end, shortened: real Beam, real local Ray cluster, real DeepSpeed. Its
console (every byte written to file descriptors 1 and 2, by this process and the ones it starts)
is the project's own lines only, each one accounted for."""

import re

import pytest

from contract import schema
from jobs import cli

pytestmark = pytest.mark.slow

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
# stdout: the stages and the summary, in this order, one line each (blank lines between stages)
STDOUT = [r"\[1/3\] preprocessing the bundled sample .*", r"    \d+ train / \d+ validation examples from .*",
          r"\[2/3\] pretraining tiny CANINE-C .*", r"\[3/3\] summary", r"run  +.*", r"data  +.*", r"loss  +.*",
          r"validation  +step \d+: loss .*", r"throughput  +.* characters/s.*", r"curve  +.*/curves\.png",
          # canine evaluate's comparison (training/train/evaluate.py format_evaluation)
          r"weights  +step (\d+) of \1 \(the final weights\)",
          r"held-out  +\d+ validation examples, \d+ masked characters \(CANINE-C\)", r" +accuracy +loss",
          *(rf"  {name} +0\.\d{{3}} +\d+\.\d{{3}}" for name in ("pretrained", "initial", "unigram")),
          r"language probe 7 languages, snippets of 32 characters: .*", r" +mean +cls .*",
          *(rf"  {name} +\d\.\d{{3}} +\d\.\d{{3}}" for name in ("pretrained", "initial")), r"  majority +\d\.\d{3} .*",
          # per language: the split holds out pages of every sample language, so all seven are scored
          r"by language +masked accuracy +probe \(mean\)",
          r" +examples +pretrained +initial +unigram +pretrained +initial",
          *(rf"  {lang} +\d+( +\d\.\d{{3}}){{5}}" for lang in ("ar", "de", "en", "hi", "ko", "ru", "zh")),
          r"tensorboard  +tensorboard --logdir .*/tensorboard", r"hf export  +.*/hf .*", r"smoke run finished in \d+ s"]
# stderr: the preprocessing progress (first and last line; one more every 30 s of reading), then
# pretraining's own lines: what it starts and waits for (a user's report: the minute from the workers'
# line to step 1 was silent), a line per console step, where it exported
PROGRESS = rf"{STAMP} preprocess: .*"
PRETRAIN = [r"canine pretrain: starting a local Ray cluster on 127\.0\.0\.1 "
            r"\((\d+ CPUs|\d+ logical CPUs on \d+ cores?: \d+ for the 2 training workers, \d+ for reading the data)\) \.\.\.",
            r"canine pretrain: 2 cpu workers, ZeRO-2, fp32, char objective, 8 steps -> .*",
            r"canine pretrain: starting 2 Ray Train workers \.\.\.",
            r"canine pretrain: 2 workers up; building the model, initialising DeepSpeed \(ZeRO-2\) \.\.\.",
            r"canine pretrain: the model and DeepSpeed's engine are ready; reading the first batches \(Ray tasks build "
            r"them on the cluster's CPUs\) \.\.\."] + [
    rf"{STAMP}  step {s}/8  loss .* steps/s .*" for s in (1, 2, 4, 6, 8)] + [
    r"canine pretrain: exporting the final weights to .*/train/hf \.\.\.",
    r"canine pretrain: Hugging Face CanineModel exported to .*/train/hf"]
RETRY = r"canine pretrain: the local Ray cluster did not come up in Ray's \d+ s \(its raylet did not register\); .*"


def test_smoke_writes_shards_run_curve_and_export_and_prints_only_its_own_lines(tmp_path, capfd, monkeypatch):
    import functools

    from training.train import evaluate

    # The language probe on 256 train examples (1024 snippets a model) instead of the default 2048
    # (the whole split, ~6600 snippets: minutes of a 2-core machine for the same lines, as
    # tests/jobs/test_readme_paths.py's SHORT_EVAL); every held-out example is still scored.
    monkeypatch.setattr(evaluate, "evaluate_run", functools.partial(evaluate.evaluate_run, train_examples=256))
    assert cli.main(["smoke", "--output", str(tmp_path), "--steps", "8", "--seq-len", "256"]) == 0
    out, err = capfd.readouterr()
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(STDOUT), out
    for pattern, line in zip(STDOUT, lines):
        assert re.fullmatch(pattern, line), (pattern, line)
    lines = err.splitlines()
    progress = [line for line in lines if re.fullmatch(PROGRESS, line)]
    assert 3 <= len(progress) and "staging needs about" in progress[0] and "work items" in progress[1], err
    assert "done in" in progress[-1], err
    rest = lines[len(progress):]
    # A local start that timed out is made once more, said in one line (training/train/run.py).
    retried = [line for line in rest if re.fullmatch(RETRY, line)]
    rest = [line for line in rest if line not in retried]
    assert lines[: len(progress)] == progress and len(retried) <= 1 and len(rest) == len(PRETRAIN), err
    for pattern, line in zip(PRETRAIN, rest):
        assert re.fullmatch(pattern, line), (pattern, line)

    assert (tmp_path / "shards" / schema.MANIFEST).exists()
    run = tmp_path / "train"
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "hf" / "config.json").exists() and (run / "hf" / "README.md").exists()
    assert any((run / "tensorboard").iterdir())
