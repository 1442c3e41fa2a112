"""Numba kernels for the search of a collection made of parts (live segments, shards) in one call
(`search_parts`), with the collection-wide id ranks it cuts ties by (`collection_rank`).

Arrays in, arrays out; every kernel accepts read-only (memory-mapped) arrays.

Over 400 lines (issue 11) on purpose: the one-call search over parts, the arrays it reads (`prepare_parts`,
with the typed lists it takes) and the id ranks it cuts ties by change together; split, each piece would
import the others' private layouts.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import levels
from .candidates import region_offsets
from .levels import _BUFFER, _NO_CUT, _SLICE, MAX_TERMS, _finish, _scan, _tables, fits
from .lists import as_tuple, length
from .merge import merge_two, span_compare
from .probe import _CANDIDATES, RULE, STATS, WIDEN, ascending, search_one, widen, workspace
from .split import hist_level, rare_hist, rare_start
from .ssr import _search_one
from .topk import doc_key


@nb.njit(cache=True, nogil=True)
def _below(order, base, id_offsets, id_bytes, probe, integer):
    """How many of a part's documents (base + order[i], in id order) have an id sorting before document probe's."""
    pa = id_offsets[probe]
    pz = id_offsets[probe + 1]
    lo = 0
    hi = order.shape[0]
    while lo < hi:  # the first position whose id is not before the probe's
        mid = (lo + hi) >> 1
        d = base + order[mid]
        if span_compare(id_bytes, id_offsets[d], id_offsets[d + 1], id_bytes, pa, pz, integer) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True, nogil=True)
def _count_below(order, base, id_offsets, id_bytes, probes, integer, out):
    for q in range(probes.shape[0]):
        out[q] = _below(order, base, id_offsets, id_bytes, probes[q], integer)


def count_below(order, base, id_offsets, id_bytes, probes, integer):
    """For each probe document, how many of a part's documents have an id sorting before its id (int64[P]).

    Ids of the whole collection as UTF-8: document g's is id_bytes[id_offsets[g]:id_offsets[g + 1]]
    (id_offsets int64[N + 1]); the part's documents are base + order[i], in id order (int64[n]);
    probes int64[P]: documents (any part); integer: the collection's id order (`kernels.merge`).
    The kernel's bar (`_parts_batch`) counts the same way, one probe at a time.
    """
    out = np.empty(len(probes), dtype=np.int64)
    _count_below(np.asarray(order, dtype=np.int64), np.int64(base), id_offsets, id_bytes,
                 np.asarray(probes, dtype=np.int64), bool(integer), out)
    return out


@nb.njit(cache=True, nogil=True)
def _merged_below(order, base, probe_order, probe_base, id_offsets, id_bytes, integer, out):
    """`_count_below` for probes that are themselves in id order (another part's): one merge pass."""
    i = 0
    n = order.shape[0]
    for q in range(probe_order.shape[0]):
        p = probe_base + probe_order[q]
        pa = id_offsets[p]
        pz = id_offsets[p + 1]
        while i < n:
            d = base + order[i]
            if span_compare(id_bytes, id_offsets[d], id_offsets[d + 1], id_bytes, pa, pz, integer) >= 0:
                break
            i += 1
        out[q] = i


def collection_rank(orders, starts, id_offsets, id_bytes, integer):
    """Every document's rank in the collection's id order (uint32[N], by collection number).

    orders: per part, its documents in id order (int64[n]); starts: each part's first collection
    number; ids as in `count_below`. A document's rank counts the documents whose id sorts before
    its own (and maybe a deleted one with an equal id): strictly increasing with the id, so it ranks
    live documents as one build of them would. Per pair of parts, the smaller one's documents are
    placed in the larger by binary search or by one merge pass, whichever reads fewer ids.
    """
    n_parts = len(orders)
    counts = [np.arange(len(o), dtype=np.int64) for o in orders]
    placed = [[] for _ in range(n_parts)]  # per part: the positions of the smaller parts' documents in it
    by_size = sorted(range(n_parts), key=lambda i: len(orders[i]))
    for x, small in enumerate(by_size):
        for big in by_size[x + 1:]:
            ns, nbig = len(orders[small]), len(orders[big])
            if ns * max(1, int(nbig).bit_length()) < ns + nbig:
                pos = count_below(orders[big], starts[big], id_offsets, id_bytes, starts[small] + orders[small],
                                  integer)
            else:
                pos = np.empty(ns, dtype=np.int64)
                _merged_below(orders[big], np.int64(starts[big]), orders[small], np.int64(starts[small]),
                              id_offsets, id_bytes, bool(integer), pos)
            counts[small] += pos  # the big part's documents before each of the small part's
            placed[big].append(pos)
    total = int(sum(len(o) for o in orders))
    rank = np.empty(total, dtype=np.uint32)
    for s in range(n_parts):
        n = len(orders[s])
        if placed[s]:  # the smaller parts' documents before each of this part's: those placed at or before it
            counts[s] += np.cumsum(np.bincount(np.concatenate(placed[s]), minlength=n + 1))[:n]
        rank[starts[s] + orders[s]] = counts[s]
    return rank


# the first bar of one set of levels reads the rarest lists of the parts holding at least 1 / _FIRST_BAR of the
# collection's documents
_FIRST_BAR = 4


# the cost rule of a collection of parts: probe's (`probe.RULE`, for `search_one` part by part) and one more
# number, the postings per result wanted from which a query probe would prune goes part by part (`_levels_pay`;
# measured on 1M in 2 segments, RESULTS.md: at K=10 under 5,000 a result one set of levels was ~4% faster, over
# 8,000 part by part 1.5-1.75x; at K=100 under 2,000 and at K=1000 one set of levels)
RULE_PARTS = (*RULE, 6000.0)


@nb.njit(cache=True, nogil=True)
def _levels_pay(df, m, cap, probing, rule):
    """Whether a query of m terms (df int64[m]: each term's postings over all parts, terms in ascending
    weight), cap results, runs one set of levels over the parts (`levels._scan` part after part) rather than
    `probe.search_one` part by part behind bars (rule: `RULE_PARTS`). Levels, unless probing (method ssr),
    probe's own cost rule (`probe.RULE[0], [2]`, on the collection's postings) would try pruning it and it
    holds rule[9] postings a result: then a part's heavy lists read first and its light ones probed save more
    than the per-part tables, bars and merges cost."""
    if not probing or m < 2:
        return True
    total = np.int64(0)
    for j in range(m):
        total += df[j]
    return total < max(rule[0], rule[9] * cap) or df[0] < rule[2] * total


@nb.njit(cache=True, nogil=True, inline="always")
def _out_of_reach(terms, a, m, level, bar, bar_key, first, grank, monotone):
    """Whether none of a part's documents can enter behind the bar of one set of levels: even one holding
    every query term the part has (terms[a:a + m], -1: absent) ranks after it, on its level or, tied on
    the bar level with ranks ascending (`monotone`), on the key of the part's first document. Such a part
    is skipped unopened (its lists' cursors, its blocks): at K=10 the rare terms a small segment lacks."""
    present = 0
    for j in range(m):
        if terms[a + j] >= 0:
            present |= 1 << j
    if present == 0:
        return True  # (mask 0 has no level: `levels._tables`)
    best = level[present]
    if best > bar:
        return True
    return best == bar and monotone and bar_key != _NO_CUT and doc_key(grank[first], first) >= bar_key


@nb.njit(cache=True, nogil=True, inline="always")
def tally(g_termss, a, m, indptrs, sizes_, n_all, df, every, held):
    """A query's postings (its terms a..a + m - 1 of g_termss, as `levels_across` takes them): per term in
    every part (every) and in the parts holding at least 1 / `_FIRST_BAR` of the n_all documents (df), and
    per part (held); each int64, overwritten."""
    df[:m] = 0
    every[:m] = 0
    held[:] = 0
    for s in range(sizes_.shape[0]):
        for j in range(m):
            tm = g_termss[s][a + j]
            if tm >= 0:
                n = length(indptrs[s], tm)
                every[j] += n
                held[s] += n
                if _FIRST_BAR * sizes_[s] >= n_all:
                    df[j] += n


@nb.njit(cache=True, nogil=True)
def levels_across(t, g_termss, g_weights, a, m, cap, base, indptrs, docss, lives, starts, sizes_, n_all, grank, g_mono,
                  scan_order, df, held, width, work, out_d, out_s, out_m):
    """One set of levels for one query over every part, on workspace row t: its m terms g_weights[a:a + m]
    (ascending), part s's term of each g_termss[s][a + j] (-1: absent there). Masks are tabled once, each
    part's postings read into one buffer behind one bar (`levels._scan`, the parts in `scan_order`; part s's
    document d numbered starts[s] + d and ranked by grank[starts[s] + d]), one final sort (`levels._finish`):
    no per-part tables, buffers, sorts or merges. The first bar comes from the rarest lists of the parts
    holding at least 1 / `_FIRST_BAR` of the n_all documents (df int64[m]: their postings of each term);
    held int64[P]: each part's postings of the query (its blocks' width, `probe.widen`).

    Results best first in out_*[base:base + cap], out_d holding keys (grank << 32 | number); returns their
    count, or -1 - s for corrupt postings in part s (row t's masks then dirty).
    """
    w_mask, w_touched, w_cur, w_end, w_last, w_score, w_pop, w_level, w_lvl_score, w_lvl_pop, w_hist, w_bd, w_bl, \
        w_bk = work[:14]
    wide = work[0].shape[1]
    buf = (w_bd[t], w_bl[t], w_bk[t])
    nl = _tables(g_weights, a, m, w_score[t], w_pop[t], w_level[t], w_lvl_score[t], w_lvl_pop[t])
    w_hist[t][:nl] = 0
    bar, bar_key, cum, nbuf = nl - 1, _NO_CUT, np.int64(0), np.int64(0)
    # a first bar from the rarest lists (`split.first_level`) of the parts holding at least a quarter
    # of the documents: a small part's rare lists cost their blocks twice and move the bar little
    p = rare_start(df, m, cap)
    if p < m:
        for s in scan_order:
            if _FIRST_BAR * sizes_[s] < n_all:
                continue
            rare = np.int64(0)  # the part's postings of the rare lists p..m-1
            for j in range(p, m):
                if g_termss[s][a + j] >= 0:
                    rare += length(indptrs[s], g_termss[s][a + j])
            if not rare_hist(g_termss[s], a, p, m, indptrs[s], docss[s], sizes_[s], lives[s],
                             widen(width, rare, sizes_[s], wide), w_level[t], w_hist[t], w_mask[t],
                             w_cur[t], w_end[t], w_last[t]):
                return -1 - s
        bar = hist_level(w_hist[t], nl, cap)
    for s in scan_order:
        if _out_of_reach(g_termss[s], a, m, w_level[t], bar, bar_key, starts[s], grank, g_mono):
            continue
        # a part's share of a sparse query: wider blocks (`probe.widen`), fewer of them to start
        block = widen(width, held[s], sizes_[s], wide)
        bar, bar_key, cum, nbuf = _scan(indptrs[s], docss[s], sizes_[s], starts[s], grank, lives[s],
                                        g_termss[s], a, m, block, cap, w_mask[t], w_touched[t], w_cur[t],
                                        w_end[t], w_last[t], w_level[t], w_hist[t], buf, bar, bar_key,
                                        cum, nbuf, g_mono)
        if nbuf < 0:
            return -1 - s
    return _finish(buf, nbuf, bar, cum, cap, w_hist[t], grank, w_lvl_score[t], w_lvl_pop[t], base, out_d, out_s,
                   out_m, g_mono)


@nb.njit(cache=True, nogil=True)
def _parts_queries(lo, hi, t, indptrs, docss, ranks, lives, orders, fwd_indptrs, fwd_termss, starts, sizes_, monos,
                   q_offs, q_terms, q_weights, k, width, id_offsets, id_bytes, integer, caps_off, max_terms, work,
                   rule, g_off, g_termss, g_weights, grank, g_mono, scan_order, out_d, out_s, out_m, sizes, bad,
                   dirty, bar_s, bar_m, bar_k):
    """Queries lo..hi-1 on workspace row t (the body of `_parts_batch`'s slices and of `_parts_serial`)."""
    n_parts = starts.shape[0]
    n_all = np.int64(0)
    for s in range(n_parts):
        n_all += sizes_[s]
    # method ssr (every part's forward rows given): a query probe would prune goes part after part instead
    probing = True
    for s in range(n_parts):
        probing = probing and fwd_indptrs[s].shape[0] == sizes_[s] + 1
    # one part's results, the running top k and the merge's output (copied back into the top)
    r_d, r_s, r_m = np.empty(k, np.int64), np.empty(k, np.float64), np.empty(k, np.int32)
    t_d, t_s, t_m = np.empty(k, np.int64), np.empty(k, np.float64), np.empty(k, np.int32)
    u_d, u_s, u_m = np.empty(k, np.int64), np.empty(k, np.float64), np.empty(k, np.int32)
    stats = np.zeros(STATS, dtype=np.int64)
    df = np.zeros(MAX_TERMS, np.int64)  # a query's postings per term in the parts holding a quarter of the documents
    every = np.zeros(MAX_TERMS, np.int64)  # ... and in all parts
    held = np.zeros(n_parts, np.int64)  # a query's postings in each part (its block width: `probe.widen`)
    for q in range(lo, hi):
        if dirty[t]:  # this thread's workspace met corrupt postings: the call fails anyway
            break
        a = g_off[q]
        m = g_off[q + 1] - a
        base = caps_off[q]
        cap = caps_off[q + 1] - base
        if 0 < m <= max_terms and cap > 0:
            tally(g_termss, a, m, indptrs, sizes_, n_all, df, every, held)
        if 0 < m <= max_terms and cap > 0 and _levels_pay(every, m, cap, probing, rule):
            nt = levels_across(t, g_termss, g_weights, a, m, cap, base, indptrs, docss, lives, starts, sizes_, n_all,
                               grank, g_mono, scan_order, df, held, width, work, out_d, out_s, out_m)
            if nt < 0:  # corrupt postings in part -1 - nt: this thread's masks are dirty
                bad[q] = -nt
                dirty[t] = True
                break
            for i in range(nt):  # keys to collection document numbers
                out_d[base + i] &= 0xFFFFFFFF
            sizes[q] = nt
            continue
        nt = 0
        for s in range(n_parts):
            qo = q_offs[s]
            m = qo[q + 1] - qo[q]
            if m == 0:
                continue
            indptr = indptrs[s]
            cap = np.int64(0)
            for j in range(qo[q], qo[q + 1]):
                tm = q_terms[j]
                cap += length(indptr, tm)
            cap = min(cap, k)
            if cap == 0:
                continue
            bar_s[q] = -np.inf
            if nt == k:  # k documents known: this part's must rank before the k-th of them
                bar_s[q] = t_s[k - 1]
                bar_m[q] = t_m[k - 1]
                bar_k[q] = _below(orders[s], starts[s], id_offsets, id_bytes, t_d[k - 1], integer) << 32
            n_docs = sizes_[s]
            if m <= max_terms:
                nr = search_one(q, indptr, docss[s], ranks[s], n_docs, fwd_indptrs[s], fwd_termss[s], qo,
                                q_weights, q_terms, width, cap, lives[s], work, t, 0,
                                r_d, r_s, r_m, rule, stats, bar_s, bar_m, bar_k, monos[s])
            else:
                nr = _search_one(q, indptr, docss[s], ranks[s], n_docs, qo, q_terms, q_weights, width,
                                 work[14][t], work[15][t], work[1][t], work[2][t], work[3][t], work[4][t], 0, cap,
                                 r_d, r_s, r_m, lives[s], bar_s, bar_m, bar_k)
            if nr < 0:  # corrupt postings: this thread's accumulators are dirty
                bad[q] = s + 1
                dirty[t] = True
                break
            for i in range(nr):  # the part's keys to collection document numbers
                r_d[i] = starts[s] + (r_d[i] & 0xFFFFFFFF)
            nt = merge_two((id_offsets, id_bytes, integer), t_d, t_s, t_m, nt, r_d, r_s, r_m, nr, k, u_d, u_s, u_m)
            t_d[:nt] = u_d[:nt]
            t_s[:nt] = u_s[:nt]
            t_m[:nt] = u_m[:nt]
        if bad[q]:
            break
        for i in range(nt):
            out_d[base + i] = t_d[i]
            out_s[base + i] = t_s[i]
            out_m[base + i] = t_m[i]
        sizes[q] = nt


@nb.njit(cache=True, nogil=True)
def _outputs(caps_off, rows):
    """Result arrays (docs, scores, matches), sizes and corrupt-part marks per query, dirty rows, bars."""
    nq = caps_off.shape[0] - 1
    return (np.empty(caps_off[nq], dtype=np.int64), np.empty(caps_off[nq], dtype=np.float64),
            np.empty(caps_off[nq], dtype=np.int32), np.zeros(nq, dtype=np.int64), np.zeros(nq, dtype=np.int64),
            np.zeros(rows, dtype=np.bool_), np.empty(nq, dtype=np.float64), np.empty(nq, dtype=np.int32),
            np.empty(nq, dtype=np.int64))


@nb.njit(cache=True, parallel=True)
def _parts_batch(indptrs, docss, ranks, lives, orders, fwd_indptrs, fwd_termss, starts, sizes_, monos, q_offs,
                 q_terms, q_weights, k, width, id_offsets, id_bytes, integer, caps_off, max_terms, work, rule, g_off,
                 g_termss, g_weights, grank, g_mono, scan_order, n_slices):
    """Queries in n_slices contiguous slices taken by the threads one at a time (as `levels.run`)."""
    nq = caps_off.shape[0] - 1
    out_d, out_s, out_m, sizes, bad, dirty, bar_s, bar_m, bar_k = _outputs(caps_off, work[0].shape[0])
    for c in nb.prange(n_slices):
        _parts_queries(c * nq // n_slices, (c + 1) * nq // n_slices, nb.get_thread_id(), indptrs, docss, ranks,
                       lives, orders, fwd_indptrs, fwd_termss, starts, sizes_, monos, q_offs, q_terms, q_weights, k,
                       width, id_offsets, id_bytes, integer, caps_off, max_terms, work, rule, g_off, g_termss,
                       g_weights, grank, g_mono, scan_order, out_d, out_s, out_m, sizes, bad, dirty, bar_s, bar_m,
                       bar_k)
    return sizes, out_d, out_s, out_m, bad


@nb.njit(cache=True, nogil=True)
def _parts_serial(indptrs, docss, ranks, lives, orders, fwd_indptrs, fwd_termss, starts, sizes_, monos, q_offs,
                  q_terms, q_weights, k, width, id_offsets, id_bytes, integer, caps_off, max_terms, work, rule, g_off,
                  g_termss, g_weights, grank, g_mono, scan_order):
    """Every query on the calling thread (workspace row 0), the GIL released: a Python thread's piece."""
    out_d, out_s, out_m, sizes, bad, dirty, bar_s, bar_m, bar_k = _outputs(caps_off, 1)
    _parts_queries(0, caps_off.shape[0] - 1, 0, indptrs, docss, ranks, lives, orders, fwd_indptrs, fwd_termss, starts,
                   sizes_, monos, q_offs, q_terms, q_weights, k, width, id_offsets, id_bytes, integer, caps_off,
                   max_terms, work, rule, g_off, g_termss, g_weights, grank, g_mono, scan_order, out_d, out_s, out_m,
                   sizes, bad, dirty, bar_s, bar_m, bar_k)
    return sizes, out_d, out_s, out_m, bad


@nb.njit(cache=True)
def _list_of(a):
    out = nb.typed.List()
    out.append(a)
    return out


@nb.njit(cache=True)
def _push(items, a):
    items.append(a)


def typed_list(items):
    """A typed list of items of one type (arrays, tuples), at least one, made by cached kernels: a
    `nb.typed.List`'s own `append` is compiled for each item type in every process (seconds before a
    process's first search over parts; 16-24 s under load 18 against 5-7 s for these, which is Numba's
    first load of any kernel)."""
    out = _list_of(items[0])
    for a in items[1:]:
        _push(out, a)
    return out


def _frozen(a, dtype):
    """a as a read-only C array of dtype (a typed list holds arrays of one type; memory maps are read-only)."""
    a = np.ascontiguousarray(a, dtype=dtype).view()
    a.flags.writeable = False
    return a


def _offsets(lists):
    """The offsets array of a postings directory (`kernels.lists`)."""
    return lists[2] if isinstance(lists, tuple) else lists


def frozen_lists(lists, dtype):
    """A postings directory (`kernels.lists`) with its offsets as dtype, each array read-only (`_frozen`)."""
    if isinstance(lists, tuple):
        return _frozen(lists[0], np.uint64), _frozen(lists[1], np.uint32), _frozen(lists[2], dtype)
    return _frozen(lists, dtype)


def prepare_parts(parts, method="ssr", grank=None):
    """The parts' arrays as `search_parts` reads them: made once per collection and method and passed
    back in (typed lists cost microseconds an element to build; a small piece of a batch would pay it).

    parts: as `search_parts`' tuples; grank: the collection's id ranks uint32[N] (`collection_rank`), or
    None. Returns (typed lists of indptr, docs, rank, live, order, forward indptr and terms; starts,
    sizes int64[P]; monotone bool[P]; the order one set of levels reads the parts in; the indptrs; whether
    grank ascends with collection numbers (`probe.ascending`: one set of levels then cuts ties by document
    number); method).
    """
    lists: list[list] = [[] for _ in range(7)]
    empty = np.zeros(0, dtype=np.uint8)
    # one typed list holds one array type: offsets stay int32 when every part's are (no copy of a
    # vocabulary-sized array per call); a mix is widened to int64
    ip = np.int32 if all(np.asarray(_offsets(p[2])).dtype == np.int32 for p in parts) else np.int64
    fp = np.int32 if all(np.asarray(p[7]).dtype == np.int32 for p in parts) else np.int64
    no_fwd = np.zeros(0, dtype=fp)  # levels reads every posting where a part has no forward index
    # the postings of a live index mixing formats (plain and packed parts) are all whole-byte columns
    packed = any(isinstance(p[3], tuple) for p in parts)
    seven = any(isinstance(p[2], tuple) for p in parts)  # and their postings directories all format 7's
    for _, _, indptr, docs, rank, live, order, f_indptr, f_terms, _ in parts:
        if packed and not isinstance(docs, tuple):
            docs = (_frozen(docs, np.uint32).view(np.uint8), 32)
        indptr = frozen_lists(as_tuple(indptr) if seven else indptr, ip)
        for lst, a, dt in zip(lists, (indptr, docs, rank, empty if live is None else live.view(np.uint8), order,
                                      f_indptr if method == "ssr" else no_fwd, f_terms),
                              (ip, np.uint32, np.uint32, np.uint8, np.int64, fp, np.uint32), strict=True):
            if a is indptr:
                lst.append(a)
            elif isinstance(a, tuple):  # a packed column (forward rows, packed postings)
                lst.append((_frozen(a[0], np.uint8 if a is docs else dt), np.int64(a[1])))
            else:
                lst.append(_frozen(a, dt))
    lists = [typed_list(lst) for lst in lists]
    starts = np.array([p[0] for p in parts], dtype=np.int64)
    grank = np.zeros(0, np.uint32) if grank is None else grank
    # one set of levels reads the parts in about the collection's id order (by each part's median id): a
    # later document tied on the bar level then mostly ranks after the cut and is dropped on its key, as
    # in one index (the largest-first order of the bars would put the newest segments first)
    median = [int(grank[p[0] + p[6][len(p[6]) // 2]]) if len(p[6]) and grank.shape[0] else 0 for p in parts]
    return (lists, starts, np.array([p[1] for p in parts], dtype=np.int64),
            np.array([bool(p[9]) for p in parts], dtype=np.bool_),
            np.argsort(np.array(median, dtype=np.int64), kind="stable"), [p[2] for p in parts],
            bool(grank.shape[0]) and bool(ascending(grank)), method)


def search_parts(parts, queries, k, id_offsets, id_bytes, integer, block, n_chunks=None, method="ssr", shared=None,
                 work=None, rule=None):
    """Exact top k of every query over a collection's parts in one parallel call.

    parts: per part (first collection number, n_docs, indptr int64[V + 1], docs the postings column, rank uint32[n]
    (ties in the collection's id order), live bool[n] or None, order int64[n] (its documents in id order),
    forward indptr int[n + 1] and rows (words, width) (the part's forward index, `kernels.forward`; method
    "ssr" probes it), whether its ranks ascend with its document numbers (`probe.ascending`)), or
    `prepare_parts`' result for them;
    searched in the given order (largest first makes the bar tighten soonest). queries: per part
    (offsets int64[Q + 1], terms int64, weights float64), each query's terms in ascending weight, weights
    the collection's. Per query, part after part, behind a bar: the k-th entry of the top k so far (its id
    turned into the part's own rank by binary search over the part's ids, as UTF-8 in
    `id_bytes[id_offsets[g]:id_offsets[g + 1]]`), then merged into it (`merge.merge_two`). method "ssr":
    `probe.search_one` (probing where its cost rule says it pays, else levels), "levels": levels,
    "union": the heap union `ssr._search_one` (also past MAX_TERMS terms). One parallel region for the
    batch: no Python between the parts.
    shared: (offsets int64[Q + 1], per part terms int64 aligned with them (-1: absent from the part),
    weights float64, the collection's id ranks uint32[N] (`collection_rank`)): the same queries over the
    collection's signals. With it, a query of 1..MAX_TERMS terms (unless "union") runs ONE set of levels
    over every part instead: masks tabled once, each part's postings read into one buffer behind one bar
    (`levels._scan`, the parts in about the collection's id order), ties cut by the collection rank, one
    final sort (`levels._finish`): no per-part tables, buffers, sorts or merges; except, with method "ssr", the
    queries probe's cost rule would prune over the collection (`_levels_pay`): those go part after part.
    n_chunks 1 (or one query): on the calling thread, the GIL released (a Python thread's piece of a batch).
    work: a one-element list holding a `probe.workspace` the caller keeps across calls (made or replaced
    when missing or too small), as `probe.search_batch`'s.
    rule: the cost rule (`RULE_PARTS`, the default: probe's for `search_one`, and `_levels_pay`'s postings a
    result).
    Returns (offsets int64[Q + 1], docs int64 (collection numbers), scores float64, matches int32,
    corrupt part index or -1).
    """
    if n_chunks is None:
        n_chunks = nb.get_num_threads()
    if shared is None:  # every query part after part
        shared = (np.zeros(len(queries[0][0]), np.int64), [np.zeros(0, np.int64)] * len(queries), np.zeros(0),
                  np.zeros(0, np.uint32))
    if not (isinstance(parts, tuple) and parts[-1] == method):
        parts = prepare_parts(parts, method, shared[3])
    lists, starts, sizes, monos, scan_order, indptrs, g_mono, _ = parts
    nq = len(queries[0][0]) - 1
    caps = np.zeros(nq, dtype=np.int64)
    # the parts' query terms as one flat array: part s's query q is q_offs[s, q]..q_offs[s, q + 1]
    q_offs = np.empty((len(queries), nq + 1), dtype=np.int64)
    at = 0
    for s, (offsets, terms, _) in enumerate(queries):
        caps += np.diff(region_offsets(offsets, terms, indptrs[s], k))
        q_offs[s] = offsets + at
        at += len(terms)
    caps_off = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(np.minimum(caps, k), out=caps_off[1:])
    q_terms = np.concatenate([np.asarray(q[1], dtype=np.int64) for q in queries])
    q_weights = np.concatenate([np.asarray(q[2], dtype=np.float64) for q in queries])
    widest = max(1, int(sizes.max()))
    width = min(max(1, block), widest)
    g_terms = np.array(shared[1], dtype=np.int64).reshape(len(queries), -1)
    longest = max(max(int(np.diff(o).max()) if len(o) > 1 else 1 for o in [shared[0]] + [q[0] for q in queries]), 64)
    threads = max(1, min(n_chunks, nq, int(nb.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    # rows by thread id: any of the pool's; one thread runs on the calling thread, on row 0
    rows = 1 if threads == 1 else int(nb.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    wide, entries = min(width * WIDEN, widest), max(_BUFFER, 4 * k)
    n_cand = min(_CANDIDATES, widest) if method == "ssr" else 1
    holder = [None] if work is None else work
    if not (fits(holder[0], rows, wide, longest, entries) and holder[0][16].shape[1] == n_cand):
        holder[0] = workspace(max(rows, holder[0][0].shape[0] if holder[0] is not None else 1), wide, longest,
                              entries, n_cand)
    args = (*lists, starts, sizes, monos, q_offs, q_terms, q_weights, np.int64(k), np.int64(width), id_offsets,
            id_bytes, bool(integer), caps_off, np.int64(0 if method == "union" else MAX_TERMS), holder[0],
            np.asarray(RULE_PARTS if rule is None else rule, dtype=np.float64), np.asarray(shared[0], dtype=np.int64),
            g_terms, np.asarray(shared[2], dtype=np.float64), np.asarray(shared[3], dtype=np.uint32), g_mono,
            scan_order)
    if threads == 1:
        got, docs, scores, matches, bad = _parts_serial(*args)
    else:
        n_slices = np.int64(max(1, min(nq, max(8 * n_chunks, -(-nq // _SLICE)))))
        got, docs, scores, matches, bad = levels.sliced_call(threads, _parts_batch, *args, n_slices)
    if bad.any():  # an abandoned query left the zeroed rows dirty (mask, acc, cnt)
        for a in (holder[0][0], holder[0][14], holder[0][15]):
            a[...] = 0
    offsets = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(got, out=offsets[1:])
    keep = np.repeat(caps_off[:-1] - offsets[:-1], got) + np.arange(int(offsets[-1]), dtype=np.int64)
    hit = np.flatnonzero(bad)
    return offsets, docs[keep], scores[keep], matches[keep], int(bad[hit[0]]) - 1 if hit.shape[0] else -1
