# Over 400 lines on purpose: the mask tables, the block loop with its cuts and skips, the long-query split and
# the batch entry (workspace, plan, run) that probe shares are one kernel; splitting the entry off would split
# its workspace layout.
"""The union read as term masks, ranked by levels instead of a heap (method `ssr`, DESIGN.md section 4).

Same inputs and outputs as `ssr.search_batch`, the same results bit for bit; every posting is read.

With binary signals a document's (score, matches) is a function of the set of query terms it
holds: its *mask*, one bit per term in ascending weight order. For a query of m <= MAX_TERMS terms
every mask's canonical score is tabled once (score[mask] = score[mask minus its highest bit] + the
highest bit's weight: the ascending-weight sum, bit-identical to term-at-a-time accumulation), and
the masks are sorted by (score desc, popcount desc) into *levels*: equal (score, matches) share a
level, so the level orders documents exactly as the result order does up to the id.

Per 16K-document block the postings only OR a bit into a uint16 mask per document (32 KiB: the
accumulators stay in L1 where float sums and counts took L2). Then each document's level (met again
at its first posting in the block) is compared with the bar: the best level L such that at least k
documents seen so far lie at levels <= L. A document below the bar is beaten by k others on
(score, matches) alone and is dropped without reading its id rank; the others go to a buffer
(document, level). When the buffer fills it is cut to the bar, and the bar level's ties to the ones
with the best id ranks (the only doc_rank reads). At the end the survivors are ordered by (level,
id rank). No heap: at K=1000 the union kernel spent most of its time sifting ties through one.
MaxScore's split (`split`): a first bar from the rarest lists, and the lightest lists whose
documents alone rank after the bar read only into the others' masks.

Queries of more than MAX_TERMS terms take `long_one` (their rarest terms' documents scored apart,
`long`) where those terms' lists are short; they otherwise, and k <= 0 (every candidate), take
`ssr._search_one`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .candidates import CorruptIndexData, cap_k, region_offsets
from .long import bar_of, merge_long, split_long
from .packed import at
from .split import first_level, or_lists
from .ssr import DEFAULT_BLOCK, _bar_arrays, _search_one, block_start, open_lists, skip_past
from .topk import check_key_range, compact_failed, doc_key, heap_arrays

# 2**12 masks per query: tabling and sorting them costs ~tens of microseconds at 12 terms, far
# below such a query's postings; masks fit uint16
MAX_TERMS = 12
_MASKS = 1 << MAX_TERMS
# buffer entries per thread (at least 4 k): a cut keeps at most k, so a full buffer always empties
_BUFFER = 4096
_EVERY_DOC = np.zeros(0, dtype=np.uint8)  # an empty live mask: no deletions (read-only, shared)
_NO_BAR = (np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64))  # no bar
_NO_CUT = np.int64(1) << 62  # above every document key (rank << 32 | doc, both < 2**31)
# queries per slice of a batch at most (and at least 8 slices per thread when there are enough)
_SLICE = 16


@nb.njit(cache=True, nogil=True, inline="always")
def or_block(docs, cur, end, last, p, m, lo, hi, mask, touched):
    """One block [lo, hi) of the lists p..m-1: ORs bit j into mask[d - lo] for each posting d of list j
    (uint16 masks), advancing the cursors cur/end/last (int64[m]); each document's offset d - lo is
    written to `touched` once. Returns how many were, or -1 for corrupt postings (not strictly ascending).
    """
    nt = 0
    for j in range(p, m):
        bit = np.uint16(1 << j)
        c = cur[j]
        e = end[j]
        prev = last[j]
        while c < e:
            d = at(docs, c)
            if d >= hi:
                break
            if d <= prev:  # strictly ascending postings (hence d >= lo): keeps x in range
                return -1
            prev = d
            x = d - lo
            old = mask[x]
            touched[nt] = x
            nt += np.int64(old == 0)  # branch-free first touch, as in ssr._search_one
            mask[x] = old | bit
            c += 1
        cur[j] = c
        last[j] = prev
    return nt


@nb.njit(cache=True, nogil=True, inline="always")
def next_block(docs, cur, end, last, p, m, n_docs, block, mask, touched):
    """The next block of the lists p..m-1 (from their smallest unread posting, `block` documents) ORed into
    masks (`or_block`). Returns (its first document, documents touched); (n_docs, 0) when every list is
    read, (-1, 0) for corrupt postings."""
    lo = block_start(docs, cur[p:], end[p:], m - p, n_docs)
    if lo < 0 or lo >= n_docs:
        return lo, np.int64(0)
    nt = or_block(docs, cur, end, last, p, m, lo, min(lo + block, n_docs), mask, touched)
    if nt < 0:
        return np.int64(-1), np.int64(0)
    return lo, nt


@nb.njit(cache=True, nogil=True)
def _tables(q_weights, a, m, score, pop, level, lvl_score, lvl_pop):
    """Score and popcount of every mask of m terms; level[mask] (0 = best); returns the level count.

    score float64[>= 2**m], pop int32, level int32; lvl_score/lvl_pop: each level's (score, matches).
    """
    nm = 1 << m
    score[0] = 0.0
    pop[0] = 0
    # masks by score desc without a sort: the masks of terms 0..j-1, sorted, and the same masks plus
    # bit j (score[x | bit] = score[x] + w: the heaviest term added last, the canonical sum; adding
    # a weight keeps their order) merge into the masks of terms 0..j, sorted
    order = np.empty(nm, dtype=np.int64)
    other = np.empty(nm, dtype=np.int64)
    order[0] = 0
    size = 1
    for j in range(m):
        w = q_weights[a + j]
        bit = 1 << j
        for i in range(size):
            x = order[i]
            score[x | bit] = score[x] + w
            pop[x | bit] = pop[x] + 1
        i = 0
        u = 0
        for o in range(2 * size):
            if u == size or (i < size and score[order[i]] >= score[order[u] | bit]):
                other[o] = order[i]
                i += 1
            else:
                other[o] = order[u] | bit
                u += 1
        order, other = other, order
        size *= 2
    # within a run of equal scores, more matches first (runs are short: insertion sort); mask 0 (the
    # only one of popcount 0, at the lowest score) ends last
    n = nm
    i = 0
    while i < n:
        j = i + 1
        while j < n and score[order[j]] == score[order[i]]:
            j += 1
        for u in range(i + 1, j):
            v = order[u]
            z = u
            while z > i and pop[order[z - 1]] < pop[v]:
                order[z] = order[z - 1]
                z -= 1
            order[z] = v
        i = j
    n = nm - 1
    nl = 0
    for u in range(n):
        msk = order[u]
        if u == 0 or score[msk] != lvl_score[nl - 1] or pop[msk] != lvl_pop[nl - 1]:
            lvl_score[nl] = score[msk]
            lvl_pop[nl] = pop[msk]
            nl += 1
        level[msk] = nl - 1
    return nl


@nb.njit(cache=True, nogil=True)
def _cut(bd, bl, bk, nb_, bar, keep_tied, doc_rank, monotone=False):
    """Keep buffer entries of level < bar, and the `keep_tied` entries of level == bar with the
    smallest id ranks (their keys are read here; with `monotone`, keys ascending with documents, the
    documents are compared instead: no doc_rank read but the cut's).

    Returns (the new entry count, the largest key kept on the bar level when ties were dropped,
    else _NO_CUT): a later document on the bar level with a larger key cannot enter.
    """
    tied = 0
    for i in range(nb_):
        if bl[i] == bar:
            bk[tied] = bd[i] if monotone else doc_key(doc_rank[bd[i]], bd[i])
            tied += 1
    cut = np.sort(bk[:tied])[keep_tied - 1] if tied > keep_tied else _NO_CUT
    n = 0
    j = 0
    for i in range(nb_):  # in place: position n never passes position i
        lv = bl[i]
        if lv == bar:
            keep = bk[j] <= cut
            j += 1
        else:
            keep = lv < bar
        if keep:
            bd[n] = bd[i]
            bl[n] = lv
            n += 1
    if monotone and cut != _NO_CUT:
        cut = doc_key(doc_rank[cut], cut)
    return n, cut


@nb.njit(cache=True, nogil=True)
def first_at(doc_rank, key):
    """The first document whose key is >= `key`, when keys ascend with documents (`probe.ascending`)."""
    lo, hi = 0, doc_rank.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if doc_key(doc_rank[mid], mid) >= key:
            hi = mid
        else:
            lo = mid + 1
    return lo


@nb.njit(cache=True, nogil=True)
def _bar_level(q, nl, lvl_score, lvl_pop, bar_s, bar_m, bar_k):
    """The starting (bar level, bar key) of a query with nl levels under the caller's bar (none: nl - 1).

    A bar level below 0: k documents elsewhere beat every document the query could find.
    """
    if bar_s.shape[0] == 0:
        return nl - 1, _NO_CUT
    # levels run by (score, matches) desc: the first one not strictly before the caller's bar
    lo_, hi_ = 0, nl
    while lo_ < hi_:
        mid = (lo_ + hi_) >> 1
        if lvl_score[mid] > bar_s[q] or (lvl_score[mid] == bar_s[q] and lvl_pop[mid] > bar_m[q]):
            lo_ = mid + 1
        else:
            hi_ = mid
    if lo_ < nl and lvl_score[lo_] == bar_s[q] and lvl_pop[lo_] == bar_m[q]:
        return lo_, min(bar_k[q], _NO_CUT)
    return lo_ - 1, _NO_CUT


@nb.njit(cache=True, nogil=True)
def _scan(indptr, docs, n_docs, first, doc_rank, live, q_terms, a, m, block, cap, mask, touched, cur, end, last,
          level, hist, buf, bar, bar_key, cum, nbuf, monotone=False):
    """Read one index's postings of a query's terms q_terms[a:a + m] (bit j for term j; a term id < 0:
    absent here) into the buffer behind the running bar. The state (bar, bar_key, cum: buffered
    documents at levels <= bar, nbuf) goes in and comes out, so several indexes (a live index's
    segments) can share one set of levels.

    The index's document d is numbered first + d in the buffer and ranked by doc_rank[first + d];
    live: bool/uint8[n_docs] or empty. `monotone`: doc_rank ascends with the document number
    (`probe.ascending`), so a block whose documents would all be dropped on the bar level's key is
    skipped. Once the bar ranks the lightest lists' documents out, those lists only complete the masks of
    the others' documents (MaxScore's split, `split.or_lists`). Returns the new state; nbuf = -1 for
    corrupt postings.
    """
    bd, bl, bk = buf
    open_lists(q_terms, a, 0, m, indptr, cur, end, last)
    for j in range(m):
        if q_terms[a + j] < 0:
            cur[j] = end[j] = 0
    # with `monotone`, the bar key as a document (g >= bar_doc: key >= bar_key), so that ties at the bar
    # are dropped without a doc_rank read (at 8.8M each one missed cache)
    n_all = doc_rank.shape[0]
    bar_doc = n_all
    if monotone and bar_key != _NO_CUT:
        # a later segment of a live index starts past the bar's key: its every document is (no binary search)
        past = first < n_all and doc_key(doc_rank[first], first) >= bar_key
        bar_doc = first if past else first_at(doc_rank, bar_key)
    starts = np.empty(m, np.int64)  # each list's first posting in the block
    p = 0  # lists 0..p-1 are read only into the documents of the others (see below)
    while True:
        lo = block_start(docs, cur, end, m, n_docs)
        if lo < 0:
            return bar, bar_key, cum, -1
        if lo >= n_docs:
            break
        hi = min(lo + block, n_docs)
        # the block's best possible level is that of every list with a posting in it (a superset's level is
        # never worse); when even that cannot enter, skip the block unread (a huge list of the lightest term,
        # alone in most blocks and tied at the bar, then costs a binary search a block)
        present = 0
        for j in range(m):
            if cur[j] < end[j] and at(docs, cur[j]) < hi:
                present |= 1 << j
        best = level[present]
        if best > bar or (best == bar and first + lo >= bar_doc):
            skip_past(docs, cur, end, last, m, hi)
            continue
        # MaxScore's split at the bar: a document of the lightest lists 0..p-1 alone ranks after the bar level
        while p < m and level[(1 << (p + 1)) - 1] > bar:
            p += 1
        if p == m:  # nothing left can enter
            break
        if not or_lists(docs, cur, end, last, p, m, lo, hi, mask, starts):
            return bar, bar_key, cum, -1
        # each document of lists p..m-1 once, at its first posting in list order (its mask complete, then
        # zeroed): the postings read again from L1 instead of a list of touched documents, whose branch-free
        # append chained every posting's mask load to the next one's store (RESULTS.md)
        for j in range(p, m):
            for c in range(starts[j], cur[j]):
                x = at(docs, c) - lo
                v = mask[x]
                if v == 0:
                    continue
                mask[x] = 0
                lv = level[v]
                if lv > bar or (live.shape[0] != 0 and not live[lo + x]):
                    continue
                g = first + lo + x
                if lv == bar and bar_key != _NO_CUT and (
                        g >= bar_doc if monotone else doc_key(doc_rank[g], g) >= bar_key):
                    continue
                if nbuf == bd.shape[0]:
                    # cut to the bar: at most cap entries stay, and the buffer holds >= 4 cap (see _BUFFER)
                    nbuf, cut = _cut(bd, bl, bk, nbuf, bar, cap - (cum - hist[bar]), doc_rank, monotone)
                    bar_key = min(bar_key, cut + 1)
                    if monotone and bar_key != _NO_CUT:
                        bar_doc = first_at(doc_rank, bar_key)
                    if cum > cap:
                        hist[bar] -= cum - cap
                        cum = cap
                bd[nbuf] = g
                bl[nbuf] = lv
                nbuf += 1
                hist[lv] += 1
                cum += 1
                while cum - hist[bar] >= cap:
                    cum -= hist[bar]
                    bar -= 1
                    bar_key = _NO_CUT
                    bar_doc = n_all
        # with `monotone`, k documents at or above the bar, all before hi: a later one on the bar level loses
        if monotone and cum >= cap and first + hi < bar_doc:
            bar_doc = first + hi
            bar_key = doc_key(doc_rank[bar_doc], bar_doc)
    return bar, bar_key, cum, nbuf


@nb.njit(cache=True, nogil=True)
def _finish(buf, nbuf, bar, cum, cap, hist, doc_rank, lvl_score, lvl_pop, base, res_d, res_s, res_m, monotone=False):
    """The last cut, then the survivors in rank order (level, id rank) into res_*[base:]; returns their
    count. res_d gets the heap's keys (rank << 32 | document number)."""
    bd, bl, bk = buf
    nbuf, _ = _cut(bd, bl, bk, nbuf, bar, cap - (cum - hist[bar]), doc_rank, monotone)
    for i in range(nbuf):
        bk[i] = doc_key(doc_rank[bd[i]], bd[i])
    order = np.argsort((bl[:nbuf].astype(np.int64) << 32) | (bk[:nbuf] >> 32))
    for i in range(nbuf):
        e = order[i]
        res_s[base + i] = lvl_score[bl[e]]
        res_m[base + i] = lvl_pop[bl[e]]
        res_d[base + i] = bk[e]
    return nbuf


