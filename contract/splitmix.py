"""SplitMix64 (Steele, Lea & Flood 2014): the mix of the counter-based random numbers of both sides.

A counter-based number is the SplitMix64 finalizer of integers that name it, so it is the same in
any process, batch or order. Both sides draw through it, each from its own seeds module, which
also says how its integers are combined into a state:
  * pipeline/seeds.py: the mask plans (CounterUniforms: an example's mask_key and a stream,
    then the index of the span or subword);
  * training/seeds.py: the batch builder's identity spans, prediction order and noise
    (batch_uniform: one sum of the build seed, example key, index and stream).
The two recipes differ; one recipe for both would change every mask plan or every batch, so they
stay. The sides' other decisions hash names instead (blake2b, crc32, numpy's SeedSequence: the
tables of the two seeds modules). pipeline/rows/wordspans.py takes GOLDEN for Fibonacci hashing in a
hash table, which draws nothing. Imports numpy only.
"""

import numpy as np

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
