"""Exact dynamic pruning for SSR: MaxScore over weight-ordered signals (DESIGN.md section 4).

Same inputs and outputs as `ssr.search_batch` (queries flat, each query's terms in ascending
weight order; results flat and in rank order), same results bit for bit; fewer postings read.

Why it is exact. Every posting of a term carries the term's weight, so a document's score is
the canonical (ascending-weight) float64 sum of the weights of the query terms it contains.
Call terms 0..p-1 (the p lightest) *non-essential* while a document containing only those
cannot enter the heap: its score is at most prefix[p], the canonical sum of the p lightest
weights (a canonical sum of a sub-multiset never exceeds that of the multiset: float addition
of positive numbers is monotone), and it matches at most p terms. Against the heap's worst
entry (score s, matches c, key) it cannot enter when prefix[p] < s, or prefix[p] == s and
p < c (equal bound and equal matches may still win on id, so that case is kept). Only
essential lists generate candidates; non-essential lists are probed (binary search, or a
merge when that is cheaper) for candidates whose own bound (their essential weights plus
prefix[p]) can still enter, under the same full-key test. A survivor's score is recomputed
from the bit set of the terms it matched, lowest bit (lightest weight) first: the canonical
sum, whatever order the lists were visited in.

Candidates are collected in document-range blocks (as in the union kernel): a block starts at
the smallest unread posting of an essential list, so the ranges between essential postings
are skipped and non-essential lists are only galloped over there.

Pruning needs a bounded heap (k >= 1) and at most 64 terms (one bit each); other queries take
the union kernel. Threads: a batch is cut into slices of 16 queries that the threads take one
at a time (parallel chunk size 1), so a thread slowed down by another process takes fewer of
them instead of holding the batch back; each thread keeps its accumulators across calls.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import levels
from .candidates import CorruptIndexData, region_offsets
from .lists import length, span
from .packed import at, contains
from .ssr import DEFAULT_BLOCK, _search_one
from .topk import check_key_range, compact_failed, deheap_sort, doc_key, heap_push

# Relative margin of the quick float bound test. An approximate sum of at most 64 positive
# weights is within 64 * 2**-53 (< 1e-14) of the canonical one; outside this band the answer
# is certain, inside it the canonical sum and the full key decide.
_SLACK = 1e-12
MAX_TERMS = 64  # one bit per query term in the candidate masks

METHODS = ("maxscore", "union")
# Queries with fewer postings than this take the union path under "maxscore" too (0: prune every
# query). Pruning's per-block galloping and bound tests cost more than they skip on short lists; no
# threshold has been measured to pay reliably yet (benchmarks/RESULTS.md), so none is applied.
PRUNE_FROM = 0


@nb.njit(cache=True, nogil=True, inline="always")
def _gallop(docs, c, e, target):
    """First position in [c, e) whose doc is >= target (e when none); exponential then binary search."""
    if c >= e or at(docs, c) >= target:
        return c
    lo = c  # docs[lo] < target throughout
    step = np.int64(1)
    hi = c + 1
    while hi < e and at(docs, hi) < target:
        lo = hi
        step <<= 1
        hi = lo + step
    if hi > e:
        hi = e
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if at(docs, mid) < target:
            lo = mid
        else:
            hi = mid
    return hi


_contains = contains  # whether positions c..e-1 of the postings column docs hold target


# lowest set bit -> its index: (b & -b) times a de Bruijn constant puts a distinct 6-bit pattern on top
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
with np.errstate(over="ignore"):  # the product wraps modulo 2**64 by design
    for _i in range(64):
        _DEBRUIJN_INDEX[int((np.uint64(1 << _i) * _DEBRUIJN) >> np.uint64(58))] = _i


@nb.njit(cache=True, nogil=True, inline="always")
def _lowest_bit(bits):
    """Index of the lowest set bit of a non-zero uint64."""
    low = bits & (~bits + np.uint64(1))
    return _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]


@nb.njit(cache=True, nogil=True, inline="always")
def _mask_sum(bits, weights, a):
    """Canonical sum of weights[a + j] over the set bits j of `bits` (ascending j) and their count."""
    s = 0.0
    n = 0
    zero = np.uint64(0)
    while bits != zero:
        j = _lowest_bit(bits)
        s += weights[a + j]
        n += 1
        bits &= bits - np.uint64(1)
    return s, n


@nb.njit(cache=True, nogil=True, inline="always")
def _log2_ceil(n):
    r = 0
    while (np.int64(1) << r) < n:
        r += 1
    return r


@nb.njit(cache=True, nogil=True)
def _maxscore_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, block,
                  mask, acc, touched, cur, end, prefix, base, cap, res_d, res_s, res_m):
    """One query, m <= 64 terms, cap >= 1: MaxScore in document-range blocks; returns the result count.

    mask uint64[block] and acc float64[block] must be zero and are left zero; touched int64[block + 1];
    cur, end int64[>= m]; prefix float64[>= m + 1]. Results go to res_*[base:base + cap], best first.
    """
    a = q_offsets[q]
    m = q_offsets[q + 1] - a
    prefix[0] = 0.0
    for j in range(m):
        t = q_terms[a + j]
        cur[j], end[j] = span(indptr, t)
        prefix[j + 1] = prefix[j] + q_weights[a + j]
    size = 0
    p = 0  # terms 0..p-1 are non-essential
    one = np.uint64(1)
    while True:
        if size == cap:
            rs = res_s[base]
            rm = res_m[base]
            while p < m:
                u = prefix[p + 1]
                if u < rs or (u == rs and p + 1 < rm):
                    p += 1
                else:
                    break
            if p == m:
                break  # no document outside the heap can enter any more
        lo = n_docs
        for j in range(p, m):
            if cur[j] < end[j]:
                d = at(docs, cur[j])
                if d < lo:
                    lo = d
        if lo >= n_docs:
            break
        hi = lo + block
        nt = 0
        for j in range(p, m):
            w = q_weights[a + j]
            bit = one << np.uint64(j)
            c = cur[j]
            e = end[j]
            while c < e:
                d = at(docs, c)
                if d >= hi:
                    break
                x = d - lo
                old = mask[x]
                touched[nt] = x
                nt += np.int64(old == np.uint64(0))
                mask[x] = old | bit
                acc[x] += w
                c += 1
            cur[j] = c
        ns = nt
        if p > 0:
            low = prefix[p]
            if size == cap:
                # drop candidates that cannot enter even with every non-essential term
                rs = res_s[base]
                rm = res_m[base]
                lowbits = (one << np.uint64(p)) - one
                ns = 0
                for i in range(nt):
                    x = touched[i]
                    ub = acc[x] + low
                    if ub * (1.0 + _SLACK) < rs:
                        keep = False
                    elif ub * (1.0 - _SLACK) > rs:
                        keep = True
                    else:
                        s, c_ = _mask_sum(mask[x] | lowbits, q_weights, a)
                        keep = s > rs or (s == rs and c_ >= rm)
                    if keep:
                        touched[ns] = x
                        ns += 1
                    else:
                        mask[x] = np.uint64(0)
                        acc[x] = 0.0
            if ns > 0:
                for j in range(p - 1, -1, -1):
                    c = _gallop(docs, cur[j], end[j], lo)
                    e = _gallop(docs, c, end[j], hi)
                    r = e - c
                    if r > 0:
                        bit = one << np.uint64(j)
                        if ns * (_log2_ceil(r) + 2) < r:
                            for i in range(ns):
                                x = touched[i]
                                if _contains(docs, c, e, lo + x):
                                    mask[x] |= bit
                        else:
                            # a merge over the range: cheaper than one search per candidate here
                            for cc in range(c, e):
                                x = at(docs, cc) - lo
                                if mask[x] != np.uint64(0):
                                    mask[x] |= bit
                    cur[j] = e
        for i in range(ns):
            x = touched[i]
            s, c_ = _mask_sum(mask[x], q_weights, a)
            key = doc_key(doc_rank[lo + x], lo + x)
            size = heap_push(res_s, res_m, res_d, base, size, cap, s, np.int32(c_), key)
            mask[x] = np.uint64(0)
            acc[x] = 0.0
    deheap_sort(res_s, res_m, res_d, base, size)
    return size


@nb.njit(cache=True, nogil=True, inline="always")
def _postings(q, q_offsets, q_terms, indptr):
    """Postings of query q's terms (the sum of their df)."""
    total = np.int64(0)
    for j in range(q_offsets[q], q_offsets[q + 1]):
        total += length(indptr, q_terms[j])
    return total