@nb.njit(cache=True, nogil=True)
def _levels_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_weights, q_terms, block, cap, live,
                mask, touched, cur, end, last, score, pop, level, lvl_score, lvl_pop, hist, buf,
                base, res_d, res_s, res_m, bar_s, bar_m, bar_k, monotone=False):
    """One query of 1..MAX_TERMS terms, cap >= 1; results best first in res_*[base:base + cap].

    mask uint16[block] must be zero and is left zero. buf = (docs int64, levels int32, keys
    int64) of equal length >= 4 cap. bar_s/bar_m/bar_k: the caller's bar (`ssr._search_one`);
    empty: none. `monotone`: as `_scan`'s. Returns the result count, or -1 for corrupt postings.
    """
    a = q_offsets[q]
    m = q_offsets[q + 1] - a
    nl = _tables(q_weights, a, m, score, pop, level, lvl_score, lvl_pop)
    hist[:nl] = 0
    # documents on the bar level with a key >= bar_key cannot enter: set by the caller's bar (its
    # level's key) and by every cut that drops ties (the largest key kept + 1). They are dropped on
    # reading their rank, never buffered: a huge list whose documents all tie at the bar would
    # otherwise refill the buffer and be sorted again and again
    bar, bar_key = _bar_level(q, nl, lvl_score, lvl_pop, bar_s, bar_m, bar_k)
    if bar < 0:
        return 0  # k documents elsewhere beat every document this query could find here
    # a first bar from the rarest lists (`split`): the lightest lists are read only into the others' documents
    first = first_level(q_terms, a, m, indptr, docs, n_docs, live, block, cap, level, nl, hist, mask, cur, end, last)
    if first < 0:
        return -1
    if first < bar:
        bar, bar_key = first, _NO_CUT
    bar, bar_key, cum, nbuf = _scan(indptr, docs, n_docs, 0, doc_rank, live, q_terms, a, m, block, cap, mask,
                                    touched, cur, end, last, level, hist, buf, bar, bar_key, 0, 0, monotone)
    if nbuf < 0:
        return -1
    return _finish(buf, nbuf, bar, cum, cap, hist, doc_rank, lvl_score, lvl_pop, base, res_d, res_s, res_m, monotone)


