"""Byte spans: the comparisons and gathers every kernel uses on (data uint8, offsets int64) strings.

A span is data[a:b]; a set of spans is (data, offsets) with span i = data[offsets[i]:offsets[i + 1]].

Numba's cache keys a compiled kernel on its own file only: a kernel elsewhere that inlines a function of
this module keeps its cached copy until its own file changes (or the cache is cleared).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types

LITTLE = np.little_endian  # `span_equal`'s masked load keeps a span's bytes as the word's low ones


@nb.extending.intrinsic
def load_u64(typingctx, data, byte):
    """The uint64 (native byte order) at byte offset `byte` of a contiguous uint8 array, whatever its alignment:
    one load (the caller keeps byte + 8 within the array)."""
    if not (isinstance(data, types.Array) and data.dtype == types.uint8 and data.layout == "C"):
        return None

    def codegen(context, builder, signature, args):
        ptr = context.make_array(signature.args[0])(context, builder, args[0]).data
        u64p = context.get_value_type(types.uint64).as_pointer()
        return builder.load(builder.bitcast(builder.gep(ptr, [args[1]]), u64p), align=1)

    return types.uint64(data, byte), codegen


@nb.extending.intrinsic
def store_u64(typingctx, data, byte, value):
    """Write the uint64 `value` (native byte order) at byte offset `byte` of a contiguous uint8 array, whatever its
    alignment: one store (the caller keeps byte + 8 within the array)."""
    if not (isinstance(data, types.Array) and data.dtype == types.uint8 and data.layout == "C"):
        return None

    def codegen(context, builder, signature, args):
        ptr = context.make_array(signature.args[0])(context, builder, args[0]).data
        u64p = context.get_value_type(types.uint64).as_pointer()
        word = context.cast(builder, args[2], signature.args[2], types.uint64)
        builder.store(word, builder.bitcast(builder.gep(ptr, [args[1]]), u64p), align=1)
        return context.get_dummy_value()

    return types.none(data, byte, value), codegen


@nb.njit(cache=True, nogil=True, inline="always")
def span_equal(a_data, a0, a1, b_data, b0, b1):
    """a_data[a0:a1] == b_data[b0:b1], byte for byte.

    Compared eight bytes a load (`load_u64`): a span of up to 8 bytes in one masked load when 8 bytes
    from its start lie inside both arrays, a longer one word by word, its last word overlapping the one
    before. A byte loop mispredicted its exit on every span: 3x slower on the build's collision check."""
    n = a1 - a0
    if n != b1 - b0:
        return False
    if n <= 8:
        if LITTLE and n > 0 and a0 + 8 <= a_data.shape[0] and b0 + 8 <= b_data.shape[0]:
            low = ~np.uint64(0) >> np.uint64(64 - 8 * n)  # the span's bytes (little-endian: the low ones)
            return ((load_u64(a_data, a0) ^ load_u64(b_data, b0)) & low) == 0
        for i in range(n):
            if a_data[a0 + i] != b_data[b0 + i]:
                return False
        return True
    i = 0
    while i + 8 < n:
        if load_u64(a_data, a0 + i) != load_u64(b_data, b0 + i):
            return False
        i += 8
    return load_u64(a_data, a1 - 8) == load_u64(b_data, b1 - 8)


@nb.njit(cache=True, nogil=True, inline="always")
def span_compare(a_data, a0, n1, b_data, b0, n2):
    """-1, 0 or 1 as a_data[a0:a0 + n1] sorts before, equal to or after b_data[b0:b0 + n2] (byte order)."""
    m = n1 if n1 < n2 else n2
    for i in range(m):
        a = a_data[a0 + i]
        b = b_data[b0 + i]
        if a != b:
            return -1 if a < b else 1
    if n1 == n2:
        return 0
    return -1 if n1 < n2 else 1


@nb.njit(cache=True, nogil=True)
def spans_equal(a_data, a_offsets, a_index, b_data, b_offsets, b_index):
    """bool[n]: out[i] = (a span a_index[i] == b span b_index[i])."""
    n = a_index.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        a, b = a_index[i], b_index[i]
        out[i] = span_equal(a_data, a_offsets[a], a_offsets[a + 1], b_data, b_offsets[b], b_offsets[b + 1])
    return out


@nb.njit(cache=True, nogil=True, inline="always")
def picked_offsets(offsets, picks):
    """int64[m + 1]: the offsets of the spans `picks` of `offsets` laid end to end (`gather_spans`' layout)."""
    m = picks.shape[0]
    out_off = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        p = picks[i]
        out_off[i + 1] = out_off[i] + offsets[p + 1] - offsets[p]
    return out_off


@nb.njit(cache=True, nogil=True)
def gather_spans(data, offsets, picks):
    """Concatenate the spans `picks` of (data, offsets): (new offsets int64[m + 1], new data uint8)."""
    m = picks.shape[0]
    out_off = picked_offsets(offsets, picks)
    out = np.empty(out_off[m], dtype=np.uint8)
    for i in range(m):
        p = picks[i]
        out[out_off[i] : out_off[i + 1]] = data[offsets[p] : offsets[p + 1]]
    return out_off, out
