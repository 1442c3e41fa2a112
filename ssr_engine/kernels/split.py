"""MaxScore's split for `levels`: the lightest lists read only into the other lists' documents, behind a bar
found first on the rarest lists (DESIGN.md section 4).

A query's terms are in ascending weight (bit j = term j). Once the bar level is such that even a document of
all the lightest lists 0..p-1 ranks after it (level[2**p - 1] > bar: a subset's level is never better than
its superset's), a document outside the lists p..m-1 cannot enter: those lists alone start masks, and lists
0..p-1 only OR their bit into masks already started (`or_lists`); only the documents of p..m-1 are visited.

`first_level` gives the bar before the scan: the documents of the rarest lists (at most `_SHARE` of the
query's postings) ranked by the mask of those lists alone. A document's true mask holds that partial one, so
its true level is at least as good: when k live documents have partial levels at or above L, the final
k-th entry's level is at or above L, and every document below L can be dropped from the first block on.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lists import length
from .packed import at
from .ssr import block_start, open_lists

# the rarest lists that give the first bar hold at most this share of the query's postings (read twice)
_SHARE = 0.25


@nb.njit(cache=True, nogil=True, inline="always")
def or_lists(docs, cur, end, last, p, m, lo, hi, mask, starts):
    """One block [lo, hi) of the lists 0..m-1 ORed into masks (uint16[block], bit j for list j), each list's
    first position in the block going to starts[j] (its postings in the block: starts[j]..cur[j]); the lists
    0..p-1 OR their bit only into documents of the lists p..m-1 (their masks left zero elsewhere). Cursors
    cur/end/last as `levels.or_block`'s. Returns False for corrupt postings (not strictly ascending)."""
    # this block-read loop's head (cursors, stop at hi, the strictly-ascending check) is written out again in
    # levels.or_block, ssr._search_one and prune: only the read is shared (`packed.at`); the bodies differ
    # (mask bits, sums, first touches) and Numba passes a loop body only as a jitted callback, not tried in
    # these hottest loops (a shared sort taking its comparison so cost 4.2x: kernels/text.py `_sort_tokens`)
    for u in range(m):
        j = (u + p) % m  # p..m-1 first: their documents' masks are set before 0..p-1 are read
        bit = np.uint16(1 << j)
        new = j >= p  # may start a mask
        c = cur[j]
        starts[j] = c
        e = end[j]
        prev = last[j]
        while c < e:
            d = at(docs, c)
            if d >= hi:
                break
            if d <= prev:  # strictly ascending postings (hence d >= lo): keeps d - lo in range
                return False
            prev = d
            v = mask[d - lo]
            mask[d - lo] = v | (bit * np.uint16(new or v != 0))
            c += 1
        cur[j] = c
        last[j] = prev
    return True


@nb.njit(cache=True, nogil=True)
def rare_start(df, m, cap):
    """The first of the rarest lists p..m-1 that give a first bar (their postings at most `_SHARE` of the
    query's; df int64[m]: each list's length, summed over the indexes searched together), or m for no bar
    (those lists hold fewer than 2 cap postings)."""
    total = 0
    for j in range(m):
        total += df[j]
    p = m
    held = 0
    while p > 1:
        if held + df[p - 1] > _SHARE * total:
            break
        held += df[p - 1]
        p -= 1
    return m if p == m or held < 2 * cap else p


@nb.njit(cache=True, nogil=True)
def rare_hist(q_terms, a, p, m, indptr, docs, n_docs, live, block, level, hist, mask, cur, end, last):
    """Count one index's live documents of the lists p..m-1 by the level of their bits on those lists alone
    (hist[level] += 1; a term id < 0: absent from this index). Returns False for corrupt postings."""
    open_lists(q_terms, a, p, m, indptr, cur, end, last)
    for j in range(p, m):
        if q_terms[a + j] < 0:
            cur[j] = end[j] = 0
    starts = np.empty(m - p, np.int64)
    while True:
        lo = block_start(docs, cur[p:], end[p:], m - p, n_docs)
        if lo < 0:
            return False
        if lo >= n_docs:
            return True
        if not or_lists(docs, cur[p:], end[p:], last[p:], 0, m - p, lo, min(lo + block, n_docs), mask, starts):
            return False
        for j in range(p, m):
            for c in range(starts[j - p], cur[j]):
                x = at(docs, c) - lo
                v = mask[x]
                if v == 0:
                    continue
                mask[x] = 0
                if live.shape[0] == 0 or live[lo + x]:
                    hist[level[np.int64(v) << p]] += 1


@nb.njit(cache=True, nogil=True)
def hist_level(hist, nl, cap):
    """The best level with cap documents at or above it in hist (nl - 1: none); hist is left zero."""
    got = nl - 1
    cum = 0
    for lv in range(nl):
        cum += hist[lv]
        if cum >= cap:
            got = lv
            break
    hist[:nl] = 0
    return got


@nb.njit(cache=True, nogil=True)
def first_level(q_terms, a, m, indptr, docs, n_docs, live, block, cap, level, nl, hist, mask, cur, end, last):
    """A bar level for the query q_terms[a:a + m] (`levels._tables`' level, nl levels) before its scan: the
    best level L at which cap live documents of its rarest lists rank at or above L on those lists' bits
    alone; nl - 1 (no bar) when those lists hold fewer than 2 cap postings or under cap documents.
    hist int64[>= nl] must be zero and is left zero; mask uint16[block] too. Returns -1 for corrupt postings.
    A live index's segments run the same three steps over all of them (`kernels.live`).
    """
    df = np.empty(m, np.int64)
    for j in range(m):
        df[j] = length(indptr, q_terms[a + j])
    p = rare_start(df, m, cap)
    if p == m:
        return nl - 1
    if not rare_hist(q_terms, a, p, m, indptr, docs, n_docs, live, block, level, hist, mask, cur, end, last):
        return -1
    return hist_level(hist, nl, cap)
