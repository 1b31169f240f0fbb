"""`canine finetune ner` and `canine finetune tydiqa`: fine-tune a CANINE on named-entity recognition
(character-level sequence labelling, paper §4) or TyDi QA's primary tasks (passage selection and
minimal answer) as a canine run (Ray Train + DeepSpeed, resume, MLflow), scored as conlleval or
tydi_eval.py scores; docs/downstream.md.

    canine finetune ner --train swa=data/swa/train.txt --dev swa=data/swa/dev.txt --test swa=data/swa/test.txt \\
        --init runs/tiny --output runs/ner-swa
    canine finetune ner --train data/swa/train.txt --train data/hau/train.txt --dev data/swa/dev.txt \\
        --dev data/hau/dev.txt --init /models/canine-c --output runs/ner --workers 8       # two languages, one model
    canine finetune ner --train data/swa/train.txt --dev data/swa/dev.txt --size tiny --output runs/ner-random
    canine finetune ner --output runs/ner-swa --predict data/swa/test.txt --to swa.pred   # conlleval.pl < swa.pred
    canine evaluate runs/ner-swa                                                          # the scores again
    canine finetune tydiqa --train tydiqa-v1.0-train.jsonl.gz --dev tydiqa-v1.0-dev.jsonl.gz \\
        --init /models/canine-c --output runs/tydiqa --workers 8          # TyDi QA's primary tasks, Google's recipe
    canine finetune tydiqa --output runs/tydiqa --predict tydiqa-v1.0-dev.jsonl.gz --to pred.jsonl  # tydi_eval.py's input

Files are CoNLL text (token ... tag per line, blank line between sentences), LANG=PATH or PATH
(its folder names the language: MasakhaNER's data/swa/train.txt is swa); for tydiqa, the official
primary-task .jsonl.gz files, windowed first by the pipeline's Beam job into OUTPUT/windows
(pipeline/downstream, once: a resumed run finds them). --init takes what
`canine pretrain --init` takes: a run (--init-step N: its checkpoint), a canine export, a Hugging
Face CANINE directory; without it a fresh encoder of --size (the random-initialisation baseline).
The same command again resumes a stopped run (Ctrl-C: exit 130 and the step it resumes from) or
says a finished one has nothing to do. Exit codes as `canine pretrain`'s (jobs/cli.py).
"""

import contextlib
import json
import sys

from jobs import flags, quiet

# Flag dest -> dotted key of training/finetune/schema.py's FinetuneConfig.
FLAGS = {
    "output": "output", "init": "init.path", "init_step": "init.step", "size": "model.size",
    "max_length": "task.max_length", "stride": "task.stride", "workers": "parallel.workers",
    "max_steps": "train.max_steps", "epochs": "train.epochs", "global_batch": "train.global_batch",
    "micro_batch": "train.micro_batch", "lr": "optim.lr", "seed": "train.seed", "eval_every": "train.eval_every",
    "stop_at_step": "train.stop_at_step", "checkpoint_every": "checkpoint.every", "zero_stage": "parallel.zero_stage",
    "precision": "parallel.precision", "device": "parallel.device", "ray_address": "parallel.ray_address",
    "max_failures": "parallel.max_failures", "mlflow": "log.mlflow",
}


def add_arguments(parser) -> None:
    from training.finetune.schema import FinetuneConfig

    parser.epilog = ("The defaults shown are ner's. tydiqa's are Google's CANINE recipe: --max-length 2048, --stride "
                     "512, --global-batch 512, --micro-batch 8; its other settings are --set task.max_question=256, "
                     "task.include_unknowns=0.1, task.max_passages=45, task.max_answer_length=100, "
                     "task.candidate_beam=30 (docs/downstream.md).")
    parser.add_argument("task", choices=("ner", "tydiqa"),
                        help="the downstream task: ner (CoNLL files) or tydiqa (TyDi QA's official primary-task files)")
    for role, what in (("train", "training"), ("dev", "development (picks the kept weights)"),
                       ("test", "test (its figures at the best dev F1 are the run's; ner only)")):
        parser.add_argument(f"--{role}", action="append", default=None, metavar="[LANG=]PATH",
                            help=f"a {what} file (repeatable). ner: CoNLL, LANG= names its language, else its folder "
                                 "does; tydiqa: an official .jsonl.gz (default: none)")
    parser.add_argument("--config", default="", help="a YAML file of FinetuneConfig values (only what differs; "
                        "default: none, the built-in defaults)")
    flags.add_field_flags(parser, FinetuneConfig, FLAGS, defaults=False)
    parser.set_defaults(**{flags.CONFIG_BY: _config_class})
    flags.add_set_flag(parser, "optim.warmup_fraction=0.05 or model.hidden_dropout_prob=0.2")
    parser.add_argument("--predict", metavar="PATH", help="no training: the run's kept weights (--output) predict this "
                        "file. ner: a CoNLL file, written with a predicted tag column (conlleval's input); tydiqa: an "
                        "official .jsonl.gz, written as tydi_eval.py's prediction file (default: train)")
    parser.add_argument("--to", default="-", help="with --predict: the file to write ('-': stdout)")
    parser.add_argument("--prepare-workers", type=int, default=0, metavar="N",
                        help="tydiqa: Beam workers that window the official files before training (default 0: one "
                             "for inputs under 64 MB, else one per CPU)")
    parser.add_argument("--json", action="store_true", help="print the run's summary as JSON on stdout")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")


