"""Counter-based random numbers, the one generator both sides draw from.

Every random decision about a row (the pipeline's mask plans, pipeline/masks.py; the batch
builder's identity spans, order and noise, training/batch.py and training/noise.py) is a pure
function of named integers, so it is the same in any process and any batch: the SplitMix64
finalizer (Steele, Lea & Flood 2014) of a mix of them. Imports numpy only.
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
