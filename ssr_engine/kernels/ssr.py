"""Numba search kernels: arrays in, arrays out, no I/O (DESIGN.md section 4).

Queries arrive as a flat batch: `q_offsets` (int64[Q + 1]) into `q_terms` (term ids) and
`q_weights` (float64), each query's terms in ascending weight order. Visiting terms in that
order and accumulating term-at-a-time adds every document's matched weights in ascending
order: the canonical sum of `scoring.canonical_sum`, so scores are bit-identical to the
reference and to the exhaustive scan.

Result order (section 2): score desc, matched count desc, doc_rank asc, kept by the shared
heap of `topk`. `k <= 0` means every candidate. Results come back flat: `(offsets
int64[Q + 1], docs int64, scores float64, matches int32)`; only documents with at least one
matched term appear, never padding.

Every kernel accepts read-only (memory-mapped) arrays and is compiled once (`cache=True`).
Pruning kernels (DESIGN.md section 4) reuse the same pieces: `candidates.region_offsets` for
the output regions, `topk.heap_push`/`rejects`/`deheap_sort`/`compact` for the order.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .candidates import CorruptIndexData, cap_k, region_offsets
from .forward import term_at
from .lists import span
from .packed import at
from .topk import check_key_range, compact, compact_failed, deheap_sort, doc_key, heap_arrays, heap_push, rejects

# Accumulator block in documents: 16K docs x (8 + 4) bytes = 192 KiB, well inside L2. Measured on
# 8.8M documents (benchmarks/bench_search.py --blocks, kernel only, 1 thread, K=1000): 16K blocks
# 24.8 M postings/s, 64K blocks 16.0, a plain N-sized scatter 12.6 (benchmarks/RESULTS.md).
DEFAULT_BLOCK = 1 << 14


# ------------------------------------------------------------------------- inverted search


@nb.njit(cache=True, nogil=True, inline="always")
def block_start(docs, cur, end, m, n_docs):
    """The next block's first document: the smallest unread posting of the m term cursors.

    docs the postings column (`packed`); cur/end int64[>= m], each term's next and past-the-end positions. Returns
    n_docs when every list is read, -1 when an unread posting is >= n_docs (corrupt postings).
    """
    lo = n_docs
    left = False
    for j in range(m):
        if cur[j] < end[j]:
            left = True
            d = at(docs, cur[j])
            if d < lo:
                lo = d
    if lo >= n_docs and left:
        return np.int64(-1)
    return lo


@nb.njit(cache=True, nogil=True, inline="always")
def open_lists(q_terms, a, p, m, indptr, cur, end, last):
    """Cursors on the lists of query terms a+p..a+m-1: cur/end/last[j] = first posting, past the end, -1."""
    for j in range(p, m):
        t = q_terms[a + j]
        cur[j], end[j] = span(indptr, t)
        last[j] = -1


@nb.njit(cache=True, nogil=True)
def skip_past(docs, cur, end, last, m, hi):
    """Every cursor to its first posting >= hi (binary search). The skipped postings are never read, so
    last[j] = hi - 1: a later posting below hi is reported as corrupt, as when read in order."""
    for j in range(m):
        c = cur[j]
        if c < end[j] and at(docs, c) < hi:
            lo, up = c + 1, end[j]
            while lo < up:
                mid = (lo + up) >> 1
                if at(docs, mid) < hi:
                    lo = mid + 1
                else:
                    up = mid
            cur[j] = lo
            last[j] = hi - 1


@nb.njit(cache=True, nogil=True)
def _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, block,
                acc, cnt, touched, cur, end, last, base, cap, res_d, res_s, res_m, live, bar_s, bar_m, bar_k):
    """One query: accumulate its postings block by block, keep the best `cap`; returns the count.

    A block is the document range [lo, lo + block) starting at the smallest unread posting, so
    empty ranges are skipped; its accumulators stay cache-resident while every term's postings
    in the range are added. Terms are visited in the given (ascending weight) order in every
    block, so each document's sum keeps the canonical order. touched int64[block + 1]: the
    branch-free first touch writes one entry past the block's distinct documents (when a block's
    every document is touched and one more posting follows). `bar_s`/`bar_m`/`bar_k`: the full
    key (score, matches, doc key) a candidate must rank strictly before; empty: no bar.
    """
    bs = -np.inf
    bm = 0
    bk = np.int64(0)
    if bar_s.shape[0]:
        bs = bar_s[q]
        bm = bar_m[q]
        bk = bar_k[q]
    a = q_offsets[q]
    m = q_offsets[q + 1] - a
    open_lists(q_terms, a, 0, m, indptr, cur, end, last)
    size = 0
    while True:
        lo = block_start(docs, cur, end, m, n_docs)
        if lo < 0:
            return -1  # a posting >= N: corrupt postings_docs (never read past the arrays)
        if lo >= n_docs:
            break
        # clipped at N, so a posting >= N ends the block instead of indexing doc_rank past its end
        hi = min(lo + block, n_docs)
        nt = 0
        for j in range(m):
            w = q_weights[a + j]
            c = cur[j]
            e = end[j]
            prev = last[j]
            while c < e:
                d = at(docs, c)
                if d >= hi:
                    break
                # strictly ascending postings (hence d >= lo): the one check that keeps x in range
                if d <= prev:
                    return -1  # corrupt postings_docs
                prev = d
                x = d - lo
                # branch-free "first touch": a mispredicted branch on the count would serialise
                # the (cache-missing) loads of consecutive postings
                seen = cnt[x]
                touched[nt] = x
                nt += np.int64(seen == 0)
                acc[x] += w
                cnt[x] = seen + 1
                c += 1
            cur[j] = c
            last[j] = prev
        for i in range(nt):
            x = touched[i]
            # a live index's deleted documents (live[d] == 0) never rank; an empty mask: all live
            # the bar: k documents known elsewhere (a live index's other segments) rank before it
            s = acc[x]
            if ((live.shape[0] == 0 or live[lo + x]) and not (s < bs or (s == bs and (cnt[x] < bm or (
                    cnt[x] == bm and doc_key(doc_rank[lo + x], lo + x) >= bk))))
                    and not rejects(res_s, res_m, base, size, cap, s, cnt[x])):
                key = doc_key(doc_rank[lo + x], lo + x)
                size = heap_push(res_s, res_m, res_d, base, size, cap, acc[x], cnt[x], key)
            acc[x] = 0.0
            cnt[x] = 0
    deheap_sort(res_s, res_m, res_d, base, size)
    return size


@nb.njit(cache=True, parallel=True)
def _search_batch(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, block, n_chunks, live,
                  bar_s, bar_m, bar_k):
    nq = q_offsets.shape[0] - 1
    caps_off = region_offsets(q_offsets, q_terms, indptr, k)
    longest = 1
    for q in range(nq):
        if q_offsets[q + 1] - q_offsets[q] > longest:
            longest = q_offsets[q + 1] - q_offsets[q]
    res_s, res_m, res_d = heap_arrays(caps_off[nq])
    sizes = np.zeros(nq, dtype=np.int64)
    width = min(block, max(n_docs, 1))
    # Each chunk owns its accumulators and takes queries c, c + n_chunks, ...: no shared
    # writes, and interleaving spreads expensive queries over the threads.
    for c in nb.prange(n_chunks):
        acc = np.zeros(width, dtype=np.float64)
        cnt = np.zeros(width, dtype=np.int32)
        touched = np.empty(width + 1, dtype=np.int64)  # + 1: see _search_one
        cur = np.empty(longest, dtype=np.int64)
        end = np.empty(longest, dtype=np.int64)
        last = np.empty(longest, dtype=np.int64)
        for q in range(c, nq, n_chunks):
            sizes[q] = _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width,
                                   acc, cnt, touched, cur, end, last, caps_off[q], caps_off[q + 1] - caps_off[q],
                                   res_d, res_s, res_m, live, bar_s, bar_m, bar_k)
            if sizes[q] < 0:  # corrupt postings: this chunk's accumulators are dirty; stop it
                break
    return compact_failed(caps_off, sizes, res_s, res_m, res_d)


def search_batch(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, block=DEFAULT_BLOCK,
                 n_chunks=None, live=None, bar=None):
    """Exact top-k of every query over the inverted CSR (`k=None` or `k <= 0`: every candidate).

    indptr int64[V + 1], docs the postings column (`packed`, ascending per term), doc_rank uint32[N];
    q_terms: distinct term ids per query, in ascending weight order.
    `block` = document-range width of the accumulators (`n_docs` gives a plain scatter).
    `live`: bool or uint8[N], the documents that may rank (a live index's deletions); None: all.
    `bar`: (scores float64[Q], matches int32[Q], keys int64[Q]): per query, the full key (score,
    matches, doc_rank << 32 | doc) a document must rank strictly before (-inf: none; a key of 2**63 - 1
    keeps every tie on score and matches); the others are left out. None: no bar.
    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32).
    """
    if n_chunks is None:
        n_chunks = nb.get_num_threads()
    check_key_range(n_docs)
    nq = len(q_offsets) - 1
    *out, bad = _search_batch(indptr, docs, doc_rank, np.int64(n_docs), np.asarray(q_offsets, dtype=np.int64),
                              np.asarray(q_terms, dtype=np.int64), np.asarray(q_weights, dtype=np.float64),
                              np.int64(cap_k(k, n_docs)), np.int64(max(1, block)),
                              np.int64(max(1, min(n_chunks, nq))),
                              np.zeros(0, dtype=np.uint8) if live is None else np.asarray(live).view(np.uint8),
                              *_bar_arrays(bar, nq))
    if bad:
        raise CorruptIndexData("postings_docs.npy: a posting list is not strictly ascending or holds a document "
                               "id >= N")
    return tuple(out)


def _bar_arrays(bar, nq):
    if bar is None:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
    arrays = (np.ascontiguousarray(bar[0], dtype=np.float64), np.ascontiguousarray(bar[1], dtype=np.int32),
              np.ascontiguousarray(bar[2], dtype=np.int64))
    if any(a.shape != (nq,) for a in arrays):
        raise ValueError(f"bar: one (score, matches, key) per query ({nq})")
    return arrays


# ----------------------------------------------------------------------- exhaustive scan


def query_term_table(q_offsets, q_terms, q_weights, n_terms):
    """The batch's query terms arranged for a forward scan.

    Returns (bitset uint64[ceil(n_terms / 64)] of query terms, uterms int64 sorted distinct
    term ids, urank int64: each uterm's position in ascending weight order, r_indptr/r_query:
    CSR from weight position to the queries holding that term, r_weight float64 per position).
    A term's weight must be the same in every query (it depends on df only).
    """
    q_offsets = np.asarray(q_offsets, dtype=np.int64)
    q_terms = np.asarray(q_terms, dtype=np.int64)
    q_weights = np.asarray(q_weights, dtype=np.float64)
    query_of = np.repeat(np.arange(len(q_offsets) - 1, dtype=np.int64), np.diff(q_offsets))
    uterms, inverse = np.unique(q_terms, return_inverse=True)
    uweight = np.zeros(len(uterms), dtype=np.float64)
    uweight[inverse] = q_weights
    if not np.array_equal(uweight[inverse], q_weights):
        raise ValueError("a term has different weights in different queries")
    by_weight = np.argsort(uweight, kind="stable")
    urank = np.empty(len(uterms), dtype=np.int64)
    urank[by_weight] = np.arange(len(uterms), dtype=np.int64)
    entry_rank = urank[inverse]
    order = np.argsort(entry_rank, kind="stable")
    r_query = query_of[order]
    r_indptr = np.zeros(len(uterms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(entry_rank, minlength=len(uterms)), out=r_indptr[1:])
    bitset = np.zeros((n_terms + 63) // 64 + 1, dtype=np.uint64)
    np.bitwise_or.at(bitset, uterms >> 6, np.left_shift(np.uint64(1), (uterms & 63).astype(np.uint64)))
    return bitset, uterms, urank, r_indptr, r_query, uweight[by_weight]


@nb.njit(cache=True, nogil=True)
def _scan_range(lo, hi, fwd_indptr, fwd, doc_rank, bitset, uterms, urank, r_indptr, r_query, r_weight,
                nq, count_only, heap_off, heap_cap, heap_size, hs, hm, hd, slot0, n_terms):
    """Score documents [lo, hi) against every query of the batch; push into the chunk's heaps.

    Returns the number of term ids found outside the bitset (a corrupt forward row; skipped).
    """
    bad = 0
    acc = np.zeros(nq, dtype=np.float64)
    cnt = np.zeros(nq, dtype=np.int32)
    touched = np.empty(nq, dtype=np.int64)
    matched = np.empty(64, dtype=np.int64)
    nu = uterms.shape[0]
    for d in range(lo, hi):
        nm = 0
        prev = np.int64(-1)
        for p in range(fwd_indptr[d], fwd_indptr[d + 1]):
            t = term_at(fwd, p)
            if t >= n_terms or t <= prev:
                bad += 1  # past the vocabulary (so never past the bitset) or not ascending
                continue
            prev = t
            if (bitset[t >> 6] >> np.uint64(t & 63)) & np.uint64(1):
                u = np.searchsorted(uterms, t)
                if u < nu and uterms[u] == t:
                    if nm == matched.shape[0]:
                        bigger = np.empty(2 * nm, dtype=np.int64)
                        bigger[:nm] = matched
                        matched = bigger
                    # insertion by weight position: the doc's matched terms in ascending weight
                    r = urank[u]
                    i = nm
                    while i > 0 and matched[i - 1] > r:
                        matched[i] = matched[i - 1]
                        i -= 1
                    matched[i] = r
                    nm += 1
        if nm == 0:
            continue
        nt = 0
        for i in range(nm):
            r = matched[i]
            w = r_weight[r]
            for e in range(r_indptr[r], r_indptr[r + 1]):
                q = r_query[e]
                if cnt[q] == 0:
                    touched[nt] = q
                    nt += 1
                acc[q] += w
                cnt[q] += 1
        for i in range(nt):
            q = touched[i]
            s = slot0 + q
            if count_only:
                heap_size[s] += 1
            elif not rejects(hs, hm, heap_off[s], heap_size[s], heap_cap[s], acc[q], cnt[q]):
                heap_size[s] = heap_push(hs, hm, hd, heap_off[s], heap_size[s], heap_cap[s], acc[q], cnt[q],
                                         doc_key(doc_rank[d], d))
            acc[q] = 0.0
            cnt[q] = 0
    return bad


@nb.njit(cache=True, parallel=True)
def _exhaustive(fwd_indptr, fwd, doc_rank, bitset, uterms, urank, r_indptr, r_query, r_weight, nq, k,
                n_chunks, n_terms):
    n_docs = fwd_indptr.shape[0] - 1
    slots = n_chunks * nq
    heap_size = np.zeros(slots, dtype=np.int64)
    heap_cap = np.empty(slots, dtype=np.int64)
    dummy_s = np.empty(0, dtype=np.float64)
    dummy_m = np.empty(0, dtype=np.int32)
    dummy_d = np.empty(0, dtype=np.int64)
    bad = np.zeros(n_chunks, dtype=np.int64)
    if k > 0:
        heap_cap[:] = k
    else:
        # every candidate: a counting pass sizes each chunk's list exactly
        for c in nb.prange(n_chunks):
            bad[c] += _scan_range(c * n_docs // n_chunks, (c + 1) * n_docs // n_chunks, fwd_indptr, fwd, doc_rank,
                        bitset, uterms, urank, r_indptr, r_query, r_weight, nq, True, heap_size, heap_cap,
                        heap_size, dummy_s, dummy_m, dummy_d, c * nq, n_terms)
        heap_cap[:] = heap_size
        heap_size[:] = 0
    heap_off = np.zeros(slots + 1, dtype=np.int64)
    for s in range(slots):
        heap_off[s + 1] = heap_off[s] + heap_cap[s]
    hs, hm, hd = heap_arrays(heap_off[slots])
    for c in nb.prange(n_chunks):
        bad[c] += _scan_range(c * n_docs // n_chunks, (c + 1) * n_docs // n_chunks, fwd_indptr, fwd,
                              doc_rank, bitset, uterms, urank, r_indptr, r_query, r_weight, nq, False, heap_off,
                              heap_cap, heap_size, hs, hm, hd, c * nq, n_terms)
    # merge each query's per-chunk heaps
    caps_off = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        total = np.int64(0)
        for c in range(n_chunks):
            total += heap_size[c * nq + q]
        if k > 0 and total > k:
            total = k
        caps_off[q + 1] = caps_off[q] + total
    res_s, res_m, res_d = heap_arrays(caps_off[nq])
    sizes = np.zeros(nq, dtype=np.int64)
    for q in nb.prange(nq):
        base = caps_off[q]
        cap = caps_off[q + 1] - base
        size = 0
        for c in range(n_chunks):
            s = c * nq + q
            for i in range(heap_off[s], heap_off[s] + heap_size[s]):
                size = heap_push(res_s, res_m, res_d, base, size, cap, hs[i], hm[i], hd[i])
        deheap_sort(res_s, res_m, res_d, base, size)
        sizes[q] = size
    offsets, out_d, out_s, out_m = compact(caps_off, sizes, res_s, res_m, res_d)
    return offsets, out_d, out_s, out_m, bad.sum()


def exhaustive_batch(fwd_indptr, fwd, doc_rank, n_terms, q_offsets, q_terms, q_weights, k, n_chunks=None):
    """The same results as `search_batch` from one scan of the forward (document-major) CSR
    (fwd_indptr int[N + 1]; fwd the rows as `kernels.forward` reads them).

    Every document's terms are looked up in the batch's query terms (a bitset, then a binary
    search); its matched weights are added per query in ascending weight order. Parallel over
    document ranges; each range keeps its own per-query heaps, merged at the end.
    """
    if n_chunks is None:
        n_chunks = nb.get_num_threads()
    nq = len(q_offsets) - 1
    n_docs = len(fwd_indptr) - 1
    check_key_range(n_docs)
    n_chunks = max(1, min(n_chunks, max(n_docs, 1)))
    table = query_term_table(q_offsets, q_terms, q_weights, n_terms)
    *out, bad = _exhaustive(fwd_indptr, fwd, doc_rank, *table, np.int64(nq),
                            np.int64(cap_k(k, n_docs)), np.int64(n_chunks), np.int64(n_terms))
    if bad:
        raise CorruptIndexData("forward_terms.npy: a row is not strictly ascending or holds term ids past the "
                               "vocabulary")
    return tuple(out)

