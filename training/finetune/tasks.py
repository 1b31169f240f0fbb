"""The fine-tuning tasks: what differs between `canine finetune ner` and `canine finetune tydiqa`
(the rest, the workers' loop, the driver, checkpoints, resume, is one code path).

A task object answers, for its kind of data:
    read(cfg)                   its data on a worker (and the driver, before Ray)
    labels(data)                the names of the head's classes (NER's tags, TyDi's answer types)
    train_count(data)           training windows: the seeded order runs over them (data.py)
    eval_roles(data)            the roles scored at each evaluation ("dev", "test")
    model(model_cfg, cfg)       the encoder with the task's heads (training/downstream.py)
    denominator(data, batch)    what a step's loss is the mean over (NER: labelled characters; TyDi: windows)
    train_batch(data, ids, m)   a micro batch's tensors
    sums(out, inputs)           [loss sum, correct, count] of a forward pass, for the logged figures
    eval_batches(...)           this worker's share of a role's fixed evaluation batches
    collect(..., meta)          a batch's per-window results (meta: what the batch carried beside its tensors)
    score(cfg, data, role, r)   the official figures, with "overall": {"f1": the selection figure}
    write_predictions(...)      OUTPUT/predictions/ in the task's official input format
"""


def of(cfg):
    """The task of a fine-tuning config (its `kind`)."""
    if cfg.kind == "tydiqa":
        from training.finetune.tydi import TydiTask

        return TydiTask(cfg)
    from training.finetune.ner import NerTask

    return NerTask()
