"""Ray nodes for tests, as `ray start` makes them on a cluster: each node a `ray start --block`
process in its own process group, on an address of its own in 127.0.0.0/8, with its own temp dir
and free ports, so that several nodes on this machine share nothing but what they are given (the
GCS address, an object store's URL). Killing a node's process group is a machine dying; `stop` is
an orderly shutdown.

Why not 127.0.0.1 (ray 2.60, ray/scripts/scripts.py `start`, _private/services.py): a node joining
a head is refused unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1, and with it set Ray replaces the
addresses "127.0.0.1" / "localhost" it is given by the host's network address (resolve_ip_for_
localhost), so the cluster's traffic would leave loopback. Other loopback addresses (127.0.0.2,
...) are not rewritten. The nodes use token authentication, as Ray 2.60 clusters do by default."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from loopback.stores import free_port

RAY = str(Path(sys.executable).parent / "ray")
_PORT_FLAGS = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
               "metrics-export-port", "runtime-env-agent-port")


TOKEN = __import__("secrets").token_hex(24)  # this test session's clusters'


def env(**extra) -> dict:
    """The environment of a node or a client of the test clusters: their token, multi-node
    clusters allowed (see above), nothing from the developer's own setup."""
    out = {k: v for k, v in os.environ.items()
           if not k.startswith("RAY_AUTH") and k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    out.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1",
               RAY_USAGE_STATS_ENABLED="0", DS_ACCELERATOR="cpu", PYTHONUNBUFFERED="1",
               # A joining node waits this long for the GCS to list it (default 30 s): on 2 busy
               # cores CI saw a worker node give up after 37 s ("node registration may not be
               # complete yet ... RAY_raylet_start_wait_time_s").
               RAY_raylet_start_wait_time_s="180",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{out.get('PATH', '')}")
    out.update(extra)
    return out


class Node:
    """One `ray start --block` node. head: the GCS and dashboard ports are its own; otherwise it
    joins `address` (host:port of a head's GCS)."""

    def __init__(self, *, head: bool, num_cpus: int, ip: str, address: str = "", extra_flags=(),
                 node_env: dict | None = None):
        self.tmp = tempfile.mkdtemp(prefix="rn", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
        self.gcs_port = free_port() if head else None
        client_port = free_port() if head else None
        flags = ["--head", f"--port={self.gcs_port}", f"--ray-client-server-port={client_port}"] if head else \
            [f"--address={address}"]
        chosen = {k: free_port() for k in _PORT_FLAGS}
        ports = [f"--{k}={port}" for k, port in chosen.items()]
        # A worker-port range of this node's own, holding none of the ports just chosen: Ray refuses
        # to start a node whose components share a port ("worker_ports is trying to use a port
        # number ... used by other components"), seen once when the range fell on the dashboard
        # agent's port.
        taken = (set(chosen.values()) | {self.gcs_port, client_port}) - {None}
        lo = free_port() // 100 * 100
        while any(lo <= port < lo + 100 for port in taken):
            lo = free_port() // 100 * 100
        self.ip = ip
        cmd = [RAY, "start", "--block", f"--node-ip-address={ip}", f"--temp-dir={self.tmp}", f"--num-cpus={num_cpus}",
               "--num-gpus=0", "--disable-usage-stats", *flags, *ports, f"--min-worker-port={lo}",
               f"--max-worker-port={lo + 99}", *extra_flags]
        self.log_path = os.path.join(self.tmp, "node.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, env=node_env or env(), stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.gcs_port}"

    def log(self) -> str:
        return Path(self.log_path).read_text()[-3000:]

    def diagnostics(self) -> str:
        """`ray start`'s output and the tails of its GCS and raylet logs, for a failure message."""
        out = [f"--- node {self.ip} ({'running' if self.proc.poll() is None else f'exited {self.proc.returncode}'}): "
               f"ray start ---\n{self.log()}"]
        for name in ("gcs_server.out", "gcs_server.err", "raylet.out", "raylet.err"):
            for path in Path(self.tmp).glob(f"session_latest/logs/{name}"):
                out.append(f"--- node {self.ip}: {name} ---\n{path.read_text(errors='replace')[-1500:]}")
        return "\n".join(out)

    def kill(self) -> None:
        """The machine dies: every process of the node at once (SIGKILL to its group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def stop(self) -> None:
        """SIGTERM to `ray start --block` alone: it stops its children in order (~4 s idle). Killing
        the whole group at once leaves it waiting on a dead GCS, so the group gets SIGKILL only
        after, and only if the orderly stop is slow (a loaded machine): these nodes are disposable."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def alive_nodes(address: str, timeout_s: float = 30.0) -> int:
    """Alive nodes of the cluster at `address`, asked from its GCS by a short-lived driver (0 if
    the GCS does not answer within timeout_s)."""
    code = ("import ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
            "print(sum(n['Alive'] for n in ray.nodes()))" % address)
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 0
    return int(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else 0


def wait_for_nodes(address: str, count: int, timeout_s: float = 120.0, nodes=()) -> None:
    """Block until the cluster at `address` has `count` alive nodes; AssertionError if a node's
    process ends or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while alive_nodes(address, timeout_s=max(5.0, min(30.0, deadline - time.monotonic()))) != count:
        for node in nodes:
            assert node.proc.poll() is None, f"Ray node {node.ip} exited with code {node.proc.returncode}"
        assert time.monotonic() < deadline, f"not {count} alive Ray nodes at {address} within {timeout_s} s"
        time.sleep(1.0)  # polling the cluster's state until it answers, not synchronizing


def start_cluster(ips, num_cpus: int, node_env: dict, head_flags=(), attempts: int = 2,
                  timeout_s: float = 120.0) -> list:
    """A head node on ips[0] and a worker node on each further address, all alive; returns the
    nodes, head first. A cluster that is not up within timeout_s is stopped (its nodes' logs kept
    for the message) and started again on fresh ports, `attempts` times in all: on the loaded
    2-core CI machine, in the full suite only, a head's GCS once did not answer for 120 s and a
    joining node once gave up registering after 37 s; alone, the same test never failed here."""
    failures = []
    for attempt in range(1, attempts + 1):
        head = Node(head=True, num_cpus=num_cpus, ip=ips[0], node_env=node_env, extra_flags=head_flags)
        nodes = [head]
        try:
            for ip in ips[1:]:
                nodes.append(Node(head=False, num_cpus=num_cpus, ip=ip, address=head.address, node_env=node_env))
            wait_for_nodes(head.address, len(ips), timeout_s, nodes)
            if failures:  # in the suite's warnings summary: a retry that succeeded stays visible
                warnings.warn(f"raynodes: the cluster came up at attempt {attempt}; before:\n" + "\n".join(failures))
            return nodes
        except AssertionError as e:
            failures.append(f"attempt {attempt}: {e}\n" + "\n".join(node.diagnostics() for node in nodes))
            for node in reversed(nodes):
                node.stop()
    raise AssertionError("\n\n".join(failures))
