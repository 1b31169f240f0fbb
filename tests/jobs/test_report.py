"""`canine report` on a run directory: summary numbers come from metrics.jsonl, the PNG is real."""

import json
import os

import yaml

from jobs import cli, report
from pipeline.synthetic import WORDS, write_contract_shards
from training.train import rundir


def write_run(tmp_path):
    records = []
    for step in range(1, 21):
        r = {"step": step, "loss": 10.0 - step * 0.3, "accuracy": step / 40, "lr": 1e-3, "grad_norm": 1.0,
             "examples_per_s": 4.0, "chars_per_s": 2000.0 + step, "data_wait_fraction": 0.01}
        if step % 10 == 0:
            r.update(eval_loss=9.0 - step * 0.2, eval_accuracy=step / 50)
        records.append(r)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def test_summary_and_curve(tmp_path):
    write_run(tmp_path)
    s = report.report_of(str(tmp_path))
    assert s["steps"] == 20
    assert s["loss_start"] == round(sum(10.0 - k * 0.3 for k in range(1, 6)) / 5, 4)
    assert s["loss_end"] < s["loss_start"]
    assert s["eval_accuracy"] == 20 / 50 and s["eval_sop_accuracy"] is None
    assert "sentence order" not in report.format_summary(s)
    png = (tmp_path / rundir.CURVES).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_cli_report_and_missing_run(tmp_path, capsys):
    write_run(tmp_path)
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "loss" in capsys.readouterr().out
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err


def test_data_comes_from_the_contract_manifest_and_a_torn_last_line_is_dropped(tmp_path):
    write_run(tmp_path)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 21, "loss": 3.')  # a crash in the middle of writing step 21
    shards = write_contract_shards(str(tmp_path / "shards"), train_rows=(90,), validation_rows=10)
    run_config = {"train": {"objective": "char"}, "data": {"path": str(shards)}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(run_config))
    s = report.report_of(str(tmp_path))
    assert s["steps"] == 20 and s["objective"] == "char"
    assert s["examples"] == {"train": 90, "validation": 10} and s["languages"] == sorted(WORDS)
    left = sorted(os.listdir(tmp_path))
    assert left == sorted([rundir.CURVES, "config.yaml", "metrics.jsonl", "shards"])  # no temp file


def test_sentence_order_accuracy_is_reported_when_the_run_had_pairs(tmp_path):
    records = write_run(tmp_path)
    records[-1].update(eval_sop_loss=0.61, eval_sop_accuracy=0.6875)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    s = report.report_of(str(tmp_path))
    assert s["eval_sop_accuracy"] == 0.6875
    assert "validation     step 20: loss 5.0000, accuracy 0.4000, sentence order 0.6875" in report.format_summary(s)


def test_summary_json_report_and_model_card_print_the_same_figures(tmp_path):
    """One summary of metrics.jsonl (rundir.run_figures): the driver's summary.json, canine report
    and the model card print the same numbers, to the digit (they once used three statistics)."""
    from training.train.export import model_card
    from training.train import config
    from training.train.run import run_summary

    records = write_run(tmp_path)
    for i, r in enumerate(records):  # speeds that differ between the mean, the median and its steady part
        r.update(examples_per_s=1.0 + (i * 7919 % 23) / 3, chars_per_s=1000.0 + (i * 104729 % 31) * 17.3,
                 peak_rss_mb=500.0 + i)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    cfg = config.load_config("tiny", {"output": str(tmp_path), "data.path": str(tmp_path / "shards"),
                                          "train.max_steps": 20})
    saved = run_summary(cfg, records)
    shown = report.report_of(str(tmp_path))
    card = model_card(cfg, config.model_config(cfg), records, None, "not here")
    for key in ("loss_start", "loss_end", "final_loss", "eval_loss", "eval_accuracy", "examples_per_s", "chars_per_s"):
        assert saved[key] == shown[key], key
    assert saved["steps"] == 20 and saved["finished"] and saved["peak_rss_mb_per_worker"] == 519.0
    text = report.format_summary(shown)
    for label, line in rundir.figures(saved):
        assert f"{label:<15}{line}" in text and f"- {label}: {line}" in card
    assert f"{saved['examples_per_s']:.2f} examples/s" in card and f"{saved['chars_per_s']:.1f} characters/s" in card
