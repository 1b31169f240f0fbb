"""What a run needs from the Ray cluster, checked by the driver before the trainer starts, so a
job the cluster cannot place fails at once, or waits a bounded time saying what for, instead of
waiting silently forever.

A run needs `parallel.workers` training workers of `parallel.cpus_per_worker` CPUs (and one GPU
each on cuda), each placed whole on one node (Ray Train's placement group, PACK strategy), and
beside them room for at least one input-pipeline task of `data.cpus_per_task` CPUs: the Ray
tasks that read shards and build batches (stream.py) run outside the workers' reservations.
Without that room the workers start and then wait for their first batch forever (e.g.
`--workers 2` on a 2-CPU Ray head).

- The cluster's nodes cannot hold that and no autoscaler can add nodes: fail at once, naming
  what is needed and what is there.
- An autoscaler can add nodes (detected as Ray Data detects it), or the nodes can hold the run but
  other jobs use the resources now: wait, saying for what, and give up after
  `parallel.resource_wait_s`.
"""

import dataclasses
import sys
import time

EPS = 1e-9  # resource amounts are floats (0.5 CPU): compare with a tolerance
REPEAT_S = 60.0  # while waiting, the waiting line is repeated this often
POLL_S = 2.0  # between looks at the cluster while waiting


class ClusterTooSmall(RuntimeError):
    """The cluster cannot place the run (now, or within parallel.resource_wait_s)."""


@dataclasses.dataclass(frozen=True)
class Needs:
    workers: int  # training workers
    worker: dict  # one worker's resources: {"CPU": c} or {"CPU": c, "GPU": 1}
    data_cpus: float  # one input-pipeline task, which must fit beside the workers
    one_per_node: bool = False  # parallel.placement STRICT_SPREAD

    def describe(self) -> str:
        each = ", ".join(f"{_amount(v)} {k}" for k, v in self.worker.items())
        total = ", ".join(f"{_amount(self.workers * v + (self.data_cpus if k == 'CPU' else 0))} {k}"
                          for k, v in self.worker.items())
        return (f"{self.workers} training workers x ({each}) (parallel.workers, parallel.cpus_per_worker) plus "
                f"{_amount(self.data_cpus)} CPU free for input-pipeline tasks (data.cpus_per_task): {total} in all")


def needs(cfg) -> Needs:
    """The resources of a resolved config (workers and device known)."""
    p = cfg.parallel
    worker = {"CPU": float(p.cpus_per_worker), **({"GPU": 1.0} if p.device == "cuda" else {})}
    # A fine-tuning run (training/finetune) reads its data in the workers: no read tasks.
    tasks = float(cfg.data.cpus_per_task) if hasattr(cfg, "data") else 0.0
    return Needs(p.workers, worker, tasks, p.placement == "STRICT_SPREAD")


def _amount(x: float) -> str:
    return f"{x:g}"


def _copies(bundle: dict, node: dict) -> int:
    """How many copies of `bundle` fit on a node with these free resources."""
    return min(int(node.get(k, 0.0) / v + EPS) for k, v in bundle.items() if v > 0)


def shortfall(need: Needs, nodes: list[dict]) -> str | None:
    """What these nodes (each a dict of free resources) lack to hold the run; None if they hold it.
    Workers go to the largest nodes first, as PACK places them (one a node under STRICT_SPREAD);
    the input pipeline then needs one node with `data_cpus` left."""
    free = sorted((dict(n) for n in nodes), key=lambda n: (n.get("GPU", 0.0), n.get("CPU", 0.0)), reverse=True)
    placed = 0
    for node in free:
        k = min(_copies(need.worker, node), need.workers - placed, 1 if need.one_per_node else need.workers)
        for key, v in need.worker.items():
            node[key] = node.get(key, 0.0) - k * v
        placed += k
    if placed < need.workers:
        return f"room for {placed} of {need.workers} training workers"
    if not any(n.get("CPU", 0.0) + EPS >= need.data_cpus for n in free):
        left = max((n.get("CPU", 0.0) for n in free), default=0.0)
        return (f"room for the workers, but then at most {_amount(max(left, 0.0))} CPU free on a node, less than "
                f"one input-pipeline task's {_amount(need.data_cpus)}: the workers would wait for data forever")
    return None


def describe_nodes(nodes: list[dict]) -> str:
    cpus, gpus = sum(n.get("CPU", 0.0) for n in nodes), sum(n.get("GPU", 0.0) for n in nodes)
    return f"{_amount(cpus)} CPU, {_amount(gpus)} GPU on {len(nodes)} node(s)"


def autoscaling_enabled() -> bool:
    """Whether an autoscaler can add nodes, judged as Ray Data judges it: ray 2.60.0
    ray/data/_internal/cluster_autoscaler/util.py, is_autoscaling_enabled() (a node group in the
    cluster config the autoscaler publishes to the GCS, that can scale up). A private function:
    tests/training/train/test_train_resources.py fails if it moves or stops answering on a local cluster."""
    from ray.data._internal.cluster_autoscaler.util import is_autoscaling_enabled

    return is_autoscaling_enabled()


def probe() -> tuple[list[dict], dict, bool]:
    """The cluster now: each alive node's total resources, the free resources of the whole
    cluster, and whether an autoscaler can add nodes."""
    import ray

    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    return nodes, ray.available_resources(), autoscaling_enabled()


def await_resources(need: Needs, wait_s: float, *, probe=probe, sleep=time.sleep, clock=time.monotonic,
                    out=sys.stderr) -> None:
    """Return once the cluster can place the run now; raise ClusterTooSmall at once if it never
    can (no autoscaler), or after `wait_s` seconds of waiting."""
    start, said = clock(), None
    while True:
        nodes, available, autoscaler = probe()
        lack = shortfall(need, nodes)
        if lack and not autoscaler:
            raise ClusterTooSmall(f"the cluster cannot place this run and has no autoscaler to add nodes: it needs "
                                  f"{need.describe()}; the cluster has {describe_nodes(nodes)} ({lack}). Lower "
                                  "--workers, parallel.cpus_per_worker or data.cpus_per_task, or use a larger cluster")
        # Free resources are known for the whole cluster only: checked as if one node (an approximation).
        busy = None if lack else shortfall(dataclasses.replace(need, one_per_node=False), [available])
        if not lack and not busy:
            return
        waited = clock() - start
        why = (f"an autoscaler to add nodes ({lack} on {describe_nodes(nodes)})" if lack else
               f"other jobs to free resources (free now: {_amount(available.get('CPU', 0.0))} CPU, "
               f"{_amount(available.get('GPU', 0.0))} GPU; {busy})")
        if waited >= wait_s:
            raise ClusterTooSmall(f"gave up after waiting {waited:.0f} s (parallel.resource_wait_s) for {why}; "
                                  f"this run needs {need.describe()}")
        if said is None or clock() - said >= REPEAT_S:
            out.write(f"canine pretrain: waiting for {why}; this run needs {need.describe()}; "
                      f"giving up in {wait_s - waited:.0f} s\n")
            out.flush()
            said = clock()
        sleep(min(POLL_S, max(0.1, wait_s - waited)))