def _config_class(args):
    from training.finetune.config import config_class

    return config_class(args.task)


def overrides_from_args(args) -> dict:
    from contract.options import parse_settings

    values = flags.values_of(args, FLAGS)
    for role in ("train", "dev", "test"):
        if getattr(args, role):
            values[f"task.{role}"] = list(getattr(args, role))
    return {**values, **parse_settings(args.set)}


def main(args) -> int:
    from jobs import errors
    from training.finetune import config

    objects = {args.output or "": "the run directory (--output)"}
    try:
        cfg = config.load_config(overrides_from_args(args), args.config, kind=args.task)
    except Exception as e:
        return errors.report("finetune", e, objects, as_json=args.json)
    if args.dry_run:
        print(config.to_yaml(cfg), end="", file=quiet.document())
        return 0
    if args.predict:
        return _predict(args, cfg) if cfg.kind == "ner" else _predict_tydi(args, cfg)
    missing = [flag for flag, value in (("--output", cfg.output), ("--train", cfg.task.train)) if not value]
    if missing:
        print(f"canine finetune: {' and '.join(missing)}: required (canine finetune --help)", file=sys.stderr)
        return 2
    if cfg.kind == "tydiqa":
        try:
            cfg = _prepare_tydi(args, cfg)
        except Exception as e:
            return errors.report("finetune", e, {**objects, **{p: "a TyDi QA file" for p in cfg.task.train + cfg.task.dev}},
                                 as_json=args.json)

    from ray.train import TrainingFailedError

    from training.finetune.run import finetune
    from training.train import failures

    try:
        summary = finetune(cfg)  # stdout holds the JSON alone with --json (jobs/cli.py JSON_STDOUT)
    except TrainingFailedError as e:
        limit = cfg.parallel.max_failures
        print(f"canine finetune: training failed after {limit} restart(s) (--max-failures {limit}): "
              f"{failures.summary(e)}; the workers' tracebacks are in Ray's logs (/tmp/ray/session_latest/logs); "
              "the same command resumes from the last checkpoint", file=sys.stderr)
        return 1
    except Exception as e:
        if cfg.init.path:
            objects[cfg.init.path] = "the init weights (--init)"
        return errors.report("finetune", e, objects, as_json=args.json)
    if args.json:
        print(json.dumps(summary, indent=1), file=quiet.document())
    else:
        _print_scores(summary)
    return 0


def _print_scores(summary: dict) -> None:
    from training.finetune import score, tydi

    lines = [f"kept the weights of step {summary.get('best_step')} ({summary.get('selection')}) of "
             f"{summary.get('max_steps')}"]
    for role in ("dev", "test"):
        if summary.get(role):
            lines += (tydi.format_scores if summary.get("task") == "tydiqa" else score.format_scores)(summary[role], role)
    if summary.get("hf_export") and summary.get("task") == "tydiqa":
        lines.append(f"export: {summary['hf_export']} (transformers: AutoModelForQuestionAnswering.from_pretrained(PATH, "
                     "trust_remote_code=True).answer(question, document))")
    elif summary.get("hf_export"):
        lines.append(f"export: {summary['hf_export']} (transformers: pipeline('token-classification', model=PATH, "
                     "aggregation_strategy='simple', trust_remote_code=True))")
    print("\n".join(lines), file=sys.stderr)


