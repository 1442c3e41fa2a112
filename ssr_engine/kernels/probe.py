# Over 400 lines on purpose: the essential-set search (collect, bound, probe or complete, grow E) is one
# argument for exactness (the docstring), kept in one module with its batch entry points (and `_long`, which
# calls `search_one` and is called by `_query`: in another module it would import this one and be imported by it).
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
only candidates whose id rank beats the worst entry's are probed. Where the candidates to probe would
cost more than reading the other lists (RULE), `_complete` reads E again and lets each other list OR
its bit, block by block, into the documents E touched whose bound can still enter the heap as it fills
(no probes; those masks exact; a block without any leaves the other lists unread).

A caller's bar (a live index's other segments, shards: the full key a document must rank strictly
before) starts the query as the kernel's own bar does; the results are those without it that beat it.

Why the result is exact. A document outside E holds at most the non-E terms: its (score, matches)
is at most (score, popcount) of the all-non-E mask. When the k-th entry beats that strictly, no such
document can enter, and every candidate that could has been probed (with a caller's bar and fewer than
k found: when the all-non-E mask ranks strictly after that bar). Otherwise the k-th entry found
(a lower bound of the true one) gives a larger E (MaxScore's split: the lightest terms whose all-set
mask still ranks strictly after it) and the query is redone; when E would hold more than RULE[5] of
the query's postings (pruning cannot pay), or more than the candidate buffer, `levels` reads them all.

Queries of more than `levels.MAX_TERMS` terms take `_long` (as `levels.long_one`, their lightest terms through
`search_one`), and k <= 0 `ssr._search_one`, as in `levels`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import levels
from .forward import row_contains
from .levels import _BUFFER, _MASKS, MAX_TERMS, _levels_one, _tables, first_at, long_one, next_block
from .long import bar_of, merge_long, split_long
from .packed import at
from .prune import _contains, _gallop
from .small import _df, small_one
from .ssr import DEFAULT_BLOCK, _bar_arrays, _search_one, open_lists
from .topk import compact_failed, deheap_sort, doc_key, heap_push, ranks_after, rejects

# candidates per thread; a query whose essential lists hold more takes levels
_CANDIDATES = 1 << 20
# the first essential set: the heaviest lists until they hold this many postings per result wanted
_FIRST = 2
# the cost rule: which queries try (at least RULE[0] postings and RULE[1] per result wanted, the lightest
# list holding a RULE[2] share of them: what pruning can skip is mostly that list; on queries of fewer
# postings, or of even lists, the tries, probes and re-reads cost more than levels: benchmarks/RESULTS.md),
# RULE[3], what a forward-row probe costs in sequentially read postings (measured: ~500 ns against
# ~5 ns at 8.8M, where the rows miss cache and TLB): a probe count above it makes reading another list pay;
# RULE[4], what a posting of a non-E list costs in `_complete` (a load and a masked store, no new candidate; most
# are never read: survivors bounded again before each long list, searched when few);
# RULE[5]: essential lists holding more than this share of a query's postings: levels reads them all instead;
# RULE[6]: queries of fewer postings (and of one term, with ids in row order) take `small`: its gallops missed
# cache (~120 ns each on real short texts) where levels' reads are sequential, so it pays only on tiny queries;
# RULE[7]: ... and of at most this many results wanted (at K=1000 its heap cost more than levels' buffer);
# RULE[8]: in `_complete`, a block's postings of a non-E list are searched per surviving candidate rather than
# scanned when they outnumber the survivors by more than this (each binary search costs ~log2 of them in
# dependent loads that miss cache at 8.8M, where a scan streams)
RULE = (32768.0, 128.0, 0.75, 64.0, 0.05, 0.5, 200.0, 64.0, 64.0)
_RULE = np.asarray(RULE, dtype=np.float64)  # as the kernels take it (made once: a single query's call is µs)
# levels' blocks are widened 4x at a time (up to WIDEN x the caller's) while a block holds under this many
# postings of the query on average
_PER_BLOCK = 512
WIDEN = 16
_DOC = 0xFFFFFFFF  # a key's document half
# per-query counters (`search_batch(stats=...)`): postings read, forward rows probed, E sets tried,
# 1 when levels read every posting in the end, postings of non-E lists read by `_complete` (also in the first),
# 1 when `small` answered it
STATS = 6


