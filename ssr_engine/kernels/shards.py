"""Numba kernels for sharded indexes: matching two shards' sorted vocabularies (the global df reduction) and
merging a group's running top k with the next shard's rows (`merge_two`).

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


@nb.njit(cache=True, nogil=True, inline="always")
def _before(s1, m1, r1, s2, m2, r2):
    """(s1, m1, r1) ranks before (s2, m2, r2) by the full key: score desc, matches desc, id rank asc."""
    if s1 != s2:
        return s1 > s2
    if m1 != m2:
        return m1 > m2
    return r1 < r2


@nb.njit(cache=True, nogil=True)
def merge_two(a_off, a_docs, a_scores, a_matches, a_ranks, b_off, b_docs, b_scores, b_matches, b_ranks, k):
    """Two ranked lists of every query merged into its top k by the full key (a group's running top k and
    the next shard's rows: one pass, no concatenation).

    Parameters
    ----------
    a_off, b_off : int64 ndarray, shape (Q + 1,)
        Query q's rows of each list: a_off[q]:a_off[q + 1], best first.
    a_docs, a_scores, a_matches, a_ranks : int64, float64, int32, uint32 ndarrays, shape (a_off[Q],)
        Each row's document, score, matches and id rank (distinct across both lists); b's the same.
    k : int
        Rows kept per query (k <= 0: all).

    Returns
    -------
    (offsets int64 (Q + 1,), docs int64, scores float64, matches int32, ranks uint32), each query's rows
    best first.
    """
    nq = a_off.shape[0] - 1
    out = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        n = a_off[q + 1] - a_off[q] + b_off[q + 1] - b_off[q]
        out[q + 1] = out[q] + (min(n, k) if k > 0 else n)
    docs = np.empty(out[nq], dtype=np.int64)
    scores = np.empty(out[nq], dtype=np.float64)
    matches = np.empty(out[nq], dtype=np.int32)
    ranks = np.empty(out[nq], dtype=np.uint32)
    for q in range(nq):
        i, j, i_end, j_end = a_off[q], b_off[q], a_off[q + 1], b_off[q + 1]
        for dst in range(out[q], out[q + 1]):
            if j >= j_end or (i < i_end and _before(a_scores[i], a_matches[i], a_ranks[i], b_scores[j], b_matches[j],
                                                     b_ranks[j])):
                docs[dst], scores[dst], matches[dst], ranks[dst] = a_docs[i], a_scores[i], a_matches[i], a_ranks[i]
                i += 1
            else:
                docs[dst], scores[dst], matches[dst], ranks[dst] = b_docs[j], b_scores[j], b_matches[j], b_ranks[j]
                j += 1
    return out, docs, scores, matches, ranks