def _predict(args, cfg) -> int:
    from jobs import errors
    from training.finetune import predict

    try:
        figures = predict.predict_file(cfg.output, args.predict, args.to)
    except Exception as e:
        return errors.report("finetune", e, {args.predict: "the file to tag (--predict)",
                                              cfg.output: "the run directory (--output)"})
    from training.finetune import score

    where = "stdout" if args.to == "-" else args.to
    print("\n".join([f"canine finetune: tagged {args.predict} -> {where}", *score.format_scores(figures, "that file")]),
          file=sys.stderr)
    return 0


# --- tydiqa ---------------------------------------------------------------------------------------


def _window_settings(cfg):
    from pipeline.downstream.windows import WindowSettings

    t = cfg.task
    return WindowSettings(max_length=t.max_length, stride=t.stride, max_question=t.max_question,
                          include_unknowns=t.include_unknowns, max_passages=t.max_passages, seed=cfg.train.seed)


def _prepare_workers(args, paths) -> int:
    import os

    if args.prepare_workers:
        return args.prepare_workers
    from training.train import rundir

    size = sum(os.path.getsize(p) for p in paths if os.path.exists(rundir.absolute(p)))
    return 1 if size < 64 << 20 else (os.cpu_count() or 1)


@contextlib.contextmanager
def _beam_job():
    """Around the windowing job: library records as `canine finetune` lines (a root handler, as
    canine preprocess has; without one Beam's first error record installs logging's default), and
    the runner's records of an error that becomes our one line held and dropped (jobs/quiet.py)."""
    import logging

    from jobs import errors, logs

    root, handler = logging.getLogger(), logs.log_handler("finetune", logging.WARNING)
    root.addHandler(handler)
    try:
        with quiet.runner_errors_held(errors.is_known):
            yield
    finally:
        root.removeHandler(handler)


def _say(line: str) -> None:
    print(f"canine finetune: {line}", file=sys.stderr, flush=True)


def _prepare_tydi(args, cfg):
    """The official files windowed by the pipeline's Beam job into OUTPUT/windows (or task.windows),
    before anything starts Ray: idempotent, so a resumed run finds them prepared."""
    import dataclasses
    import os
    import shutil

    from pipeline.downstream.prepare import prepare
    from training.train import rundir

    t = cfg.task
    if t.dev == () and args.dev is None:
        _say("no --dev: the run keeps its last evaluation's weights and reports no score")
    windows = t.windows or rundir.join(cfg.output, "windows")
    inputs = {"train": list(t.train), **({"dev": list(t.dev)} if t.dev else {})}
    fresh = os.path.abspath(cfg.output)  # the highest folder of it this command would create (local)
    while not os.path.exists(os.path.dirname(fresh)) and os.path.dirname(fresh) != fresh:
        fresh = os.path.dirname(fresh)
    fresh = None if "://" in cfg.output or os.path.exists(fresh) else fresh
    try:
        with _beam_job():
            prepare(inputs, rundir.absolute(windows), _window_settings(cfg),
                    workers=_prepare_workers(args, t.train + t.dev), say=_say)
    except BaseException:
        # Refused input leaves no run directory behind (the job's lock made the folders; it wrote no file).
        if fresh and os.path.isdir(fresh) and not any(files for _, _, files in os.walk(fresh)):
            shutil.rmtree(fresh, ignore_errors=True)
        raise
    return dataclasses.replace(cfg, task=dataclasses.replace(t, windows=windows))


def _predict_tydi(args, cfg) -> int:
    import tempfile

    from jobs import errors
    from pipeline.downstream.prepare import prepare
    from training.finetune import predict, tydi

    objects = {args.predict: "the file to predict (--predict)", cfg.output: "the run directory (--output)"}
    try:
        run_cfg = predict.run_config(cfg.output)  # before the windowing: a run with kept weights
        with tempfile.TemporaryDirectory(prefix="canine-tydiqa-") as tmp:
            with _beam_job():
                prepare({"predict": [args.predict]}, tmp, _window_settings(run_cfg),
                        workers=_prepare_workers(args, [args.predict]), say=_say, training_roles=())
            scores = tydi.predict_file(cfg.output, tmp, "predict", [args.predict], args.to)
    except Exception as e:
        return errors.report("finetune", e, objects)
    where = "stdout" if args.to == "-" else args.to
    print("\n".join([f"canine finetune: predicted {args.predict} -> {where} (tydi_eval.py's --predictions_path)",
                     *tydi.format_scores(scores, "that file")]), file=sys.stderr)
    return 0
