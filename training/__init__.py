"""The CANINE model and what builds its input; a run of it is train/'s.

    canine_config.py  the model's configuration: one dataclass (defaults = CANINE-base) and the named sizes
    model.py          the CANINE encoder (paper §3): architecture only, no Ray, no DeepSpeed
    kernels.py        the fast paths the model and heads call (oneDNN linears, fused loss, attention)
    heads.py          the pretraining heads: CANINE-C's character loss, CANINE-S's subword loss, sentence order
    flops.py          FLOPs per example for MFU, counted matmul by matmul
    batch.py          rows of the shard contract -> fixed-shape training arrays (masks, targets, noise)
    noise.py          CharBERT's noisy language modeling: typos in the input, clean targets
    seeds.py          every random decision of training, and the one module that seeds or draws them
    hf.py             the Hugging Face format of the model: export_hf / import_hf
    hf_masked.py      the encoder with its pretraining head for transformers' trust_remote_code (fill-in)
    train/            a run, from its config to its export: Ray Train + DeepSpeed, the run directory, the
                      checkpoints, the evaluation and the export of a finished run (train/__init__.py)

A module here never imports train/ (tests/test_layers.py): the model and its input do not depend on
how a run drives them, so the trainer can change without touching them.
"""
