"""Numba kernels for BM25 (Lucene's form, DESIGN.md section 5): arrays in, arrays out.

    score(q, d) = sum over query terms t of  w_t * tf / (tf + k1 * (1 - b + b * dl / avgdl))

with w_t = idf(t) times the number of times t occurs in the query (computed by the caller).
Queries arrive flat: `q_offsets` (int64[Q + 1]) into `q_terms` (term ids) and `q_weights`
(float64). Each document's contributions are added term-at-a-time in the given term order,
in float64. Order: score desc, then doc_rank asc. A candidate is a document containing at
least one query term (its score is > 0 because every idf is); only candidates are returned.

Results are flat: `(offsets int64[Q + 1], docs int64, scores float64, matches int32,
pool int64[Q])` where matches counts the distinct query terms a document contains and pool
is the number of candidates of each query before the top-k cut.

It imports only the shared SSR kernels (`kernels.region_offsets`); every kernel accepts read-only arrays.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .ssr import region_offsets


@nb.njit(cache=True, nogil=True, inline="always")
def _after(s1, d1, s2, d2, doc_rank):
    """True when (s1, d1) ranks after (s2, d2)."""
    if s1 != s2:
        return s1 < s2
    return doc_rank[d1] > doc_rank[d2]


@nb.njit(cache=True, nogil=True)
def _sift(hs, hd, lo, i, n, doc_rank):
    """Restore the heap hs/hd[lo:lo + n] below i; the root is the entry that ranks last."""
    while True:
        c = 2 * i + 1
        if c >= n:
            return
        if c + 1 < n and _after(hs[lo + c + 1], hd[lo + c + 1], hs[lo + c], hd[lo + c], doc_rank):
            c += 1
        if not _after(hs[lo + c], hd[lo + c], hs[lo + i], hd[lo + i], doc_rank):
            return
        hs[lo + i], hs[lo + c] = hs[lo + c], hs[lo + i]
        hd[lo + i], hd[lo + c] = hd[lo + c], hd[lo + i]
        i = c


@nb.njit(cache=True, nogil=True)
def _top_k(acc, touched, n_touched, doc_rank, hs, hd, lo, cap):
    """Keep the best `cap` touched documents in hs/hd[lo:], sorted best first; returns how many."""
    size = 0
    for i in range(n_touched):
        d = touched[i]
        s = acc[d]
        if size < cap:
            # sift up
            j = size
            while j > 0:
                p = (j - 1) >> 1
                if not _after(s, d, hs[lo + p], hd[lo + p], doc_rank):
                    break  # the new entry does not rank after its parent: heap order holds
                hs[lo + j] = hs[lo + p]
                hd[lo + j] = hd[lo + p]
                j = p
            hs[lo + j] = s
            hd[lo + j] = d
            size += 1
        elif _after(hs[lo], hd[lo], s, d, doc_rank):
            hs[lo] = s
            hd[lo] = d
            _sift(hs, hd, lo, 0, size, doc_rank)
    # heap sort: repeatedly move the last-ranked entry to the end
    for last in range(size - 1, 0, -1):
        hs[lo], hs[lo + last] = hs[lo + last], hs[lo]
        hd[lo], hd[lo + last] = hd[lo + last], hd[lo]
        _sift(hs, hd, lo, 0, last, doc_rank)
    return size


@nb.njit(cache=True, parallel=True)
def _bm25_batch(q_offsets, q_terms, q_weights, indptr, docs, tfs, doc_lengths, avgdl, k1, b, doc_rank,
                n_docs, caps, n_chunks, out_d, out_s, out_m, sizes, pool, acc_all, cnt_all):
    nq = q_offsets.shape[0] - 1
    for c in nb.prange(n_chunks):
        # per-thread accumulators (row c of the workspace), left zeroed after every query
        acc = acc_all[c]
        cnt = cnt_all[c]
        touched = np.empty(n_docs, dtype=np.int64)
        for q in range(c, nq, n_chunks):  # round robin: long and short queries spread evenly
            n_touched = 0
            for j in range(q_offsets[q], q_offsets[q + 1]):
                t = q_terms[j]
                w = q_weights[j]
                for p in range(indptr[t], indptr[t + 1]):
                    d = np.int64(docs[p])
                    tf = np.float64(tfs[p])
                    norm = k1 * ((1.0 - b) + b * np.float64(doc_lengths[d]) / avgdl)
                    if cnt[d] == 0:
                        touched[n_touched] = d
                        n_touched += 1
                    cnt[d] += 1
                    acc[d] += w * (tf / (norm + tf))
            pool[q] = n_touched
            lo = caps[q]
            size = _top_k(acc, touched, n_touched, doc_rank, out_s, out_d, lo, caps[q + 1] - lo)
            sizes[q] = size
            for i in range(size):
                out_m[lo + i] = cnt[out_d[lo + i]]
            for i in range(n_touched):
                d = touched[i]
                acc[d] = 0.0
                cnt[d] = 0


@nb.njit(cache=True)
def _compact(caps, sizes, out_d, out_s, out_m):
    nq = sizes.shape[0]
    offsets = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        offsets[q + 1] = offsets[q] + sizes[q]
    d = np.empty(offsets[nq], dtype=np.int64)
    s = np.empty(offsets[nq], dtype=np.float64)
    m = np.empty(offsets[nq], dtype=np.int32)
    for q in range(nq):
        for i in range(sizes[q]):
            d[offsets[q] + i] = out_d[caps[q] + i]
            s[offsets[q] + i] = out_s[caps[q] + i]
            m[offsets[q] + i] = out_m[caps[q] + i]
    return offsets, d, s, m


@nb.njit(cache=True, parallel=True)
def _union_sizes(q_offsets, q_terms, indptr, docs, n_docs, n_chunks, out):
    nq = q_offsets.shape[0] - 1
    for c in nb.prange(n_chunks):
        seen = np.zeros(n_docs, dtype=np.uint8)
        touched = np.empty(n_docs, dtype=np.int64)
        for q in range(c, nq, n_chunks):
            n = 0
            for j in range(q_offsets[q], q_offsets[q + 1]):
                t = q_terms[j]
                for p in range(indptr[t], indptr[t + 1]):
                    d = np.int64(docs[p])
                    if seen[d] == 0:
                        seen[d] = 1
                        touched[n] = d
                        n += 1
            out[q] = n
            for i in range(n):
                seen[touched[i]] = 0


def union_sizes(q_offsets, q_terms, indptr, docs, n_docs, n_chunks=None):
    """Documents in the union of each query's postings: the candidate pool of any CSR index
    (SSR's documents with score > 0, BM25's documents with a query term). int64[Q]."""
    nq = len(q_offsets) - 1
    out = np.zeros(nq, dtype=np.int64)
    if nq:
        n_chunks = max(1, min(int(n_chunks or nb.get_num_threads()), nq))
        _union_sizes(np.asarray(q_offsets, dtype=np.int64), np.asarray(q_terms, dtype=np.int64), indptr, docs,
                     np.int64(n_docs), n_chunks, out)
    return out


def bm25_workspace(n_chunks, n_docs):
    """Zeroed per-thread accumulators (float64 and int32 [n_chunks, n_docs]) for `bm25_batch`.

    Kept by a searcher across calls: allocating and first-touching N-sized arrays on every call
    dominated single-query latency (~50 ms at 8.8M documents).
    """
    return np.zeros((n_chunks, n_docs), dtype=np.float64), np.zeros((n_chunks, n_docs), dtype=np.int32)


def bm25_batch(q_offsets, q_terms, q_weights, indptr, docs, tfs, doc_lengths, avgdl, k1, b, doc_rank, k,
               n_chunks=None, workspace=None):
    """Top-k BM25 of a batch of queries (k <= 0: every candidate). See the module docstring.

    `workspace` (from `bm25_workspace`, at least n_chunks rows) is used and left zeroed; without
    one, a fresh one is allocated for the call.
    """
    n_docs = doc_rank.shape[0]
    nq = q_offsets.shape[0] - 1
    caps = region_offsets(q_offsets, q_terms, indptr, np.int64(k))
    total = int(caps[-1])
    out_d = np.empty(total, dtype=np.int64)
    out_s = np.empty(total, dtype=np.float64)
    out_m = np.empty(total, dtype=np.int32)
    sizes = np.zeros(nq, dtype=np.int64)
    pool = np.zeros(nq, dtype=np.int64)
    if nq:
        if n_chunks is None:
            n_chunks = nb.get_num_threads()
        n_chunks = max(1, min(int(n_chunks), nq))
        if workspace is None or workspace[0].shape[0] < n_chunks or workspace[0].shape[1] != n_docs:
            workspace = bm25_workspace(n_chunks, n_docs)
        _bm25_batch(q_offsets, q_terms, q_weights, indptr, docs, tfs, doc_lengths, np.float64(avgdl),
                    np.float64(k1), np.float64(b), doc_rank, n_docs, caps, n_chunks, out_d, out_s, out_m, sizes, pool,
                    workspace[0], workspace[1])
    offsets, d, s, m = _compact(caps, sizes, out_d, out_s, out_m)
    return offsets, d, s, m, pool