def workspace(rows, width, longest=64, entries=_BUFFER):
    """Scratch arrays of the kernel, one row per thread (a caller may keep them across calls).

    (mask uint16 [rows, width]; touched int64 [rows, width + 1]: the branch-free first touch writes
    one entry past the block's distinct documents; cur, end, last int64: [rows, longest]; score
    float64, pop int32, level int32, lvl_score float64, lvl_pop int32, hist int64: [rows, 2**12];
    buffer docs int64, levels int32, keys int64: [rows, entries]; the heap union's acc float64,
    cnt int32: [rows, width]). mask, acc and cnt are zero, and every call leaves them zero.
    """
    return (np.zeros((rows, width), np.uint16), np.empty((rows, width + 1), np.int64),
            *(np.empty((rows, max(1, longest)), np.int64) for _ in range(3)),
            np.empty((rows, _MASKS), np.float64), np.empty((rows, _MASKS), np.int32),
            np.empty((rows, _MASKS), np.int32), np.empty((rows, _MASKS), np.float64),
            np.empty((rows, _MASKS), np.int32), np.zeros((rows, _MASKS), np.int64),
            np.empty((rows, entries), np.int64), np.empty((rows, entries), np.int32),
            np.empty((rows, entries), np.int64), np.zeros((rows, width), np.float64),
            np.zeros((rows, width), np.int32))


