"""`canine evaluate` (training/train/evaluate.py, jobs/evaluate.py): a run's encoder against its own
initialization on held-out data: masked prediction beside a unigram baseline, and a linear
language probe of the pooled output."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import torch

from contract import schema
from jobs import cli
from training.train import evaluate
from training.train import config

from test_export import write_run


def test_unigram_baseline_by_hand():
    train = [{"char_targets": torch.tensor([[5, 5, 7, 0]]), "char_weights": torch.tensor([[1.0, 1.0, 1.0, 0.0]])}]
    held_out = [{"char_targets": torch.tensor([[5, 7, 9]]), "char_weights": torch.tensor([[1.0, 1.0, 0.0]])}]
    got = evaluate.unigram_baseline(train, held_out, "char", classes=10)
    # add-one counts: 5 -> 3, 7 -> 2, the 8 others -> 1 (the padding slot's 0 has weight 0): total 13
    assert got["predictions"] == 2 and got["accuracy"] == 0.5  # always 5: right once of two
    assert got["loss"] == pytest.approx(-(np.log(3 / 13) + np.log(2 / 13)) / 2)


def test_snippets_are_whole_text_windows_labelled_by_language():
    cps = [schema.CLS] + [ord(c) for c in "abcdefghij"] + [schema.SEP] + [ord(c) for c in "KLMNO"] + [schema.SEP]
    rows = pa.table({"codepoints": [cps, [schema.CLS, 65, 66, schema.SEP]], "lang": ["xx", "yy"]})
    ids, langs = evaluate.snippets(rows, chars=4, per_row=5, seed=0)
    # "abcdefghij" holds two whole windows of 4 (abcd, efgh), "KLMNO" one; the 2-character row none
    assert langs == ["xx"] * 3 and ids.shape == (3, 6)
    assert (ids[:, 0] == schema.CLS).all() and (ids[:, -1] == schema.SEP).all()
    assert sorted("".join(map(chr, r[1:-1])) for r in ids) == ["KLMN", "abcd", "efgh"]
    assert len(evaluate.snippets(rows, chars=4, per_row=1, seed=0)[1]) == 1


def test_linear_probe_separates_what_is_separable_and_not_noise():
    gen = torch.Generator().manual_seed(0)
    y = torch.arange(300) % 3
    x = torch.randn(300, 8, generator=gen)
    separable = x.clone()
    separable[:, 0] += 10 * y  # the class is in one feature, 10 standard deviations apart
    assert evaluate.linear_probe(separable[:200], y[:200], separable[200:], y[200:], 3) == 1.0
    assert evaluate.linear_probe(x[:200], y[:200], x[200:], y[200:], 3) < 0.6  # nothing to find: about 1/3


def test_an_untrained_run_equals_its_initialization(tmp_path, contract_shards):
    """write_run saves the weights of torch.manual_seed(0), the initialization of a train.seed 0
    run: evaluate rebuilds the run's own initial model, so every figure agrees exactly."""
    run = str(tmp_path / "run")
    write_run(run, contract_shards)
    r = evaluate.evaluate_run(run, examples=16, train_examples=64)
    m, p = r["masked"], r["probe"]
    assert m["pretrained"] == m["initial"] and m["pretrained"]["predictions"] > 100
    assert p["pretrained"] == p["initial"] and len(p["languages"]) == 6 and p["test_snippets"] > 0
    assert not evaluate.beats_initialization(r)
    langs = r["languages"]  # the 16 rows hold all six languages: each scored, the same both ways
    assert sorted(langs) == p["languages"] and r["unscored_languages"] == []
    assert sum(x["validation_examples"] for x in langs.values()) == 16
    assert all(x["masked"]["pretrained"] == x["masked"]["initial"] for x in langs.values())
    assert all(x["probe"]["pretrained"] == x["probe"]["initial"] for x in langs.values())


