"""Numba kernels for live indexes: reading documents back out of a segment (compaction), and the search
of a collection made of parts (live segments, shards) in one call (`search_parts`).

Arrays in, arrays out; every kernel accepts read-only (memory-mapped) arrays.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .candidates import region_offsets
from .levels import _BUFFER, MAX_TERMS
from .merge import span_compare
from .probe import _CANDIDATES, RULE, STATS, WIDEN, search_one, workspace
from .ssr import _search_one


@nb.njit(cache=True, nogil=True)
def _gather(src, starts, lengths, out):
    o = 0
    for i in range(starts.shape[0]):
        s = starts[i]
        for j in range(lengths[i]):
            out[o + j] = src[s + j]
        o += lengths[i]


def gather_spans(src, starts, lengths):
    """Concatenate src[starts[i]:starts[i] + lengths[i]] for every i (src 1-d; result has src's dtype)."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.empty(int(lengths.sum()), dtype=src.dtype)
    _gather(src, starts, lengths, out)
    return out


@nb.njit(cache=True, nogil=True)
def _term_frequencies(indptr, docs, tfs, terms, doc_of, out):
    for i in range(terms.shape[0]):
        t = terms[i]
        d = doc_of[i]
        lo = indptr[t]
        hi = indptr[t + 1]
        while lo < hi:  # binary search: d in the term's ascending postings
            mid = (lo + hi) >> 1
            if np.int64(docs[mid]) < d:
                lo = mid + 1
            else:
                hi = mid
        if lo < indptr[t + 1] and np.int64(docs[lo]) == d:
            out[i] = tfs[lo]
        else:
            out[i] = 0  # the forward and inverted indexes disagree: a corrupt segment


def term_frequencies(indptr, docs, tfs, terms, doc_of):
    """tf of each (term terms[i], document doc_of[i]) pair, read from the postings (uint32[n]).

    indptr int64[V + 1], docs uint32[P] ascending per term, tfs uint32[P]. A pair missing from the
    postings gets 0 (the caller treats that as corruption).
    """
    terms = np.asarray(terms, dtype=np.int64)
    doc_of = np.asarray(doc_of, dtype=np.int64)
    out = np.empty(terms.shape[0], dtype=np.uint32)
    _term_frequencies(indptr, docs, tfs, terms, doc_of, out)
    return out


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
def _merge_one(a_d, a_s, a_m, na, b_d, b_s, b_m, nb_, k, id_offsets, id_bytes, integer, o_d, o_s, o_m):
    """The best min(na + nb_, k) of two ranked lists (collection document numbers) by the full key,
    ids compared as the collection orders them; written to o_*; returns the count."""
    i = 0
    j = 0
    n = min(na + nb_, k)
    for o in range(n):
        take_a = j >= nb_
        if not take_a and i < na:
            if a_s[i] != b_s[j]:
                take_a = a_s[i] > b_s[j]
            elif a_m[i] != b_m[j]:
                take_a = a_m[i] > b_m[j]
            else:
                x, y = a_d[i], b_d[j]
                take_a = span_compare(id_bytes, id_offsets[x], id_offsets[x + 1], id_bytes, id_offsets[y],
                                      id_offsets[y + 1], integer) < 0
        if take_a:
            o_d[o], o_s[o], o_m[o] = a_d[i], a_s[i], a_m[i]
            i += 1
        else:
            o_d[o], o_s[o], o_m[o] = b_d[j], b_s[j], b_m[j]
            j += 1
    return n


@nb.njit(cache=True, parallel=True)
def _parts_batch(indptrs, docss, ranks, lives, orders, fwd_indptrs, fwd_termss, starts, sizes_, monos, q_offs,
                 q_termss, q_weightss, k, width, n_chunks, id_offsets, id_bytes, integer, caps_off, max_terms, work,
                 rule):
    n_parts = starts.shape[0]
    nq = caps_off.shape[0] - 1
    out_d = np.empty(caps_off[nq], dtype=np.int64)
    out_s = np.empty(caps_off[nq], dtype=np.float64)
    out_m = np.empty(caps_off[nq], dtype=np.int32)
    sizes = np.zeros(nq, dtype=np.int64)
    bad = np.zeros(nq, dtype=np.int64)  # 1 + the part whose postings are corrupt
    for c in nb.prange(n_chunks):
        t = nb.get_thread_id()  # this chunk's workspace row
        # one part's results, the running top k and the merge's output (copied back into the top)
        r_d, r_s, r_m = np.empty(k, np.int64), np.empty(k, np.float64), np.empty(k, np.int32)
        t_d, t_s, t_m = np.empty(k, np.int64), np.empty(k, np.float64), np.empty(k, np.int32)
        u_d, u_s, u_m = np.empty(k, np.int64), np.empty(k, np.float64), np.empty(k, np.int32)
        bar_s = np.empty(nq, dtype=np.float64)
        bar_m = np.empty(nq, dtype=np.int32)
        bar_k = np.empty(nq, dtype=np.int64)
        stats = np.zeros(STATS, dtype=np.int64)
        for q in range(c, nq, n_chunks):
            nt = 0
            for s in range(n_parts):
                qo = q_offs[s]
                m = qo[q + 1] - qo[q]
                if m == 0:
                    continue
                indptr = indptrs[s]
                cap = np.int64(0)
                for j in range(qo[q], qo[q + 1]):
                    tm = q_termss[s][j]
                    cap += indptr[tm + 1] - indptr[tm]
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
                                    q_weightss[s], q_termss[s], width, cap, lives[s], work, t, 0,
                                    r_d, r_s, r_m, rule, stats, bar_s, bar_m, bar_k, monos[s])
                else:
                    nr = _search_one(q, indptr, docss[s], ranks[s], n_docs, qo, q_termss[s], q_weightss[s], width,
                                     work[14][t], work[15][t], work[1][t], work[2][t], work[3][t], work[4][t], 0, cap,
                                     r_d, r_s, r_m, lives[s], bar_s, bar_m, bar_k)
                if nr < 0:  # corrupt postings: this thread's accumulators are dirty; stop it
                    bad[q] = s + 1
                    break
                for i in range(nr):  # the part's keys to collection document numbers
                    r_d[i] = starts[s] + (r_d[i] & 0xFFFFFFFF)
                nt = _merge_one(t_d, t_s, t_m, nt, r_d, r_s, r_m, nr, k, id_offsets, id_bytes, integer,
                                u_d, u_s, u_m)
                t_d[:nt] = u_d[:nt]
                t_s[:nt] = u_s[:nt]
                t_m[:nt] = u_m[:nt]
            if bad[q]:
                break
            base = caps_off[q]
            for i in range(nt):
                out_d[base + i] = t_d[i]
                out_s[base + i] = t_s[i]
                out_m[base + i] = t_m[i]
            sizes[q] = nt
    return sizes, out_d, out_s, out_m, bad


