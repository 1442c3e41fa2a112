"""Byte spans: the comparisons and gathers every kernel uses on (data uint8, offsets int64) strings.

A span is data[a:b]; a set of spans is (data, offsets) with span i = data[offsets[i]:offsets[i + 1]].
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True, inline="always")
def span_equal(a_data, a0, a1, b_data, b0, b1):
    """a_data[a0:a1] == b_data[b0:b1], byte for byte."""
    if a1 - a0 != b1 - b0:
        return False
    for i in range(a1 - a0):
        if a_data[a0 + i] != b_data[b0 + i]:
            return False
    return True


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
