"""Fixed-width bit packing: n unsigned values of `width` bits (1..63) in uint64 words, little-endian.

Value i occupies bits [i * width, (i + 1) * width) of the word array, so it may straddle two
words; the array carries one spare word at its end so that a read never goes past it. Used for
the signal string codes (`kernels.strings`). `get32`/`pack32`: the same layout in uint32 words for
widths 1..32, read as one 64-bit pair of adjacent words.

A column is how the kernels take a uint32 array that may be packed: a plain integer array (the
values as they are), or `col = (words, width)`, width 1..32 packed by `pack32`, or `PLAIN` (0)
the words are the values. `at`, `contains` and `gather` are its only readers: the forward rows
(`kernels.forward`, always a pair) and the postings (`Index.postings`: the plain array of formats
2-5) are columns. The reader is chosen by the column's type when a kernel compiles, not per read.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types

_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
_W64 = np.uint64(64)
_W32 = np.uint64(32)
PLAIN = 0  # a column's width when its words are the values themselves


def width_for(n: int) -> int:
    """Bits of one packed value of a column whose values are 0..n-1."""
    return max(1, int(n - 1).bit_length())


def byte_width_for(n: int) -> int:
    """`width_for(n)` rounded up to whole bytes (8, 16 or 24), or PLAIN where that is 32 bits."""
    w = (width_for(n) + 7) // 8 * 8
    return PLAIN if w >= 32 else w


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


def at(col, p):
    """Value p (int64) of the column col: a plain integer array, or (words, width) (width PLAIN: the
    words are the values; else packed by `pack32`). Kernels call it; Numba picks the reader by col's
    type (`_at`), so a plain array costs exactly the load it always did, with no width test."""
    if isinstance(col, tuple):
        words, width = col
        if words.dtype == np.uint8:
            return int.from_bytes(words[p * (width >> 3): (p + 1) * (width >> 3)].tobytes(), "little")
        return int(words[p]) if width == PLAIN else int(get32(words, width, p))
    return int(col[p])


@nb.extending.intrinsic
def _load_u32(typingctx, data, byte):
    """The uint32 at byte offset `byte` of a uint8 array's data, whatever its alignment: one load."""

    def codegen(context, builder, signature, args):
        ptr = context.make_array(signature.args[0])(context, builder, args[0]).data
        u32p = context.get_value_type(types.uint32).as_pointer()
        return builder.load(builder.bitcast(builder.gep(ptr, [args[1]]), u32p), align=1)

    return types.uint32(data, byte), codegen


@nb.extending.overload(at, inline="always")
def _at(col, p):
    if isinstance(col, types.Array):
        return lambda col, p: np.int64(col[p])
    if isinstance(col[0], types.Array) and col[0].dtype == types.uint8:
        def bytes_at(col, p):  # whole-byte widths (8, 16, 24): the spare word keeps the 4-byte load in range
            data, width = col
            return np.int64(_load_u32(data, p * (width >> 3))) & ((np.int64(1) << width) - 1)

        return bytes_at

    def tuple_at(col, p):
        words, width = col
        if width == PLAIN:
            return np.int64(words[p])
        return get32(words, width, p)

    return tuple_at


@nb.njit(cache=True, nogil=True, inline="always")
def contains(col, lo, hi, v):
    """Whether positions lo..hi-1 of col (ascending values) hold v: binary search."""
    while lo < hi:
        mid = (lo + hi) >> 1
        x = at(col, mid)
        if x < v:
            lo = mid + 1
        elif x > v:
            hi = mid
        else:
            return True
    return False


@nb.njit(cache=True, nogil=True)
def _gather(col, starts, lengths, out):
    o = 0
    for i in range(starts.shape[0]):
        for p in range(starts[i], starts[i] + lengths[i]):
            out[o] = at(col, p)
            o += 1


def gather(col, starts, lengths) -> np.ndarray:
    """int64: the values at positions starts[i]..starts[i] + lengths[i] - 1 of col, one range after another."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.empty(int(lengths.sum()), dtype=np.int64)
    _gather(col, starts, lengths, out)
    return out
