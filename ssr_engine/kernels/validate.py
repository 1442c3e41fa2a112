"""Structural checks of index arrays: single passes, no temporaries, parallel over ranges.

Each returns the position of the first defect found (in its range order) or -1 when sound. The
callers (`ssr_engine.validate`) turn a position into an error naming the file. These run on
memory-mapped arrays at open (the O(N) and O(V) checks) and under `verify` (the O(P) ones).
"""

from __future__ import annotations

import numba as nb
import numpy as np

_RANGE = 1 << 20  # entries per parallel work item


@nb.njit(cache=True, parallel=True)
def monotone(a):
    """First i with a[i + 1] < a[i] (a: int64[n]), or -1."""
    n = a.shape[0]
    n_ranges = (n + _RANGE - 1) // _RANGE
    first = np.full(max(n_ranges, 1), -1, dtype=np.int64)
    for r in nb.prange(n_ranges):
        lo = r * _RANGE
        hi = min(lo + _RANGE, n - 1)
        for i in range(lo, hi):
            if a[i + 1] < a[i]:
                first[r] = i
                break
    for r in range(n_ranges):
        if first[r] >= 0:
            return first[r]
    return -1


@nb.njit(cache=True, parallel=True)
def strictly_increasing(a):
    """First i with a[i + 1] <= a[i] (a: uint64[n], the vocabulary), or -1."""
    n = a.shape[0]
    n_ranges = (n + _RANGE - 1) // _RANGE
    first = np.full(max(n_ranges, 1), -1, dtype=np.int64)
    for r in nb.prange(n_ranges):
        lo = r * _RANGE
        hi = min(lo + _RANGE, n - 1)
        for i in range(lo, hi):
            if a[i + 1] <= a[i]:
                first[r] = i
                break
    for r in range(n_ranges):
        if first[r] >= 0:
            return first[r]
    return -1


@nb.njit(cache=True)
def permutation(a):
    """First i at which a (uint32[n]) stops being a permutation of 0..n-1 (a value >= n or a repeat), or -1."""
    n = a.shape[0]
    seen = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        v = np.int64(a[i])
        if v >= n or seen[v]:
            return i
        seen[v] = True
    return -1


@nb.njit(cache=True, parallel=True)
def rows_ascending_below(indptr, values, bound):
    """First row whose values are not strictly ascending or not all < bound, or -1.

    indptr int64[R + 1] (already checked monotone, from 0 to len(values)), values uint32[P].
    """
    n_rows = indptr.shape[0] - 1
    n_ranges = (n_rows + _RANGE - 1) // _RANGE
    first = np.full(max(n_ranges, 1), -1, dtype=np.int64)
    for r in nb.prange(n_ranges):
        lo = r * _RANGE
        hi = min(lo + _RANGE, n_rows)
        for row in range(lo, hi):
            prev = np.int64(-1)
            bad = False
            for p in range(indptr[row], indptr[row + 1]):
                v = np.int64(values[p])
                if v <= prev or v >= bound:
                    bad = True
                    break
                prev = v
            if bad:
                first[r] = row
                break
    for r in range(n_ranges):
        if first[r] >= 0:
            return first[r]
    return -1


@nb.njit(cache=True, parallel=True)
def first_zero(a):
    """First i with a[i] == 0 (a: uint32[n], term frequencies), or -1."""
    n = a.shape[0]
    n_ranges = (n + _RANGE - 1) // _RANGE
    first = np.full(max(n_ranges, 1), -1, dtype=np.int64)
    for r in nb.prange(n_ranges):
        lo = r * _RANGE
        hi = min(lo + _RANGE, n)
        for i in range(lo, hi):
            if a[i] == 0:
                first[r] = i
                break
    for r in range(n_ranges):
        if first[r] >= 0:
            return first[r]
    return -1
