"""Giving a finished unit's memory back to the system, so a long-lived worker's resident size is
its largest unit, not the sum of the units it ran.

A DirectRunner or Dask worker runs one step after another (an item, then a pack group, then a
shard) in threads of a pool, and glibc's malloc keeps what a step freed in that thread's arena:
the numpy arrays and Python objects of a unit are mostly below glibc's mmap threshold (which
rises up to 32 MB as large blocks are freed), so they come from the heap and stay resident. An
SDK worker at 317 MB of XML (benchmarks/scale.py's input, resident size read before and after
each step) rose from 226 MB before its first item to ~500 MB before its first shard, with no
Arrow buffer alive and the earlier steps' data dropped, and the shard's own peak came on top. malloc_trim(0) returns the free pages
of every arena (glibc >= 2.8); elsewhere (musl, macOS) there is nothing to call and release does
nothing. Arrow's buffers come from jemalloc, which returns freed pages itself (pipeline/beam/job.py).
"""

import ctypes
import sys

_trim = None  # libc's malloc_trim once looked up; False where there is none


def release() -> None:
    """Return the freed memory of every malloc arena to the system (a few ms: call it after a
    unit of work, not per row)."""
    global _trim
    if _trim is None:
        _trim = False
        if sys.platform.startswith("linux"):
            try:
                _trim = ctypes.CDLL(None).malloc_trim
                _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):  # a libc without it (musl)
                _trim = False
    if _trim:
        _trim(0)
