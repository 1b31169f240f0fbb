"""The `canine` command: jobs/cli.py parses the line and runs one sub-command module, whose
`main(args)` calls a driver below (pipeline/run.py, training/train/run.py, training/finetune/run.py) and prints its result.
Inside jobs/ the imports run one way, from the sub-commands down to the helpers they share
(tests/test_layers.py checks that none runs back in a circle).

    cli.py         the entry point: the parser, a sub-command's run, its error reported once
    commands.py    the table of sub-commands (name -> module, one-line help)
    errors.py      an exception as the one line a user reads, and the exit status
    logs.py        log records as `canine COMMAND: ...` lines, credentials masked
    quiet.py       third-party lines silenced where they come from; stdout kept for --json
    flags.py       flags made from config fields, and --set
    preprocess.py  canine preprocess: dumps or rows -> shards (a Beam job)
    inspect.py     canine inspect: a shard directory's manifest as a table or JSON
    validate.py    canine validate: every shard against the contract and the manifest
    pretrain.py    canine pretrain: Ray Train + DeepSpeed on shards
    finetune.py    canine finetune ner: a downstream run (training/finetune/run.py), scored as conlleval scores
    submit.py      canine submit: a canine command as a Ray job on a cluster
    evaluate.py    canine evaluate: held-out accuracy and a language probe of a run
    export.py      canine export: a run's weights as a Hugging Face directory
    report.py      canine report: a finished run's plots and summary
    smoke.py       canine smoke: the bundled sample preprocessed, pretrained, evaluated, exported
"""