@nb.njit(cache=True, nogil=True)
def _collect(a, p, m, q_terms, indptr, docs, n_docs, block, live, mask, touched, cur, end, last, cd, cm):
    """Live documents of the lists of terms a+p..a+m-1 into cd (uint32) with their masks in cm (uint16).

    mask uint16[block] must be zero and is left zero. Returns the candidate count, or -1 for corrupt
    postings (not strictly ascending, or >= n_docs).

    One of two loops over E's blocks (both through `levels.next_block`): this one keeps every candidate, as
    `_attempt` must bucket them all by bound before probing the best first; `_complete` settles each block
    before reading the next (bounds, the other lists, the heap), so it holds no candidate across blocks.
    """
    open_lists(q_terms, a, p, m, indptr, cur, end, last)
    n = 0
    while True:
        lo, nt = next_block(docs, cur, end, last, p, m, n_docs, block, mask, touched)
        if lo < 0:
            return -1
        if lo >= n_docs:
            return n
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


@nb.njit(cache=True, nogil=True, inline="always")
def widen(width, postings, n_docs, widest):
    """Blocks for reading `postings` postings: `width` widened 4x at a time (up to `widest`) while a block
    would hold under _PER_BLOCK of them (the per-block work dominated sparse reads: RESULTS.md)."""
    while width * 4 <= widest and postings * width * 4 <= _PER_BLOCK * n_docs:
        width *= 4
    return width


@nb.njit(cache=True, nogil=True, inline="always")
def _tie_out(d, s, m, bar, bar_doc, at_root, root_key, doc_rank, monotone):
    """Whether document d, at best (s, m), ranks after the bar or, tied with the full heap's root on
    (s, m), after the root: its id decides. With keys ascending in documents (`monotone`) documents are
    compared (bar_doc: the first document after the bar's key, `levels.first_at`), no doc_rank read:
    those missed cache at 8.8M."""
    bs, bm, bk = bar
    if monotone:
        return (s == bs and m == bm and d >= bar_doc) or (at_root and d > (root_key & _DOC))
    key = doc_key(doc_rank[d], d)
    return _below(s, m, key, bs, bm, bk) or (at_root and key > root_key)