def fits(work, rows, width, longest, entries) -> bool:
    """True when `work` (from `workspace`) serves a call needing these sizes."""
    return (work is not None and work[0].shape[0] >= rows and work[0].shape[1] == width
            and work[2].shape[1] >= longest and work[11].shape[1] >= entries)


@nb.njit(cache=True, nogil=True)
def long_one(q, k, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width, cap, live, work, t, base,
             res_d, res_s, res_m, bar_s, bar_m, bar_k, monotone):
    """Query q of more than MAX_TERMS terms, k > 0, cap >= 1, on workspace row t (`work` as `workspace`'s
    first 14 arrays): its lightest MAX_TERMS terms through levels, its rarest terms' documents scored
    apart (`long`). Returns the result count, -1 for corrupt postings, -3 when the rarest terms hold
    more than `long.RARE_POSTINGS` postings (the caller takes the heap union)."""
    nc, rare, cap_h = split_long(q, k, MAX_TERMS, q_offsets, q_terms, q_weights, indptr, docs, doc_rank, n_docs,
                                 live)
    if nc < 0:
        return nc
    hs, hm, hk = np.empty(cap_h, np.float64), np.empty(cap_h, np.int32), np.empty(cap_h, np.int64)
    nh = 0
    if cap_h > 0:
        buf = (work[11][t], work[12][t], work[13][t])
        if buf[0].shape[0] < 4 * cap_h:
            buf = (np.empty(4 * cap_h, np.int64), np.empty(4 * cap_h, np.int32), np.empty(4 * cap_h, np.int64))
        a = q_offsets[q]
        hb_s, hb_m, hb_k = bar_of(bar_s, bar_m, bar_k, q)
        nh = _levels_one(0, indptr, docs, doc_rank, n_docs, np.array([a, a + MAX_TERMS]), q_weights, q_terms, width,
                         cap_h, live, work[0][t], work[1][t], work[2][t], work[3][t], work[4][t], work[5][t],
                         work[6][t], work[7][t], work[8][t], work[9][t], work[10][t], buf, 0, hk, hs, hm,
                         hb_s, hb_m, hb_k, monotone)
        if nh < 0:
            return -1
    return merge_long(hs, hm, hk, nh, rare, cap, res_s, res_m, res_d, base, bar_s, bar_m, bar_k, q)


