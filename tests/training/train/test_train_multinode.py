"""Training across Ray nodes that share nothing but the S3 server: a head and a worker node
started by `ray start` on 127.0.0.1 (tests/raynodes.py, each its own temp dir and ports), one
training worker on each (parallel.placement STRICT_SPREAD), data and output on the store. The
worker node dies mid-run (its whole process group SIGKILLed) and a new one joins; Ray Train
restarts the workers from the last checkpoint on the store, and the run ends with the losses of
the uninterrupted reference run (conftest.py `reference_run`, on the one-node local cluster)."""

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import raynodes
from reference_settings import REFERENCE_SETTINGS, REFERENCE_STEPS, assert_same_losses
from training.train import rundir

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
SETTINGS = {**REFERENCE_SETTINGS, "log.console_every": 1}


@pytest.fixture(scope="module")
def cluster(s3_store):
    """A head and a worker node of 2 CPUs each; yields the nodes (a list: the test replaces the
    worker node it kills)."""
    node_env = raynodes.env(**s3_store.env)  # the store's endpoint and dummy credentials, as a node's own
    nodes = raynodes.start_cluster(["127.0.0.2", "127.0.0.3"], 2, node_env, head_flags=["--include-dashboard=false"])
    try:
        yield nodes
    finally:
        for node in reversed(nodes):
            node.stop()


@pytest.fixture(scope="module")
def data_on_s3(s3_store, pipeline_shards):
    url = s3_store.url("multinode-shards")
    s3_store.fs().put(pipeline_shards + "/", url.split("://", 1)[1], recursive=True)
    return url


def _node_logs(nodes) -> str:
    """The worker nodes' own logs, for a failure message: why a (replacement) node did not serve."""
    return "".join(f"\n{node.diagnostics()}" for node in nodes[1:])


def test_a_run_across_nodes_survives_the_loss_of_a_node(cluster, s3_store, data_on_s3, reference_run):
    _, _, expected = reference_run
    head, output = cluster[0], s3_store.url("multinode-run")
    cmd = [sys.executable, "-m", "jobs.cli", "pretrain", "--config", "tiny", "--data", data_on_s3, "--output", output,
           "--ray-address", head.address, "--set", "parallel.placement=STRICT_SPREAD",
           "--set", "parallel.max_failures=1", *(f"--set={k}={v}" for k, v in SETTINGS.items())]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=raynodes.env(**s3_store.env), stderr=subprocess.PIPE, text=True)
    lines, killed_at = [], None
    deadline = time.monotonic() + 480
    for line in proc.stderr:
        lines.append(line)
        step = re.search(r"  step +(\d+)/", line)
        if killed_at is None and step and int(step[1]) >= 12:  # past the step-10 checkpoint on the store
            killed_at = int(step[1])
            cluster[1].kill()  # the worker node's machine dies: raylet, workers, all at once
            cluster[1] = raynodes.Node(head=False, num_cpus=2, ip="127.0.0.4", address=head.address,
                                       node_env=raynodes.env(**s3_store.env))  # a replacement joins
        assert time.monotonic() < deadline, "".join(lines[-40:]) + _node_logs(cluster)
    assert proc.wait(timeout=60) == 0, "".join(lines[-60:]) + _node_logs(cluster)
    assert killed_at is not None, "".join(lines)

    assert_same_losses(rundir.read_metrics(output), expected)
    fs = s3_store.fs()
    root = output.split("://", 1)[1]
    assert fs.exists(f"{root}/final/model_fp32.pt") and fs.exists(f"{root}/summary.json")
    # Steps trained again after the restart (from the step-10 checkpoint) are printed once.
    shown = [int(m[1]) for line in lines if (m := re.search(r"  step +(\d+)/", line))]
    assert shown == list(range(1, REFERENCE_STEPS + 1)), shown
