"""Fixtures for the training tests: the real pipeline's output on the bundled sample, a local Ray
cluster, a one-process torch.distributed group. (The synthetic shards, `contract_shards`, are
tests/conftest.py's: the pipeline's tests check them too.)
"""

import os
import socket

import pytest

from pipeline.synthetic import SEQ_LEN

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before anything imports deepspeed
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="session")
def pipeline_shards(sample_xml, tmp_path_factory) -> str:
    """The real pipeline (`canine preprocess`, Beam DirectRunner) on the bundled sample dumps, at
    length 256 with sentence-order pairs: one train shard of ~1650 examples, ~80 for validation
    (a page of each of the 7 languages)."""
    from jobs import cli

    out = str(tmp_path_factory.mktemp("pipeline") / "shards")
    argv = ["preprocess", *map(str, sample_xml.values()), "--output", out, "--seq-len", str(SEQ_LEN),
            "--vocab-size", "1000", "--validation-fraction", "0.05", "--sentence-order", "--workers", "1"]
    assert cli.main(argv) == 0
    return out


@pytest.fixture(scope="session")
def ray_local(s3_store, gcs_store):
    """One local Ray cluster on 127.0.0.1 for the session's end-to-end runs (CPU only). Started
    after the object-store servers: its processes inherit their endpoints and dummy credentials
    from the environment, as a cluster that `canine pretrain` starts inherits the driver's."""
    import ray

    from training.train.run import init_local

    init_local(4)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def reference_run(pipeline_shards, ray_local, tmp_path_factory):
    """(output, summary, metrics records) of the uninterrupted 2-worker ZeRO-2 run on the
    pipeline's shards (tests/training/reference_settings.py) that the end-to-end, restart and
    multi-node tests compare their losses with step by step. log.profile_steps leaves the
    arithmetic unchanged."""
    from reference_settings import reference_config
    from training.train import rundir
    from training.train.run import pretrain

    output = tmp_path_factory.mktemp("reference")
    summary = pretrain(reference_config(pipeline_shards, output, **{"log.profile_steps": 2}))
    return str(output), summary, rundir.read_metrics(str(output))


@pytest.fixture(scope="session")
def one_process_group():
    """torch.distributed with world size 1 (gloo) in the test process, as Ray Train sets it up in
    a worker, for DeepSpeed unit tests. Kept for the session: DeepSpeed holds on to the group."""
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # DeepSpeed reads LOCAL_RANK, as Ray Train's workers have it
    dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
