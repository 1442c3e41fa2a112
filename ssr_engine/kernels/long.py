"""Queries of more than `levels.MAX_TERMS` terms: their rarest terms' documents scored apart.

`levels` tables a query's 2**m masks, so it takes at most MAX_TERMS terms; longer queries took the
heap union (`ssr._search_one`), whose accumulators and heap cost 40-120 ns a posting on the huge
lists such queries hold (the slowest queries at 8.8M: benchmarks/RESULTS.md). `levels.long_one`
splits them: the lightest MAX_TERMS terms H go through levels as a query of their own, and the
documents C of the other (rarest) terms, few when their lists are short, are scored here:

- a document outside C holds H terms only, so its (score, matches) is that of its H mask: the
  canonical sum over H, the same additions in the same order as over the whole query;
- levels is asked for k + |C| results: at most |C| of them are C's documents (scored there without
  their rare terms, so dropped here), which leaves at least k exact ones, the best outside C;
- each C document is scored over all m terms (a binary search per term, summed in ascending weight:
  the canonical sum), and both parts merged by the full key give the top k (`merge_rare`).

`split_long` and `merge_long` are the two ends; the light part in between is `levels` (`levels.long_one`) or,
for method `ssr`, `probe.search_one` (probing where it pays: 1.1-1.5x on the long queries at 8.8M).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lists import length, span
from .packed import at, contains
from .topk import doc_key, ranks_after

# postings of the rarest terms a query may hold for the split (each of their documents costs m binary
# searches); past it, the heap union
RARE_POSTINGS = 1024
_DOC = 0xFFFFFFFF


@nb.njit(cache=True, nogil=True)
def rare_docs(a, h, m, q_terms, q_weights, indptr, docs, doc_rank, n_docs, live, most):
    """C: the live documents of the query's terms h..m-1 (a: the query's first term in q_terms), each
    scored over all m terms. Returns (count, docs ascending int64, scores float64, matches int32, keys
    int64); count -1 when those lists hold more than `most` postings, -2 for corrupt postings."""
    total = 0
    for j in range(h, m):
        t = q_terms[a + j]
        total += length(indptr, t)
    cd = np.empty(min(total, most + 1), np.int64)
    cs = np.empty(cd.shape[0], np.float64)
    cm = np.empty(cd.shape[0], np.int32)
    ck = np.empty(cd.shape[0], np.int64)
    if total > most:
        return -1, cd[:0], cs[:0], cm[:0], ck[:0]
    n = 0
    for j in range(h, m):
        t = q_terms[a + j]
        prev = -1
        lo, hi = span(indptr, t)
        for p in range(lo, hi):
            d = at(docs, p)
            if d <= prev or d >= n_docs:
                return -2, cd[:0], cs[:0], cm[:0], ck[:0]
            prev = d
            cd[n] = d
            n += 1
    cd = np.unique(cd[:n])
    nc = 0
    for i in range(cd.shape[0]):
        d = cd[i]
        if live.shape[0] != 0 and not live[d]:
            continue
        s = 0.0
        c = 0
        for j in range(m):  # ascending weight: the canonical sum
            t = q_terms[a + j]
            lo, hi = span(indptr, t)
            if contains(docs, lo, hi, d):
                s += q_weights[a + j]
                c += 1
        cd[nc] = d
        cs[nc] = s
        cm[nc] = c
        ck[nc] = doc_key(doc_rank[d], d)
        nc += 1
    return nc, cd[:nc], cs[:nc], cm[:nc], ck[:nc]


@nb.njit(cache=True, nogil=True)
def split_long(q, k, h, q_offsets, q_terms, q_weights, indptr, docs, doc_rank, n_docs, live):
    """Query q's documents C of its terms h..m-1 (`rare_docs`), and how many results its terms 0..h-1 must give
    (k + |C|, at most their postings). Returns (|C| or -1 for corrupt postings or -3 when those lists hold more
    than RARE_POSTINGS, C's (docs, scores, matches, keys), that count)."""
    a = q_offsets[q]
    nc, cd, cs, cm, ck = rare_docs(a, h, q_offsets[q + 1] - a, q_terms, q_weights, indptr, docs, doc_rank, n_docs,
                                   live, RARE_POSTINGS)
    held = 0
    for j in range(h):
        held += length(indptr, q_terms[a + j])
    return (-1 if nc == -2 else -3) if nc < 0 else nc, (cd, cs, cm, ck), min(k + nc, held)


@nb.njit(cache=True, nogil=True, inline="always")
def bar_of(bar_s, bar_m, bar_k, q):
    """The caller's bar of query q as arrays of one entry (of none when there is no bar), for a sub-query 0."""
    b = q if bar_s.shape[0] != 0 else 0
    n = 1 if bar_s.shape[0] != 0 else 0
    return bar_s[b : b + n], bar_m[b : b + n], bar_k[b : b + n]


@nb.njit(cache=True, nogil=True)
def merge_long(hs, hm, hk, nh, rare, cap, res_s, res_m, res_d, base, bar_s, bar_m, bar_k, q):
    """The top cap of query q (`merge_rare`) from its light part's results hs/hm/hk[:nh] and C (`split_long`),
    under the caller's bar (bar_*[q]; empty: none)."""
    cd, cs, cm, ck = rare
    if bar_s.shape[0] != 0:
        return merge_rare(hs, hm, hk, nh, cd, cs, cm, ck, cap, res_s, res_m, res_d, base, True, bar_s[q], bar_m[q],
                          bar_k[q])
    return merge_rare(hs, hm, hk, nh, cd, cs, cm, ck, cap, res_s, res_m, res_d, base, False, 0.0, 0, 0)


@nb.njit(cache=True, nogil=True)
def merge_rare(hs, hm, hk, nh, cd, cs, cm, ck, cap, res_s, res_m, res_d, base, barred, bs, bm, bk):
    """The best `cap` of levels' results hs/hm/hk[:nh] (best first; C's documents among them dropped)
    and of C (`rare_docs`; with `barred`, only those ranking strictly before the full key (bs, bm, bk)),
    merged by the full key into res_*[base:] (keys in res_d). Returns the count."""
    order = np.argsort(ck)  # C in result order: key, then (stable) matches desc, then score desc
    order = order[np.argsort(-cm[order], kind="mergesort")]
    order = order[np.argsort(-cs[order], kind="mergesort")]
    i = 0
    j = 0
    n = 0
    while n < cap:
        while i < nh and contains(cd, 0, cd.shape[0], hk[i] & _DOC):
            i += 1
        take_c = j < order.shape[0]
        if take_c:
            e = order[j]
            take_c = not barred or ranks_after(bs, bm, bk, cs[e], cm[e], ck[e])
        if i >= nh and not take_c:
            break
        if i < nh and (not take_c or ranks_after(cs[order[j]], cm[order[j]], ck[order[j]], hs[i], hm[i], hk[i])):
            res_s[base + n] = hs[i]
            res_m[base + n] = hm[i]
            res_d[base + n] = hk[i]
            i += 1
        else:
            e = order[j]
            res_s[base + n] = cs[e]
            res_m[base + n] = cm[e]
            res_d[base + n] = ck[e]
            j += 1
        n += 1
    return n