@nb.njit(cache=True, nogil=True)
def _complete(a, p, m, q_terms, indptr, docs, doc_rank, n_docs, block, live, mask, touched, cur, end, last, score,
              pop, cap, base, res_d, res_s, res_m, bar, monotone, search):
    """What `_attempt` returns, by one pass in blocks instead of probes: E's lists OR their bits into the
    block's masks (the candidates); a candidate whose bound (its E mask | every non-E bit) cannot enter the
    heap or pass the bar is dropped there. The other lists follow heaviest first, each cursor galloped to
    the block: a list ORs its bit only into the survivors (a posting's whole cost: one load and one masked
    store), or where the block holds far fewer survivors than the list's postings, finds each survivor by
    binary search; after each list the survivors are bounded again (their bits so far | the lighter lists'
    bits), so the lightest, longest lists meet fewest. A block without survivors leaves the rest unread.
    Every survivor's mask is then exact. Returns the heap size, or -1 for corrupt postings.
    """
    bs, bm, bk = bar
    nonE = (1 << p) - 1
    bar_doc = first_at(doc_rank, bk + 1) if monotone and bs >= 0 else n_docs
    open_lists(q_terms, a, 0, m, indptr, cur, end, last)
    size = 0
    while True:
        lo, nt = next_block(docs, cur, end, last, p, m, n_docs, block, mask, touched)
        if lo < 0:
            return -1
        if lo >= n_docs:
            return size
        hi = min(lo + block, n_docs)
        ns = 0  # survivors, kept in touched[:ns] (their masks kept; the others zeroed)
        for i in range(nt):
            x = touched[i]
            ub = mask[x] | nonE
            us = score[ub]
            um = pop[ub]
            if (live.shape[0] != 0 and not live[lo + x]) or rejects(res_s, res_m, base, size, cap, us, um) or (
                    us < bs or (us == bs and um < bm)):
                mask[x] = 0
                continue
            at_root = size == cap and us == res_s[base] and um == res_m[base]
            if at_root or (us == bs and um == bm):  # at best a tie on (score, matches): the id decides
                if _tie_out(lo + x, us, um, bar, bar_doc, at_root, res_d[base], doc_rank, monotone):
                    mask[x] = 0
                    continue
            touched[ns] = x
            ns += 1
        for j in range(p - 1, -1, -1):
            if ns == 0:
                break
            bit = np.uint16(1 << j)
            c = _gallop(docs, cur[j], end[j], lo)  # the list's postings in the block: [c, z)
            z = _gallop(docs, c, end[j], hi)
            cur[j] = z
            if j < p - 1 and z - c > ns:  # a long list ahead: bound the survivors again (bits so far | 0..j)
                rest = (1 << (j + 1)) - 1
                n2 = 0
                for i in range(ns):
                    x = touched[i]
                    ub = mask[x] | rest
                    us = score[ub]
                    um = pop[ub]
                    keep = not (rejects(res_s, res_m, base, size, cap, us, um) or us < bs or (us == bs and um < bm))
                    if keep and ((size == cap and us == res_s[base] and um == res_m[base]) or (us == bs and um == bm)):
                        keep = not _tie_out(lo + x, us, um, bar, bar_doc, size == cap and us == res_s[base] and
                                            um == res_m[base], res_d[base], doc_rank, monotone)
                    if keep:
                        touched[n2] = x
                        n2 += 1
                    else:
                        mask[x] = 0
                ns = n2
            if ns * search < z - c:  # few survivors: a binary search each instead of a scan
                for i in range(ns):
                    if _contains(docs, c, z, lo + touched[i]):
                        mask[touched[i]] |= bit
            else:
                prev = lo - 1
                for i in range(c, z):
                    d = at(docs, i)
                    if d <= prev or d >= hi:  # strictly ascending and in the block: keeps d - lo in range
                        return -1
                    prev = d
                    v = mask[d - lo]
                    mask[d - lo] = v | (bit * np.uint16(v != 0))
        for i in range(ns):
            x = touched[i]
            msk = mask[x]
            mask[x] = 0
            s = score[msk]
            mm = pop[msk]
            if rejects(res_s, res_m, base, size, cap, s, mm) or s < bs or (s == bs and mm < bm):
                continue
            at_root = size == cap and s == res_s[base] and mm == res_m[base]
            if (at_root or (s == bs and mm == bm)) and _tie_out(lo + x, s, mm, bar, bar_doc, at_root, res_d[base],
                                                                  doc_rank, monotone):
                continue
            size = heap_push(res_s, res_m, res_d, base, size, cap, s, mm, doc_key(doc_rank[lo + x], lo + x))


