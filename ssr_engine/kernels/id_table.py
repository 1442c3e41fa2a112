"""External ids out of a fixed-width id table, for `format.Index.ids_of` (no search kernel involved)."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, parallel=True)
def gather_ids_ucs4(table, docs):
    """Rows `docs` of a fixed-width ASCII id table (uint8[N, w]) widened to UCS-4 code units.

    The result (uint32[len(docs), w]) viewed as `<U{w}` is a NumPy str array of the ids: one
    parallel pass, where building Python str objects one by one dominated batch search time.
    """
    n = docs.shape[0]
    w = table.shape[1]
    out = np.empty((n, w), dtype=np.uint32)
    for i in nb.prange(n):
        d = docs[i]
        for j in range(w):
            out[i, j] = table[d, j]
    return out
