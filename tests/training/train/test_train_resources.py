"""What a run needs from the cluster: the arithmetic, the waiting, and a real 2-CPU cluster that
cannot place `--workers 2` failing at once instead of hanging."""

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.train import config, resources
from training.train.resources import Needs, shortfall

ROOT = Path(__file__).resolve().parents[3]
CPU2 = Needs(workers=2, worker={"CPU": 1.0}, data_cpus=0.5)
GPU2 = Needs(workers=2, worker={"CPU": 4.0, "GPU": 1.0}, data_cpus=1.0)


def test_needs_come_from_the_resolved_config():
    cfg = config.load_config("tiny", {"parallel.device": "cpu"})
    assert resources.needs(cfg) == CPU2  # tiny: 2 workers x 1 CPU, input tasks of 0.5 CPU
    cfg = config.load_config("tiny", {"parallel.device": "cuda", "parallel.cpus_per_worker": 4,
                                      "data.cpus_per_task": 1})
    assert resources.needs(cfg) == GPU2
    assert CPU2.describe().endswith("0.5 CPU free for input-pipeline tasks (data.cpus_per_task): 2.5 CPU in all")


@pytest.mark.parametrize("need, nodes, lack", [
    (CPU2, [{"CPU": 3.0}], None),
    (CPU2, [{"CPU": 2.0}], "at most 0 CPU free on a node, less than one input-pipeline task's 0.5"),
    (CPU2, [{"CPU": 1.0}], "room for 1 of 2 training workers"),
    (CPU2, [{"CPU": 1.5}, {"CPU": 1.5}], None),  # a worker and a task's room on each node
    (Needs(1, {"CPU": 3.0}, 0.5), [{"CPU": 2.0}, {"CPU": 2.0}], "room for 0 of 1"),  # 4 CPUs, none holds 3
    (Needs(10, {"CPU": 0.1}, 0.1), [{"CPU": 1.1}], None),  # 11 x 0.1 fits despite float rounding
    (GPU2, [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0, "GPU": 1.0}], None),
    (GPU2, [{"CPU": 16.0, "GPU": 2.0}], None),
    (GPU2, [{"CPU": 8.0, "GPU": 2.0}], "at most 0 CPU free"),
    (GPU2, [{"CPU": 64.0, "GPU": 1.0}, {"CPU": 64.0}], "room for 1 of 2"),
    (GPU2, [{"CPU": 64.0}], "room for 0 of 2"),
    (Needs(2, {"CPU": 1.0}, 0.5, one_per_node=True), [{"CPU": 4.0}], "room for 1 of 2"),  # STRICT_SPREAD
    (Needs(2, {"CPU": 1.0}, 0.5, one_per_node=True), [{"CPU": 2.0}, {"CPU": 2.0}], None),
])
def test_shortfall(need, nodes, lack):
    got = shortfall(need, nodes)
    assert got is None if lack is None else lack in got, got


class FakeCluster:
    """probe()'s answers over time, a clock that the sleeps advance."""

    def __init__(self, answers):
        self.answers, self.now, self.sleeps = list(answers), 0.0, []

    def probe(self):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


def _await(cluster, wait_s=30.0):
    out = io.StringIO()
    resources.await_resources(CPU2, wait_s, probe=cluster.probe, sleep=cluster.sleep, clock=lambda: cluster.now,
                              out=out)
    return out.getvalue()


def test_too_small_without_an_autoscaler_fails_at_once():
    cluster = FakeCluster([([{"CPU": 2.0}], {"CPU": 2.0}, False)])
    with pytest.raises(resources.ClusterTooSmall) as info:
        _await(cluster)
    assert cluster.sleeps == []
    assert "no autoscaler" in str(info.value) and "2.5 CPU in all" in str(info.value)
    assert "the cluster has 2 CPU, 0 GPU on 1 node(s)" in str(info.value)


def test_with_an_autoscaler_it_says_what_it_waits_for_and_gives_up():
    cluster = FakeCluster([([{"CPU": 2.0}], {"CPU": 2.0}, True)])
    out = io.StringIO()
    with pytest.raises(resources.ClusterTooSmall, match=r"gave up after waiting 30 s .*autoscaler to add nodes"):
        resources.await_resources(CPU2, 30.0, probe=cluster.probe, sleep=cluster.sleep, clock=lambda: cluster.now,
                                  out=out)
    assert out.getvalue().startswith("canine pretrain: waiting for an autoscaler to add nodes (room for the workers, but then")
    assert out.getvalue().count("\n") == 1  # said once, not at every look
    assert sum(cluster.sleeps) == pytest.approx(30.0)


def test_it_goes_ahead_when_a_node_arrives_or_other_jobs_free_resources():
    arrives = FakeCluster([([{"CPU": 2.0}], {"CPU": 2.0}, True), ([{"CPU": 2.0}, {"CPU": 4.0}], {"CPU": 6.0}, True)])
    assert "autoscaler" in _await(arrives) and len(arrives.sleeps) == 1
    busy = FakeCluster([([{"CPU": 4.0}], {"CPU": 1.0}, False), ([{"CPU": 4.0}], {"CPU": 4.0}, False)])
    assert "waiting for other jobs to free resources (free now: 1 CPU, 0 GPU" in _await(busy)
    assert _await(FakeCluster([([{"CPU": 4.0}], {"CPU": 4.0}, False)])) == ""  # enough: no line, no wait
    spread = Needs(2, {"CPU": 1.0}, 0.5, one_per_node=True)  # free resources are known per cluster only
    resources.await_resources(spread, 30.0, probe=lambda: ([{"CPU": 2.0}, {"CPU": 2.0}], {"CPU": 4.0}, True),
                              sleep=pytest.fail, out=io.StringIO())


def test_a_local_cluster_has_no_autoscaler(ray_local):
    """resources.autoscaling_enabled relies on a private function of Ray Data (ray 2.60.0): this
    fails if it moves or stops answering."""
    assert resources.autoscaling_enabled() is False
    nodes, available, autoscaler = resources.probe()
    assert nodes[0]["CPU"] == 4 and available["CPU"] <= 4 and autoscaler is False


@pytest.mark.slow  # a Ray cluster
def test_a_cluster_too_small_fails_at_once_with_what_it_needs(contract_shards, tmp_path):
    """`canine pretrain --workers 2` on a real 2-CPU local cluster: exit 2 before training starts."""
    script = ("import sys; from training.train.run import init_local; init_local(2); "
              "from jobs import cli; sys.exit(cli.main(sys.argv[1:]))")
    output = tmp_path / "run"
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": ""}
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script, "pretrain", "--data", contract_shards, "--output",
                           str(output), "--workers", "2"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "canine pretrain: the cluster cannot place this run and has no autoscaler" in proc.stderr
    assert "2 training workers x (1 CPU)" in proc.stderr and "2.5 CPU in all" in proc.stderr
    assert "the cluster has 2 CPU, 0 GPU on 1 node(s)" in proc.stderr
    assert "step 1/" not in proc.stderr and not output.exists()
    assert time.monotonic() - t < 120  # Ray's start and imports; no waiting