@nb.njit(cache=True, nogil=True)
def _attempt(a, p, m, q_terms, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, block, cap, live, mask,
             touched, cur, end, last, score, pop, level, cand, bucket, base, res_d, res_s, res_m, bar, next_df,
             rest, rule, stats, monotone):
    """The top k (a heap in res_*[base:base + cap]) among documents of E = terms p..m-1 that rank
    at or before `bar` = (score, matches, key) (the k-th of k real documents holding an E term, so a
    lower bound of the final k-th entry; score -1: none).

    Exact among those documents; the caller decides whether documents outside E could still
    enter. When probing the candidates whose bound beats the bar would cost more (RULE) than reading
    E again and scanning the `rest` postings of the other lists, `_complete` does that instead. Gives
    up (grow = True) when the candidates still to probe would cost more than reading `next_df` more
    postings. cand = (docs uint32, masks uint16, sorted docs uint32),
    bucket = (counts, order, levels) int64[>= 2**MAX_TERMS]. Returns (heap size or -1 for corrupt
    postings, grow).
    """
    cd, cm, sd = cand
    bcount, border, blevel = bucket
    bs, bm, bk = bar
    bar_doc = first_at(doc_rank, bk + 1) if monotone and bs >= 0 else n_docs
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
    while stop > 0:  # buckets 0..stop-1 in bound order beat the bar
        w = (order[stop - 1] << p) | nonE
        if not (score[w] < bs or (score[w] == bs and pop[w] < bm)):
            break
        stop -= 1
    if cum[stop] * rule[3] > cum[nbk - 1] + rule[4] * rest:
        for j in range(p, m):
            stats[0] += _df(indptr, q_terms, a, j)  # E read again
        stats[0] += rest
        stats[4] += rest
        return _complete(a, p, m, q_terms, indptr, docs, doc_rank, n_docs, block, live, mask, touched, cur, end,
                         last, score, pop, cap, base, res_d, res_s, res_m, bar, monotone, rule[8]), False
    probe_cost = rule[3]
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
                if _tie_out(d, us, um, bar, bar_doc, tie_root, res_d[base], doc_rank, monotone):
                    continue
            r0 = fwd_indptr[d]
            r1 = fwd_indptr[d + 1]
            full = b << p
            for j in range(p):
                if row_contains(fwd, r0, r1, q_terms[a + j]):
                    full |= 1 << j
            probes += 1
            s = score[full]
            mm = pop[full]
            if rejects(res_s, res_m, base, size, cap, s, mm) or s < bs or (s == bs and mm < bm):
                continue
            at_root = size == cap and s == res_s[base] and mm == res_m[base]
            if (at_root or (s == bs and mm == bm)) and _tie_out(d, s, mm, bar, bar_doc, at_root, res_d[base],
                                                                  doc_rank, monotone):
                continue
            size = heap_push(res_s, res_m, res_d, base, size, cap, s, mm, doc_key(doc_rank[d], d))
    stats[1] += probes
    return size, grow


@nb.njit(cache=True, nogil=True)
def _fill(a, m, q_terms, indptr, docs, doc_rank, n_docs, live, cur, end, last, s0, cap, base, res_d, res_s, res_m,
          size, bar):
    """The heap (the top k among E = terms 1..m-1) completed with term 0's documents outside E, when id
    ranks ascend with document numbers: those all rank (s0, 1 match), so by document number; read in order
    until the heap or the bar refuses one (every later one ranks after it). Returns the heap size, -1 for
    corrupt postings."""
    bs, bm, bk = bar
    open_lists(q_terms, a, 0, m, indptr, cur, end, last)
    prev = -1
    for c in range(cur[0], end[0]):
        d = at(docs, c)
        if d <= prev or d >= n_docs:
            return -1
        prev = d
        inside = False
        for j in range(1, m):  # in an E list too: not mask {0}, and the attempt has ranked it
            cur[j] = _gallop(docs, cur[j], end[j], d)
            inside = inside or (cur[j] < end[j] and at(docs, cur[j]) == d)
        if inside or (live.shape[0] != 0 and not live[d]):
            continue
        key = doc_key(doc_rank[d], d)
        if _below(s0, 1, key, bs, bm, bk) or (size == cap and ranks_after(s0, 1, key, res_s[base], res_m[base],
                                                                          res_d[base])):
            break
        size = heap_push(res_s, res_m, res_d, base, size, cap, s0, 1, key)
    return size


