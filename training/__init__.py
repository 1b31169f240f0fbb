"""The CANINE model and what builds its input; a run of it is train/'s.

    canine_config.py  the model's configuration: one dataclass (defaults = CANINE-base) and the named sizes
    model.py          the CANINE encoder (paper §3): architecture only, no Ray, no DeepSpeed
    kernels.py        the fast paths the model and heads call (oneDNN linears, fused loss, attention)
    heads.py          the pretraining heads: CANINE-C's character loss, CANINE-S's subword loss, sentence order
    downstream.py     the downstream heads: token classification (NER over characters), TyDi QA's span and answer type
    tydi_heads.py     TyDi QA's prediction rule: a window's best span from its start / end logits (Google's postproc)
    conll.py          CoNLL NER files -> character-labelled windows, and word tags back (the task's data reading)
    flops.py          FLOPs per example for MFU, counted matmul by matmul
    batch.py          rows of the shard contract -> fixed-shape training arrays (masks, targets, noise)
    noise.py          CharBERT's noisy language modeling: typos in the input, clean targets
    seeds.py          every random decision of training, and the one module that seeds or draws them
    hf.py             the Hugging Face format of the model: export_hf / import_hf
    hf_masked.py      the encoder with its pretraining head for transformers' trust_remote_code (fill-in)
    hf_token.py       the token-classification pipeline with character offsets, for trust_remote_code
    hf_qa.py          the TyDi QA model answering a question on a raw document, for trust_remote_code
    train/            a run, from its config to its export: Ray Train + DeepSpeed, the run directory, the
                      checkpoints, the evaluation and the export of a finished run (train/__init__.py)
    finetune/         a downstream run (canine finetune ner): train/'s workers and engine on a task, scored as the
                      task's official script scores (finetune/__init__.py)

A module here never imports train/ or finetune/ (tests/test_layers.py): the model and its input do not depend on
how a run drives them, so the trainer can change without touching them.
"""
