"""The shard contract, schema version 2: with pipeline/manifest.py (the manifest's record) and
pipeline/rows.py (the rules every row obeys), the only modules `training/` may import from `pipeline/`.

One Parquet row (zstd) per example. Positions are absolute indices into `codepoints`
(position 0 is CLS). Data, constants, the Arrow schema and a few small functions; it imports
pyarrow, numpy and fsspec only, so the training side can read it without Beam. It also holds the one
way every published file is written, by both sides (`atomic_write`): a crash leaves the old
version or the new one, never half of one, and the one counter-based random number
generator both sides draw from (`splitmix64`).

Special codepoints come from CANINE's private-use assignments (docs/canine.md "Input",
google-research/language canine/special_codepoints.py).
"""

import contextlib
import hashlib
import os
import re
import uuid

import fsspec
import numpy as np
import pyarrow as pa

# 2: the output's side files are named with a leading underscore (below); the rows are as in 1.
SCHEMA_VERSION = 2

# --- Special codepoints (private use area; PAD is 0) ---------------------------------
PAD = 0
CLS = 0xE000
SEP = 0xE001
BOS = 0xE002
MASK = 0xE003
RESERVED = 0xE004
# Any input character in this set could be confused with a special codepoint, so the
# cleaner replaces it with REPLACEMENT_CHARACTER and counts it (pipeline/clean.py).
ALIASED_RANGE = (0xE000, 0xE0FF)  # inclusive, plus U+0000
REPLACEMENT_CHARACTER = 0xFFFD

# --- Masking plans (paper §3.2, §4.1.3) ------------------------------------------------
MASK_RATE = 0.15  # of whitespace spans (CANINE-C) or subwords (CANINE-S)
MAX_CHAR_PREDICTIONS = 320  # CANINE-C: at most 320 predicted characters per example
MAX_SUBWORD_PREDICTIONS = 80  # CANINE-S: at most 80 predicted subwords per example
# CANINE-S per-span action, stored in `subword_actions`: 80% / 10% / 10%.
ACTION_MASK = 0
ACTION_RANDOM = 1  # replaced by a random vocabulary subword of the same length in characters
ACTION_KEEP = 2
# BERT's split of the chosen subwords over those actions: the pipeline's default plan
# (pipeline/masks.py) and the synthetic shards (training/synthetic.py) both draw it.
SUBWORD_ACTION_SHARES = {ACTION_MASK: 0.8, ACTION_RANDOM: 0.1, ACTION_KEEP: 0.1}
# `sop_label`
SOP_IN_ORDER = 0
SOP_SWAPPED = 1
SOP_NO_PAIR = -1

DEFAULT_SEQ_LEN = 2048

# --- The output directory ----------------------------------------------------------------
# Only the split folders hold Parquet. Every other published name starts with "_": Parquet
# readers (pyarrow.dataset, pandas, Spark, HF datasets) skip names that start with "_" or ".",
# as they skip Spark's _SUCCESS and _metadata, so reading the output's root as a Parquet
# dataset gives exactly the manifest's rows. Run-time files (the lock, staging)
# start with ".".
SPLITS = ("train", "validation")
MANIFEST = "_manifest.json"
TOKENIZER = "_tokenizer.json"
REJECTS = "_rejects"
LOCK = ".canine.lock"  # held while a run writes the output (pipeline/lock.py); gone after it
STAGING_PREFIX = ".staging-"  # + config sha: a run's work in progress, removed when it publishes
LEGACY_MANIFEST = "manifest.json"  # schema 1's name, recognised only to say the output is too old

# Per-language accounting in the manifest. Identity: pages_read = sum(PAGE_OUTCOMES).
PAGE_OUTCOMES = ("redirects", "non_article", "parse_errors", "empty", "kept")
LANGUAGE_KEYS = ("pages_read",) + PAGE_OUTCOMES + (
    "examples",
    "sampling_weight",
    "replaced_characters",
)
# What kept pages lost in cleaning, per reason (pipeline/clean.py), as each language's
# `dropped` in the manifest: constructs, not pages, so they are outside the identity above.
# references: <ref> citations and reference lists; templates: templates dropped without words
# (infoboxes apart); images: File/Image links with their captions; end_matter and
# empty_sections: headings dropped, with what was under them.
CONSTRUCT_DROPS = ("tables", "infoboxes", "galleries", "images", "references", "templates", "end_matter",
                   "empty_sections")

_i32 = pa.list_(pa.int32())
SCHEMA = pa.schema(
    [
        pa.field("example_id", pa.string(), nullable=False),  # unique across the output
        pa.field("lang", pa.string(), nullable=False),
        pa.field("page_ids", pa.list_(pa.int64()), nullable=False),  # pages whose text is in it
        pa.field("codepoints", _i32, nullable=False),  # unmasked input: CLS A SEP [B SEP], no padding
        pa.field("segment_ids", pa.list_(pa.int8()), nullable=False),  # same length as codepoints
        pa.field("sop_label", pa.int8(), nullable=False),  # SOP_* above
        pa.field("char_mask_positions", _i32, nullable=False),  # sorted; whole whitespace spans
        pa.field("subword_starts", _i32, nullable=False),  # absolute start of each chosen subword
        pa.field("subword_lengths", _i32, nullable=False),  # its length in characters
        pa.field("subword_ids", _i32, nullable=False),  # its id in tokenizer.json's vocabulary
        pa.field("subword_predict_offsets", _i32, nullable=False),  # offset inside the span, < length
        pa.field("subword_actions", pa.list_(pa.int8()), nullable=False),  # ACTION_* above
        # Codepoints of the replacement subwords, concatenated in order of the ACTION_RANDOM spans;
        # each replacement has exactly its span's length.
        pa.field("subword_replacements", _i32, nullable=False),
    ],
    metadata={b"canine.schema_version": str(SCHEMA_VERSION).encode()},
)
COLUMNS = tuple(SCHEMA.names)


def is_aliased(cp):
    """True if an input codepoint would alias PAD or a special codepoint; elementwise on an array."""
    return (cp == PAD) | ((ALIASED_RANGE[0] <= cp) & (cp <= ALIASED_RANGE[1]))


# --- Counter-based random numbers ------------------------------------------------------------
# Every random decision about a row (the pipeline's mask plans, the batch builder's identity
# spans, order and noise) is a pure function of named integers, so it is the same in any process
# and any batch: the SplitMix64 finalizer (Steele, Lea & Flood 2014) of a mix of them.
GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: SplitMix64's increment
MIX1, MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function of uint64 states (uint64 arithmetic wraps mod 2^64, as intended)."""
    x = (x ^ (x >> np.uint64(30))) * MIX1
    x = (x ^ (x >> np.uint64(27))) * MIX2
    return x ^ (x >> np.uint64(31))


def unit_floats(bits: np.ndarray) -> np.ndarray:
    """uint64 random bits -> float64 uniform in [0, 1): the top 53 bits."""
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


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


def file_sha256(url: str, block: int = 1 << 22) -> str:
    """sha256 of a file's bytes at any fsspec URL, streamed in 4 MiB blocks (never held whole):
    what the manifest records of each shard and the tokenizer, what the trainer checks."""
    h = hashlib.sha256()
    with fsspec.open(url, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
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
