"""`canine smoke` (what `make smoke` runs): the whole product on the bundled sample, on one machine.

    make smoke                                   # set-up if needed, then this
    canine smoke --output runs/smoke --steps 100 # the same, by hand

1. preprocess pipeline/sample/*.xml with the Beam DirectRunner (2 worker processes) into shards;
2. pretrain the tiny CANINE-C model on a local Ray cluster on 127.0.0.1: 2 CPU workers running
   DeepSpeed ZeRO-2 over gloo, with evaluation and checkpoints;
3. consolidate the weights, export them to Hugging Face format, draw the loss / accuracy curve,
   and end with a summary: the figures, the curve's PNG, the held-out evaluation of the
   pretrained encoder against its initialization (`canine evaluate`), the TensorBoard command,
   the export.
A second run reuses the shards (the preprocessing is a no-op for the same config) and trains afresh.
Its console is the project's own lines only (jobs/quiet.py; tests/jobs/test_smoke.py counts them).
"""

import shutil
import sys
import time
from pathlib import Path

from jobs import flags

SAMPLE = Path(__file__).resolve().parents[1] / "pipeline" / "sample"


def add_arguments(p):
    p.add_argument("--output", default="runs/smoke", help="where shards/ and train/ go")
    # 512 characters keep the 2-core smoke run within minutes; pretraining proper uses 2048 (paper §4.1.3).
    p.add_argument("--seq-len", type=int, default=512, help="characters per example (pretraining proper: 2048)")
    p.add_argument("--steps", type=int, default=100, help="optimizer steps")
    p.add_argument("--workers", type=int, default=2, help="Beam worker processes and Ray Train workers")
    p.add_argument("--resume", action="store_true", help="continue the previous smoke run instead of starting afresh")
    flags.add_set_flag(p, "model.ngram_orders=[2,3] (the pretraining config, tiny preset) or preprocess.keep_tables=true")


def _settings(items: list[str]) -> tuple[dict, dict]:
    """--set pairs: (PreprocessConfig fields given as preprocess.FIELD, the pretraining config's keys).
    A key neither config has is refused as `canine pretrain` and `canine preprocess` refuse theirs:
    every such key in one line, with a did-you-mean among both configs' keys."""
    from contract import options
    from pipeline.preprocess_config import PreprocessConfig
    from training.train.schema import PretrainConfig

    pre, train, unknown = {}, {}, []
    for key, value in options.parse_settings(items).items():
        section, _, name = key.partition(".")
        if section == "preprocess":
            pre[name] = value
            known = options.settable(PreprocessConfig, name)
        else:
            train[key] = value
            known = options.settable(PretrainConfig, key)
        if not known:
            unknown.append(key)
    if unknown:
        keys = options.keys(PretrainConfig) + options.keys(PreprocessConfig, "preprocess.")
        raise ValueError(options.unknown_keys("--set", unknown, keys))
    return pre, train


def _stage(n, text):
    print(f"\n[{n}/3] {text}", flush=True)


def main(args) -> int:
    from contract import options
    from jobs import errors, report
    from jobs.preprocess import preprocess
    from pipeline.preprocess_config import PreprocessConfig
    from training.train import evaluate, rundir
    from training.train.config import load_config
    from training.train.run import pretrain

    started = time.time()
    root = Path(args.output).resolve()
    shards, run = root / "shards", root / "train"

    # Both configs first: a bad --set fails in a second, before any work.
    # A larger validation share than the default 0.5%: the sample has ~200 articles, and the
    # smoke run should report a validation accuracy over more than one page.
    # Four validation points for the curve, two checkpoints (half-way, and the last one, always
    # written): an evaluation plus a checkpoint (ZeRO-2 states saved, reported to Ray Train) cost
    # 4-13 s on the shared 2-core machine, against ~7 s for ten steps.
    try:
        pre_settings, train_settings = _settings(args.set)
        pre = options.build(PreprocessConfig, {"inputs": [str(SAMPLE / "*.xml")], "output": str(shards),
                                               "seq_len": args.seq_len, "vocab_size": 4000,
                                               "validation_fraction": 0.05, **pre_settings}, "preprocess")
        cfg = load_config("tiny", {"data.path": str(shards), "output": str(run), "train.objective": "char",
                                   "train.max_steps": args.steps, "train.eval_every": max(1, args.steps // 4),
                                   "checkpoint.every": max(1, args.steps // 2), "parallel.workers": args.workers,
                                   "parallel.zero_stage": 2, "data.seq_len": args.seq_len, **train_settings})
    except ValueError as e:
        return errors.report("smoke", e)

    _stage(1, f"preprocessing the bundled sample with the Beam DirectRunner ({args.workers} workers) -> {shards}")
    _, result = preprocess(pre, workers=args.workers)
    splits, langs = result.manifest.splits, result.manifest.languages
    print(f"    {splits['train'].rows} train / {splits['validation'].rows} validation "
          f"examples from {sum(c.kept for c in langs.values())} articles in {len(langs)} languages "
          f"({' '.join(langs)})" + (" (reused: same config)" if result.up_to_date else ""), flush=True)

    _stage(2, f"pretraining tiny CANINE-C on a local Ray cluster (127.0.0.1): {args.workers} CPU workers, "
              f"DeepSpeed ZeRO-2, gloo, {cfg.train.max_steps} steps -> {run}")
    if run.exists() and not args.resume:
        shutil.rmtree(run)
    summary = pretrain(cfg)
    if not summary.get("finished"):
        print(f"canine smoke: training stopped before step {cfg.train.max_steps}", file=sys.stderr)
        return 1

    _stage(3, "summary")
    s = report.report_of(str(run))
    # the report's figures and curve, then where to look next: TensorBoard, the export
    print(report.format_summary({k: v for k, v in s.items() if k not in ("consolidated", "hf_export")}))
    # Proof of learning (canine evaluate): held-out masked characters and a language probe,
    # the pretrained encoder against itself at initialization.
    print(evaluate.format_evaluation(evaluate.evaluate_run(str(run))))
    print(f"tensorboard    tensorboard --logdir {run / rundir.TENSORBOARD}")
    if summary.get("hf_export"):
        print(f"hf export      {summary['hf_export']}  (transformers AutoModel / AutoTokenizer .from_pretrained)")
    else:
        print(f"hf export      none (the reason is above); then: canine export {run}")
    print(f"smoke run finished in {time.time() - started:.0f} s")
    return 0
