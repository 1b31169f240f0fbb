"""A fine-tuning run: a pretrained CANINE (or a fresh one, as the baseline) trained on a downstream
task (NER, TyDi QA's primary tasks) and scored as the task's official script scores it. A layer like train/ and above it: it
drives the same Ray Train workers and DeepSpeed engine through train/'s pieces (engine, checkpoint,
run directory, metrics, tracking, the driver's cluster and Ctrl-C handling), and train/ never
imports it (tests/test_layers.py). The task heads are training/downstream.py's, the task's data
reading training/conll.py's.

One idea per module:
    schema.py   the run configuration: the task's section, the pretraining sections with fine-tuning defaults
    tasks.py    what differs between the tasks, as one interface the loop and the driver call
    ner.py      NER: CoNLL windows, the token classifier, conlleval's figures and input files
    tydi.py     TyDi QA: the prepared windows, the span and answer-type heads, official predictions and figures
    config.py   loading, validation and resolution (workers, device, precision, steps from the data)
    data.py     the task's examples on every worker: files read whole, windows, a step's batch (seeded)
    score.py    conlleval's figures (entity-level P/R/F1 overall, per type, per language) through seqeval
    tydi_score.py  TyDi QA's official figures (tydi_eval.py): passage and minimal P/R/F1, macro over languages
    loop.py     the Ray Train worker function: train, evaluate on dev and test, keep the best-dev weights
    run.py      `finetune(cfg)`: the driver (checks before Ray, the cluster, the lock, the trainer, the export)
    predict.py  `--predict`: a finished run's best weights tag a CoNLL file, conlleval's input
"""