@nb.njit(cache=True, nogil=True, inline="always")
def _first_bar(q, bar_s, bar_m, bar_k):
    """The caller's bar for query q (a document must rank strictly before it) as the kernel's own kind,
    one a document must rank at or before: keys are integers, so key < bar_k is key <= bar_k - 1.
    Score -1: no bar (empty arrays, -inf, or a score every document beats)."""
    if bar_s.shape[0] == 0 or not bar_s[q] >= 0:
        return (-1.0, np.int64(0), np.int64(0))
    return (bar_s[q], np.int64(bar_m[q]), max(bar_k[q], np.int64(0)) - 1)


@nb.njit(cache=True, nogil=True)
def _probe_one(q, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_weights, q_terms, block, cap,
               live, work, t, base, res_d, res_s, res_m, rule, stats, bar, monotone):
    """One query of 2..MAX_TERMS terms, cap >= 1, by growing essential sets on workspace row t; results
    best first in res_*[base:base + cap]. `bar` (`_first_bar`): documents must rank at or before it.
    Returns the result count, -1 for corrupt postings, -2 when levels should read every posting instead
    (nothing written)."""
    mask, touched, cur, end, last, score, pop, level = (work[0][t], work[1][t], work[2][t], work[3][t], work[4][t],
                                                        work[5][t], work[6][t], work[7][t])
    cand = (work[16][t], work[17][t], work[18][t])
    bucket = (work[19][t], work[20][t], work[21][t])
    a = q_offsets[q]
    m = q_offsets[q + 1] - a
    total = 0
    for j in range(m):
        total += _df(indptr, q_terms, a, j)
    if total < max(rule[0], rule[1] * cap) or _df(indptr, q_terms, a, 0) < rule[2] * total:
        return -2
    _tables(q_weights, a, m, score, pop, level, work[8][t], work[9][t])
    limit = min(rule[5] * total, cand[0].shape[0])
    p = m - 1  # first E: the heaviest lists until they hold _FIRST postings per result wanted
    held = _df(indptr, q_terms, a, p)
    while p > 1 and held < _FIRST * cap:
        p -= 1
        held += _df(indptr, q_terms, a, p)
    spent = 0
    while p > 0 and held <= limit and spent <= total:
        stats[0] += held
        stats[2] += 1
        probed = stats[1]
        scanned = stats[4]
        # what probing is weighed against: reading the next list, else every posting (levels)
        next_df = total
        if p > 1 and held + _df(indptr, q_terms, a, p - 1) <= limit:
            next_df = _df(indptr, q_terms, a, p - 1)
        size, grow = _attempt(a, p, m, q_terms, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd,
                              widen(block, held, n_docs, mask.shape[0]), cap,
                              live, mask, touched, cur, end, last, score, pop, level, cand, bucket, base, res_d,
                              res_s, res_m, bar, next_df, total - held, rule, stats, monotone)
        if size < 0:
            return -1
        spent += held + rule[3] * (stats[1] - probed) + rule[4] * (stats[4] - scanned)
        if size == cap:  # a real k-th entry: the final one ranks at or before it
            bar = (res_s[base], np.int64(res_m[base]), res_d[base])
        nonE = (1 << p) - 1
        # every document of E at or before the bar was probed (unless the attempt gave up): exact when
        # no document outside E reaches the bar
        if not grow and bar[0] >= 0 and (score[nonE] < bar[0] or (score[nonE] == bar[0] and pop[nonE] < bar[1])):
            deheap_sort(res_s, res_m, res_d, base, size)
            return size
        if not grow and p == 1 and monotone:  # outside E only the lightest list's documents, all tied
            size = _fill(a, m, q_terms, indptr, docs, doc_rank, n_docs, live, cur, end, work[4][t], score[1], cap,
                         base, res_d, res_s, res_m, size, bar)
            if size < 0:
                return -1
            deheap_sort(res_s, res_m, res_d, base, size)
            return size
        # a larger E: at least one more list, then MaxScore's split at the bar
        p -= 1
        held += _df(indptr, q_terms, a, p)
        while p > 0 and bar[0] >= 0 and not (score[(1 << p) - 1] < bar[0] or (
                score[(1 << p) - 1] == bar[0] and pop[(1 << p) - 1] < bar[1])):
            p -= 1
            held += _df(indptr, q_terms, a, p)
    return -2


