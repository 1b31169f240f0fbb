"""`canine export RUN [--to DIR]`: a run's weights as a Hugging Face CanineModel directory.

    canine export runs/tiny                                   # -> runs/tiny/hf
    canine export gs://bucket/runs/base --to /data/canine-c-base
    python -c "from transformers import AutoModel, AutoTokenizer; AutoModel.from_pretrained('runs/tiny/hf')"

RUN and DIR are local paths (relative to the working directory) or any fsspec URL (s3://, gs://).
The directory holds the model (config.json, model.safetensors), the tokenizer config CANINE's
tokenizer needs, and a model card (README.md: the run's config, the data manifest's hash, steps,
final losses, evaluations); it is published whole (training/hf.py `publish`), its files with the
modes the umask allows (0644 under umask 022). Needs the `[hf]` extra. Exit codes: 0 written,
2 refused (no such run, not finished, the extra missing, no Hugging Face equivalent, a target that
is a file or holds other things) or failed, with one line on stderr (jobs/errors.py).
"""


def add_arguments(p):
    p.add_argument("run", metavar="RUN", help="a run directory (fsspec URL), the --output of canine pretrain")
    p.add_argument("--to", metavar="DIR", help="where the export goes (default: RUN/hf)")


def objects(args) -> dict[str, str]:
    """What each path is, for an error that names only a path (jobs/errors.py)."""
    from training import rundir

    to = args.to or rundir.join(args.run, rundir.HF)
    return {args.run: "the run directory (RUN)", to: "the export directory (--to)"}


def main(args) -> int:
    from contract.files import redact
    from jobs import errors
    from training.export import export_run

    try:
        target = export_run(args.run, to=args.to)
    except Exception as e:  # ExportError, a bare path in words, anything else with its traceback file
        return errors.report("export", e, objects(args))
    print(f"canine export: Hugging Face CanineModel of {redact(args.run)} written to {redact(target)}")
    return 0
