"""Numba search kernels: arrays in, arrays out, no I/O (DESIGN.md section 4).

Queries arrive as a flat batch: `q_offsets` (int64[Q + 1]) into `q_terms` (term ids) and
`q_weights` (float64), each query's terms in ascending weight order. Visiting terms in that
order and accumulating term-at-a-time adds every document's matched weights in ascending
order: the canonical sum of `scoring.canonical_sum`, so scores are bit-identical to the
reference and to the exhaustive scan.

Result order (section 2): score desc, matched count desc, doc_rank asc. `k <= 0` means every
candidate. Results come back flat: `(offsets int64[Q + 1], docs int64, scores float64,
matches int32)`; only documents with at least one matched term appear, never padding.

Every kernel accepts read-only (memory-mapped) arrays and is compiled once (`cache=True`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

# Accumulator block in documents: 16K docs x (8 + 4) bytes = 192 KiB, well inside L2. Measured on
# 8.8M documents (benchmarks/bench_search.py --blocks, kernel only, 1 thread, K=1000): 16K blocks
# 24.8 M postings/s, 64K blocks 16.0, a plain N-sized scatter 12.6 (benchmarks/RESULTS.md).
DEFAULT_BLOCK = 1 << 14


# ---------------------------------------------------------------------------- ranking heap
# A bounded heap whose root is the WORST kept entry, so a candidate is rejected with one
# comparison once the heap is full. Entries are (score, matches, key) with key =
# doc_rank[doc] << 32 | doc: ordering keys orders by id rank (ranks are distinct) without
# reading doc_rank again during the many tie comparisons; _compact takes the doc back out.


@nb.njit(cache=True, nogil=True, inline="always")
def _worse(s1, m1, d1, s2, m2, d2, doc_rank):
    """True when entry 1 ranks after entry 2 (d1, d2: rank-and-doc keys)."""
    if s1 != s2:
        return s1 < s2
    if m1 != m2:
        return m1 < m2
    return d1 > d2


@nb.njit(cache=True, nogil=True)
def _sift_down(hs, hm, hd, base, i, n, doc_rank):
    while True:
        c = 2 * i + 1
        if c >= n:
            return
        r = c + 1
        if r < n and _worse(hs[base + r], hm[base + r], hd[base + r], hs[base + c], hm[base + c], hd[base + c],
                            doc_rank):
            c = r
        if not _worse(hs[base + c], hm[base + c], hd[base + c], hs[base + i], hm[base + i], hd[base + i], doc_rank):
            return
        a, b = base + i, base + c
        hs[a], hs[b] = hs[b], hs[a]
        hm[a], hm[b] = hm[b], hm[a]
        hd[a], hd[b] = hd[b], hd[a]
        i = c


@nb.njit(cache=True, nogil=True)
def _push(hs, hm, hd, base, size, cap, s, m, d, doc_rank):
    """Offer (s, m, d) to the heap at hs[base:base + cap] holding `size` entries; returns the new size."""
    if size < cap:
        i = size
        while i > 0:
            p = (i - 1) >> 1
            if not _worse(s, m, d, hs[base + p], hm[base + p], hd[base + p], doc_rank):
                break
            hs[base + i] = hs[base + p]
            hm[base + i] = hm[base + p]
            hd[base + i] = hd[base + p]
            i = p
        hs[base + i] = s
        hm[base + i] = m
        hd[base + i] = d
        return size + 1
    if cap > 0 and _worse(hs[base], hm[base], hd[base], s, m, d, doc_rank):
        hs[base] = s
        hm[base] = m
        hd[base] = d
        _sift_down(hs, hm, hd, base, 0, size, doc_rank)
    return size


@nb.njit(cache=True, nogil=True)
def _heap_sort(hs, hm, hd, base, n, doc_rank):
    """Turn the heap into rank order, best first (the worst moves to the end first)."""
    for last in range(n - 1, 0, -1):
        a, b = base, base + last
        hs[a], hs[b] = hs[b], hs[a]
        hm[a], hm[b] = hm[b], hm[a]
        hd[a], hd[b] = hd[b], hd[a]
        _sift_down(hs, hm, hd, base, 0, last, doc_rank)


@nb.njit(cache=True, nogil=True)
def _compact(caps_offsets, sizes, docs, scores, matches):
    """Drop the unused tail of each query's region: returns the flat result."""
    nq = sizes.shape[0]
    offsets = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        offsets[q + 1] = offsets[q] + sizes[q]
    n = offsets[nq]
    out_d = np.empty(n, dtype=np.int64)
    out_s = np.empty(n, dtype=np.float64)
    out_m = np.empty(n, dtype=np.int32)
    for q in range(nq):
        src = caps_offsets[q]
        dst = offsets[q]
        for i in range(sizes[q]):
            out_d[dst + i] = docs[src + i] & 0xFFFFFFFF
            out_s[dst + i] = scores[src + i]
            out_m[dst + i] = matches[src + i]
    return offsets, out_d, out_s, out_m


