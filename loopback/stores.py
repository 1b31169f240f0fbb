"""Object-store servers for tests and benchmarks: real protocol servers, each in a process of its
own, on 127.0.0.1 (moto's S3 server, gcp-storage-emulator). `start(protocol, log)` returns the
process and the environment a client (this process, a Beam worker, a Ray node) needs to reach
it; credentials are the servers' dummies, given as the product expects real ones: in the
environment only."""

import os
import socket
import subprocess
import sys
import time
import uuid

_BIN = os.path.dirname(sys.executable)
SERVERS = {
    "s3": ([os.path.join(_BIN, "moto_server"), "-H", "127.0.0.1", "-p", "{port}"],
           {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:{port}"}),
    # GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false: gcsfs 2026.10 otherwise asks the storage-control
    # gRPC API for each bucket's type, which the emulator does not serve (60 s time-out a bucket).
    "gs": ([os.path.join(_BIN, "gcp-storage-emulator"), "start", "--host", "127.0.0.1", "--port", "{port}", "--in-memory"],
           {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:{port}", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
            "GOOGLE_CLOUD_PROJECT": "canine-test"}),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(protocol: str, log_path) -> tuple[subprocess.Popen, dict]:
    """Start the server for `protocol` and wait until it accepts connections."""
    cmd, env = SERVERS[protocol]
    port = free_port()
    cmd = [a.format(port=port) for a in cmd]
    proc = subprocess.Popen(cmd, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}; see {log_path}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, {k: v.format(port=port) for k, v in env.items()}
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not listen on 127.0.0.1:{port} within 60 s; see {log_path}")


class Store:
    """A bucket on a store server: `url(name)` is a folder URL in it (a fresh one by default);
    `env` is what a child process needs in its environment to reach the server."""

    def __init__(self, protocol: str, bucket: str, env: dict):
        self.protocol, self.bucket, self.env = protocol, bucket, env

    def url(self, name: str = "") -> str:
        return f"{self.protocol}://{self.bucket}/{name or uuid.uuid4().hex[:12]}"

    def fs(self):
        import fsspec

        return fsspec.filesystem(self.protocol)
