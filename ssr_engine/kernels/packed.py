"""Fixed-width bit packing: n unsigned values of `width` bits (1..63) in uint64 words, little-endian.

Value i occupies bits [i * width, (i + 1) * width) of the word array, so it may straddle two
words; the array carries one spare word at its end so that a read never goes past it. Used for
the signal string codes (`kernels.strings`). `get32`/`pack32`: the same layout in uint32 words for
widths 1..32 (the forward rows, `kernels.forward`), read as one 64-bit pair of adjacent words.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
_W64 = np.uint64(64)
_W32 = np.uint64(32)


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


def n_words32(n: int, width: int) -> int:
    """uint32 words holding n values of `width` bits, the spare word included."""
    return (n * width + 31) // 32 + 1


@nb.njit(cache=True, nogil=True, inline="always")
def get32(words, width, i):
    """Value i (int64) of `words` (uint32[n_words32]), packed at `width` bits (1..32): no branch, the
    two words under it read as one pair (the spare word keeps the last pair in range)."""
    bit = np.int64(i) * width
    at = bit >> 5
    pair = np.uint64(words[at]) | (np.uint64(words[at + 1]) << _W32)
    return np.int64((pair >> np.uint64(bit & 31)) & ((_ONE << np.uint64(width)) - _ONE))


@nb.njit(cache=True, nogil=True)
def pack32(values, width, spare=True):
    """uint32 words holding values (int[n], each in [0, 2**width)) at `width` bits (1..32), with the
    spare word (`spare`; without it, n * width must be a multiple of 32: a piece of a longer array)."""
    n = values.shape[0]
    full = (n * width + 31) // 32
    words = np.zeros(full + 1, dtype=np.uint64)  # built in 64-bit words' halves: one OR per straddle
    w = np.uint64(width)
    for i in range(n):
        bit = np.uint64(i) * w
        at = np.int64(bit >> _SIX)
        off = bit & _LOW6
        v = np.uint64(values[i])
        words[at] |= v << off
        if off + w > _W64:
            words[at + 1] |= v >> (_W64 - off)
    out = words.view(np.uint32)[: full + 1 if spare else full].copy()
    return out
