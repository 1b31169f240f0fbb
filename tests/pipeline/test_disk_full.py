"""A real full disk (pipeline/output/disk.py): `canine preprocess` into a small tmpfs, run as the README
shows it (relative paths, from another working directory, --workers 2).

- A disk smaller than the staging's estimated peak: refused in one line before anything is written.
- A disk that fills while the job runs (a file written to fill it once the first work items are
  cached): one line naming the staging path, the space needed and free, what to do; exit 2,
  nothing published, the lock released; after the file is removed the same command resumes
  from the cached items and publishes the shards of an uninterrupted run, staging removed.

The tmpfs is mounted in a mount namespace of its own (`unshare --user --map-root-user --mount`,
no root needed where the kernel lets users make namespaces): nothing is left mounted whatever
happens. This file runs itself inside it (`python test_disk_full.py SCENARIO ...`) and reports
what it saw as JSON.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

FLAGS = ["--seq-len", "512", "--vocab-size", "600", "--seed", "3", "--workers", "2", "--json"]
ITEM_BYTES = "150000"  # ~20 work items of the ~3 MB dump, so that the disk fills between two of them


def _canine(args, cwd, **kw):
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"CANINE_PREPROCESS_ITEM_BYTES": ITEM_BYTES}
    return subprocess.Popen([sys.executable, "-m", "jobs.cli", "preprocess", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _fill(path: Path) -> None:
    """Write `path` until the disk has no byte left."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError:
                pass


def scenario(root: str, dump: str) -> dict:
    """Inside the namespace: the two runs of the module docstring; what they printed and left."""
    root = Path(root)
    cwd, small, full = root / "cwd", root / "small", root / "full"
    for d in (cwd, small, full):
        d.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(full)], check=True)
    rel = os.path.relpath(dump, cwd)
    report = {}

    proc = _canine([rel, "--output", "../small/out", *FLAGS], cwd)
    out, err = proc.communicate(timeout=300)
    report["refused"] = {"rc": proc.returncode, "stdout": out, "stderr": err, "left": os.listdir(small)}

    args = [rel, "--output", "../full/out", *FLAGS]
    proc = _canine(args, cwd)
    deadline, filled = time.time() + 300, False
    while proc.poll() is None and time.time() < deadline:
        items = list((full / "out").glob(".staging-*/items/*.parquet"))
        if len(items) >= 2 and not filled:
            _fill(full / "filler")
            filled = True
        time.sleep(0.05)
    out, err = proc.communicate(timeout=300)
    staging = list((full / "out").glob(".staging-*"))
    report["filled"] = {"rc": proc.returncode, "stdout": out, "stderr": err, "filled": filled,
                        "items": len(list((full / "out").glob(".staging-*/items/*.parquet"))),
                        "manifest": (full / "out" / "_manifest.json").exists(),
                        "locked": (full / "out" / ".canine.lock").exists(),
                        "published": sorted(p.name for p in (full / "out").iterdir() if not p.name.startswith(".")),
                        "staging": [str(s) for s in staging]}
    (full / "filler").unlink()
    proc = _canine(args, cwd)
    out, err = proc.communicate(timeout=300)
    report["rerun"] = {"rc": proc.returncode, "stdout": out, "stderr": err,
                       "staging": [str(s) for s in (full / "out").glob(".staging-*")]}
    return report


def _namespace() -> list[str] | None:
    """The command prefix that runs a command in a mount namespace of its own, or None."""
    if not shutil.which("unshare"):
        return None
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /mnt && umount /mnt"], capture_output=True)
    return ["unshare", "--user", "--map-root-user", "--mount"] if probe.returncode == 0 else None


def shards(manifest: dict) -> dict:
    return {s["path"]: s["sha256"] for split in manifest["splits"].values() for s in split["shards"]}


@pytest.mark.slow  # three runs of the Beam job with 2 workers, and a baseline
def test_a_disk_too_small_is_refused_and_a_full_one_resumes(tmp_path, make_synthetic_dump):
    prefix = _namespace()
    if prefix is None:
        pytest.skip("this machine lets no user mount a tmpfs in a namespace of its own (unshare --user --mount)")
    (tmp_path / "in").mkdir()
    dump = make_synthetic_dump(tmp_path / "in" / "enwiki-20261101-pages-articles.xml", 700)
    baseline = _canine([str(dump), "--output", str(tmp_path / "baseline"), *FLAGS], tmp_path)
    out, err = baseline.communicate(timeout=300)
    assert baseline.returncode == 0, err[-3000:]
    expected = shards(json.loads(out))

    root = tmp_path / "ns"
    proc = subprocess.run([*prefix, sys.executable, __file__, str(root), str(dump)], capture_output=True, text=True,
                          timeout=900, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)

    refused = report["refused"]
    lines = [line for line in refused["stderr"].splitlines() if line.startswith("canine preprocess:")]
    assert refused["rc"] == 2 and len(lines) == 1, refused["stderr"][-3000:]
    assert lines[0].startswith("canine preprocess: --output ../small/out: not enough disk space for this run: "
                               "staging (../small/out/.staging-"), lines[0]
    assert "at its peak and 1.0 MB is free there; free " in lines[0] and lines[0].endswith("nothing was written")
    assert "staging needs about" not in refused["stderr"] and refused["left"] == []  # not even the output folder
    first = report["rerun"]["stderr"].splitlines()[0]  # the first line of a run: the cached items count as room
    assert "preprocess: staging needs about " in first and " free there, " in first and " already staged by an interrupted run, reused or freed by this one)" in first

    filled = report["filled"]
    assert filled["filled"] and filled["rc"] == 2, filled["stderr"][-3000:]
    lines = [line for line in filled["stderr"].splitlines() if line.startswith("canine preprocess:")]
    assert len(lines) == 1 and "Traceback" not in filled["stderr"], filled["stderr"][-3000:]
    line = lines[0]
    assert line.startswith("canine preprocess: ../full/out/.staging-") and ": no space left on the device" in line, line
    assert "needs about " in line and " free there now" in line and "nothing was published" in line, line
    assert f"work items already read (kept)" in line and "run the same command again" in line, line
    assert not filled["manifest"] and filled["published"] == [] and filled["items"] >= 2
    assert not filled["locked"]  # released: the rerun below starts at once
    assert len(filled["staging"]) == 1

    rerun = report["rerun"]
    assert rerun["rc"] == 0, rerun["stderr"][-3000:]
    manifest = json.loads(rerun["stdout"])
    assert manifest["run"]["items_reused"] >= 2 and manifest["run"]["items_parsed"] >= 1
    assert shards(manifest) == expected
    assert rerun["staging"] == []  # removed after publishing


if __name__ == "__main__":  # inside the namespace (the test above runs this file)
    print(json.dumps(scenario(sys.argv[1], sys.argv[2])))
