"""Candidates of a query over any CSR index: output region bounds and the exact pool size.

Queries arrive flat: `q_offsets` (int64[Q + 1]) into `q_terms` (term ids); `indptr`
(int64[V + 1]) and `docs` (the postings column, `packed`) are the inverted CSR. Used by the SSR and BM25
kernels and by every searcher's `pool_sizes`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lists import length, span
from .packed import at


@nb.njit(cache=True)
def region_offsets(q_offsets, q_terms, indptr, k):
    """int64[Q + 1]: offsets of each query's output region, min(k, sum of its terms' df) entries
    (k <= 0: no limit), an upper bound on its candidates."""
    nq = q_offsets.shape[0] - 1
    caps = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        total = np.int64(0)
        for j in range(q_offsets[q], q_offsets[q + 1]):
            t = q_terms[j]
            total += length(indptr, t)
        if k > 0 and total > k:
            total = k
        caps[q + 1] = caps[q] + total
    return caps


@nb.njit(cache=True, parallel=True)
def _union_sizes(q_offsets, q_terms, indptr, docs, n_docs, n_chunks, out):
    nq = q_offsets.shape[0] - 1
    for c in nb.prange(n_chunks):
        seen = np.zeros(n_docs, dtype=np.uint8)
        touched = np.empty(n_docs, dtype=np.int64)
        for q in range(c, nq, n_chunks):
            n = 0
            bad = False
            for j in range(q_offsets[q], q_offsets[q + 1]):
                t = q_terms[j]
                prev = np.int64(-1)
                lo, hi = span(indptr, t)
                for p in range(lo, hi):
                    d = at(docs, p)
                    if d >= n_docs or d <= prev:
                        bad = True  # corrupt postings_docs: flagged, never used as an index
                        continue
                    prev = d
                    if seen[d] == 0:
                        seen[d] = 1
                        touched[n] = d
                        n += 1
            out[q] = -1 if bad else n
            for i in range(n):
                seen[touched[i]] = 0


def union_sizes(q_offsets, q_terms, indptr, docs, n_docs, n_chunks=None):
    """int64[Q]: documents in the union of each query's postings, the candidate pool of any CSR
    index (SSR's documents with score > 0, BM25's documents with a query term)."""
    nq = len(q_offsets) - 1
    out = np.zeros(nq, dtype=np.int64)
    if nq:
        n_chunks = max(1, min(int(n_chunks or nb.get_num_threads()), nq))
        _union_sizes(np.asarray(q_offsets, dtype=np.int64), np.asarray(q_terms, dtype=np.int64), indptr, docs,
                     np.int64(n_docs), n_chunks, out)
        if out.min() < 0:
            raise CorruptIndexData("postings_docs.npy: a posting list is not strictly ascending or holds a "
                                   "document id >= N")
    return out


def cap_k(k, n_docs):
    """k as the kernels take it: 0 for every candidate; a k above N is N (same results, and it fits int64)."""
    return 0 if k is None or k <= 0 else min(int(k), max(int(n_docs), 1))


class CorruptIndexData(ValueError):
    """An index array that lies (found by a kernel's bounds guard); the caller names the index."""
