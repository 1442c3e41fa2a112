"""External ids in and out of a fixed-width id table: `fixed_table` builds it (`ids.fixed_width_ids`),
the gathers read it for `format.Index.ids_of` (no search kernel involved)."""

from __future__ import annotations

import numba as nb
import numpy as np

# Below this many ids the gather runs on the calling thread alone: waking Numba's OpenMP team for a
# single query's ten ids cost 8 ms of CPU (20 ms wall under load) where the gather itself takes
# microseconds (benchmarks/RESULTS.md, "Search core v2": BM25's 8.00 ms single-query floor).
PARALLEL_FROM = 1 << 16


@nb.njit(cache=True, nogil=True)
def fixed_table(offsets, data, width):
    """Strings data[offsets[i]:offsets[i + 1]] (each at most `width` bytes) as rows of a zero-padded
    uint8[len(offsets) - 1, width] table. One pass: the NumPy scatter it replaces (row and column
    index arrays of 8 bytes per id byte) took 8 s and ~1.4 GiB of temporaries for 8.8M ids."""
    n = offsets.shape[0] - 1
    out = np.zeros((n, width), dtype=np.uint8)
    for i in range(n):
        a = offsets[i]
        for j in range(offsets[i + 1] - a):
            out[i, j] = data[a + j]
    return out


@nb.njit(cache=True, nogil=True, inline="always")
def _gather_row(table, docs, out, i):
    d = docs[i]
    for j in range(table.shape[1]):
        out[i, j] = table[d, j]


@nb.njit(cache=True, nogil=True)
def gather_rows(table, docs, out):
    """out[i] = table[docs[i]] widened to uint32 (UCS-4), for every i. Ids of at most 8 characters (MS MARCO's)
    are copied by a loop of constant length, unrolled: 11-14 ns an id against 16-35 for the loop of the
    table's width (1,000 ids a query at K=1000: ~6 µs of a query's ~130)."""
    w = table.shape[1]
    if w <= 8:
        for i in range(docs.shape[0]):
            d = docs[i]
            for j in range(8):
                if j < w:
                    out[i, j] = table[d, j]
    else:
        for i in range(docs.shape[0]):
            _gather_row(table, docs, out, i)


@nb.njit(cache=True, nogil=True)
def _gather_serial(table, docs):
    out = np.empty((docs.shape[0], table.shape[1]), dtype=np.uint32)
    gather_rows(table, docs, out)
    return out


@nb.njit(cache=True, parallel=True)
def _gather_parallel(table, docs):
    out = np.empty((docs.shape[0], table.shape[1]), dtype=np.uint32)
    for i in nb.prange(docs.shape[0]):
        _gather_row(table, docs, out, i)
    return out


def gather_ids_ucs4(table, docs):
    """Rows `docs` of a fixed-width ASCII id table (uint8[N, w]) widened to UCS-4 code units.

    The result (uint32[len(docs), w]) viewed as `<U{w}` is a NumPy str array of the ids: one pass
    (parallel for large batches on a caller allowed several Numba threads: a batch run on one thread
    gathers on that thread), where building Python str objects one by one dominated batch search time.
    """
    if docs.shape[0] < PARALLEL_FROM or nb.get_num_threads() == 1:
        return _gather_serial(table, docs)
    return _gather_parallel(table, docs)