@nb.njit(cache=True, nogil=True)
def search_one(q, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_weights, q_terms, width, cap,
               live, work, t, base, res_d, res_s, res_m, rule, stats, bar_s, bar_m, bar_k, monotone):
    """Query q of 1..MAX_TERMS terms, cap >= 1, on workspace row t (`workspace`, its blocks `width` or
    wider): probing in blocks of `width` where the cost rule says it pays, else `levels._levels_one`
    (every posting read; always when fwd_indptr is not int[n_docs + 1]), in blocks widened for a sparse
    query. bar_s/bar_m/bar_k: as `levels._levels_one`'s. stats: the query's STATS counters.
    Results best first in res_*[base:base + cap]; returns their count or -1 for corrupt postings.
    """
    a = q_offsets[q]
    m = q_offsets[q + 1] - a
    total = 0
    for j in range(m):
        total += _df(indptr, q_terms, a, j)
    bar = _first_bar(q, bar_s, bar_m, bar_k)
    if cap <= rule[7] and (total < rule[6] or (m == 1 and monotone)):  # list by list behind the heap (`small`)
        stats[5] += 1
        return small_one(a, m, q_terms, q_weights, indptr, docs, doc_rank, n_docs, live, cap, base, res_d, res_s,
                         res_m, bar, monotone, work[5][t], work[6][t], work[2][t], work[3][t], work[4][t], stats)
    if m >= 2 and fwd_indptr.shape[0] == n_docs + 1:
        got = _probe_one(q, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_weights, q_terms,
                         width, cap, live, work, t, base, res_d, res_s, res_m, rule, stats, bar, monotone)
        if got != -2:
            return got
    stats[3] += 1
    stats[0] += total
    # a sparse query reads few postings a block: wider blocks (`widen`)
    return _levels_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_weights, q_terms,
                       widen(width, total, n_docs, work[0].shape[1]), cap, live, work[0][t], work[1][t], work[2][t],
                       work[3][t], work[4][t], work[5][t], work[6][t], work[7][t], work[8][t], work[9][t], work[10][t],
                       (work[11][t], work[12][t], work[13][t]), base, res_d, res_s, res_m, bar_s, bar_m, bar_k,
                       monotone)


@nb.njit(cache=True, nogil=True)
def _long(q, k, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_terms, q_weights, width, cap, live,
          work, t, base, res_d, res_s, res_m, bar_s, bar_m, bar_k, rule, stats, monotone):
    """Query q of more than MAX_TERMS terms, as `levels.long_one` (`long`), its lightest MAX_TERMS terms through
    `search_one` (levels' own call where their results would overflow the workspace's buffer). Returns the
    result count, -1 for corrupt postings, -3 when the rarest terms hold too many postings."""
    nc, rare, cap_h = split_long(q, k, MAX_TERMS, q_offsets, q_terms, q_weights, indptr, docs, doc_rank, n_docs,
                                 live)
    if nc < 0:
        return nc
    if 4 * cap_h > work[11].shape[1]:
        return long_one(q, k, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width, cap, live, work,
                        t, base, res_d, res_s, res_m, bar_s, bar_m, bar_k, monotone)
    hs, hm, hk = np.empty(cap_h, np.float64), np.empty(cap_h, np.int32), np.empty(cap_h, np.int64)
    nh = 0
    if cap_h > 0:
        a = q_offsets[q]
        hb_s, hb_m, hb_k = bar_of(bar_s, bar_m, bar_k, q)
        nh = search_one(0, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, np.array([a, a + MAX_TERMS]), q_weights,
                        q_terms, width, cap_h, live, work, t, 0, hk, hs, hm, rule, stats, hb_s, hb_m, hb_k, monotone)
        if nh < 0:
            return -1
    return merge_long(hs, hm, hk, nh, rare, cap, res_s, res_m, res_d, base, bar_s, bar_m, bar_k, q)


