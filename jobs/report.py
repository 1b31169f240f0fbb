"""`canine report RUN_DIR`: redraw a run's loss / accuracy curve and print its summary.

    canine report runs/smoke/train
    canine report gs://bucket/runs/base --json

Reads only what the run wrote (metrics.jsonl, config.yaml, summary.json, and the shard
manifest its config points to, read as the trainer reads it: training/train/data.py), so it
works for any finished or running run. RUN_DIR is a local path (relative to the working
directory) or any fsspec URL; the curve goes to RUN_DIR/curves.png.
"""

import io
import json

from jobs import quiet
from training.train import rundir
from training.train import data


def _dataset(data_path: str) -> "data.Dataset | None":
    """The shards a run trained on, as the trainer read them (their manifest), None where they are gone."""
    try:
        return data.open_dataset(data_path)
    except FileNotFoundError:
        return None


def plot(records: list[dict], url: str) -> str:
    """Loss and accuracy against step (train every step, eval where evaluated) as a PNG."""
    import matplotlib

    from contract.files import atomic_write

    matplotlib.use("Agg")  # no display on servers and CI
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.8))
    steps = [r["step"] for r in records]
    ax_loss.plot(steps, [r["loss"] for r in records], label="train", lw=1)
    ax_acc.plot(steps, [r.get("accuracy", float("nan")) for r in records], label="train", lw=1)
    evals = [r for r in records if "eval_loss" in r]
    if evals:
        ax_loss.plot([r["step"] for r in evals], [r["eval_loss"] for r in evals], "o-", label="validation")
        ax_acc.plot([r["step"] for r in evals], [r["eval_accuracy"] for r in evals], "o-", label="validation")
    for ax, name in ((ax_loss, "loss"), (ax_acc, "masked-prediction accuracy")):
        ax.set_xlabel("step")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write(url, buf.getvalue())
    return url


def report_of(run_dir: str) -> dict:
    """The run's figures (rundir.run_figures: the same as its summary.json and model card), what it
    trained on, where its curve, weights and export are; draws the curve."""
    records = rundir.read_metrics(run_dir)
    if not records:
        raise FileNotFoundError(f"{run_dir}: no {rundir.METRICS} (not a canine pretrain run, or it has not logged a "
                                "step); give the --output of canine pretrain")
    summary = {"run": run_dir, **rundir.run_figures(records), "curve": plot(records, rundir.join(run_dir, rundir.CURVES))}
    cfg = rundir.read_saved_config(run_dir)
    if cfg:
        summary["objective"] = cfg.get("train", {}).get("objective")
        data_path = cfg.get("data", {}).get("path")
        ds = _dataset(data_path) if data_path else None
        if ds is not None:
            summary["data"] = data_path
            summary["examples"] = ds.split_rows()
            summary["languages"] = sorted(ds.languages)
            if ds.trial_slice:  # a model trained on a --max-pages slice says so (a whole run's summary has no key)
                summary["trial_slice"] = ds.trial_slice
    run_summary = rundir.read(rundir.join(run_dir, rundir.SUMMARY))
    if run_summary:
        s = json.loads(run_summary)
        summary.update({k: v for k, v in s.items() if k in ("hf_export", "consolidated", "checkpoint")})
    return summary


def format_summary(s: dict) -> str:
    lines = [f"run            {s['run']}  ({s.get('objective') or '?'} objective, {s['steps']} steps)"]
    if "examples" in s:
        ex = ", ".join(f"{k} {v}" for k, v in s["examples"].items())
        lines.append(f"data           {s['data']}: {ex} examples, {len(s['languages'])} languages ({' '.join(s['languages'])})")
    if s.get("trial_slice"):
        lines.append(f"trial slice    {s['trial_slice']}")
    lines += [f"{label:<15}{text}" for label, text in rundir.figures(s)]
    lines.append(f"curve          {s['curve']}")
    for key in ("consolidated", "hf_export"):
        if s.get(key):
            lines.append(f"{key:<15}{s[key]}")
    return "\n".join(lines)


def add_arguments(p):
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (fsspec URL), the --output of canine pretrain")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def main(args) -> int:
    from jobs import errors

    try:
        s = report_of(args.run_dir)
    except Exception as e:  # our messages as they are, a bare path in words, anything else with its traceback file
        return errors.report("report", e, {args.run_dir: "the run directory (RUN_DIR)"}, as_json=args.json)
    print(json.dumps(s, indent=1) if args.json else format_summary(s), file=quiet.document())
    return 0