def test_each_languages_figures_are_over_its_own_rows_and_the_unread_are_listed(tmp_path, contract_shards):
    from training.seeds import build_seed

    run = str(tmp_path / "run")
    write_run(run, contract_shards)
    r = evaluate.evaluate_run(run, examples=4, train_examples=64)
    # the validation split's first 4 rows are ja ru de el: en and hi have none read
    assert sorted(r["languages"]) == ["de", "el", "ja", "ru"] and r["unscored_languages"] == ["en", "hi"]
    cfg, manifest, pretrained, _ = evaluate.load_run(run)
    rows = evaluate.read_rows(manifest.splits["validation"], 4)
    ru = rows.filter(pc.equal(rows["lang"], "ru"))
    seq_len, seed = cfg.data.seq_len or manifest.seq_len, build_seed(cfg.train.seed, None)
    out = pretrained(evaluate.build_batch(ru, seq_len, "char", seed,
                                          num_hash_buckets=pretrained.config.num_hash_buckets))
    got = r["languages"]["ru"]["masked"]["pretrained"]
    assert got["predictions"] == int(out.count) < r["masked"]["pretrained"]["predictions"]
    assert got["loss"] == pytest.approx(float(out.objective_loss), rel=1e-5)
    assert got["accuracy"] == pytest.approx(float(out.correct) / float(out.count))
    # the overall figures are the languages' together
    for name in ("pretrained", "initial", "unigram"):
        per = [x["masked"][name] for x in r["languages"].values()]
        assert sum(x["predictions"] for x in per) == r["masked"][name]["predictions"]
        assert sum(x["loss"] * x["predictions"] for x in per) / r["masked"][name]["predictions"] == pytest.approx(
            r["masked"][name]["loss"])
    assert sum(x["probe"]["test_snippets"] for x in r["languages"].values()) == r["probe"]["test_snippets"]
    # each language's probe figure: the same probe's accuracy on that language's snippets alone
    train_ids, train_langs = evaluate.snippets(evaluate.read_rows(manifest.splits["train"], 64), 32, 4, cfg.train.seed)
    test_ids, test_langs = evaluate.snippets(rows, 32, 4, cfg.train.seed + 1)
    classes = sorted(set(train_langs))
    train_x = evaluate.features(pretrained.encoder, train_ids)["mean"]
    predicted = evaluate.probe_predictions(train_x, [classes.index(x) for x in train_langs],
                                           evaluate.features(pretrained.encoder, test_ids)["mean"], len(classes))
    for lang, x in r["languages"].items():
        right = [int(y) == classes.index(lang) for y, other in zip(predicted, test_langs) if other == lang]
        assert x["probe"]["pretrained"]["mean"] == pytest.approx(sum(right) / len(right)), lang
    text = evaluate.format_evaluation(r)
    of_ru = r["languages"]["ru"]
    assert (f"  ru           {1:>9}{got['accuracy']:>11.3f}{of_ru['masked']['initial']['accuracy']:>9.3f}"
            f"{of_ru['masked']['unigram']['accuracy']:>9.3f}{of_ru['probe']['pretrained']['mean']:>12.3f}") in text
    assert text.endswith("  no validation examples read, not scored: en hi")


def _train_briefly(run: str, data: str, steps: int) -> None:
    """Overwrite the run's weights with those of a short in-process AdamW run on its data."""
    from training.heads import CaninePretrainingModel
    from training.train.rundir import CONSOLIDATED
    from training.train.checkpoint import save_consolidated
    from training.seeds import build_seed

    cfg, manifest, _, _ = evaluate.load_run(run)
    model = CaninePretrainingModel(config.model_config(cfg), "char")
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rows = evaluate.read_rows(manifest.splits["train"], 400)
    for step in range(steps):
        batch = evaluate.build_batch(rows.slice(16 * step % 384, 16), 256, "char", build_seed(0, step),
                                     num_hash_buckets=model.config.num_hash_buckets)
        model(batch).loss.backward()
        opt.step()
        opt.zero_grad()
    save_consolidated(model.state_dict(), f"{run}/{CONSOLIDATED}")


