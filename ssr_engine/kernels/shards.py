"""Numba kernels for sharded indexes: matching two shards' sorted vocabularies (the global df reduction).

Arrays in, arrays out; read-only (memory-mapped) arrays are accepted.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def match_sorted(a, b):
    """Position in `b` of each value of `a`, or -1: one merge pass over two ascending arrays.

    Parameters
    ----------
    a : uint64 ndarray, shape (n,), strictly ascending (a shard's vocabulary)
    b : uint64 ndarray, shape (m,), strictly ascending

    Returns
    -------
    int64 ndarray, shape (n,)
    """
    out = np.full(a.shape[0], -1, dtype=np.int64)
    j = 0
    m = b.shape[0]
    for i in range(a.shape[0]):
        v = a[i]
        while j < m and b[j] < v:
            j += 1
        if j == m:
            break
        if b[j] == v:
            out[i] = j
    return out
