"""Distributed CANINE pretraining: Ray Train workers running DeepSpeed ZeRO on the shards.

One idea per module:
    config.py      the run configuration (one dataclass per concern) and YAML / override loading
    data.py        the manifest, the per-epoch plan of work units, reading rows (deterministic, sha256-checked)
    stream.py      the input pipeline of one worker, Ray tasks (read + build batches + prefetch)
    optim.py       AdamW / LAMB and the warm-up + linear-decay learning rate
    lamb.py        the LAMB optimizer (per-tensor trust ratio)
    engine.py      the ONE place that wraps the model with DeepSpeed
    checkpoint.py  DeepSpeed checkpoints (loaded weights_only) + data position + RNG, the consolidated fp32 weights
    metrics.py     metrics.jsonl, TensorBoard, the console line, MFU and memory
    loop.py        the Ray Train worker function
    guard.py       stops a run whose first steps have a zero or non-finite gradient norm, or did not move the weights
    failures.py    errors a restart cannot fix (OOM, bad input, the guard's) end the run at once; fault injection for tests
    autobatch.py   --micro-batch auto: the largest micro batch that fits the GPU, the global batch kept by accumulation
    resources.py   what a run needs from the cluster: fail at once, or wait a bounded time, if it cannot be placed
    run.py         `pretrain(cfg)`: the driver (Ray cluster, output lock, TorchTrainer, export)

Importing this package is cheap: Ray, DeepSpeed and torch are imported by the modules that use them.
"""