# ------------------------------------------------------------------------- inverted search


@nb.njit(cache=True, nogil=True)
def _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, block,
                acc, cnt, touched, cur, end, base, cap, res_d, res_s, res_m):
    """One query: accumulate its postings block by block, keep the best `cap`; returns the count.

    A block is the document range [lo, lo + block) starting at the smallest unread posting, so
    empty ranges are skipped; its accumulators stay cache-resident while every term's postings
    in the range are added. Terms are visited in the given (ascending weight) order in every
    block, so each document's sum keeps the canonical order.
    """
    a = q_offsets[q]
    m = q_offsets[q + 1] - a
    for j in range(m):
        t = q_terms[a + j]
        cur[j] = indptr[t]
        end[j] = indptr[t + 1]
    size = 0
    while True:
        lo = n_docs
        for j in range(m):
            if cur[j] < end[j]:
                d = np.int64(docs[cur[j]])
                if d < lo:
                    lo = d
        if lo >= n_docs:
            break
        hi = lo + block
        nt = 0
        for j in range(m):
            w = q_weights[a + j]
            c = cur[j]
            e = end[j]
            while c < e:
                d = np.int64(docs[c])
                if d >= hi:
                    break
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
        for i in range(nt):
            x = touched[i]
            key = (np.int64(doc_rank[lo + x]) << 32) | (lo + x)
            size = _push(res_s, res_m, res_d, base, size, cap, acc[x], cnt[x], key, doc_rank)
            acc[x] = 0.0
            cnt[x] = 0
    _heap_sort(res_s, res_m, res_d, base, size, doc_rank)
    return size


@nb.njit(cache=True)
def region_offsets(q_offsets, q_terms, indptr, k):
    """Output region of each query: min(k, sum of its terms' df) entries (k <= 0: no limit),
    an upper bound on its candidates. Shared with the BM25 kernels."""
    nq = q_offsets.shape[0] - 1
    caps = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        total = np.int64(0)
        for j in range(q_offsets[q], q_offsets[q + 1]):
            t = q_terms[j]
            total += indptr[t + 1] - indptr[t]
        if k > 0 and total > k:
            total = k
        caps[q + 1] = caps[q] + total
    return caps


