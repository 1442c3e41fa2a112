"""Fixed-width bit packing: n unsigned values of `width` bits (1..63) in uint64 words, little-endian.

Value i occupies bits [i * width, (i + 1) * width) of the word array, so it may straddle two
words; the array carries one spare word at its end so that a read never goes past it. Used for
the signal string codes (`kernels.strings`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
_W64 = np.uint64(64)


def n_words(n: int, width: int) -> int:
    """Words holding n values of `width` bits, the spare word included."""
    return (n * width + 63) // 64 + 1


@nb.njit(cache=True, nogil=True, inline="always")
def get(words, width, i):
    """Value i (uint64) of `words` (uint64[n_words]), packed at `width` bits (1..63)."""
    w = np.uint64(width)
    bit = np.uint64(i) * w
    at = np.int64(bit >> _SIX)
    off = bit & _LOW6
    v = words[at] >> off
    if off + w > _W64:
        v |= words[at + 1] << (_W64 - off)
    return v & ((_ONE << w) - _ONE)


@nb.njit(cache=True, nogil=True)
def pack(values, width):
    """uint64[n_words(n, width)] holding values (uint64[n], each < 2**width) at `width` bits (1..63)."""
    n = values.shape[0]
    w = np.uint64(width)
    words = np.zeros((n * width + 63) // 64 + 1, dtype=np.uint64)
    for i in range(n):
        bit = np.uint64(i) * w
        at = np.int64(bit >> _SIX)
        off = bit & _LOW6
        v = values[i]
        words[at] |= v << off
        if off + w > _W64:
            words[at + 1] |= v >> (_W64 - off)
    return words
