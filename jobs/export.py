"""`canine export RUN [--step N | --checkpoint PATH] [--to DIR]`: a run's weights as a Hugging Face
CanineModel directory.

    canine export runs/tiny                                   # -> runs/tiny/hf
    canine export runs/tiny --step 8                          # the checkpoint of step 8 -> runs/tiny/hf-step8
    canine export runs/tiny --checkpoint runs/tiny/ray_train/checkpoint_step00000008 --to /data/canine-s8
    canine export gs://bucket/runs/base --to /data/canine-c-base
    canine export runs/tiny --json                            # what was written, as JSON
    python -c "from transformers import AutoModel, AutoTokenizer; AutoModel.from_pretrained('runs/tiny/hf')"

RUN and DIR are local paths (relative to the working directory) or any fsspec URL (s3://, gs://).
By default the final weights (written after the run's last step); --step N or --checkpoint PATH
(a checkpoint directory) export a saved checkpoint's, consolidated here without Ray or a GPU
(training/train/checkpoint.py `consolidate`), to RUN/hf-stepN unless --to says otherwise, so the
final export is never replaced; the model card names the step. A step with no checkpoint is
refused with the saved steps listed.
The directory holds the model (config.json, model.safetensors), the tokenizer config CANINE's
tokenizer needs, and a model card (README.md: the run's config, the data manifest's hash, steps,
final losses, evaluations); it is published whole (training/hf.py `publish`), its files with the
modes the umask allows (0644 under umask 022). --json prints what was written as one JSON
document: {"run", "export" (the directory), "step", "max_steps", "checkpoint" (null for the final
weights), "files"}; an error is {"error": LINE}. Needs the `[hf]` extra. Exit codes: 0 written,
2 refused (no such run, not finished, the extra missing, no Hugging Face equivalent, a target that
is a file or holds other things) or failed, with one line on stderr (jobs/errors.py).
"""


def add_arguments(p):
    p.add_argument("run", metavar="RUN", help="a run directory (fsspec URL), the --output of canine pretrain")
    p.add_argument("--to", metavar="DIR", help="where the export goes (default: RUN/hf; RUN/hf-stepN for a checkpoint)")
    add_weights_arguments(p)
    p.add_argument("--json", action="store_true", help="print what was written (the directory, the step, its files) "
                                                       "as JSON instead of a line")


def add_weights_arguments(p) -> None:
    """--step / --checkpoint: which weights of the run (training/train/rundir.py `weights`); canine evaluate's too."""
    which = p.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, metavar="N",
                       help="the checkpoint saved at step N (default: the final weights, written after the last step)")
    which.add_argument("--checkpoint", metavar="PATH",
                       help="a checkpoint directory, RUN/ray_train/checkpoint_stepNNNNNNNN or any fsspec URL "
                            "(default: none, the final weights)")


def objects(args) -> dict[str, str]:
    """What each path is, for an error that names only a path (jobs/errors.py)."""
    from training.train import rundir

    default = f"{rundir.HF}-step{args.step}" if args.step is not None else rundir.HF
    out = {args.run: "the run directory (RUN)", args.to or rundir.join(args.run, default): "the export directory (--to)"}
    if args.checkpoint:
        out[rundir.absolute(args.checkpoint)] = "the checkpoint directory (--checkpoint)"
    return out


def main(args) -> int:
    import json

    import fsspec

    from contract.files import redact
    from jobs import errors, quiet
    from training.train import rundir
    from training.train.export import export_run

    try:
        target = export_run(args.run, to=args.to, step=args.step, checkpoint=args.checkpoint)
    except Exception as e:  # ExportError, a bare path in words, anything else with its traceback file
        return errors.report("export", e, objects(args), as_json=args.json)  # stdout stays JSON
    w = rundir.weights(args.run, args.step, args.checkpoint)
    if args.json:
        fs, path = fsspec.core.url_to_fs(target)
        files = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
        print(json.dumps({"run": redact(args.run), "export": redact(target), "step": w.step, "max_steps": w.max_steps,
                          "checkpoint": redact(w.url) if w.checkpoint else None, "files": files}, indent=1),
              file=quiet.document())
        return 0
    at = f" at {w.describe()}" if w.checkpoint else ""  # a checkpoint's weights: which step of how many
    print(f"canine export: Hugging Face CanineModel of {redact(args.run)}{at} written to {redact(target)}")
    return 0