@nb.njit(cache=True, parallel=True)
def _search_batch(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, block, n_chunks):
    nq = q_offsets.shape[0] - 1
    caps_off = region_offsets(q_offsets, q_terms, indptr, k)
    longest = 1
    for q in range(nq):
        if q_offsets[q + 1] - q_offsets[q] > longest:
            longest = q_offsets[q + 1] - q_offsets[q]
    res_d = np.empty(caps_off[nq], dtype=np.int64)
    res_s = np.empty(caps_off[nq], dtype=np.float64)
    res_m = np.empty(caps_off[nq], dtype=np.int32)
    sizes = np.zeros(nq, dtype=np.int64)
    width = min(block, max(n_docs, 1))
    # Each chunk owns its accumulators and takes queries c, c + n_chunks, ...: no shared
    # writes, and interleaving spreads expensive queries over the threads.
    for c in nb.prange(n_chunks):
        acc = np.zeros(width, dtype=np.float64)
        cnt = np.zeros(width, dtype=np.int32)
        touched = np.empty(width, dtype=np.int64)
        cur = np.empty(longest, dtype=np.int64)
        end = np.empty(longest, dtype=np.int64)
        for q in range(c, nq, n_chunks):
            sizes[q] = _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width,
                                   acc, cnt, touched, cur, end, caps_off[q], caps_off[q + 1] - caps_off[q],
                                   res_d, res_s, res_m)
    return _compact(caps_off, sizes, res_d, res_s, res_m)


def search_batch(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, block=DEFAULT_BLOCK,
                 n_chunks=None):
    """Exact top-k of every query over the inverted CSR (`k=None` or `k <= 0`: every candidate).

    indptr int64[V + 1], docs uint32[P] (ascending per term), doc_rank uint32[N];
    q_terms: distinct term ids per query, in ascending weight order.
    `block` = document-range width of the accumulators (`n_docs` gives a plain scatter).
    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32).
    """
    if n_chunks is None:
        n_chunks = nb.get_num_threads()
    _check_docs(n_docs)
    nq = len(q_offsets) - 1
    return _search_batch(indptr, docs, doc_rank, np.int64(n_docs), np.asarray(q_offsets, dtype=np.int64),
                         np.asarray(q_terms, dtype=np.int64), np.asarray(q_weights, dtype=np.float64),
                         np.int64(0 if k is None else k), np.int64(max(1, block)),
                         np.int64(max(1, min(n_chunks, nq))))


def _check_docs(n_docs):
    if n_docs >= 1 << 31:
        raise ValueError(f"{n_docs} documents: the kernels' rank-and-doc keys need fewer than 2**31")


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
def _scan_range(lo, hi, fwd_indptr, fwd_terms, doc_rank, bitset, uterms, urank, r_indptr, r_query, r_weight,
                nq, count_only, heap_off, heap_cap, heap_size, hs, hm, hd, slot0):
    """Score documents [lo, hi) against every query of the batch; push into the chunk's heaps."""
    acc = np.zeros(nq, dtype=np.float64)
    cnt = np.zeros(nq, dtype=np.int32)
    touched = np.empty(nq, dtype=np.int64)
    matched = np.empty(64, dtype=np.int64)
    nu = uterms.shape[0]
    for d in range(lo, hi):
        nm = 0
        for p in range(fwd_indptr[d], fwd_indptr[d + 1]):
            t = np.int64(fwd_terms[p])
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
            else:
                key = (np.int64(doc_rank[d]) << 32) | d
                heap_size[s] = _push(hs, hm, hd, heap_off[s], heap_size[s], heap_cap[s], acc[q], cnt[q], key,
                                     doc_rank)
            acc[q] = 0.0
            cnt[q] = 0


