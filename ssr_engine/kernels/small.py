"""Small queries list by list, rarest first, behind the heap's bar (part of method `ssr`, DESIGN.md section 4).

A query of m <= `levels.MAX_TERMS` terms in ascending weight (bit j = term j, as in `levels`). Its lists
are read one at a time from the heaviest (rarest, j = m - 1) down. Each document d of list j is scored
exactly: the heavier lists j+1..m-1 already gave it its (score, matches) if it is in one of them, so it is
skipped then (a duplicate); else its mask is bit j | its bits among the lighter lists 0..j-1, found by
galloping those lists' cursors to d (d ascends within list j, so each cursor only moves forward). The top k
is the shared heap (`topk`), keyed by the full order.

Why it pays: the rarest lists hold the best documents, so the heap's root (the k-th so far) is high after
the first lists, and then

- a document's bound, bit j | its lighter bits found so far | the lighter bits not yet looked at, is
  checked before every gallop (heaviest lighter list first): most documents stop after one or two;
- list j is read at all only while its bound, the mask of every bit 0..j, could still enter: a document
  outside lists j+1..m-1 holds at most bits 0..j, and a superset's canonical sum is never below a subset's
  (positive weights, round-to-nearest is monotone) nor its popcount smaller. The lightest lists, which
  hold most postings, are mostly never read.

Ties on (score, matches) are decided by the id: with ranks ascending in documents (`monotone`) the heap
holds document numbers as keys (no doc_rank read until the k results), and within list j a document that
ties the root's (score, matches) on its list's bound ends the list (every later one has a larger id).

Exactness: every document holding a query term is either scored exactly (in the rarest list that holds
it) or left out by a bound that ranks strictly after k documents found (or after the caller's bar), or
on an equal (score, matches) after them by id.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .levels import MAX_TERMS, first_at
from .lists import length, span
from .packed import at
from .prune import _gallop
from .topk import deheap_sort, doc_key, heap_push

# another list's cursor follows list j's documents by a walk when that list holds at most this many times
# list j's postings (a walk reads them in order; a gallop's jumps each missed cache: ~120 ns, RESULTS.md),
# else by galloping
_SCAN = 64


@nb.njit(cache=True, nogil=True, inline="always")
def _df(indptr, q_terms, a, j):
    """The document frequency of the query's term j (its list's length)."""
    t = q_terms[a + j]
    return length(indptr, t)


@nb.njit(cache=True, nogil=True, inline="always")
def _advance(docs, c, e, target, walk):
    """First position in [c, e) whose doc is >= target: a walk, or a gallop (`prune._gallop`)."""
    if not walk:
        return _gallop(docs, c, e, target)
    while c < e and at(docs, c) < target:
        c += 1
    return c


@nb.njit(cache=True, nogil=True, inline="always")
def _score_tables(q_weights, a, m, score, pop):
    """score[mask] (the canonical sum: the mask minus its highest bit, plus that bit's weight) and its
    popcount, for every mask of m terms (float64/int32[>= 2**m])."""
    score[0] = 0.0
    pop[0] = 0
    for j in range(m):
        w = q_weights[a + j]
        bit = 1 << j
        for x in range(bit):
            score[x | bit] = score[x] + w
            pop[x | bit] = pop[x] + 1


@nb.njit(cache=True, nogil=True, inline="always")
def _key(d, doc_rank, monotone):
    """The heap's key of document d: d itself when ranks ascend with documents, else rank << 32 | d."""
    return np.int64(d) if monotone else doc_key(doc_rank[d], d)


@nb.njit(cache=True, nogil=True, inline="always")
def _after(s, mm, size, cap, base, res_s, res_m, bs, bm):
    """Whether (s, mm) ranks strictly after the full heap's root or the caller's bar on (score, matches)
    alone: then so does any document at or below it, whatever its id."""
    return (size == cap and (s < res_s[base] or (s == res_s[base] and mm < res_m[base]))) or (
        bs >= 0 and (s < bs or (s == bs and mm < bm)))


@nb.njit(cache=True, nogil=True, inline="always")
def _out(d, s, mm, size, cap, base, res_s, res_m, res_d, bs, bm, bk, bar_doc, doc_rank, monotone):
    """Whether document d at (s, mm) ranks after the full heap's root or after the caller's bar (bs, bm, bk:
    a document must rank at or before it; bs < 0: none; bar_doc: with `monotone`, the first document
    after it)."""
    if size == cap:
        rs = res_s[base]
        if s < rs:
            return True
        if s == rs:
            rm = res_m[base]
            if mm < rm or (mm == rm and _key(d, doc_rank, monotone) > res_d[base]):
                return True
    if bs >= 0:
        if s < bs:
            return True
        if s == bs:
            if mm < bm:
                return True
            if mm == bm:
                return d >= bar_doc if monotone else doc_key(doc_rank[d], d) > bk
    return False


@nb.njit(cache=True, nogil=True, inline="always")
def _walk(j, a, m, los, his, docs, doc_rank, first, n_docs, live, cap, base, res_d, res_s, res_m, size, bar, bar_doc,
          monotone, score, pop, cur, end, scan, stats):
    """List j of one index's lists (list i's postings los[a + i]..his[a + i] - 1 of docs; empty: absent
    there) into the heap of `size` entries: its documents not in a heavier list, each scored exactly unless
    its bound ranks after the heap's root or the bar. The index's document d is numbered first + d (its key:
    `_key(first + d, doc_rank, ...)`; bar_doc on that numbering). Returns the heap's new size, or -1 for
    corrupt postings (a list not strictly ascending, or a document >= n_docs)."""
    full = (1 << (j + 1)) - 1  # every bit a document outside the heavier lists may hold
    fs = score[full]
    fm = pop[full]
    bs, bm, bk = bar
    nj = his[a + j] - los[a + j]
    for i in range(m):
        cur[i], end[i] = los[a + i], his[a + i]
        # a list at most _SCAN times as long as list j is walked, a longer one galloped
        scan[i] = end[i] - cur[i] <= _SCAN * nj
    bit = 1 << j
    prev = -1
    c0 = cur[j]
    c = c0
    gallops = 0
    while c < end[j]:
        d = at(docs, c)
        c += 1
        if d <= prev or d >= n_docs:
            return -1
        prev = d
        g = first + d
        if _out(g, fs, fm, size, cap, base, res_s, res_m, res_d, bs, bm, bk, bar_doc, doc_rank, monotone):
            # on (score, matches) alone, or on the id with ranks ascending: every later document too
            if monotone or _after(fs, fm, size, cap, base, res_s, res_m, bs, bm):
                break
            continue
        if live.shape[0] != 0 and not live[d]:
            continue
        msk = bit
        rest = bit - 1  # lighter bits not looked at yet
        ok = True
        for i in range(j - 1, -1, -1):
            x = _advance(docs, cur[i], end[i], d, scan[i])
            cur[i] = x
            gallops += 1
            lb = 1 << i
            rest ^= lb
            if x < end[i] and at(docs, x) == d:
                msk |= lb  # the bound stays what was checked last
            else:
                ub = msk | rest
                if _out(g, score[ub], pop[ub], size, cap, base, res_s, res_m, res_d, bs, bm, bk, bar_doc, doc_rank,
                        monotone):
                    ok = False
                    break
        if not ok:
            continue
        for i in range(j + 1, m):  # in a heavier list: scored there already
            x = _advance(docs, cur[i], end[i], d, scan[i])
            cur[i] = x
            gallops += 1
            if x < end[i] and at(docs, x) == d:
                ok = False
                break
        if ok:
            size = heap_push(res_s, res_m, res_d, base, size, cap, score[msk], pop[msk], _key(g, doc_rank, monotone))
    stats[0] += c - c0
    stats[1] += gallops
    return size


@nb.njit(cache=True, nogil=True)
def small_one(a, m, q_terms, q_weights, indptr, docs, doc_rank, n_docs, live, cap, base, res_d, res_s, res_m,
              bar, monotone, score, pop, cur, end, scan, stats):
    """The top `cap` (>= 1) of the query of terms q_terms[a:a + m] (1 <= m <= `levels.MAX_TERMS`, ascending
    weight), best first in res_*[base:] (keys in res_d). bar = (score, matches, key): documents must rank
    at or before it (score < 0: none). score/pop float64/int32[>= 2**m], cur/end int64[>= MAX_TERMS + m]:
    scratch.
    stats: postings read (driving lists), gallops (probe's STATS columns 0 and 1).
    Returns the result count, or -1 for corrupt postings (a list read not strictly ascending, or >= n_docs).
    """
    _score_tables(q_weights, a, m, score, pop)
    bs, bm, bk = bar
    bar_doc = first_at(doc_rank, bk + 1) if monotone and bs >= 0 else n_docs
    size = 0
    # the lists' spans, read once, in the cursor rows' spare tail (the workspace's rows hold >= 64 entries and m
    # <= MAX_TERMS): no allocation a query
    los, his = cur[MAX_TERMS : MAX_TERMS + m], end[MAX_TERMS : MAX_TERMS + m]
    for i in range(m):
        los[i], his[i] = span(indptr, q_terms[a + i])
    for j in range(m - 1, -1, -1):
        full = (1 << (j + 1)) - 1
        if _after(score[full], pop[full], size, cap, base, res_s, res_m, bs, bm):  # no document left can enter
            break
        size = _walk(j, 0, m, los, his, docs, doc_rank, 0, n_docs, live, cap, base, res_d, res_s, res_m, size, bar,
                     bar_doc, monotone, score, pop, cur, end, scan, stats)
        if size < 0:
            return -1
    deheap_sort(res_s, res_m, res_d, base, size)
    if monotone:
        for i in range(size):
            d = res_d[base + i]
            res_d[base + i] = doc_key(doc_rank[d], d)
    return size


@nb.njit(cache=True, nogil=True)
def small_across(a, m, terms, los, his, weights, docss, grank, starts, sizes_, lives, scan_order, cap, res_d, res_s,
                 res_m, monotone, score, pop, cur, end, scan, stats):
    """`small_one` over the parts of a collection as one index (a sharded group, with no bar): list by list,
    rarest first, each list read part after part (`scan_order`) into one heap, so the heap's root bars every
    later part and list; no per-part tables, heaps, sorts or merges. The query's terms are weights[a:a + m]
    (ascending), part s's term of each terms[s][a + j] (-1: absent there), its postings los[s][a + j]..
    his[s][a + j] - 1 of docss[s]; part s's document d is numbered
    starts[s] + d and ranked by grank[starts[s] + d] (`monotone`: grank ascends). Results best first in
    res_*[0:], res_d keys (grank << 32 | number). Returns their count, or -1 - s for corrupt postings in
    part s."""
    _score_tables(weights, a, m, score, pop)
    bar = (-1.0, np.int64(0), np.int64(0))
    size = 0
    for j in range(m - 1, -1, -1):
        full = (1 << (j + 1)) - 1
        if _after(score[full], pop[full], size, cap, 0, res_s, res_m, -1.0, 0):  # no document left can enter
            break
        for s in scan_order:
            if terms[s][a + j] < 0:
                continue
            size = _walk(j, a, m, los[s], his[s], docss[s], grank, starts[s], sizes_[s], lives[s], cap, 0, res_d,
                         res_s, res_m, size, bar, grank.shape[0], monotone, score, pop, cur, end, scan, stats)
            if size < 0:
                return -1 - s
    deheap_sort(res_s, res_m, res_d, 0, size)
    if monotone:
        for i in range(size):
            d = res_d[i]
            res_d[i] = doc_key(grank[d], d)
    return size
