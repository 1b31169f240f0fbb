"""A pretraining run, from its config to its export: Ray Train workers running DeepSpeed ZeRO on the
shards, the run directory they write, and what reads a finished run (the evaluation, the Hugging
Face export). The model and what builds its input are the package above's (training/); this
package imports them, never the other way round (tests/test_layers.py).

One idea per module:
    schema.py         the run configuration's fields: one frozen dataclass per concern, each field commented
    config.py         loading the run configuration (preset or YAML, overrides), validation, resolving "auto"
    rundir.py         a run directory's files by name, reading them on any fsspec URL, the one metrics summary
    data.py           the manifest, the per-epoch order of work units, reading rows (deterministic, sha256-checked)
    stream.py         the input pipeline of one worker, Ray tasks (read + build batches + prefetch)
    optim.py          AdamW / LAMB and the warm-up + linear-decay learning rate
    lamb.py           the LAMB optimizer (per-tensor trust ratio)
    engine.py         the ONE place that wraps the model with DeepSpeed, and the forward's autocast
    compile_check.py  compiled against eager training, gradient by gradient (tests and the GPU check)
    init.py           --init: a new run from a Hugging Face CANINE directory, an export or a run (checked before Ray)
    checkpoint.py     DeepSpeed checkpoints (loaded weights_only) + data position + RNG, the consolidated fp32 weights
    metrics.py        metrics.jsonl, TensorBoard, the console line, MFU and memory
    tracking.py       experiment tracking with MLflow (log.mlflow): params, metrics, artifacts, one MLflow run per run
    loop.py           the Ray Train worker function
    guard.py          stops a run whose first steps have a zero or non-finite gradient norm, or did not move the weights
    failures.py       errors a restart cannot fix (OOM, bad input, the guard's) end the run at once; fault injection
    autobatch.py      --micro-batch auto: the largest micro batch that fits the GPU; accumulation keeps the global batch
    resources.py      what a run needs from the cluster: fail at once, or wait a bounded time, if it cannot be placed
    run.py            `pretrain(cfg)`: the driver (Ray cluster, output lock, TorchTrainer, export)
    reaper.py         the local cluster a driver started goes with it, even on SIGKILL
    export.py         a finished run (or a checkpoint of it) -> a Hugging Face directory with its model card
    evaluate.py       proof of learning: a run's encoder against its initialization on held-out data

Importing this package is cheap: Ray, DeepSpeed and torch are imported by the modules that use them.
"""