@nb.njit(cache=True, nogil=True)
def _query(q, k, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_terms, q_weights, width, live,
           caps_off, res_d, res_s, res_m, work, t, bar_s, bar_m, bar_k, rule, stats, monotone):
    """Query q on workspace row t: `search_one` for 1..MAX_TERMS terms and k > 0, `levels.long_one` for
    longer ones, else (k <= 0, or too many rare postings) the heap union."""
    base = caps_off[q]
    cap = caps_off[q + 1] - base
    if cap == 0:
        return 0
    if k > 0 and q_offsets[q + 1] - q_offsets[q] <= MAX_TERMS:
        return search_one(q, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_weights, q_terms,
                          width, cap, live, work, t, base, res_d, res_s, res_m, rule, stats[q], bar_s, bar_m, bar_k,
                          monotone)
    if k > 0:  # more terms: the rarest ones' documents scored apart (`levels.long_one`) where they are few
        got = _long(q, k, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_terms, q_weights, width,
                    cap, live, work, t, base, res_d, res_s, res_m, bar_s, bar_m, bar_k, rule, stats[q], monotone)
        if got != -3:
            return got
    return _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width, work[14][t],
                       work[15][t], work[1][t], work[2][t], work[3][t], work[4][t], base, cap, res_d, res_s, res_m,
                       live, bar_s, bar_m, bar_k)


@nb.njit(cache=True, nogil=True)
def _probe_serial(indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_terms, q_weights, k, width,
                  live, work, bar_s, bar_m, bar_k, rule, stats, monotone):
    """Every query on the calling thread (row 0): no thread team to wake (as `levels._levels_serial`)."""
    nq, caps_off, res_s, res_m, res_d, sizes, _ = levels.batch_start(q_offsets, q_terms, indptr, k, 1)
    for q in range(nq):
        sizes[q] = _query(q, k, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_terms, q_weights,
                          width, live, caps_off, res_d, res_s, res_m, work, 0, bar_s, bar_m, bar_k, rule, stats,
                          monotone)
        if sizes[q] < 0:  # corrupt postings: the workspace is dirty; stop (the caller clears it)
            break
    return compact_failed(caps_off, sizes, res_s, res_m, res_d)


