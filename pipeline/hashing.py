"""Stable hashes of named values: the mix of the pipeline's per-page and per-example decisions.

Python's `hash()` is salted per process, so a DirectRunner with two workers would disagree
with itself. Every split, bucket, shard and sampling decision hashes its name and inputs with
these instead, which is what makes the output independent of worker count and runner. The
decisions themselves, with their names, are pipeline/seeds.py's; the one other caller is
pipeline/beam/itemcache.py, which names a cache file (a content address, not a decision).
"""

import hashlib

_SCALE = float(1 << 64)


def stable_int(*parts) -> int:
    """A 64-bit unsigned integer from the string forms of `parts` (blake2b, not salted)."""
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def stable_unit(*parts) -> float:
    """A number in [0, 1), uniform over inputs, from `parts`."""
    return stable_int(*parts) / _SCALE