@nb.njit(cache=True, nogil=True)
def _run_queries(q0, q1, step, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, block, prune_from,
                 caps_off, res_d, res_s, res_m, sizes, acc, cnt, mask, touched):
    """Queries q0, q0 + step, ... < q1 into their regions of res_*; per-thread workspace, left zeroed."""
    longest = 1
    for q in range(q0, q1, step):
        if q_offsets[q + 1] - q_offsets[q] > longest:
            longest = q_offsets[q + 1] - q_offsets[q]
    cur = np.empty(longest, dtype=np.int64)
    end = np.empty(longest, dtype=np.int64)
    prefix = np.empty(longest + 1, dtype=np.float64)
    last = np.empty(longest, dtype=np.int64)
    no_deletions = np.zeros(0, dtype=np.uint8)  # kernels.ssr's live mask: empty = every document ranks
    no_bar_s = np.zeros(0, dtype=np.float64)  # kernels.ssr's bar: empty = none
    no_bar_m = np.zeros(0, dtype=np.int32)
    no_bar_k = np.zeros(0, dtype=np.int64)
    width = acc.shape[0]
    for q in range(q0, q1, step):
        base = caps_off[q]
        cap = caps_off[q + 1] - base
        if cap == 0:
            sizes[q] = 0
        elif prune_from >= 0 and k > 0 and q_offsets[q + 1] - q_offsets[q] <= MAX_TERMS and \
                _postings(q, q_offsets, q_terms, indptr) >= prune_from:
            sizes[q] = _maxscore_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width,
                                     mask, acc, touched, cur, end, prefix, base, cap, res_d, res_s, res_m)
        else:
            sizes[q] = _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width,
                                   acc, cnt, touched, cur, end, last, base, cap, res_d, res_s, res_m, no_deletions,
                                   no_bar_s, no_bar_m, no_bar_k)
            if sizes[q] < 0:  # corrupt postings (see kernels.ssr): this slice's accumulators are dirty
                break


