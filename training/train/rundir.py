"""A run directory: what `canine pretrain --output OUTPUT` writes there, by name; reading it on
any fsspec URL; and the one summary of its metrics.jsonl, which summary.json, `canine report`,
`canine smoke` and the model card all print, so they agree to the digit.

    OUTPUT/config.yaml            CONFIG: the resolved config, saved at the first start (a resume must match it)
    OUTPUT/metrics.jsonl          METRICS: one record per optimizer step (training/train/metrics.py)
    OUTPUT/tensorboard/           TENSORBOARD: the same figures as TensorBoard events
    OUTPUT/profile.txt            PROFILE: torch.profiler's ops table (log.profile_steps)
    OUTPUT/ray_train/checkpoint_stepNNNNNNNN/   CHECKPOINTS: Ray Train's checkpoints (training/train/checkpoint.py)
    OUTPUT/ray_train/checkpoint_manager_snapshot.json   RAY_SNAPSHOT: Ray Train's record of them (last_checkpoint)
    OUTPUT/final/model_fp32.pt    CONSOLIDATED: the fp32 weights, written after the last step
    OUTPUT/summary.json           SUMMARY: the run's figures (run_figures), written when a start ends
    OUTPUT/hf/                    HF: the Hugging Face export (training/train/export.py)
    OUTPUT/hf-stepN/              an export of the checkpoint of step N (`export_dir`): never the final's HF
    OUTPUT/curves.png             CURVES: `canine report`'s loss and accuracy curves
A fine-tuning run (`canine finetune`, training/finetune/) writes the same files, the HF export
being its task model's, and:
    OUTPUT/best/model_fp32.pt     BEST: the fp32 weights of the evaluation with the best dev F1
    OUTPUT/scores.json            SCORES: that evaluation's dev and test figures (conlleval's), finished or not
    OUTPUT/predictions/ROLE-LANG.txt   PREDICTIONS: those predictions, each input file with a tag column

It imports no torch: `canine report` reads runs without it. `join` is contract/files.py's, one join
for every URL; `absolute` makes a local path absolute, as every command does with the paths it is
given before anything else reads them. `weights` says which weights `canine evaluate` and
`canine export` read: the final ones, or a saved checkpoint's (--step N, --checkpoint URL).
"""

import dataclasses
import json
import logging
import os
import statistics

import fsspec
import yaml

from contract.files import join, redact

logger = logging.getLogger(__name__)

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
TENSORBOARD = "tensorboard"
PROFILE = "profile.txt"
CHECKPOINTS = "ray_train"  # Ray Train's run name: RunConfig(name=...) under storage_path=OUTPUT
# Ray Train's record of a run's checkpoints, the one a new trainer of the same RunConfig restores
# from: ray/train/v2/_internal/constants.py CHECKPOINT_MANAGER_SNAPSHOT_FILENAME, rewritten by
# ray/train/v2/_internal/execution/checkpoint/checkpoint_manager.py after each checkpoint it
# registers. tests/training/train/test_train_run_paths.py pins the name and the fields read here.
RAY_SNAPSHOT = "checkpoint_manager_snapshot.json"
CONSOLIDATED = "final/model_fp32.pt"
SUMMARY = "summary.json"
HF = "hf"
CURVES = "curves.png"
BEST = "best/model_fp32.pt"
SCORES = "scores.json"
PREDICTIONS = "predictions"


def prediction_file(role: str, lang: str, index: int = 0) -> str:
    """The predictions of a file of `role` (dev, test) in language `lang`; `index`: how many files
    of that role and language came before it."""
    return f"{PREDICTIONS}/{role}-{index}-{lang}.txt" if index else f"{PREDICTIONS}/{role}-{lang}.txt"

EDGE_STEPS = 5  # losses are the mean of the first / last 5 steps: one step is noisy


def absolute(url: str) -> str:
    """A local path made absolute against this process's working directory; a URL (s3://, gs://,
    file://, ...) and "" as they are. The Ray workers run in a working directory of their own,
    where a relative --data or --output would name another place (or nothing)."""
    if not url or "://" in url:
        return url
    return os.path.abspath(os.path.expanduser(url))


def check_writable(output: str) -> None:
    """A local run directory, or the folder that will hold it, this process can write in: tried
    with a file made and removed at once, the one test that answers for permissions, ACLs, a
    read-only mount and an immutable folder alike, before Ray starts (10-50 s) and before the
    shards are hashed. A URL is left to the store (its credentials answer only when written)."""
    if not output or "://" in output:
        return
    folder = os.path.abspath(output)
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)  # the nearest folder that exists: the run's is made in it
    if not os.path.isdir(folder):
        return  # a file on the way: the lock's own error names it
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(prefix=".canine-write-check-", dir=folder)
    except OSError as e:
        where = "" if folder == output else f" ({folder}, where it would be made)"
        raise ValueError(f"--output {redact(output)}: cannot write there{where}: {e.strerror or e}; "
                         "choose another --output, or make it writable") from None
    os.close(fd)
    os.unlink(probe)