@nb.njit(cache=True, nogil=True)
def _query(q, k, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width, live, caps_off,
           res_d, res_s, res_m, work, t, bar_s, bar_m, bar_k, monotone):
    """Query q on workspace row t: levels for 1..MAX_TERMS terms and k > 0, `long_one` for longer ones,
    else (k <= 0, or too many rare postings) the heap union."""
    base = caps_off[q]
    cap = caps_off[q + 1] - base
    if cap == 0:
        return 0
    mask, touched, cur, end, last, score, pop, level, lvl_score, lvl_pop, hist, bd, bl, bk, acc, cnt = work
    if k > 0 and q_offsets[q + 1] - q_offsets[q] <= MAX_TERMS:
        return _levels_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_weights, q_terms, width, cap, live,
                           mask[t], touched[t], cur[t], end[t], last[t], score[t], pop[t], level[t], lvl_score[t],
                           lvl_pop[t], hist[t], (bd[t], bl[t], bk[t]), base, res_d, res_s, res_m, bar_s, bar_m,
                           bar_k, monotone)
    if k > 0:
        got = long_one(q, k, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width, cap, live, work, t,
                       base, res_d, res_s, res_m, bar_s, bar_m, bar_k, monotone)
        if got != -3:
            return got
    return _search_one(q, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width, acc[t], cnt[t],
                       touched[t], cur[t], end[t], last[t], base, cap, res_d, res_s, res_m, live, bar_s, bar_m, bar_k)


