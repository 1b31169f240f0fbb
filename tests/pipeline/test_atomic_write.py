"""contract.atomic_write: a crash leaves the old content or the new, never part; no temp file stays."""

import os
import uuid

import fsspec
import pytest

from pipeline import contract


def test_local_write_replaces_whole_and_keeps_the_umask_mode(tmp_path):
    path = tmp_path / "run" / "summary.json"
    contract.atomic_write(str(path), b"old")
    contract.atomic_write(str(path), b"new")
    assert path.read_bytes() == b"new" and os.listdir(path.parent) == ["summary.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_a_crash_before_the_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    contract.atomic_write(str(path), b"old")

    def crash(src, dst):
        assert open(src, "rb").read() == b"new"  # written in full beside it, then renamed
        raise KeyboardInterrupt  # a kill between the write and the rename

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        contract.atomic_write(str(path), b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["config.yaml"]


def test_a_remote_write_is_one_whole_object(monkeypatch):
    url = f"memory://files-test-{uuid.uuid4().hex}/run/metrics.jsonl"
    fs, path = fsspec.core.url_to_fs(url)
    calls, real = [], type(fs).pipe_file
    monkeypatch.setattr(type(fs), "pipe_file", lambda self, p, data, **kw: calls.append(p) or real(self, p, data, **kw))
    contract.atomic_write(url, b"{}\n")
    assert not contract.is_local(fs) and calls == [path] and fs.cat_file(path) == b"{}\n"