@nb.njit(cache=True, parallel=True)
def _exhaustive(fwd_indptr, fwd_terms, doc_rank, bitset, uterms, urank, r_indptr, r_query, r_weight, nq, k,
                n_chunks):
    n_docs = fwd_indptr.shape[0] - 1
    slots = n_chunks * nq
    heap_size = np.zeros(slots, dtype=np.int64)
    heap_cap = np.empty(slots, dtype=np.int64)
    dummy_s = np.empty(0, dtype=np.float64)
    dummy_m = np.empty(0, dtype=np.int32)
    dummy_d = np.empty(0, dtype=np.int64)
    if k > 0:
        heap_cap[:] = k
    else:
        # every candidate: a counting pass sizes each chunk's list exactly
        for c in nb.prange(n_chunks):
            _scan_range(c * n_docs // n_chunks, (c + 1) * n_docs // n_chunks, fwd_indptr, fwd_terms, doc_rank,
                        bitset, uterms, urank, r_indptr, r_query, r_weight, nq, True, heap_size, heap_cap,
                        heap_size, dummy_s, dummy_m, dummy_d, c * nq)
        heap_cap[:] = heap_size
        heap_size[:] = 0
    heap_off = np.zeros(slots + 1, dtype=np.int64)
    for s in range(slots):
        heap_off[s + 1] = heap_off[s] + heap_cap[s]
    hs = np.empty(heap_off[slots], dtype=np.float64)
    hm = np.empty(heap_off[slots], dtype=np.int32)
    hd = np.empty(heap_off[slots], dtype=np.int64)
    for c in nb.prange(n_chunks):
        _scan_range(c * n_docs // n_chunks, (c + 1) * n_docs // n_chunks, fwd_indptr, fwd_terms, doc_rank,
                    bitset, uterms, urank, r_indptr, r_query, r_weight, nq, False, heap_off, heap_cap, heap_size,
                    hs, hm, hd, c * nq)
    # merge each query's per-chunk heaps
    caps_off = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        total = np.int64(0)
        for c in range(n_chunks):
            total += heap_size[c * nq + q]
        if k > 0 and total > k:
            total = k
        caps_off[q + 1] = caps_off[q] + total
    res_d = np.empty(caps_off[nq], dtype=np.int64)
    res_s = np.empty(caps_off[nq], dtype=np.float64)
    res_m = np.empty(caps_off[nq], dtype=np.int32)
    sizes = np.zeros(nq, dtype=np.int64)
    for q in nb.prange(nq):
        base = caps_off[q]
        cap = caps_off[q + 1] - base
        size = 0
        for c in range(n_chunks):
            s = c * nq + q
            for i in range(heap_off[s], heap_off[s] + heap_size[s]):
                size = _push(res_s, res_m, res_d, base, size, cap, hs[i], hm[i], hd[i], doc_rank)
        _heap_sort(res_s, res_m, res_d, base, size, doc_rank)
        sizes[q] = size
    return _compact(caps_off, sizes, res_d, res_s, res_m)


def exhaustive_batch(fwd_indptr, fwd_terms, doc_rank, n_terms, q_offsets, q_terms, q_weights, k, n_chunks=None):
    """The same results as `search_batch` from one scan of the forward (document-major) CSR.

    Every document's terms are looked up in the batch's query terms (a bitset, then a binary
    search); its matched weights are added per query in ascending weight order. Parallel over
    document ranges; each range keeps its own per-query heaps, merged at the end.
    """
    if n_chunks is None:
        n_chunks = nb.get_num_threads()
    nq = len(q_offsets) - 1
    n_docs = len(fwd_indptr) - 1
    _check_docs(n_docs)
    n_chunks = max(1, min(n_chunks, max(n_docs, 1)))
    table = query_term_table(q_offsets, q_terms, q_weights, n_terms)
    return _exhaustive(fwd_indptr, fwd_terms, doc_rank, *table, np.int64(nq), np.int64(0 if k is None else k),
                       np.int64(n_chunks))


# ------------------------------------------------------------------------- term look-up


@nb.njit(cache=True, nogil=True)
def spans_equal(a_data, a_offsets, a_index, b_data, b_offsets, b_index):
    """out[i] = (a span a_index[i] == b span b_index[i]), spans given by data[offsets[j]:offsets[j+1]]."""
    n = a_index.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        a0 = a_offsets[a_index[i]]
        a1 = a_offsets[a_index[i] + 1]
        b0 = b_offsets[b_index[i]]
        b1 = b_offsets[b_index[i] + 1]
        if a1 - a0 != b1 - b0:
            continue
        same = True
        for j in range(a1 - a0):
            if a_data[a0 + j] != b_data[b0 + j]:
                same = False
                break
        out[i] = same
    return out


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