@nb.njit(cache=True, parallel=True)
def _search_par(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, prune_from, n_slices, acc, cnt, mask,
                touched):
    """Every query of the batch, slice by slice over the threads; workspace row = thread id.

    Compiled with parallel=True even when run on one thread: the parfor-compiled loop measured
    1.5-2x faster than the same calls from a plain njit function (numba 0.58, CPU time).
    """
    nq = q_offsets.shape[0] - 1
    caps_off = region_offsets(q_offsets, q_terms, indptr, k)
    res_d = np.empty(caps_off[nq], dtype=np.int64)
    res_s = np.empty(caps_off[nq], dtype=np.float64)
    res_m = np.empty(caps_off[nq], dtype=np.int32)
    sizes = np.zeros(nq, dtype=np.int64)
    width = acc.shape[1]
    for c in nb.prange(n_slices):
        t = nb.get_thread_id()
        q0 = c * nq // n_slices
        q1 = (c + 1) * nq // n_slices
        _run_queries(q0, q1, 1, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, width, prune_from,
                     caps_off, res_d, res_s, res_m, sizes, acc[t], cnt[t], mask[t], touched[t])
    return compact_failed(caps_off, sizes, res_s, res_m, res_d)


def workspace(width, rows=None):
    """Zeroed per-thread accumulators for `search_batch`: (acc float64, cnt int32, mask uint64,
    touched int64), each [rows, width] (touched [rows, width + 1]: see `ssr._search_one`); rows default:
    Numba's thread pool size.

    Kept by a caller across calls (every kernel leaves them zeroed): allocating and zeroing them
    per call showed in single-query latency. One call at a time may use a workspace.
    """
    if rows is None:
        rows = int(nb.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    return (np.zeros((rows, width), dtype=np.float64), np.zeros((rows, width), dtype=np.int32),
            np.zeros((rows, width), dtype=np.uint64), np.empty((rows, width + 1), dtype=np.int64))


# queries per slice: slices are handed to threads one at a time (chunk size 1), so a thread slowed
# down by another process takes fewer of them; small enough to balance, large enough to amortise
_SLICE = 16


def search_batch(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, block=DEFAULT_BLOCK,
                 threads=None, method="maxscore", work=None, prune_from=PRUNE_FROM):
    """Exact top-k of every query: the same results as `ssr.search_batch`, bit for bit.

    indptr int64[V + 1], docs the postings column (`packed`, ascending per term), doc_rank uint32[N];
    q_offsets int64[Q + 1] into q_terms (distinct term ids, ascending weight) and q_weights float64;
    `k=None` or `k <= 0`: every candidate (no pruning possible). method "maxscore" prunes,
    "union" reads every posting. `threads`: default Numba's current thread count; a single query
    runs on the calling thread alone. `prune_from`: with "maxscore", queries with fewer postings
    take the union path. `work`: a `workspace(width)` to use (and leave zeroed), width =
    min(block, n_docs); without one, a fresh one is allocated.
    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    check_key_range(n_docs)
    q_offsets = np.asarray(q_offsets, dtype=np.int64)
    q_terms = np.asarray(q_terms, dtype=np.int64)
    q_weights = np.asarray(q_weights, dtype=np.float64)
    nq = len(q_offsets) - 1
    n_threads = nb.get_num_threads() if threads is None else int(threads)
    n_slices = max(1, (nq + _SLICE - 1) // _SLICE)
    n_threads = max(1, min(n_threads, n_slices, int(nb.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    width = int(min(max(1, block), max(n_docs, 1)))
    if work is None or work[0].shape[1] != width or work[0].shape[0] < int(nb.config.NUMBA_NUM_THREADS):
        work = workspace(width)
    acc, cnt, mask, touched = work
    *out, bad = levels.sliced_call(n_threads, _search_par, indptr, docs, doc_rank, np.int64(n_docs), q_offsets,
                                   q_terms, q_weights, np.int64(0 if k is None else k),
                                   np.int64(prune_from if method == "maxscore" else -1), np.int64(n_slices), acc, cnt,
                                   mask, touched)
    if bad:
        for a in work:  # the workspace outlives this call: leave it clean
            a[...] = 0
        raise CorruptIndexData("postings_docs.npy: a posting list is not strictly ascending or holds a document "
                               "id >= N")
    return tuple(out)
