"""contract/files.py: atomic_write (a crash leaves the old content or the new, never part; no temp file
stays) and redact (credentials in URLs masked, nothing else)."""

import os
import uuid

import fsspec
import pytest

from contract.files import atomic_write, is_local, redact


def test_local_write_replaces_whole_and_keeps_the_umask_mode(tmp_path):
    path = tmp_path / "run" / "summary.json"
    atomic_write(str(path), b"old")
    atomic_write(str(path), b"new")
    assert path.read_bytes() == b"new" and os.listdir(path.parent) == ["summary.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_a_crash_before_the_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    atomic_write(str(path), b"old")

    def crash(src, dst):
        assert open(src, "rb").read() == b"new"  # written in full beside it, then renamed
        raise KeyboardInterrupt  # a kill between the write and the rename

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(path), b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["config.yaml"]


def test_a_remote_write_is_one_whole_object(monkeypatch):
    url = f"memory://files-test-{uuid.uuid4().hex}/run/metrics.jsonl"
    fs, path = fsspec.core.url_to_fs(url)
    calls, real = [], type(fs).pipe_file
    monkeypatch.setattr(type(fs), "pipe_file", lambda self, p, data, **kw: calls.append(p) or real(self, p, data, **kw))
    atomic_write(url, b"{}\n")
    assert not is_local(fs) and calls == [path] and fs.cat_file(path) == b"{}\n"


def test_redact_masks_credentials_in_urls_only():
    text = ("https://alice:pw1@h.example/x.xml?X-Amz-Signature=sig1&X-Amz-Date=20261101&X-Amz-Credential=AKIA/x "
            "gs://b/o?x=1&sig=sig2 s3://bucket/plain/path")
    masked = redact(text)
    for secret in ("alice", "pw1", "sig1", "AKIA", "sig2"):
        assert secret not in masked
    assert "X-Amz-Date=20261101" in masked and "s3://bucket/plain/path" in masked and "gs://b/o?x=1" in masked
