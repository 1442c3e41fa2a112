"""Numba kernel: merge the ranked results of several parts of one collection by the full key.

A part (a segment of a live index, a shard) is searched on its own with the collection's global
weights and returns, per query, its exact local top-k in rank order. The global top-k is then a
k-way merge of those lists under the full order of DESIGN.md section 2:

    score desc, then matched signals desc (BM25: distinct query terms), then external id asc

where ids compare as integers when every live id of the collection is a base-10 integer (equal
integers, "7" and "007", by their strings) and as strings (code point order) otherwise. Ids arrive
as UCS-4 code units, zero-padded rows of uint32[n, w] (a NumPy `<U{w}` array viewed as uint32),
so both orders are decided on the code units themselves: no Python str per candidate.

An id containing U+0000 is not supported (NumPy str arrays cannot hold a trailing one either).
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True, inline="always")
def _length(codes, i):
    n = codes.shape[1]
    while n > 0 and codes[i, n - 1] == 0:
        n -= 1
    return n


@nb.njit(cache=True, nogil=True)
def id_compare(codes, i, j, integer):
    """-1, 0 or 1 as the id in row i sorts before, equal to or after the id in row j."""
    li = _length(codes, i)
    lj = _length(codes, j)
    if integer:
        neg_i = li > 0 and codes[i, 0] == 45  # "-"
        neg_j = lj > 0 and codes[j, 0] == 45
        si = 1 if neg_i else 0
        sj = 1 if neg_j else 0
        while si < li and codes[i, si] == 48:  # leading "0"s do not change the value
            si += 1
        while sj < lj and codes[j, sj] == 48:
            sj += 1
        mi = li - si
        mj = lj - sj
        neg_i = neg_i and mi > 0  # "-0" is zero
        neg_j = neg_j and mj > 0
        if neg_i != neg_j:
            return -1 if neg_i else 1
        c = 0
        if mi != mj:
            c = -1 if mi < mj else 1
        else:
            for p in range(mi):
                a = codes[i, si + p]
                b = codes[j, sj + p]
                if a != b:
                    c = -1 if a < b else 1
                    break
        if c != 0:
            return -c if neg_i else c
        # equal values: by their strings, as scoring.id_order does
    for p in range(min(li, lj)):
        a = codes[i, p]
        b = codes[j, p]
        if a != b:
            return -1 if a < b else 1
    if li != lj:
        return -1 if li < lj else 1
    return 0


@nb.njit(cache=True, nogil=True, inline="always")
def _before(r1, r2, scores, matches, codes, integer):
    """True when row r1 ranks before row r2."""
    if scores[r1] != scores[r2]:
        return scores[r1] > scores[r2]
    if matches[r1] != matches[r2]:
        return matches[r1] > matches[r2]
    return id_compare(codes, r1, r2, integer) < 0


@nb.njit(cache=True, parallel=True)
def _merge(offsets, scores, matches, codes, k, integer, out_offsets, out_rows):
    nq = offsets.shape[0]
    n_parts = offsets.shape[1] - 1
    for q in nb.prange(nq):
        heads = offsets[q, :n_parts].copy()
        dst = out_offsets[q]
        for _ in range(out_offsets[q + 1] - out_offsets[q]):
            best = -1
            for s in range(n_parts):
                if heads[s] < offsets[q, s + 1]:
                    if best < 0 or _before(heads[s], heads[best], scores, matches, codes, integer):
                        best = s
            out_rows[dst] = heads[best]
            heads[best] += 1
            dst += 1


def merge_ranked(offsets, scores, matches, codes, k, integer=False):
    """Merge per-part ranked lists into each query's global top-k.

    offsets int64[Q, S + 1]: rows of query q from part s are offsets[q, s]:offsets[q, s + 1], each
    part's rows already in rank order (parts may hold no rows); scores float64[n], matches int32[n],
    codes uint32[n, w] (ids as zero-padded UCS-4). k <= 0 keeps every row.
    Returns (out_offsets int64[Q + 1], rows int64): the chosen rows of each query, best first.
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    counts = offsets[:, -1] - offsets[:, 0]
    if k > 0:
        counts = np.minimum(counts, k)
    out_offsets = np.zeros(offsets.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out_offsets[1:])
    rows = np.empty(int(out_offsets[-1]), dtype=np.int64)
    if codes.ndim != 2 or codes.shape[1] == 0:
        codes = np.zeros((max(scores.shape[0], 1), 1), dtype=np.uint32)
    _merge(offsets, np.asarray(scores, dtype=np.float64), np.asarray(matches, dtype=np.int32),
           np.ascontiguousarray(codes, dtype=np.uint32), np.int64(k), bool(integer),
           out_offsets, rows)
    return out_offsets, rows
