"""The table of `canine`'s sub-commands: jobs/cli.py builds its parser from it, jobs/submit.py
checks the command it submits against it. A module of its own so that neither imports the other."""

# name -> (module, one-line help)
COMMANDS = {
    "preprocess": ("jobs.preprocess", "Beam job: Wikipedia dumps / JSONL / Parquet -> codepoint shards"),
    "inspect": ("jobs.inspect", "print a shard directory's manifest"),
    "validate": ("jobs.validate", "check every shard against the contract and the manifest"),
    "pretrain": ("jobs.pretrain", "Ray Train + DeepSpeed pretraining on shards"),
    "submit": ("jobs.submit", "submit a canine job to a Ray cluster (Ray Jobs API)"),
    "report": ("jobs.report", "plot and summarize a finished run"),
    "evaluate": ("jobs.evaluate", "held-out masked accuracy and a language probe: pretrained vs initialization"),
    "finetune": ("jobs.finetune", "fine-tune and score a CANINE on a downstream task (ner, tydiqa) as a Ray Train run"),
    "export": ("jobs.export", "write a run's weights as a Hugging Face CanineModel directory"),
    "smoke": ("jobs.smoke", "preprocess the bundled sample, pretrain, evaluate, export"),
}
