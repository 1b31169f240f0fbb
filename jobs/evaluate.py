"""`canine evaluate RUN`: does the pretrained encoder beat its own initialization on held-out data
(and an `--init` run the weights it started from, the baseline it must beat)?

    canine evaluate runs/smoke/train
    canine evaluate runs/smoke/train --step 50          # the checkpoint saved at step 50
    canine evaluate gs://bucket/runs/base --examples 4096 --json

A fine-tuning run (`canine finetune ner` or `tydiqa`) gets its kept evaluation's scores again
(conlleval's figures on dev and test, overall, per entity type and per language; TyDi QA's passage
and minimal F1, macro and per language; --json: its scores.json).

Masked prediction on the validation split (pretrained, initial, unigram baseline) and a linear
probe of the pooled output for language identification of short snippets, overall and per
language, with the languages that had no validation example to score (training/train/evaluate.py
says how each is measured; --json: the same under "masked", "probe", "languages" and
"unscored_languages"; an --init run's init under "init"; the weights to beat under "baseline").
Reads the run's config, its consolidated weights (written after the last step) or, with --step
N or --checkpoint PATH, a saved checkpoint's (consolidated here, no Ray or GPU needed; the output
names the step, --json under "step" and "max_steps"), and its shards.
RUN and PATH are local paths (relative to the working directory) or any fsspec URL. Exit codes: 0
evaluated, 2 refused (no such run, not finished, no checkpoint at that step: the line lists the
saved ones, no validation rows), with one line on stderr (jobs/errors.py).
"""

import json

from jobs import quiet


def add_arguments(p):
    import inspect

    from jobs.export import add_weights_arguments
    from training.train.evaluate import evaluate_run

    default = {name: param.default for name, param in inspect.signature(evaluate_run).parameters.items()}  # one place
    p.add_argument("run", metavar="RUN", help="a run directory (fsspec URL), the --output of canine pretrain")
    p.add_argument("--examples", type=int, default=default["examples"],
                   help="validation examples (the first ones of the split)")
    p.add_argument("--train-examples", type=int, default=default["train_examples"],
                   help="train examples for the unigram counts and the probe's training snippets")
    p.add_argument("--snippet-chars", type=int, default=default["snippet_chars"],
                   help="characters per language-probe snippet")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_weights_arguments(p)


def main(args) -> int:
    from jobs import errors
    from training.train import rundir
    from training.train.evaluate import evaluate_run, format_evaluation

    if _is_finetune_run(args.run):
        return _finetune_scores(args)
    try:
        result = evaluate_run(args.run, examples=args.examples, train_examples=args.train_examples,
                              snippet_chars=args.snippet_chars, step=args.step, checkpoint=args.checkpoint)
    except Exception as e:  # our messages as they are, a bare path in words, anything else with its traceback file
        objects = {args.run: "the run directory (RUN)"}
        if args.checkpoint:
            objects[rundir.absolute(args.checkpoint)] = "the checkpoint directory (--checkpoint)"
        return errors.report("evaluate", e, objects, as_json=args.json)  # stdout stays JSON
    print(json.dumps(result, indent=1) if args.json else format_evaluation(result), file=quiet.document())
    return 0


def _is_finetune_run(run: str) -> bool:
    from training.train import rundir

    try:
        saved = rundir.read_saved_config(rundir.absolute(run))
    except Exception:  # noqa: BLE001 (not readable here: evaluate_run says why, in its words)
        return False
    return bool(saved) and "task" in saved


def _finetune_scores(args) -> int:
    from jobs import errors
    from training.finetune import predict, score, tydi
    from training.train import rundir

    try:
        scores = predict.scores_of(args.run)
        tydiqa = (rundir.read_saved_config(rundir.absolute(args.run)) or {}).get("kind") == "tydiqa"
    except Exception as e:
        return errors.report("evaluate", e, {args.run: "the run directory (RUN)"}, as_json=args.json)
    if args.json:
        print(json.dumps(scores, indent=1), file=quiet.document())
        return 0
    lines = [f"step {scores['step']} ({scores['selection']}){'' if scores.get('finished') else ', run not finished'}"]
    for role in ("dev", "test"):
        if scores.get(role):
            lines += (tydi.format_scores if tydiqa else score.format_scores)(scores[role], role)
    print("\n".join(lines), file=quiet.document())
    return 0
