"""The one bounded top-k heap of every search kernel, keyed by the full result order.

DESIGN.md section 2's order: score desc, matched signals desc, id rank asc. An entry is
(score float64, matches int32, key int64) with key = doc_rank[doc] << 32 | doc (`doc_key`):
ranks are distinct, so comparing keys compares id ranks without reading doc_rank again
during the many tie comparisons, and `compact` takes the document back out.

Heaps live in regions of flat arrays (one region per query, or per query and thread), as
`heap_arrays` allocates them: region `base:base + cap` of (scores, matches, keys). The root
of a heap is its WORST entry, so once a heap is full a candidate is rejected with one
comparison (`rejects`, which needs no key: callers skip the doc_rank read for most candidates).
In pynndescent's manner the operations are plain jitted functions over those arrays:

    size = heap_push(hs, hm, hk, base, size, cap, score, matches, key)   # offer one entry
    deheap_sort(hs, hm, hk, base, size)                                  # rank order, best first
    offsets, docs, scores, matches = compact(region_offsets, sizes, hs, hm, hk)

Keys need doc ids and ranks below 2**31 (`check_key_range`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

_DOC_MASK = 0xFFFFFFFF


def check_key_range(n_docs: int) -> None:
    """Refuse collections whose ids would not fit a rank-and-doc key."""
    if n_docs >= 1 << 31:
        raise ValueError(f"{n_docs} documents: the kernels' rank-and-doc keys need fewer than 2**31")


@nb.njit(cache=True, nogil=True)
def heap_arrays(total):
    """Uninitialised (scores float64[total], matches int32[total], keys int64[total]) for heap regions."""
    return np.empty(total, dtype=np.float64), np.empty(total, dtype=np.int32), np.empty(total, dtype=np.int64)


@nb.njit(cache=True, nogil=True, inline="always")
def doc_key(rank, doc):
    """The int64 key of a document: its id rank in the high half, its internal id in the low half."""
    return (np.int64(rank) << 32) | np.int64(doc)


@nb.njit(cache=True, nogil=True, inline="always")
def ranks_after(s1, m1, k1, s2, m2, k2):
    """True when entry 1 comes after entry 2 in the result order."""
    if s1 != s2:
        return s1 < s2
    if m1 != m2:
        return m1 < m2
    return k1 > k2


@nb.njit(cache=True, nogil=True, inline="always")
def rejects(hs, hm, base, size, cap, s, m):
    """True when a full heap surely keeps out (s, m, any key): it ranks after the root on score
    or matches alone. Lets a caller skip computing the key of most candidates."""
    if size < cap:
        return False
    if cap == 0:
        return True
    r = hs[base]
    return s < r or (s == r and m < hm[base])


@nb.njit(cache=True, nogil=True)
def _sift_down(hs, hm, hk, base, i, n):
    while True:
        c = 2 * i + 1
        if c >= n:
            return
        r = c + 1
        if r < n and ranks_after(hs[base + r], hm[base + r], hk[base + r], hs[base + c], hm[base + c], hk[base + c]):
            c = r
        if not ranks_after(hs[base + c], hm[base + c], hk[base + c], hs[base + i], hm[base + i], hk[base + i]):
            return
        a, b = base + i, base + c
        hs[a], hs[b] = hs[b], hs[a]
        hm[a], hm[b] = hm[b], hm[a]
        hk[a], hk[b] = hk[b], hk[a]
        i = c


@nb.njit(cache=True, nogil=True)
def heap_push(hs, hm, hk, base, size, cap, s, m, key):
    """Offer (s, m, key) to the heap at [base, base + cap) holding `size` entries; returns the new size."""
    if size < cap:
        i = size
        while i > 0:
            p = (i - 1) >> 1
            if not ranks_after(s, m, key, hs[base + p], hm[base + p], hk[base + p]):
                break
            hs[base + i] = hs[base + p]
            hm[base + i] = hm[base + p]
            hk[base + i] = hk[base + p]
            i = p
        hs[base + i] = s
        hm[base + i] = m
        hk[base + i] = key
        return size + 1
    if cap > 0 and ranks_after(hs[base], hm[base], hk[base], s, m, key):
        hs[base] = s
        hm[base] = m
        hk[base] = key
        _sift_down(hs, hm, hk, base, 0, size)
    return size


@nb.njit(cache=True, nogil=True)
def deheap_sort(hs, hm, hk, base, size):
    """Turn the heap at [base, base + size) into rank order, best first (the worst moves to the end first)."""
    for last in range(size - 1, 0, -1):
        a, b = base, base + last
        hs[a], hs[b] = hs[b], hs[a]
        hm[a], hm[b] = hm[b], hm[a]
        hk[a], hk[b] = hk[b], hk[a]
        _sift_down(hs, hm, hk, base, 0, last)


@nb.njit(cache=True, nogil=True)
def compact(region_offsets, sizes, hs, hm, hk):
    """The flat result of sorted heaps: region q = [region_offsets[q], + sizes[q]).

    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32): query q owns
    rows offsets[q]:offsets[q + 1]; docs are the keys' low halves.
    """
    nq = sizes.shape[0]
    offsets = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        offsets[q + 1] = offsets[q] + sizes[q]
    n = offsets[nq]
    out_d = np.empty(n, dtype=np.int64)
    out_s = np.empty(n, dtype=np.float64)
    out_m = np.empty(n, dtype=np.int32)
    for q in range(nq):
        src = region_offsets[q]
        dst = offsets[q]
        for i in range(sizes[q]):
            out_d[dst + i] = hk[src + i] & _DOC_MASK
            out_s[dst + i] = hs[src + i]
            out_m[dst + i] = hm[src + i]
    return offsets, out_d, out_s, out_m


@nb.njit(cache=True, nogil=True)
def compact_failed(region_offsets, sizes, hs, hm, hk):
    """`compact`, after counting the queries a kernel abandoned (size < 0: corrupt postings) and
    emptying them. Returns (offsets, docs, scores, matches, abandoned)."""
    bad = 0
    for q in range(sizes.shape[0]):
        if sizes[q] < 0:
            sizes[q] = 0
            bad += 1
    offsets, out_d, out_s, out_m = compact(region_offsets, sizes, hs, hm, hk)
    return offsets, out_d, out_s, out_m, bad