@nb.njit(cache=True, parallel=True)
def _probe_batch(indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_terms, q_weights, k, width,
                 live, work, bar_s, bar_m, bar_k, rule, stats, monotone, n_slices):
    """Queries in n_slices contiguous slices taken by the threads one at a time (as `levels._levels_batch`)."""
    nq, caps_off, res_s, res_m, res_d, sizes, dirty = levels.batch_start(q_offsets, q_terms, indptr, k,
                                                                         work[0].shape[0])
    for c in nb.prange(n_slices):
        t = nb.get_thread_id()
        for q in range(c * nq // n_slices, (c + 1) * nq // n_slices):
            if not dirty[t]:  # as in `levels._levels_batch`
                sizes[q] = _query(q, k, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets,
                                  q_terms, q_weights, width, live, caps_off, res_d, res_s, res_m, work, t, bar_s,
                                  bar_m, bar_k, rule, stats, monotone)
                dirty[t] = sizes[q] < 0
    return compact_failed(caps_off, sizes, res_s, res_m, res_d)


@nb.njit(cache=True, nogil=True)
def ascending(doc_rank):
    """Whether id ranks ascend with document numbers (ids in row order): `search_batch(monotone=...)`."""
    for i in range(1, doc_rank.shape[0]):
        if doc_rank[i] <= doc_rank[i - 1]:
            return False
    return True


def workspace(rows, width, longest=64, entries=_BUFFER, candidates=_CANDIDATES):
    """`levels.workspace(rows, width, longest, entries)` and probe's own rows: candidate documents uint32,
    masks uint16 and sorted documents uint32 [rows, candidates]; bucket counts, order and levels int64
    [rows, 2**12]. A caller may keep it across calls (`search_batch(work=...)`)."""
    return (*levels.workspace(rows, width, longest, entries),
            np.empty((rows, candidates), np.uint32), np.empty((rows, candidates), np.uint16),
            np.empty((rows, candidates), np.uint32), *(np.empty((rows, _MASKS), np.int64) for _ in range(3)))


def fit_workspace(holder, rows, width, n_docs, longest, entries, candidates=_CANDIDATES):
    """Keep holder[0] a `workspace` serving a call of these sizes (`levels.plan`'s), replaced when it does not.

    Its blocks are `width` * WIDEN wide (for sparse queries, `search_one`). Returns the workspace."""
    n_cand = max(1, min(candidates, n_docs))
    wide = min(width * WIDEN, max(n_docs, 1))
    if not (levels.fits(holder[0], rows, wide, longest, entries) and holder[0][16].shape[1] == n_cand):
        rows = max(rows, holder[0][0].shape[0] if holder[0] is not None else 1)
        holder[0] = workspace(rows, wide, max(longest, 64), entries, n_cand)
    return holder[0]


def search_batch(indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, q_offsets, q_terms, q_weights, k,
                 block=DEFAULT_BLOCK, n_chunks=None, live=None, buffer=_BUFFER, candidates=_CANDIDATES, rule=RULE,
                 stats=None, bar=None, work=None, monotone=False):
    """Exact top-k of every query, as `levels.search_batch` (same arguments, same results bit for bit).

    fwd_indptr int[N + 1] and fwd (words, width) are the forward index (each document's term ids,
    ascending, as `kernels.forward` reads them; never copied); an empty fwd_indptr makes every query
    read all its postings (`levels`).
    `candidates`: per-thread candidate buffer (at most N are used). `rule`: which queries try pruning
    (see RULE). `stats`: an int64[Q, STATS] array to add each query's postings read, forward rows
    probed, essential sets tried and whether levels read every posting to. `bar`: as
    `levels.search_batch`'s (per query the full key a document must rank strictly before); with it, the
    results are those without it that beat the bar. `n_chunks` and `work`: as `levels.search_batch`'s
    (`work` holds a `workspace` here). `monotone`: doc_rank ascends with the document number (ids in
    row order), which lets a query whose every list but the lightest is read finish without levels.
    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32).
    """
    if len(rule) != len(RULE):
        raise ValueError(f"a cost rule of {len(RULE)} numbers (probe.RULE), not {len(rule)}")
    q_offsets = np.asarray(q_offsets, dtype=np.int64)
    nq = len(q_offsets) - 1
    threads, rows, width, k, longest, entries = levels.plan(n_docs, q_offsets, k, block, n_chunks, buffer)
    holder = [None] if work is None else work
    fit_workspace(holder, rows, width, n_docs, longest, entries, candidates)
    if stats is None:
        stats = np.zeros((nq, STATS), dtype=np.int64)
    args = (indptr, docs, doc_rank, np.int64(n_docs), fwd_indptr, fwd, q_offsets,
            np.asarray(q_terms, dtype=np.int64), np.asarray(q_weights, dtype=np.float64), np.int64(k),
            np.int64(width), levels._EVERY_DOC if live is None else np.asarray(live).view(np.uint8), holder[0],
            *(levels._NO_BAR if bar is None else _bar_arrays(bar, nq)),
            _RULE if rule is RULE else np.asarray(rule, dtype=np.float64), stats, bool(monotone))
    return levels.run(_probe_serial, _probe_batch, args, threads, nq, holder[0])