def absolute_paths(cfg):
    """A pretraining config (training/train/schema.py) with its data.path, output and init.path `absolute`:
    what the workers are sent and the run saves."""
    return dataclasses.replace(cfg, output=absolute(cfg.output),
                               data=dataclasses.replace(cfg.data, path=absolute(cfg.data.path)),
                               init=dataclasses.replace(cfg.init, path=absolute(cfg.init.path)))


def _snapshot(run: str) -> dict:
    """Ray Train's record of the run's checkpoints (RAY_SNAPSHOT) as data; {} before the first one."""
    url = join(run, CHECKPOINTS, RAY_SNAPSHOT)
    raw = read(url)
    if raw is None:
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{redact(url)}: not JSON ({e}), so the run's last checkpoint is unknown; Ray Train "
                         "cannot resume it either: remove the run's ray_train folder to start it again") from e


def last_checkpoint(run: str) -> tuple[int, str] | None:
    """(step, URL) of the checkpoint a rerun of `run` resumes from, as Ray Train's snapshot records
    it (RAY_SNAPSHOT); None before the first one. A checkpoint folder that the snapshot does not
    name (a copy cut short by a Ctrl-C or a crash) is never resumed from, so it is not read here."""
    latest = _snapshot(run).get("latest_checkpoint_result")
    if not latest:
        return None
    return int(latest["metrics"]["step"]), join(run, CHECKPOINTS, latest["checkpoint_dir_name"])


def saved_checkpoints(run: str) -> dict[int, str]:
    """step -> URL of every checkpoint Ray Train keeps of `run` (the last checkpoint.keep), in step
    order: its snapshot's `checkpoint_results`, rewritten before it deletes the older ones, so a
    folder listed here is whole and a folder it does not list (cut short, or being deleted) is not."""
    kept = {int(r["metrics"]["step"]): join(run, CHECKPOINTS, r["checkpoint_dir_name"])
            for r in _snapshot(run).get("checkpoint_results") or ()}
    return dict(sorted(kept.items()))


def saved_steps(run: str) -> str:
    """The steps of the run's saved checkpoints, for a message: "4, 8, 12", or "none"."""
    return ", ".join(map(str, saved_checkpoints(run))) or "none"


@dataclasses.dataclass(frozen=True)
class Weights:
    """The weights of a run that `canine evaluate` and `canine export` read (`weights`)."""
    url: str  # CONSOLIDATED, or a checkpoint directory (training/train/checkpoint.py consolidates it)
    step: int  # optimizer steps trained
    max_steps: int  # the run's train.max_steps
    checkpoint: bool  # a checkpoint's weights, not the final CONSOLIDATED file

    def describe(self) -> str:
        """ "step 8 of 12 (checkpoint URL)", or "step 12 of 12 (the final weights)". """
        what = f"checkpoint {redact(self.url)}" if self.checkpoint else "the final weights"
        return f"step {self.step} of {self.max_steps} ({what})"


def weights(run: str, step: int | None = None, checkpoint: str | None = None, cfg=None) -> Weights:
    """Which weights of `run` to read: the checkpoint saved at `step` (saved_checkpoints), the
    checkpoint directory `checkpoint` (local or any fsspec URL), or by default the final
    consolidated ones (their presence is the caller's to check: each says what to do). A step
    the run has no checkpoint of is a ValueError that lists the saved steps. `cfg`: the run's
    config (read_config), if the caller has it."""
    cfg = cfg or read_config(run)
    if step is not None and checkpoint:
        raise ValueError("--step and --checkpoint both name the weights to read; give one of them")
    if checkpoint:
        from training.train.checkpoint import saved_step

        url = absolute(checkpoint)
        return Weights(url, saved_step(url), cfg.train.max_steps, checkpoint=True)
    if step is not None:
        saved = saved_checkpoints(run)
        if step not in saved:
            why = (f"the run keeps its last {cfg.checkpoint.keep}, checkpoint.keep" if saved else
                   f"one is written every {cfg.checkpoint.every} steps, checkpoint.every")
            raise ValueError(f"{redact(run)} has no checkpoint at step {step}; saved steps: "
                             f"{', '.join(map(str, saved)) or 'none'} ({why}); name a saved step, or leave out "
                             "--step for the final weights")
        return Weights(saved[step], step, cfg.train.max_steps, checkpoint=True)
    return Weights(join(run, CONSOLIDATED), cfg.train.max_steps, cfg.train.max_steps, checkpoint=False)


def export_dir(w: Weights) -> str:
    """Where `canine export` writes by default, relative to the run: HF for the final weights,
    hf-stepN for a checkpoint's (the final step's too), so that no checkpoint's export replaces
    the final one."""
    return f"{HF}-step{w.step}" if w.checkpoint else HF