@nb.njit(cache=True, nogil=True)
def batch_start(q_offsets, q_terms, indptr, k, rows):
    """A batch call's set-up, shared by the serial and sliced loops here and in `probe`: (nq, each query's
    output region caps_off int64[Q + 1], the heap arrays res_s, res_m, res_d over them, result sizes
    int64[Q] zero, and one `dirty` flag per workspace row, bool[rows]: a row met corrupt postings)."""
    nq = q_offsets.shape[0] - 1
    caps_off = region_offsets(q_offsets, q_terms, indptr, k)
    res_s, res_m, res_d = heap_arrays(caps_off[nq])
    return nq, caps_off, res_s, res_m, res_d, np.zeros(nq, dtype=np.int64), np.zeros(rows, dtype=np.bool_)


@nb.njit(cache=True, nogil=True)
def _levels_serial(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, width, live, work, bar_s,
                   bar_m, bar_k, monotone):
    """Every query on the calling thread (row 0): no thread team to wake for a single query.

    A plain njit loop measured as fast as the parallel one on one thread (numba 0.68, RESULTS.md).
    """
    nq, caps_off, res_s, res_m, res_d, sizes, _ = batch_start(q_offsets, q_terms, indptr, k, 1)
    for q in range(nq):
        sizes[q] = _query(q, k, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width, live,
                          caps_off, res_d, res_s, res_m, work, 0, bar_s, bar_m, bar_k, monotone)
        if sizes[q] < 0:  # corrupt postings: the workspace is dirty; stop (the caller clears it)
            break
    return compact_failed(caps_off, sizes, res_s, res_m, res_d)