def _frozen(a, dtype):
    """a as a read-only C array of dtype (a typed list holds arrays of one type; memory maps are read-only)."""
    a = np.ascontiguousarray(a, dtype=dtype).view()
    a.flags.writeable = False
    return a


def search_parts(parts, queries, k, id_offsets, id_bytes, integer, block, n_chunks=None, method="ssr"):
    """Exact top k of every query over a collection's parts in one parallel call, each part behind a bar.

    parts: per part (first collection number, n_docs, indptr int64[V + 1], docs uint32[P], rank uint32[n]
    (ties in the collection's id order), live bool[n] or None, order int64[n] (its documents in id order),
    forward indptr int[n + 1] and terms uint32 (the part's forward index; method "ssr" probes it), whether
    its ranks ascend with its document numbers (`probe.ascending`));
    searched in the given order (largest first makes the bar tighten soonest). queries: per part
    (offsets int64[Q + 1], terms int64, weights float64), each query's terms in ascending weight, weights
    the collection's. Per query, part after part, behind a bar: the k-th entry of the top k so far (its id
    turned into the part's own rank by binary search over the part's ids, as UTF-8 in
    `id_bytes[id_offsets[g]:id_offsets[g + 1]]`), then merged into it (`_merge_one`). method "ssr":
    `probe.search_one` (probing where its cost rule says it pays, else levels), "levels": levels,
    "union": the heap union `ssr._search_one` (also past MAX_TERMS terms). One parallel region for the
    batch: no Python between the parts.
    Returns (offsets int64[Q + 1], docs int64 (collection numbers), scores float64, matches int32,
    corrupt part index or -1).
    """
    if n_chunks is None:
        n_chunks = nb.get_num_threads()
    nq = len(queries[0][0]) - 1
    caps = np.zeros(nq, dtype=np.int64)
    for part, (offsets, terms, _) in zip(parts, queries, strict=True):
        caps += np.diff(region_offsets(offsets, terms, part[2], k))
    caps_off = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(np.minimum(caps, k), out=caps_off[1:])
    lists = [nb.typed.List() for _ in range(10)]
    empty = np.zeros(0, dtype=np.uint8)
    # one typed list holds one array type: offsets stay int32 when every part's are (no copy of a
    # vocabulary-sized array per call); a mix is widened to int64
    ip = np.int32 if all(np.asarray(p[2]).dtype == np.int32 for p in parts) else np.int64
    fp = np.int32 if all(np.asarray(p[7]).dtype == np.int32 for p in parts) else np.int64
    no_fwd = np.zeros(0, dtype=fp)  # levels reads every posting where a part has no forward index
    for (_, _, indptr, docs, rank, live, order, f_indptr, f_terms, _), (offsets, terms, weights) in zip(
            parts, queries, strict=True):
        for lst, a, dt in zip(lists, (indptr, docs, rank, empty if live is None else live.view(np.uint8), order,
                                      f_indptr if method == "ssr" else no_fwd, f_terms, offsets, terms, weights),
                              (ip, np.uint32, np.uint32, np.uint8, np.int64, fp, np.uint32, np.int64, np.int64,
                               np.float64), strict=True):
            lst.append(_frozen(a, dt))
    starts = np.array([p[0] for p in parts], dtype=np.int64)
    sizes = np.array([p[1] for p in parts], dtype=np.int64)
    monos = np.array([bool(p[9]) for p in parts], dtype=np.bool_)
    widest = max(1, int(sizes.max()))
    width = min(max(1, block), widest)
    longest = max(max(int(np.diff(o).max()) if len(o) > 1 else 1 for o, _, _ in queries), 64)
    threads = int(nb.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # rows by thread id
    work = workspace(threads, min(width * WIDEN, widest), longest, max(_BUFFER, 4 * k),
                     min(_CANDIDATES, widest) if method == "ssr" else 1)
    got, docs, scores, matches, bad = _parts_batch(*lists[:7], starts, sizes, monos, *lists[7:], np.int64(k),
                                                   np.int64(width), np.int64(max(1, min(n_chunks, nq))), id_offsets,
                                                   id_bytes, bool(integer), caps_off,
                                                   np.int64(0 if method == "union" else MAX_TERMS), work,
                                                   np.asarray(RULE, dtype=np.float64))
    offsets = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(got, out=offsets[1:])
    keep = np.repeat(caps_off[:-1] - offsets[:-1], got) + np.arange(int(offsets[-1]), dtype=np.int64)
    hit = np.flatnonzero(bad)
    return offsets, docs[keep], scores[keep], matches[keep], int(bad[hit[0]]) - 1 if hit.shape[0] else -1