def exists(url: str) -> bool:
    fs, path = fsspec.core.url_to_fs(url)
    return fs.exists(path)


def read(url: str) -> bytes | None:
    """The bytes at `url`, or None where there is nothing."""
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        return None
    with fs.open(path, "rb") as f:
        return f.read()


def read_saved_config(run: str) -> dict | None:
    """The run's config.yaml as data (None if it has none): what the driver checks a resume
    against. `read_config` types it."""
    raw = read(join(run, CONFIG))
    return None if raw is None else (yaml.safe_load(raw.decode("utf-8")) or {})


def read_config(run: str):
    """The run's resolved config (training/train/config.py's PretrainConfig). A FileNotFoundError
    that says what a run directory is when there is no config.yaml."""
    from training.train import config

    saved = read_saved_config(run)
    if saved is None:
        raise NotARun(f"{redact(run)} has no {CONFIG}: not a run directory (the --output of canine pretrain); "
                      "check the path or URL")
    return config.from_dict(saved, where=join(run, CONFIG))


class NotARun(FileNotFoundError):
    """A directory that holds no run: its message says what one is."""


def read_metrics(run: str) -> list[dict]:
    """All records of a run's metrics.jsonl (empty if the run has none yet). A last line that is
    not JSON is what a crash mid-write leaves: it is dropped with a warning (that step is trained
    again on resume). A bad line before it is an error naming the file and the line."""
    url = join(run, METRICS)
    raw = read(url)
    if raw is None:
        return []
    lines = [(n, line) for n, line in enumerate(raw.decode("utf-8", "replace").split("\n"), 1) if line.strip()]
    records = []
    for i, (n, line) in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i < len(lines) - 1:
                raise ValueError(f"{url}: line {n} is not a JSON record ({e})") from e
            logger.warning("%s: dropped its last line (%d), torn by an interrupted write: %.80r", url, n, line)
    return records


def steady(records: list[dict]) -> list[dict]:
    """The steps that measure speed: all but the first tenth (start-up, compilation, warm caches)."""
    return records[len(records) // 10:] or records


def run_figures(records: list[dict]) -> dict:
    """A run's figures from its metrics.jsonl records, rounded as every reader prints them:
    steps; loss_start / loss_end, the mean of the first / last EDGE_STEPS steps, and final_loss,
    the last step's; the last evaluation; examples/s, characters/s and MFU (GPU runs) as the
    median of the steady steps, the data wait as their mean; the peak memory of a worker. A
    figure the records do not all carry is left out. {} without records."""
    if not records:
        return {}
    head, tail, fast = records[:EDGE_STEPS], records[-EDGE_STEPS:], steady(records)
    evals = [r for r in records if "eval_loss" in r]
    last = evals[-1] if evals else {}
    out = {
        "steps": records[-1]["step"],
        "loss_start": round(statistics.fmean(r["loss"] for r in head), 4),
        "loss_end": round(statistics.fmean(r["loss"] for r in tail), 4),
        "first_loss": round(records[0]["loss"], 4), "final_loss": round(records[-1]["loss"], 4),
        "eval_step": last.get("step"),
        **{key: round(last[key], 4) if key in last else None
           for key in ("eval_loss", "eval_accuracy", "eval_sop_accuracy")},
    }
    for key, digits in (("examples_per_s", 2), ("chars_per_s", 1), ("mfu", 4)):
        if all(key in r for r in fast):
            out[key] = round(statistics.median(r[key] for r in fast), digits)
    if all("data_wait_fraction" in r for r in fast):
        out["data_wait_fraction"] = round(statistics.fmean(r["data_wait_fraction"] for r in fast), 4)
    if all("peak_rss_mb" in r for r in records):
        out["peak_rss_mb_per_worker"] = round(max(r["peak_rss_mb"] for r in records), 1)
    return out


def figures(s: dict) -> list[tuple[str, str]]:
    """The summary's figures as (label, text), as `canine report` and the model card print them."""
    out = [("loss", f"{s['loss_start']:.4f} -> {s['loss_end']:.4f} (mean of the first / last {EDGE_STEPS} steps), "
                    f"last step {s['final_loss']:.4f}")]
    if s.get("eval_loss") is not None:
        out.append(("validation", f"step {s['eval_step']}: loss {s['eval_loss']:.4f}, accuracy {s['eval_accuracy']:.4f}"
                    + (f", sentence order {s['eval_sop_accuracy']:.4f}" if s.get("eval_sop_accuracy") is not None
                       else "")))
    if "chars_per_s" in s and "examples_per_s" in s:
        out.append(("throughput", f"{s['chars_per_s']:.1f} characters/s, {s['examples_per_s']:.2f} examples/s"
                    + (f", MFU {s['mfu']:.2%}" if "mfu" in s else "") + " (median step after the first tenth)"))
    return out