@nb.njit(cache=True, parallel=True)
def _levels_batch(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, width, live, work, bar_s, bar_m,
                  bar_k, monotone, n_slices):
    """Queries in n_slices contiguous slices taken by the threads one at a time (chunk size 1 set by
    the caller), so an expensive slice or a thread slowed by another process holds nobody back."""
    nq, caps_off, res_s, res_m, res_d, sizes, dirty = batch_start(q_offsets, q_terms, indptr, k, work[0].shape[0])
    for c in nb.prange(n_slices):
        t = nb.get_thread_id()
        for q in range(c * nq // n_slices, (c + 1) * nq // n_slices):
            if not dirty[t]:  # once a thread's workspace met corrupt postings, the call fails anyway
                sizes[q] = _query(q, k, indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, width,
                                  live, caps_off, res_d, res_s, res_m, work, t, bar_s, bar_m, bar_k, monotone)
                dirty[t] = sizes[q] < 0
    return compact_failed(caps_off, sizes, res_s, res_m, res_d)


def plan(n_docs, q_offsets, k, block, n_chunks, buffer):
    """A batch call's sizes: (threads, rows, width, k, longest, entries) as `search_batch` takes them
    (one thread, or one query, runs serially on the calling thread: rows 1)."""
    threads = nb.get_num_threads() if n_chunks is None else int(n_chunks)
    check_key_range(n_docs)
    nq = len(q_offsets) - 1
    threads = max(1, min(threads, nq, int(nb.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    width = int(min(max(1, block), max(n_docs, 1)))
    k = cap_k(k, n_docs)
    longest = int(q_offsets[1] - q_offsets[0]) if nq == 1 else int(np.diff(q_offsets).max()) if nq else 1
    # a thread id may be any of the pool's (NUMBA_NUM_THREADS) rows
    rows = 1 if threads == 1 else int(nb.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    return threads, rows, width, k, longest, max(1, buffer, 4 * k)


def sliced_call(threads, fn, *args):
    """fn(*args) on `threads` Numba threads, its parallel loops handing out one iteration (a slice of queries) at a
    time; the calling thread's thread count and chunk size are restored after. The one way the batch kernels'
    entries (`run`, `kernels.live.search_parts`, `kernels.prune`) start a parallel call."""
    before = nb.get_num_threads()
    nb.set_num_threads(threads)
    old_chunk = nb.set_parallel_chunksize(1)
    try:
        return fn(*args)
    finally:
        nb.set_parallel_chunksize(old_chunk)
        nb.set_num_threads(before)


def run(serial, sliced, args, threads, nq, work):
    """serial(*args) on one thread, else sliced(*args, n_slices) with slices taken one at a time; a
    corrupt posting list clears the workspace's zeroed arrays (mask, acc, cnt) and raises.
    Returns (offsets, docs, scores, matches)."""
    if threads == 1:
        *out, bad = serial(*args)
    else:
        *out, bad = sliced_call(threads, sliced, *args, np.int64(min(nq, max(8 * threads, -(-nq // _SLICE)))))
    if bad:
        corrupt(work)
    return tuple(out)


def corrupt(work):
    """After a call abandoned on corrupt postings: clear the workspace's zeroed arrays (mask, acc, cnt: left
    dirty by the abandoned query) and raise `CorruptIndexData`."""
    for a in (work[0], work[14], work[15]):
        a[...] = 0
    raise CorruptIndexData("postings_docs.npy: a posting list is not strictly ascending or holds a document id >= N")


def search_batch(indptr, docs, doc_rank, n_docs, q_offsets, q_terms, q_weights, k, block=DEFAULT_BLOCK,
                 n_chunks=None, live=None, buffer=_BUFFER, work=None, bar=None, monotone=False):
    """Exact top-k of every query, as `ssr.search_batch` (same arguments, same results bit for bit).

    indptr int64[V + 1], docs the postings column (`packed`, ascending per term), doc_rank uint32[N]; q_terms: distinct
    term ids per query in ascending weight order; `live`: bool or uint8[N] (None: every document).
    `bar`: as `ssr.search_batch`'s, per query the full key a document must rank strictly before
    (a live index's other segments); with it, the results are those without it that beat the bar.
    `n_chunks`: threads (default Numba's current count); one thread, or one query, runs serially on
    the calling thread. `work`: a list holding a `workspace` to use and keep (replaced in place when
    too small; one call at a time), or None. `monotone`: doc_rank ascends (`probe.ascending`): blocks
    whose documents would all be dropped on the bar level's key are skipped unread.
    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32).
    """
    q_offsets = np.asarray(q_offsets, dtype=np.int64)
    nq = len(q_offsets) - 1
    threads, rows, width, k, longest, entries = plan(n_docs, q_offsets, k, block, n_chunks, buffer)
    holder = [None] if work is None else work
    if not fits(holder[0], rows, width, longest, entries):
        rows = max(rows, holder[0][0].shape[0] if holder[0] is not None else 1)
        holder[0] = workspace(rows, width, max(longest, 64), entries)
    args = (indptr, docs, doc_rank, np.int64(n_docs), q_offsets, np.asarray(q_terms, dtype=np.int64),
            np.asarray(q_weights, dtype=np.float64), np.int64(k), np.int64(width),
            _EVERY_DOC if live is None else np.asarray(live).view(np.uint8), holder[0],
            *(_NO_BAR if bar is None else _bar_arrays(bar, nq)), bool(monotone))
    return run(_levels_serial, _levels_batch, args, threads, nq, holder[0])
