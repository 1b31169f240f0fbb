"""Files at a local path or any fsspec URL, handled alike by both sides: the one way every
published file is written (`atomic_write`: a crash leaves the old version or the new one, never
half of one), a file's sha256 as the manifest records it and the trainer checks it, joining and
telling local from remote, and `redact`, which keeps credentials out of everything written.
Imports fsspec only.
"""

import contextlib
import hashlib
import json
import os
import re
import uuid

import fsspec

# --- Credentials never recorded ----------------------------------------------------------------
# Credentials come from the environment or the cloud SDKs' own files. A URL can still carry
# some, as `scheme://user:password@host/...` or a presigned query (S3's X-Amz-Signature, GCS's
# X-Goog-Signature, Azure's sig): `redact` masks them in any text before it is written to a
# manifest, a rejects file, a lock record, a log line or an error message.
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'\"]+@")
_SECRET_QUERY = re.compile(
    r"([?&](?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential"
    r"|signature|sig|token|access_token|awsaccesskeyid|api_key|apikey|key)=)[^&\s#'\"]*", re.I)


def redact(text: str) -> str:
    """`text` with the credentials of any URL in it replaced by `***`."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def join(base: str, *parts: str) -> str:
    """`base/part/...` for a local path or any fsspec URL (os.path.join would break URLs on Windows)."""
    return "/".join([base.rstrip("/"), *parts])


def file_sha256(url: str, block: int = 1 << 22, progress=None) -> str:
    """sha256 of a file's bytes at any fsspec URL, streamed in 4 MiB blocks (never held whole):
    what the manifest records of each shard and the tokenizer, what the trainer checks.
    `progress(n)` is told each block's size. hashlib releases the GIL on large blocks, so
    threads hash files in parallel."""
    h = hashlib.sha256()
    with fsspec.open(url, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
            if progress:
                progress(len(chunk))
    return h.hexdigest()


# --- Writing published files ------------------------------------------------------------------
# On a local disk: a temporary file in the same directory, fsync, os.replace (atomic on POSIX
# within one filesystem), then fsync of the directory so the rename itself survives a power
# cut. On an object store (any non-local fsspec filesystem): one whole-object write, which the
# store commits entirely or not at all. Used for the manifest, the run's config.yaml,
# summary.json, metrics.jsonl, consolidated weights and the report's curve.


def is_local(fs) -> bool:
    """True for fsspec's local filesystem (protocol ("file", "local"))."""
    return "file" in fs.protocol or "local" in fs.protocol


def atomic_write(url: str, data: bytes) -> None:
    """Replace the file at `url` (a path or any fsspec URL) by `data`, atomically."""
    fs, path = fsspec.core.url_to_fs(url)
    if not is_local(fs):
        fs.pipe_file(path, data)
        return
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    # A dotted name: readers of the directory skip it; open(..., "x") keeps the umask's mode
    # (tempfile.mkstemp would leave the published file readable by its owner only).
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fd = os.open(directory, os.O_RDONLY)
    try:
        # Some filesystems (FUSE mounts) refuse fsync on a directory: the file is already
        # replaced, only the rename's durability across a power cut is left to them.
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def save_text(text: str, url: str) -> str:
    """`text` as UTF-8 at `url`, whole or not at all (atomic_write), whichever process writes it;
    returns `url` (a Beam step's output: the file it wrote)."""
    atomic_write(url, text.encode("utf-8"))
    return url


def save_json(value, url: str) -> str:
    """`value` as the JSON every staged file of the job uses (keys sorted, indent 1, UTF-8)."""
    return save_text(json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False), url)
