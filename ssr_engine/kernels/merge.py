"""Numba kernel: merge the ranked results of several parts of one collection by the full key.

A part (a segment of a live index, a shard) is searched on its own with the collection's global
weights and returns, per query, its exact local top-k in rank order. The global top-k is then a
merge of those lists under the full order of DESIGN.md section 2:

    score desc, then matched signals desc (BM25: distinct query terms), then external id asc

where ids compare as integers when every live id of the collection is a base-10 integer (equal
integers, "7" and "007", by their strings) and as strings (code point order) otherwise. Ids arrive
as UCS-4 code units, zero-padded rows of uint32[n, w] (a NumPy `<U{w}` array viewed as uint32),
so both orders are decided on the code units themselves: no Python str per candidate.

`merge_ranked` merges rows whose ids are all at hand. When reading ids costs
(segments of one process), two steps read them only where they decide: `select_candidates` merges on (score,
matches) alone and keeps the best k plus every row tying with the k-th; the caller gathers those
rows' ids; `order_candidates` sorts each run of (score, matches) ties by id and cuts to k.
`merge_keyed` merges rows whose ids are given as their ranks in the collection's id order (a
sharded index stores them: `distributed.layout.id_ranks`): the key is three numbers, no id is read.

An id containing U+0000 is not supported (NumPy str arrays cannot hold a trailing one either).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .spans import span_compare as bytes_compare


@nb.njit(cache=True, nogil=True, inline="always")
def _length(codes, i):
    n = codes.shape[1]
    while n > 0 and codes[i, n - 1] == 0:
        n -= 1
    return n


@nb.njit(cache=True, nogil=True)
def id_compare(codes, i, j, integer):
    """-1, 0 or 1 as the id in row i sorts before, equal to or after the id in row j."""
    return span_compare(codes[i], 0, _length(codes, i), codes[j], 0, _length(codes, j), integer)


@nb.njit(cache=True, nogil=True)
def span_compare(x, xa, xz, y, ya, yz, integer):
    """-1, 0 or 1 as the id x[xa:xz] sorts before, equal to or after the id y[ya:yz].

    Ids as code points (UCS-4) or as UTF-8 bytes (whose byte order is the code point order): as integers when
    `integer`, equal values (and every id otherwise) by `spans.span_compare`'s order of their code units.
    """
    li = xz - xa
    lj = yz - ya
    if integer:
        neg_i = li > 0 and x[xa] == 45  # "-"
        neg_j = lj > 0 and y[ya] == 45
        si = 1 if neg_i else 0
        sj = 1 if neg_j else 0
        while si < li and x[xa + si] == 48:  # leading "0"s do not change the value
            si += 1
        while sj < lj and y[ya + sj] == 48:
            sj += 1
        mi = li - si
        mj = lj - sj
        neg_i = neg_i and mi > 0  # "-0" is zero
        neg_j = neg_j and mj > 0
        if neg_i != neg_j:
            return -1 if neg_i else 1
        c = 0
        if mi != mj:
            c = -1 if mi < mj else 1
        else:
            for p in range(mi):
                a = x[xa + si + p]
                b = y[ya + sj + p]
                if a != b:
                    c = -1 if a < b else 1
                    break
        if c != 0:
            return -c if neg_i else c
        # equal values: by their strings, as scoring.id_order does
    return bytes_compare(x, xa, li, y, ya, lj)


def tie_before(ties, x, y):
    """`merge_two`'s tie test: True when row x ranks before row y (they tie on score and matches).

    `ties` says what x and y are, and Numba picks the test by its TYPE when a kernel compiles (as
    `packed.at` picks a reader): an integer (0): keys rank << 32 | document (distinct), the smaller first
    (shards, whose ranks are the collection's); `(id_offsets, id_bytes, integer)`: collection document
    numbers, document d's id being id_bytes[id_offsets[d]:id_offsets[d + 1]], compared by `span_compare`
    (live segments). (A jitted function passed as an argument, pynndescent's way, was tried first: a caller
    passing one that reads arrays could not be cached by Numba, "dynamic globals".)
    """
    if isinstance(ties, tuple):
        id_offsets, id_bytes, integer = ties
        return span_compare(id_bytes, id_offsets[x], id_offsets[x + 1], id_bytes, id_offsets[y],
                               id_offsets[y + 1], integer) < 0
    return x < y


@nb.extending.overload(tie_before, inline="always")
def _tie_before(ties, x, y):
    if isinstance(ties, nb.types.Integer):
        return lambda ties, x, y: x < y

    def by_id(ties, x, y):
        id_offsets, id_bytes, integer = ties
        return span_compare(id_bytes, id_offsets[x], id_offsets[x + 1], id_bytes, id_offsets[y],
                               id_offsets[y + 1], integer) < 0

    return by_id


@nb.njit(cache=True, nogil=True)
def merge_two(ties, a_x, a_s, a_m, na, b_x, b_s, b_m, nb_, k, o_x, o_s, o_m):
    """The best min(na + nb_, k) rows of two ranked runs by the full key, written to o_*; returns the count.

    The one two-run merge walk of a running top k (a live index's segments, a group of shards): rows go by
    score desc, then matches desc, then `tie_before(ties, a_x[i], b_x[j])` (each caller's own order of x).

    Parameters
    ----------
    ties : 0 (x are rank keys) or (id_offsets int64, id_bytes uint8, integer bool) (x are document numbers);
        see `tie_before`
    a_x, a_s, a_m : int64, float64, int32 ndarrays, shape (>= na,): run a in rank order (x, scores,
        matches); b alike with nb_ rows
    k : int, >= 0
    o_x, o_s, o_m : ndarrays, shape (>= min(na + nb_, k),), the output (neither run)
    """
    n = min(na + nb_, k)
    i = j = 0
    for o in range(n):
        take_a = j >= nb_
        if not take_a and i < na:
            if a_s[i] != b_s[j]:
                take_a = a_s[i] > b_s[j]
            elif a_m[i] != b_m[j]:
                take_a = a_m[i] > b_m[j]
            else:
                take_a = tie_before(ties, a_x[i], b_x[j])
        if take_a:
            o_x[o], o_s[o], o_m[o] = a_x[i], a_s[i], a_m[i]
            i += 1
        else:
            o_x[o], o_s[o], o_m[o] = b_x[j], b_s[j], b_m[j]
            j += 1
    return n


@nb.njit(cache=True, nogil=True, inline="always")
def _score_before(r1, r2, scores, matches):
    """True when row r1 ranks strictly before row r2 on (score, matches) alone."""
    if scores[r1] != scores[r2]:
        return scores[r1] > scores[r2]
    return matches[r1] > matches[r2]


@nb.njit(cache=True, parallel=True)
def _select(offsets, scores, matches, k, counts, out_offsets, out_rows, count_only):
    nq = offsets.shape[0]
    n_parts = offsets.shape[1] - 1
    for q in nb.prange(nq):
        heads = offsets[q, :n_parts].copy()
        n = 0
        last = -1
        while True:
            best = -1
            for s in range(n_parts):
                if heads[s] < offsets[q, s + 1]:
                    if best < 0 or _score_before(heads[s], heads[best], scores, matches):
                        best = s
            if best < 0:
                break
            r = heads[best]
            # past k, only rows that tie with the k-th on (score, matches) may still enter the top k
            if k > 0 and n >= k and _score_before(last, r, scores, matches):
                break
            if not count_only:
                out_rows[out_offsets[q] + n] = r
            last = r
            n += 1
            heads[best] += 1
        counts[q] = n


def select_candidates(offsets, scores, matches, k):
    """The rows that can be in each query's top k: the best k by (score, matches) and every row tying
    with the k-th on both (their ids decide). Rows come out in (score, matches) order, ties in part
    order (each part's rows keep their own, id, order).

    offsets int64[Q, S + 1] as in `merge_ranked`. Returns (sel_offsets int64[Q + 1], rows int64).
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    matches = np.asarray(matches, dtype=np.int32)
    nq = offsets.shape[0]
    counts = np.zeros(nq, dtype=np.int64)
    sel = np.zeros(nq + 1, dtype=np.int64)
    _select(offsets, scores, matches, np.int64(k), counts, sel, np.zeros(0, dtype=np.int64), True)
    np.cumsum(counts, out=sel[1:])
    rows = np.empty(int(sel[-1]), dtype=np.int64)
    _select(offsets, scores, matches, np.int64(k), counts, sel, rows, False)
    return sel, rows


@nb.njit(cache=True, nogil=True)
def _sort_group(idx, tmp, lo, hi, codes, integer):
    """Stable merge sort of idx[lo:hi] by id (bottom-up). The same merge as `text._sort_tokens`,
    kept apart for the measured reason given there (a comparison passed with its arrays costs
    reference counting on every step); so are the three "which part's row goes first" loops below (one walk
    taking the id test by type, tried in issue 11, made merge_ranked 1.4-2.8x slower at K=10 and no faster
    at K=1000: RESULTS.md)."""
    width = 1
    n = hi - lo
    while width < n:
        for a in range(lo, hi, 2 * width):
            m = min(a + width, hi)
            z = min(a + 2 * width, hi)
            i, j, o = a, m, a
            while i < m and j < z:
                if id_compare(codes, idx[j], idx[i], integer) < 0:
                    tmp[o] = idx[j]
                    j += 1
                else:
                    tmp[o] = idx[i]
                    i += 1
                o += 1
            while i < m:
                tmp[o] = idx[i]
                i += 1
                o += 1
            while j < z:
                tmp[o] = idx[j]
                j += 1
                o += 1
        for a in range(lo, hi):
            idx[a] = tmp[a]
        width *= 2


@nb.njit(cache=True, parallel=True)
def _order(sel, scores, matches, codes, k, integer, idx, tmp):
    nq = sel.shape[0] - 1
    for q in nb.prange(nq):
        a, z = sel[q], sel[q + 1]
        for i in range(a, z):
            idx[i] = i
        g = a
        while g < z:
            e = g + 1
            while e < z and not _score_before(g, e, scores, matches):
                e += 1  # rows g..e-1 tie on (score, matches)
            if e - g > 1:
                _sort_group(idx, tmp, g, e, codes, integer)
            g = e


def order_candidates(sel, scores, matches, codes, k, integer=False):
    """Put each query's candidates (from `select_candidates`, given as aligned arrays) in full order
    and cut to k. codes uint32[n, w]: ids as zero-padded UCS-4.
    Returns (out_offsets int64[Q + 1], positions int64 into the candidate arrays)."""
    n = scores.shape[0]
    idx = np.empty(n, dtype=np.int64)
    tmp = np.empty(n, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[1] == 0:
        codes = np.zeros((max(n, 1), 1), dtype=np.uint32)
    _order(np.asarray(sel, dtype=np.int64), np.asarray(scores, dtype=np.float64), np.asarray(matches, dtype=np.int32),
           np.ascontiguousarray(codes, dtype=np.uint32), np.int64(k), bool(integer), idx, tmp)
    counts = np.diff(sel)
    if k > 0:
        counts = np.minimum(counts, k)
    out = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    keep = np.repeat(sel[:-1], counts) + (np.arange(int(out[-1]), dtype=np.int64) - np.repeat(out[:-1], counts))
    return out, idx[keep]


@nb.njit(cache=True, nogil=True, inline="always")
def _before(r1, r2, scores, matches, codes, integer):
    """True when row r1 ranks before row r2."""
    if scores[r1] != scores[r2]:
        return scores[r1] > scores[r2]
    if matches[r1] != matches[r2]:
        return matches[r1] > matches[r2]
    return id_compare(codes, r1, r2, integer) < 0


@nb.njit(cache=True, parallel=True)
def _merge(offsets, scores, matches, codes, k, integer, out_offsets, out_rows):
    nq = offsets.shape[0]
    n_parts = offsets.shape[1] - 1
    for q in nb.prange(nq):
        heads = offsets[q, :n_parts].copy()
        dst = out_offsets[q]
        for _ in range(out_offsets[q + 1] - out_offsets[q]):
            best = -1
            for s in range(n_parts):
                if heads[s] < offsets[q, s + 1]:
                    if best < 0 or _before(heads[s], heads[best], scores, matches, codes, integer):
                        best = s
            out_rows[dst] = heads[best]
            heads[best] += 1
            dst += 1


def merge_ranked(offsets, scores, matches, codes, k, integer=False):
    """Merge per-part ranked lists into each query's global top-k.

    offsets int64[Q, S + 1]: rows of query q from part s are offsets[q, s]:offsets[q, s + 1], each
    part's rows already in rank order (parts may hold no rows); scores float64[n], matches int32[n],
    codes uint32[n, w] (ids as zero-padded UCS-4). k <= 0 keeps every row.
    Returns (out_offsets int64[Q + 1], rows int64): the chosen rows of each query, best first.
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    counts = offsets[:, -1] - offsets[:, 0]
    if k > 0:
        counts = np.minimum(counts, k)
    out_offsets = np.zeros(offsets.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out_offsets[1:])
    rows = np.empty(int(out_offsets[-1]), dtype=np.int64)
    if codes.ndim != 2 or codes.shape[1] == 0:
        codes = np.zeros((max(scores.shape[0], 1), 1), dtype=np.uint32)
    _merge(offsets, np.asarray(scores, dtype=np.float64), np.asarray(matches, dtype=np.int32),
           np.ascontiguousarray(codes, dtype=np.uint32), np.int64(k), bool(integer),
           out_offsets, rows)
    return out_offsets, rows


@nb.njit(cache=True, nogil=True, inline="always")
def _key_before(r1, r2, scores, matches, ranks):
    """True when row r1 ranks before row r2, ids given as their collection-wide ranks."""
    if scores[r1] != scores[r2]:
        return scores[r1] > scores[r2]
    if matches[r1] != matches[r2]:
        return matches[r1] > matches[r2]
    return ranks[r1] < ranks[r2]


@nb.njit(cache=True, parallel=True)
def _merge_keyed(starts, ends, scores, matches, ranks, out_offsets, out_rows):
    nq = starts.shape[0]
    n_parts = starts.shape[1]
    for q in nb.prange(nq):
        heads = starts[q].copy()
        for dst in range(out_offsets[q], out_offsets[q + 1]):
            best = -1
            for s in range(n_parts):
                if heads[s] < ends[q, s] and (best < 0 or _key_before(heads[s], heads[best], scores, matches, ranks)):
                    best = s
            out_rows[dst] = heads[best]
            heads[best] += 1


def merge_keyed(starts, ends, scores, matches, ranks, k):
    """Merge per-part ranked lists into each query's top k when every row's id is known by its rank in
    the collection's id order (a sharded index's id ranks): the full key is three numbers, no id is read.

    starts, ends int64[Q, S]: rows of query q from part s are starts[q, s]:ends[q, s], in rank order;
    scores float64[n], matches int32[n], ranks uint32[n] (distinct). k <= 0 keeps every row.
    Returns (out_offsets int64[Q + 1], rows int64): the chosen rows of each query, best first.
    """
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    counts = (ends - starts).sum(axis=1)
    if k > 0:
        counts = np.minimum(counts, k)
    out_offsets = np.zeros(starts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out_offsets[1:])
    rows = np.empty(int(out_offsets[-1]), dtype=np.int64)
    _merge_keyed(starts, ends, np.asarray(scores, dtype=np.float64), np.asarray(matches, dtype=np.int32),
                 np.asarray(ranks, dtype=np.uint32), out_offsets, rows)
    return out_offsets, rows