def test_a_trained_run_beats_its_initialization_and_the_unigram(tmp_path, contract_shards, capsys):
    run = str(tmp_path / "run")
    write_run(run, contract_shards)
    _train_briefly(run, contract_shards, steps=60)
    assert cli.main(["evaluate", run, "--examples", "64", "--train-examples", "400", "--snippet-chars", "32",
                     "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    m, p = r["masked"], r["probe"]
    assert evaluate.beats_initialization(r), m
    assert m["initial"]["accuracy"] < 0.01 < m["pretrained"]["accuracy"]
    assert m["pretrained"]["accuracy"] > m["unigram"]["accuracy"] and m["pretrained"]["loss"] < m["unigram"]["loss"]
    assert p["test_snippets"] > 20 and 0 <= p["majority"] < 1
    assert all(0 < p[model][kind] <= 1 for model in ("pretrained", "initial") for kind in evaluate.FEATURES)
    text = evaluate.format_evaluation(r)
    assert f"  pretrained   {m['pretrained']['accuracy']:>10.3f}" in text and "language probe 6 languages" in text
    assert f"  initial      {p['initial']['mean']:>10.3f}{p['initial']['cls']:>9.3f}" in text
    assert sorted(r["languages"]) == p["languages"] and "by language" in text and "not scored" not in text


def test_evaluate_refuses_what_it_cannot_read(tmp_path, contract_shards, capsys):
    assert cli.main(["evaluate", str(tmp_path / "nothing")]) == 2
    assert "has no config.yaml" in capsys.readouterr().err
    run = tmp_path / "unfinished"
    write_run(str(run), contract_shards)
    (run / "final" / "model_fp32.pt").unlink()
    assert cli.main(["evaluate", str(run)]) == 2
    assert "no consolidated weights" in capsys.readouterr().err


def test_data_without_validation_rows_is_refused_before_the_weights_are_read(tmp_path, monkeypatch, capsys):
    """From the manifest (evaluate.check_data): a checkpoint's weights are consolidated first,
    minutes of a large run, before the empty split was found."""
    from pipeline.synthetic import write_contract_shards

    shards = write_contract_shards(str(tmp_path / "shards"), train_rows=(64,), validation_rows=0)
    run = tmp_path / "run"
    write_run(str(run), shards)

    def read(*args):
        raise AssertionError("the weights were read")

    monkeypatch.setattr(evaluate, "load_consolidated", read)
    assert cli.main(["evaluate", str(run)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"canine evaluate: {shards}: the validation split has no rows: nothing was held out"), line


@pytest.mark.slow
def test_the_reference_run_beats_its_initialization_on_held_out_text(reference_run):
    """The real thing: 30 steps of Ray Train + DeepSpeed ZeRO-2 on the pipeline's shards of the
    bundled sample (7 languages, sentence-order pairs, so the CLS pooler is trained too)."""
    output, _, _ = reference_run
    r = evaluate.evaluate_run(output, examples=64, train_examples=1024)
    print(evaluate.format_evaluation(r))
    assert evaluate.beats_initialization(r), r["masked"]
    p = r["probe"]
    assert p["languages"] == ["ar", "de", "en", "hi", "ko", "ru", "zh"] and p["test_snippets"] > 100
    assert p["pretrained"]["mean"] > max(p["initial"]["mean"], p["majority"]), p  # 0.870 vs 0.830 when written


def test_an_init_run_is_measured_against_the_weights_it_started_from(tmp_path, contract_shards, capsys):
    """A user's report: `canine evaluate` of an --init run compared it with a fresh initialization only,
    so a continued run was credited with what it inherited. Here run B starts from run A's
    trained weights (init.path A) and is not trained further: B beats its initialization as A
    did, and equals its init exactly, which is the baseline named and measured."""
    import hashlib

    import yaml

    from training.heads import CaninePretrainingModel
    from training.seeds import seed_all
    from training.train import init, rundir
    from training.train.checkpoint import save_consolidated

    source, run = tmp_path / "A", tmp_path / "B"
    write_run(str(source), contract_shards)
    _train_briefly(str(source), contract_shards, steps=10)
    write_run(str(run), contract_shards)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    saved["init"] = {"path": str(source), "step": 0,
                     "sha256": hashlib.sha256((source / "final" / "model_fp32.pt").read_bytes()).hexdigest()}
    (run / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    cfg = rundir.read_config(str(run))
    seed_all(cfg.train.seed)  # what B's first start built (training/train/loop.py)
    start = CaninePretrainingModel(config.model_config(cfg), "char")
    init.load_into(start, cfg, None)
    trained = torch.load(source / "final" / "model_fp32.pt", weights_only=True)
    assert all(torch.equal(start.state_dict()[k], v) for k, v in trained.items())  # a run source: every tensor
    save_consolidated(start.state_dict(), str(run / "final" / "model_fp32.pt"))

    args = ["evaluate", str(run), "--examples", "16", "--train-examples", "64"]
    assert cli.main([*args, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    m, p, init = r["masked"], r["probe"], r["init"]
    assert r["baseline"] == "init" and (init["path"], init["sha256"]) == (str(source), saved["init"]["sha256"])
    assert init["masked"] == m["pretrained"] and init["probe"] == p["pretrained"]  # nothing gained since the init
    assert m["pretrained"]["loss"] < m["initial"]["loss"]  # inherited: what the comparison credited before
    assert not evaluate.beats_initialization(r)
    assert all(init["languages"][lang]["masked"] == x["masked"]["pretrained"] for lang, x in r["languages"].items())
    assert "init" not in m and "init" not in p  # the init's figures are under their own key only
    text = evaluate.format_evaluation(r)
    assert text.splitlines()[1] == (f"baseline       init, the weights this run started from ({source}): the "
                                    "pretrained weights must beat it; initial is a fresh initialization")
    assert f"  init         {m['pretrained']['accuracy']:>10.3f}{m['pretrained']['loss']:>9.3f}" in text
    assert f"  init         {p['pretrained']['mean']:>10.3f}{p['pretrained']['cls']:>9.3f}" in text
    assert " examples pretrained     init  initial  unigram  pretrained     init  initial" in text

    (source / "final" / "model_fp32.pt").unlink()  # the init gone: still evaluated, against initial, said so
    assert cli.main(["evaluate", str(run), "--examples", "4", "--train-examples", "16", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["baseline"] == "initial" and "no final weights" in r["init"]["error"] and "masked" not in r["init"]
    assert evaluate.format_evaluation(r).splitlines()[1].startswith(
        f"baseline       initial; the init this run started from ({source}) not scored: --init {source}: the run "
        "has no final weights")
