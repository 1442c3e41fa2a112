"""Heavy lists first, then bounded probes: exact pruning for SSR (method `probe`, DESIGN.md section 4).

Same inputs and outputs as `levels.search_batch` plus the forward index; the same results bit for bit.

A query's terms are in ascending weight (bit j = term j, as in `levels`). The *essential* set E is
the heaviest (rarest) terms p..m-1; only E's postings are read, ORing one bit per term into a mask
per document in 16K-document blocks (as `levels` does). A candidate's upper bound is the level of
(its E mask | every non-E bit): the canonical sum of a superset of positive weights is never below a
subset's (float addition of positive numbers is monotone under round-to-nearest) and its popcount
never smaller. Candidates are visited by bound, best first, and each one's non-E bits are found in its
forward row (one binary search per non-E term); its exact mask gives its (score, matches) from the
level tables. The top k is the shared heap (`topk`), keyed by the full order. Probing stops when a
bound ranks strictly after the heap's worst entry on (score, matches); at an equal (score, matches)
only candidates whose id rank beats the worst entry's are probed.

Why the result is exact. A document outside E holds at most the non-E terms: its (score, matches)
is at most (score, popcount) of the all-non-E mask. When the k-th entry beats that strictly, no such
document can enter, and every candidate that could has been probed. Otherwise the k-th entry found
(a lower bound of the true one) gives a larger E (MaxScore's split: the lightest terms whose all-set
mask still ranks strictly after it) and the query is redone; when E would hold more than `_SHARE` of
the query's postings (pruning cannot pay), or more than the candidate buffer, `levels` reads them all.

Queries of more than `levels.MAX_TERMS` terms and k <= 0 take `ssr._search_one` as in `levels`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .candidates import CorruptIndexData, cap_k, region_offsets
from .levels import _BUFFER, _MASKS, MAX_TERMS, _levels_one, _tables
from .prune import _contains
from .ssr import DEFAULT_BLOCK, _search_one
from .topk import check_key_range, compact_failed, deheap_sort, doc_key, heap_push, rejects

# candidates per thread; a query whose essential lists hold more takes levels
_CANDIDATES = 1 << 20
# the first essential set: the heaviest lists until they hold this many postings per result wanted
_FIRST = 2
# the cost rule: which queries try (at least RULE[0] postings and RULE[1] per result wanted, the lightest
# list holding a RULE[2] share of them: what pruning can skip is mostly that list; on queries of fewer
# postings, or of even lists, the tries, probes and re-reads cost more than levels: benchmarks/RESULTS.md),
# and RULE[3], what a forward-row probe costs in sequentially read postings (measured: ~500 ns against
# ~5 ns at 8.8M, where the rows miss cache and TLB): a probe count above it makes reading another list pay
RULE = (32768.0, 128.0, 0.75, 64.0)
# essential lists holding more than this share of a query's postings: levels reads them all instead
_SHARE = 0.5
# per-query counters (`search_batch(stats=...)`): postings read, forward rows probed, E sets tried,
# 1 when levels read every posting in the end
STATS = 4


@nb.njit(cache=True, nogil=True)
def _collect(a, p, m, q_terms, indptr, docs, n_docs, block, live, mask, touched, cur, end, last, cd, cm):
    """Live documents of the lists of terms a+p..a+m-1 into cd (uint32) with their masks in cm (uint16).

    mask uint16[block] must be zero and is left zero. Returns the candidate count, or -1 for corrupt
    postings (not strictly ascending, or >= n_docs).
    """
    for j in range(p, m):
        t = q_terms[a + j]
        cur[j] = indptr[t]
        end[j] = indptr[t + 1]
        last[j] = -1
    n = 0
    while True:
        lo = n_docs
        left = False
        for j in range(p, m):
            if cur[j] < end[j]:
                left = True
                d = np.int64(docs[cur[j]])
                if d < lo:
                    lo = d
        if lo >= n_docs:
            return -1 if left else n
        hi = min(lo + block, n_docs)
        nt = 0
        for j in range(p, m):
            bit = np.uint16(1 << j)
            c = cur[j]
            e = end[j]
            prev = last[j]
            while c < e:
                d = np.int64(docs[c])
                if d >= hi:
                    break
                if d <= prev:  # strictly ascending postings (hence d >= lo): keeps x in range
                    return -1
                prev = d
                x = d - lo
                old = mask[x]
                touched[nt] = x
                nt += np.int64(old == 0)
                mask[x] = old | bit
                c += 1
            cur[j] = c
            last[j] = prev
        for i in range(nt):
            x = touched[i]
            msk = mask[x]
            mask[x] = 0
            if live.shape[0] != 0 and not live[lo + x]:
                continue
            cd[n] = lo + x
            cm[n] = msk
            n += 1


@nb.njit(cache=True, nogil=True, inline="always")
def _below(s, m, key, bs, bm, bk):
    """True when (s, m, key) ranks strictly after the entry (bs, bm, bk)."""
    return s < bs or (s == bs and (m < bm or (m == bm and key > bk)))


@nb.njit(cache=True, nogil=True)
def _attempt(a, p, m, q_terms, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd_terms, block, cap, live, mask,
             touched, cur, end, last, score, pop, level, cand, bucket, base, res_d, res_s, res_m, bar, next_df,
             probe_cost, stats):
    """The top k (a heap in res_*[base:base + cap]) among documents of E = terms p..m-1 that rank
    at or before `bar` = (score, matches, key) (the k-th of k real documents holding an E term, so a
    lower bound of the final k-th entry; score -1: none).

    Exact among those documents; the caller decides whether documents outside E could still
    enter. Gives up (grow = True) when the candidates still to probe would cost more than reading
    `next_df` more postings. cand = (docs uint32, masks uint16, sorted docs uint32),
    bucket = (counts, order, levels) int64[>= 2**MAX_TERMS]. Returns (heap size or -1 for corrupt
    postings, grow).
    """
    cd, cm, sd = cand
    bcount, border, blevel = bucket
    bs, bm, bk = bar
    n = _collect(a, p, m, q_terms, indptr, docs, n_docs, block, live, mask, touched, cur, end, last, cd, cm)
    if n < 0:
        return -1, False
    # candidates grouped by their E mask (bucket b = mask >> p), buckets by their bound's level
    nonE = (1 << p) - 1
    nbk = 1 << (m - p)
    bcount[:nbk] = 0
    for i in range(n):
        bcount[cm[i] >> p] += 1
    for b in range(nbk):
        blevel[b] = level[(b << p) | nonE]
    order = np.argsort(blevel[1:nbk]) + 1  # bucket 0 (no E term) is empty
    start = 0
    for b in range(1, nbk):
        c = bcount[b]
        bcount[b] = start
        start += c
    for i in range(n):
        b = cm[i] >> p
        sd[bcount[b]] = cd[i]
        bcount[b] += 1
    cum = border  # cum[u]: candidates in the buckets before the u-th in bound order
    cum[0] = 0
    for u in range(nbk - 1):
        b = order[u]
        cum[u + 1] = cum[u] + bcount[b] - (bcount[b - 1] if b > 1 else 0)
    stop = nbk - 1
    size = 0
    probes = 0
    grow = False
    for u in range(nbk - 1):
        b = order[u]
        ub = (b << p) | nonE
        us = score[ub]
        um = pop[ub]
        # every later bucket's bound ranks at or after this one
        if rejects(res_s, res_m, base, size, cap, us, um) or us < bs or (us == bs and um < bm):
            break
        # the candidates of buckets u..stop-1 (those whose bound still beats the k-th and the bar) may
        # all need probing: give up when that costs more than reading next_df postings
        while stop > u:
            w = (order[stop - 1] << p) | nonE
            if not (rejects(res_s, res_m, base, size, cap, score[w], pop[w]) or score[w] < bs or (
                    score[w] == bs and pop[w] < bm)):
                break
            stop -= 1
        if (cum[stop] - cum[u]) * probe_cost > next_df:
            grow = True
            break
        lo_i = bcount[b - 1] if b > 1 else 0
        for i in range(lo_i, bcount[b]):
            d = np.int64(sd[i])
            if rejects(res_s, res_m, base, size, cap, us, um):
                break
            tie_root = size == cap and us == res_s[base] and um == res_m[base]
            if tie_root or (us == bs and um == bm):  # at best a tie on (score, matches): the id decides
                key = doc_key(doc_rank[d], d)
                if _below(us, um, key, bs, bm, bk) or (tie_root and key > res_d[base]):
                    continue
            r0 = fwd_indptr[d]
            r1 = fwd_indptr[d + 1]
            full = b << p
            for j in range(p):
                if _contains(fwd_terms, r0, r1, q_terms[a + j]):
                    full |= 1 << j
            probes += 1
            s = score[full]
            mm = pop[full]
            if not rejects(res_s, res_m, base, size, cap, s, mm):
                key = doc_key(doc_rank[d], d)
                if not _below(s, mm, key, bs, bm, bk):
                    size = heap_push(res_s, res_m, res_d, base, size, cap, s, mm, key)
    stats[1] += probes
    return size, grow


@nb.njit(cache=True, nogil=True, inline="always")
def _df(indptr, q_terms, a, j):
    t = q_terms[a + j]
    return indptr[t + 1] - indptr[t]


@nb.njit(cache=True, nogil=True)
def _probe_one(q, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd_terms, q_offsets, q_weights, q_terms, block, cap,
               live, mask, touched, cur, end, last, score, pop, level, lvl_score, lvl_pop, cand, bucket, base, res_d,
               res_s, res_m, rule, stats):
    """One query of 2..MAX_TERMS terms, cap >= 1, by growing essential sets; results best first in
    res_*[base:base + cap]. Returns the result count, -1 for corrupt postings, -2 when levels
    should read every posting instead (nothing written)."""
    a = q_offsets[q]
    m = q_offsets[q + 1] - a
    total = 0
    for j in range(m):
        total += _df(indptr, q_terms, a, j)
    if total < max(rule[0], rule[1] * cap) or _df(indptr, q_terms, a, 0) < rule[2] * total:
        return -2
    _tables(q_weights, a, m, score, pop, level, lvl_score, lvl_pop)
    limit = min(_SHARE * total, cand[0].shape[0])
    p = m - 1  # first E: the heaviest lists until they hold _FIRST postings per result wanted
    held = _df(indptr, q_terms, a, p)
    while p > 1 and held < _FIRST * cap:
        p -= 1
        held += _df(indptr, q_terms, a, p)
    bar = (-1.0, np.int64(0), np.int64(0))
    spent = 0
    while p > 0 and held <= limit and spent <= total:
        stats[0] += held
        stats[2] += 1
        probed = stats[1]
        # what probing is weighed against: reading the next list, else every posting (levels)
        next_df = total
        if p > 1 and held + _df(indptr, q_terms, a, p - 1) <= limit:
            next_df = _df(indptr, q_terms, a, p - 1)
        size, grow = _attempt(a, p, m, q_terms, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd_terms, block, cap,
                              live, mask, touched, cur, end, last, score, pop, level, cand, bucket, base, res_d,
                              res_s, res_m, bar, next_df, rule[3], stats)
        if size < 0:
            return -1
        spent += held + rule[3] * (stats[1] - probed)
        nonE = (1 << p) - 1
        if not grow and rejects(res_s, res_m, base, size, cap, score[nonE], pop[nonE]):
            deheap_sort(res_s, res_m, res_d, base, size)  # nothing outside E can enter: exact
            return size
        if size == cap:  # a real k-th entry: the final one ranks at or before it
            bar = (res_s[base], np.int64(res_m[base]), res_d[base])
        # a larger E: at least one more list, then MaxScore's split at the bar
        p -= 1
        held += _df(indptr, q_terms, a, p)
        while p > 0 and bar[0] >= 0 and not (score[(1 << p) - 1] < bar[0] or (
                score[(1 << p) - 1] == bar[0] and pop[(1 << p) - 1] < bar[1])):
            p -= 1
            held += _df(indptr, q_terms, a, p)
    return -2


@nb.njit(cache=True, parallel=True)
def _probe_batch(indptr, docs, doc_rank, n_docs, fwd_indptr, fwd_terms, q_offsets, q_terms, q_weights, k, block,
                 n_chunks, live, buffer, candidates, rule, stats):
    nq = q_offsets.shape[0] - 1
    caps_off = region_offsets(q_offsets, q_terms, indptr, k)
    longest = 1
    for q in range(nq):
        longest = max(longest, q_offsets[q + 1] - q_offsets[q])
    width = min(block, max(n_docs, 1))
    heap_width = width if k <= 0 or longest > MAX_TERMS else 0
    res_d = np.empty(caps_off[nq], dtype=np.int64)
    res_s = np.empty(caps_off[nq], dtype=np.float64)
    res_m = np.empty(caps_off[nq], dtype=np.int32)
    sizes = np.zeros(nq, dtype=np.int64)
    for c in nb.prange(n_chunks):
        mask = np.zeros(width, dtype=np.uint16)
        touched = np.empty(width + 1, dtype=np.int64)  # the branch-free first touch writes one past
        cur = np.empty(longest, dtype=np.int64)
        end = np.empty(longest, dtype=np.int64)
        last = np.empty(longest, dtype=np.int64)
        score = np.empty(_MASKS, dtype=np.float64)
        pop = np.empty(_MASKS, dtype=np.int32)
        level = np.empty(_MASKS, dtype=np.int32)
        lvl_score = np.empty(_MASKS, dtype=np.float64)
        lvl_pop = np.empty(_MASKS, dtype=np.int32)
        hist = np.zeros(_MASKS, dtype=np.int64)
        size0 = max(buffer, 4 * min(k, n_docs))
        buf = (np.empty(size0, np.int64), np.empty(size0, np.int32), np.empty(size0, np.int64))
        n_cand = candidates if k > 0 else 0
        cand = (np.empty(n_cand, np.uint32), np.empty(n_cand, np.uint16), np.empty(n_cand, np.uint32))
        bucket = (np.empty(_MASKS, np.int64), np.empty(_MASKS, np.int64), np.empty(_MASKS, np.int64))
        acc = np.zeros(heap_width, dtype=np.float64)
        cnt = np.zeros(heap_width, dtype=np.int32)
        no_bar_s = np.zeros(0, dtype=np.float64)
        no_bar_m = np.zeros(0, dtype=np.int32)
        no_bar_k = np.zeros(0, dtype=np.int64)
        for q in range(c, nq, n_chunks):
            base = caps_off[q]
            cap = caps_off[q + 1] - base
            m = q_offsets[q + 1] - q_offsets[q]
            if cap == 0:
                continue
            st = stats[q]
            if k > 0 and m <= MAX_TERMS:
                got = -2
                if m >= 2 and fwd_indptr.shape[0] == n_docs + 1:
                    got = _probe_one(q, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd_terms, q_offsets, q_weights,
                                     q_terms, width, cap, live, mask, touched, cur, end, last, score, pop, level,
                                     lvl_score, lvl_pop, cand, bucket, base, res_d, res_s, res_m, rule, st)
                if got == -2:
                    st[3] += 1
                    for j in range(q_offsets[q], q_offsets[q + 1]):
                        st[0] += indptr[q_terms[j] + 1] - indptr[q_terms[j]]
                    got = _levels_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_weights, q_terms, width, cap,
                                      live, mask, touched, cur, end, last, score, pop, level, lvl_score, lvl_pop,
                                      hist, buf, base, res_d, res_s, res_m, no_bar_s, no_bar_m, no_bar_k)
                sizes[q] = got
            else:
                sizes[q] = _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width,
                                       acc, cnt, touched, cur, end, last, base, cap, res_d, res_s, res_m, live,
                                       no_bar_s, no_bar_m, no_bar_k)
            if sizes[q] < 0:  # corrupt postings: this chunk's accumulators are dirty; stop it
                break
    return compact_failed(caps_off, sizes, res_s, res_m, res_d)


def search_batch(indptr, docs, doc_rank, n_docs, fwd_indptr, fwd_terms, q_offsets, q_terms, q_weights, k,
                 block=DEFAULT_BLOCK, n_chunks=None, live=None, buffer=_BUFFER, candidates=_CANDIDATES, rule=RULE,
                 stats=None):
    """Exact top-k of every query, as `levels.search_batch` (same arguments, same results bit for bit).

    fwd_indptr int[N + 1] and fwd_terms uint32 are the forward index (each document's term ids,
    ascending; read as they are, never copied); an empty fwd_indptr makes every query read all its
    postings (`levels`).
    `candidates`: per-thread candidate buffer. `rule`: which queries try pruning (see RULE).
    `stats`: an int64[Q, STATS] array to add each query's
    postings read, forward rows probed, essential sets tried and whether levels read every posting to.
    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32).
    """
    if n_chunks is None:
        n_chunks = nb.get_num_threads()
    check_key_range(n_docs)
    nq = len(q_offsets) - 1
    if stats is None:
        stats = np.zeros((nq, STATS), dtype=np.int64)
    *out, bad = _probe_batch(indptr, docs, doc_rank, np.int64(n_docs), fwd_indptr, fwd_terms,
                             np.asarray(q_offsets, dtype=np.int64), np.asarray(q_terms, dtype=np.int64),
                             np.asarray(q_weights, dtype=np.float64), np.int64(cap_k(k, n_docs)),
                             np.int64(max(1, block)), np.int64(max(1, min(n_chunks, nq))),
                             np.zeros(0, dtype=np.uint8) if live is None else np.asarray(live).view(np.uint8),
                             np.int64(max(1, buffer)), np.int64(max(1, candidates)),
                             np.asarray(rule, dtype=np.float64), stats)
    if bad:
        raise CorruptIndexData("postings_docs.npy: a posting list is not strictly ascending or holds a document "
                               "id >= N")
    return tuple(out)
