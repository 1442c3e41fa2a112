"""Numba kernels for sharded indexes: matching two shards' sorted vocabularies (the global df reduction) and
searching a group of shards as one (`search_group`).

Arrays in, arrays out; read-only (memory-mapped) arrays are accepted.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import probe
from .levels import _EVERY_DOC, MAX_TERMS
from .lists import span
from .live import _FIRST_BAR, _levels_pay, levels_across
from .merge import merge_two
from .part_terms import arrange
from .query import found_in, signals
from .small import small_across
from .topk import heap_arrays

_DOC = 0xFFFFFFFF  # a key's low half: the collection document number (`search_group`'s keys)


@nb.njit(cache=True, nogil=True)
def match_sorted(a, b):
    """Position in `b` of each value of `a`, or -1: one merge pass over two ascending arrays.

    Parameters
    ----------
    a : uint64 ndarray, shape (n,), strictly ascending (a shard's vocabulary)
    b : uint64 ndarray, shape (m,), strictly ascending

    Returns
    -------
    int64 ndarray, shape (n,)
    """
    out = np.full(a.shape[0], -1, dtype=np.int64)
    j = 0
    m = b.shape[0]
    for i in range(a.shape[0]):
        v = a[i]
        while j < m and b[j] < v:
            j += 1
        if j == m:
            break
        if b[j] == v:
            out[i] = j
    return out


@nb.njit(cache=True, nogil=True, inline="always")
def _densest_first(held, order):
    """order[:] = the shards by descending held, ties by position (a stable sort, as argsort(-held, "mergesort")),
    in place: an insertion sort (a group has a few shards), no allocation a query."""
    for i in range(held.shape[0]):
        j = i
        while j > 0 and held[order[j - 1]] < held[i]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i


@nb.njit(cache=True, nogil=True, inline="always")
def _out_of_reach(q_weights, a, b, bs, bm, bk, first, monotone):
    """Whether a shard's document holding every term q_weights[a:b] (ascending weight) ranks strictly after
    the bar (bs, bm, bk): on (score, matches), or tied on them with the shard's ranks ascending (`monotone`)
    and its first document's key (`first`: rank << 32) after the bar's."""
    sc = 0.0
    for j in range(a, b):
        sc += q_weights[j]
    return sc < bs or (sc == bs and (b - a < bm or (b - a == bm and monotone and first > bk)))


@nb.njit(cache=True, nogil=True)
def search_group(indptrs, docss, ranks, lives, fwd_indptrs, fwd_termss, bases, starts, sizes_, monos, q_offs, q_terms,
                 q_weights, g_off, g_terms, g_weights, grank, g_mono, scan_order, k, width, work, rule, fixed, across):
    """Every query's top k over a group of shards, on the calling thread (workspace row 0), the GIL released.

    A query of at most `levels.MAX_TERMS` terms that neither `small` nor probe's pruning would take over
    the group's postings (`probe.search_one`'s rule and `kernels.live._levels_pay`'s, on the group's
    totals) runs ONE set of levels over the shards (`kernels.live.levels_across`, as a live index's
    segments): tables, buffer, bar and sort once, not once a shard (a shard alone cost about half of the
    whole index's time a query on real short texts: RESULTS.md). Any other query goes shard after shard,
    each through `probe._query` (the single index's search: probe, levels, `small` or the long path by its
    cost rule) behind the bar of the group's top k so far (its k-th entry: a document must rank strictly
    before it), and its rows are merged into that top k at once. The shards' ranks are the collection's id
    ranks, so keys (rank << 32 | document) of different shards compare and a bar is one key. The shards go
    in descending order of the postings the query's terms hold in them (ties by position): where they are
    densest the top k tends to be strongest, so later shards meet a higher bar; any order gives the same
    results. A shard none of whose documents can rank strictly before the bar (`_out_of_reach`: even one
    holding all of the query's terms it has, or, tied with the bar on (score, matches) and the shard's
    ranks ascending, its first document) is not opened: at 8.8M many a query's top k ends in a tie on its
    commonest term, which the shard of the lowest ids wins; the others' levels read that term's whole list
    in each (RESULTS.md).

    Parameters
    ----------
    indptrs, docss, ranks, lives, fwd_indptrs, fwd_termss : typed lists, one entry per shard
        (`kernels.live.prepare_parts`): postings offsets and column, the collection's id rank uint32 of each
        document, live masks (empty: no deletions), forward offsets and rows.
    bases, starts, sizes_ : int64 ndarray, shape (S,)
        Each shard's first collection document number, its first number in the group (grank's) and its
        document count.
    monos : bool ndarray, shape (S,)
        Whether the shard's ranks ascend with its document numbers (`probe.ascending`).
    q_offs : int64 ndarray, shape (S, Q + 1)
        Shard s's terms of query q: q_terms[q_offs[s, q]:q_offs[s, q + 1]] (ascending weight), weights alike.
    g_off : int64 ndarray, shape (Q + 1,); g_terms int64 ndarray, shape (S, A); g_weights float64, shape (A,)
        The group's terms of query q: entries g_off[q]..g_off[q + 1] - 1 (ascending weight), shard s's term
        of each g_terms[s, entry] (-1: absent there) (`kernels.part_terms.arrange`'s shared terms).
    grank : uint32 ndarray, shape (sum of sizes_,)
        The shards' ranks end to end (shard s's document d is starts[s] + d); g_mono: whether they ascend.
    scan_order : int64 ndarray, shape (S,)
        The order one set of levels reads the shards in (about the collection's id order).
    k : int, >= 1
    width : int
        The block (`levels.plan`'s, before a shard's own cap).
    work : `probe.workspace` with one row at least, its cursor rows as long as the longest query
    rule : float64 ndarray, `kernels.live.RULE_PARTS`
    fixed : int64 ndarray, shape (S,) or (0,)
        An order to search the shards in for every query instead (tests).
    across : bool
        Whether queries may run one set of levels over the shards (tests turn it off).

    Returns
    -------
    (offsets int64 (Q + 1,), docs int64 (collection numbers), scores float64, matches int32, ranks uint32,
    stats int64 (Q, probe.STATS) summed over the shards, the first shard whose postings are corrupt or -1)
    """
    n_shards = bases.shape[0]
    nq = q_offs.shape[1] - 1
    n_all = np.int64(0)
    for s in range(n_shards):
        n_all += sizes_[s]
    # each of the group's query terms' postings in each shard, read once (the directory reads miss cache)
    n_entries = g_terms.shape[1]
    los, his = np.zeros((n_shards, n_entries), np.int64), np.zeros((n_shards, n_entries), np.int64)
    held = np.zeros((nq, n_shards), dtype=np.int64)  # postings of query q's terms in shard s
    for s in range(n_shards):  # shard by shard: one read of each typed list entry, not one a query
        indptr = indptrs[s]
        for e in range(n_entries):
            if g_terms[s, e] >= 0:
                los[s, e], his[s, e] = span(indptr, g_terms[s, e])
        for q in range(nq):  # (shard s's terms of query q are the group's entries it holds)
            for e in range(g_off[q], g_off[q + 1]):
                held[q, s] += his[s, e] - los[s, e]
    caps = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        caps[q + 1] = caps[q] + min(held[q].sum(), k)
    out_s, out_m, out_k = heap_arrays(caps[nq])
    sizes = np.zeros(nq, dtype=np.int64)
    r_s, r_m, r_k = heap_arrays(k)  # one shard's rows
    t_s, t_m, t_k = heap_arrays(k)  # the group's top k so far
    u_s, u_m, u_k = heap_arrays(k)  # a merge's output
    region = np.zeros(nq + 1, dtype=np.int64)  # `probe._query`'s output region for query q: [0, cap)
    bar_s, bar_m, bar_k = np.full(nq, -np.inf), np.zeros(nq, dtype=np.int32), np.zeros(nq, dtype=np.int64)
    stats = np.zeros((nq, probe.STATS), dtype=np.int64)
    df = np.zeros(MAX_TERMS, np.int64)  # a query's postings per term (`live.tally`)
    every = np.zeros(MAX_TERMS, np.int64)
    in_shard = np.zeros(n_shards, np.int64)
    bad = -1
    order = fixed.copy() if fixed.shape[0] else np.empty(n_shards, dtype=np.int64)
    for q in range(nq):
        cap = caps[q + 1] - caps[q]
        a = g_off[q]
        m = g_off[q + 1] - a
        if across and 0 < m <= MAX_TERMS and cap > 0:
            df[:m], every[:m], total = 0, 0, 0  # `live.tally`'s, from the spans
            for s in range(n_shards):
                for j in range(m):
                    n = his[s, a + j] - los[s, a + j]
                    every[j] += n
                    total += n
                    if _FIRST_BAR * sizes_[s] >= n_all:
                        df[j] += n
                in_shard[s] = held[q, s]
            small = cap <= rule[7] and (total < rule[6] or (m == 1 and g_mono))  # `probe.search_one`'s rule
            if small or _levels_pay(every, m, cap, True, rule):
                if small:
                    nt = small_across(a, m, g_terms, los, his, g_weights, docss, grank, starts, sizes_, lives,
                                      scan_order, cap, t_k, t_s, t_m, g_mono, work[5][0], work[6][0], work[2][0],
                                      work[3][0], work[4][0], stats[q])
                    stats[q, 5] += 1
                else:
                    nt = levels_across(0, g_terms, g_weights, a, m, cap, 0, indptrs, docss, lives, starts, sizes_,
                                       n_all, grank, g_mono, scan_order, df, in_shard, width, work, t_k, t_s, t_m)
                    stats[q, 0] += total  # (every posting counted, as levels' own)
                    stats[q, 3] += 1
                if nt < 0:  # corrupt postings: the workspace is dirty (the caller clears it)
                    bad = -1 - nt
                    break
                b = caps[q]
                for i in range(nt):  # the group's numbers to the collection's
                    g = t_k[i] & _DOC
                    s = n_shards - 1
                    while starts[s] > g:
                        s -= 1
                    out_k[b + i] = (t_k[i] & ~np.int64(_DOC)) | (bases[s] + g - starts[s])
                    out_s[b + i], out_m[b + i] = t_s[i], t_m[i]
                sizes[q] = nt
                continue
        if not fixed.shape[0]:
            _densest_first(held[q], order)
        nt = 0
        for s in order:
            if held[q, s] == 0:
                continue
            n_docs = sizes_[s]
            kk = min(k, n_docs)
            region[q], region[q + 1] = 0, min(kk, held[q, s])
            bar_s[q] = -np.inf
            if nt == k:
                bar_s[q], bar_m[q], bar_k[q] = t_s[k - 1], t_m[k - 1], (t_k[k - 1] >> 32) << 32
                if _out_of_reach(q_weights, q_offs[s, q], q_offs[s, q + 1], t_s[k - 1], t_m[k - 1], bar_k[q],
                                 np.int64(ranks[s][0]) << 32 if n_docs else bar_k[q], monos[s]):
                    continue
            nr = probe._query(q, kk, indptrs[s], docss[s], ranks[s], n_docs, fwd_indptrs[s], fwd_termss[s], q_offs[s],
                              q_terms, q_weights, min(width, n_docs), _EVERY_DOC, region, r_k, r_s, r_m, work, 0,
                              bar_s, bar_m, bar_k, rule, stats, monos[s])
            if nr < 0:  # corrupt postings: the workspace is dirty (the caller clears it)
                bad = s
                break
            for i in range(nr):  # the shard's keys: its document number to the collection's
                r_k[i] = (r_k[i] & ~np.int64(_DOC)) | (bases[s] + (r_k[i] & _DOC))
            nt = merge_two(0, t_k, t_s, t_m, nt, r_k, r_s, r_m, nr, k, u_k, u_s, u_m)
            t_s, u_s = u_s, t_s
            t_m, u_m = u_m, t_m
            t_k, u_k = u_k, t_k
        if bad >= 0:
            break
        b = caps[q]
        out_s[b : b + nt], out_m[b : b + nt], out_k[b : b + nt] = t_s[:nt], t_m[:nt], t_k[:nt]
        sizes[q] = nt
    offsets = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        offsets[q + 1] = offsets[q] + sizes[q]
    n = offsets[nq]
    docs, scores = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.float64)
    matches, rank = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.uint32)
    for q in range(nq):
        for i in range(sizes[q]):
            key = out_k[caps[q] + i]
            docs[offsets[q] + i], rank[offsets[q] + i] = key & _DOC, key >> 32
            scores[offsets[q] + i], matches[offsets[q] + i] = out_s[caps[q] + i], out_m[caps[q] + i]
    return offsets, docs, scores, matches, rank, stats, bad


@nb.njit(cache=True, nogil=True)
def prepare_group(data, q_offsets, stop, cap, seed, mask, key_shift, vocabs, checkeds, shift, strings, indptrs,
                  n_postings, n_docs, weights, directories, dir_bits, n_weights):
    """A piece of queries' terms over a group of shards sharing one key rule, in one GIL-free call (pieces on
    an actor's threads then hold the GIL only to start it): the signals made once (`query.signals`), each
    shard's look-up (`query.found_in`, through its key directory), the collection's df from the shards'
    weight slices, and `part_terms.arrange` per shard and over the group with N = n_weights.

    Parameters
    ----------
    data, q_offsets, stop, cap, seed, mask : `query.signals`' arguments (the queries' UTF-8 bytes and offsets)
    key_shift : uint64; shift : int64 (`validate.VOCAB_BLOCK_SHIFT`)
    vocabs, checkeds, strings, indptrs, weights, directories : typed lists, one entry per shard: its sorted
        keys, checked blocks, strings tuple (`query_terms.lookup_args`' fifth), postings directory, the
        collection's df of each of its terms, key directory (`terms.key_directory`)
    n_postings, n_docs, dir_bits : int64 ndarray, shape (S,)

    Returns
    -------
    (the first shard whose vocabulary or offsets failed a check, or -1 (then nothing else is to be trusted);
    `arrange`'s tuple; each signal's df in each shard int64 (S, n))
    """
    sig = signals(data, q_offsets, stop, cap, seed, mask)
    n = sig[3].shape[0]
    n_shards = len(vocabs)
    found = np.full((n_shards, n), -1, dtype=np.int64)
    own = np.zeros((n_shards, n), dtype=np.int64)
    df = np.zeros(n, dtype=np.int64)
    bad = -1
    for s in range(n_shards):
        t, d, ok = found_in(sig, key_shift, vocabs[s], checkeds[s], shift, strings[s], indptrs[s], n_postings[s],
                            n_docs[s], directories[s], dir_bits[s])
        if not ok:
            bad = s
            break
        table = weights[s]
        for i in range(n):
            found[s, i], own[s, i] = t[i], d[i]
            if t[i] >= 0:
                df[i] = table[t[i]]  # the collection's df: the same in every shard
    return bad, arrange(sig[0], found, own, df, n_weights), own
