"""Numba kernels for BM25 (Lucene's form, DESIGN.md section 5): arrays in, arrays out.

    score(q, d) = sum over query terms t of  w_t * tf / (tf + k1 * (1 - b + b * dl / avgdl))

with w_t = idf(t) times the number of times t occurs in the query (computed by the caller).
Queries arrive flat: `q_offsets` (int64[Q + 1]) into `q_terms` (term ids) and `q_weights`
(float64). Each document's contributions are added term-at-a-time in the given term order,
in float64. Order: the full order of every method (DESIGN.md section 2), kept by the shared
`topk` heap: score desc, matches desc, doc_rank asc. A candidate is a document containing at
least one query term (its score is > 0 because every idf is); only candidates are returned.

Results are flat: `(offsets int64[Q + 1], docs int64, scores float64, matches int32,
pool int64[Q])` where matches counts the distinct query terms a document contains and pool
is the number of candidates of each query before the top-k cut.

It imports only the shared kernels (`candidates`, `topk`); every kernel accepts read-only arrays.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .candidates import CorruptIndexData, cap_k, region_offsets
from .lists import span
from .packed import at
from .topk import check_key_range, compact, deheap_sort, doc_key, heap_arrays, heap_push, rejects


@nb.njit(cache=True, parallel=True)
def _bm25_batch(q_offsets, q_terms, q_weights, indptr, docs, tfs, doc_lengths, avgdl, k1, b, doc_rank,
                n_docs, caps, n_chunks, out_s, out_m, out_k, sizes, pool, acc_all, cnt_all):
    nq = q_offsets.shape[0] - 1
    for c in nb.prange(n_chunks):
        # per-thread accumulators (row c of the workspace), left zeroed after every query
        acc = acc_all[c]
        cnt = cnt_all[c]
        touched = np.empty(n_docs, dtype=np.int64)
        for q in range(c, nq, n_chunks):  # round robin: long and short queries spread evenly
            n_touched = 0
            bad = False
            for j in range(q_offsets[q], q_offsets[q + 1]):
                t = q_terms[j]
                w = q_weights[j]
                prev = np.int64(-1)
                lo, hi = span(indptr, t)
                for p in range(lo, hi):
                    d = at(docs, p)
                    if d >= n_docs or d <= prev or tfs[p] == 0:
                        bad = True  # corrupt postings (docs or tf): skipped, never used as an index
                        continue
                    prev = d
                    tf = np.float64(tfs[p])
                    norm = k1 * ((1.0 - b) + b * np.float64(doc_lengths[d]) / avgdl)
                    if cnt[d] == 0:
                        touched[n_touched] = d
                        n_touched += 1
                    cnt[d] += 1
                    acc[d] += w * (tf / (norm + tf))
            pool[q] = -1 if bad else n_touched
            lo = caps[q]
            cap = caps[q + 1] - lo
            size = 0
            for i in range(n_touched):
                d = touched[i]
                if not rejects(out_s, out_m, lo, size, cap, acc[d], cnt[d]):
                    size = heap_push(out_s, out_m, out_k, lo, size, cap, acc[d], cnt[d], doc_key(doc_rank[d], d))
            deheap_sort(out_s, out_m, out_k, lo, size)
            sizes[q] = size
            for i in range(n_touched):
                d = touched[i]
                acc[d] = 0.0
                cnt[d] = 0


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
    check_key_range(n_docs)
    nq = q_offsets.shape[0] - 1
    k = cap_k(k, n_docs)
    caps = region_offsets(q_offsets, q_terms, indptr, np.int64(k))
    out_s, out_m, out_k = heap_arrays(caps[-1])
    sizes = np.zeros(nq, dtype=np.int64)
    pool = np.zeros(nq, dtype=np.int64)
    if nq:
        if n_chunks is None:
            n_chunks = nb.get_num_threads()
        n_chunks = max(1, min(int(n_chunks), nq))
        if workspace is None or workspace[0].shape[0] < n_chunks or workspace[0].shape[1] != n_docs:
            workspace = bm25_workspace(n_chunks, n_docs)
        _bm25_batch(q_offsets, q_terms, q_weights, indptr, docs, tfs, doc_lengths, np.float64(avgdl),
                    np.float64(k1), np.float64(b), doc_rank, n_docs, caps, n_chunks, out_s, out_m, out_k, sizes, pool,
                    workspace[0], workspace[1])
        if pool.min() < 0:
            raise CorruptIndexData("postings_docs.npy or postings_tf.npy: a posting list is not strictly "
                                   "ascending, holds a document id >= N or a term frequency 0")
    offsets, d, s, m = compact(caps, sizes, out_s, out_m, out_k)
    return offsets, d, s, m, pool
