"""Query signals to term ids in every part of a collection in one call (live segments, shards).

`terms.lookup` answers one index; a live index of P segments called it P times a batch, each call
with its own argument set-up and a binary search from scratch per signal (~0.06 ms a query at 10
segments). Here the batch's signals are visited once in key order: equal signals are looked up once,
and each part's vocabulary is walked front to back, every search starting from where the last one
ended, at the position the key interpolates to (hash keys spread evenly), and galloping from there
(the vocabulary pages, offsets and strings are then read in order). The checks are
`terms.lookup`'s (every vocabulary block a search reads, every candidate's offsets and code); when
one fails the caller repeats that part's look-up the long way, whose functions name the defect.

`prepare_parts` is a batch's whole preparation in one GIL-free call, as `query.prepare` is one index's
(signals, keys, the look-up pass, global df and weights, each query's terms in ascending weight per part
and over the collection), so threads preparing pieces run in parallel; `signals`, `group_terms` and
`arrange` are its steps, called one by one where parts hash by several rules or df is given (shards).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .fnv import fnv1a64
from .lists import span
from .query import _by_weight, weight
from .spans import span_equal  # eight bytes a load (a word compare)
from .strings import sound, term_equal
from .text import extract_signals
from .validate import block_sound


@nb.njit(cache=True, nogil=True)
def _first_at_least(vocab, key, lo, checked, shift, strict):
    """The first position >= lo whose key is >= key, checking every block it reads (`validate.search_checked`);
    (-1 - defect position) when a block is unsound. The keys are hashes, spread evenly: the search starts where
    the key falls between vocab[lo] and the last key (interpolated; off by about the square root of the gap)
    and gallops from there, both ways, then bisects. Galloping from lo read ~2 log2(gap) entries, most of
    them cache misses (a gap of ~200 entries at 10 segments of 100K documents: 0.75 µs a look-up)."""
    n = vocab.shape[0]
    if lo >= n:
        return n
    hi = n
    g = lo
    if n - 1 > lo:
        for b in (lo, n - 1):
            bad = block_sound(vocab, b >> shift, shift, checked, strict)
            if bad >= 0:
                return -1 - bad
        first = np.float64(vocab[lo])
        span = np.float64(vocab[n - 1]) - first
        if span > 0:
            at = min(max((np.float64(key) - first) / span, 0.0), 1.0)
            g = lo + np.int64(at * (n - 1 - lo))
    bad = block_sound(vocab, g >> shift, shift, checked, strict)
    if bad >= 0:
        return -1 - bad
    step = 1
    if vocab[g] < key:  # gallop up: vocab[lo..p) < key
        lo = g + 1
        p = lo
        while p < n:
            bad = block_sound(vocab, p >> shift, shift, checked, strict)
            if bad >= 0:
                return -1 - bad
            if vocab[p] >= key:
                hi = p
                break
            lo = p + 1
            p += step
            step <<= 1
    else:  # gallop down: vocab[hi] >= key
        hi = g
        p = g - 1
        while p >= lo:
            bad = block_sound(vocab, p >> shift, shift, checked, strict)
            if bad >= 0:
                return -1 - bad
            if vocab[p] < key:
                lo = p + 1
                break
            hi = p
            p -= step
            step <<= 1
    while lo < hi:
        mid = (lo + hi) >> 1
        bad = block_sound(vocab, mid >> shift, shift, checked, strict)
        if bad >= 0:
            return -1 - bad
        if vocab[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    for b in (lo, lo - 1):  # the entry compared for equality and the one before it, as search_checked
        if 0 <= b < n:
            bad = block_sound(vocab, b >> shift, shift, checked, strict)
            if bad >= 0:
                return -1 - bad
    return lo


@nb.njit(cache=True, nogil=True)
def _gallop(a, x, lo):
    """The first position >= lo of sorted `a` whose value is >= x, where a[:lo] < x: steps doubling from lo,
    then bisection (a few reads near lo when x is close, where a search from scratch misses ~log2(n) times)."""
    n = a.shape[0]
    hi = lo
    step = 1
    while hi < n and a[hi] < x:
        lo = hi + 1
        hi += step
        step <<= 1
    return lo + np.searchsorted(a[lo : min(hi, n)], x)


@nb.njit(cache=True, nogil=True)
def lookup_parts(keys, order, data, offsets, vocabs, checkeds, shift, strict, tables, table_offsets, codess, bitss,
                 indptrs, n_postings, n_docs, deleted_terms, deleted_df, terms, df):
    """Term id and live df in each part of each signal (span i of (data, offsets), vocabulary key keys[i]).

    keys: uint32 or uint64[n], the same rule in every part (`format.Index.keys_of`); order int64:
    the signals by key (np.argsort(keys)), or a contiguous slice of it (threads looking up one batch:
    each its own range of keys, each part's vocabulary walked as densely as by one call; entries of
    other signals are left as they are). Per part s (typed lists): vocabs[s] (sorted keys),
    checkeds[s] (its checked blocks), tables[s], table_offsets[s], codess[s], bitss[s] (its strings,
    `kernels.strings`), indptrs[s] over n_postings[s] postings of n_docs[s] documents, deleted_terms[s]
    (sorted int64) with deleted_df[s] (`parts.Part`). Writes terms[s, i] (-1 when unknown) and df[s, i]
    (live documents; 0 when unknown). Returns -1, or the first part whose vocabulary or offsets failed a
    check (its rows are then not to be trusted).
    """
    n = order.shape[0]
    for s in range(len(vocabs)):
        vocab, checked, table, t_off, codes, bits = vocabs[s], checkeds[s], tables[s], table_offsets[s], codess[s], \
            bitss[s]
        indptr, gone, gone_df = indptrs[s], deleted_terms[s], deleted_df[s]
        v = vocab.shape[0]
        n_bytes = table.shape[0]
        lo = 0
        g = 0  # where the last deleted-df search ended: the terms found mostly ascend
        for j in range(n):
            i = order[j]
            terms[s, i] = -1
            df[s, i] = 0
            if j > 0:
                h = order[j - 1]
                if keys[h] == keys[i] and span_equal(data, offsets[h], offsets[h + 1], data, offsets[i],
                                                     offsets[i + 1]):
                    terms[s, i] = terms[s, h]  # the same signal again (another query's)
                    df[s, i] = df[s, h]
                    continue
            if v == 0:
                continue
            p = _first_at_least(vocab, keys[i], lo, checked, shift, strict)
            if p < 0:
                return s
            lo = p
            while p < v and vocab[p] == keys[i]:
                if block_sound(vocab, p >> shift, shift, checked, strict) >= 0:
                    return s
                a, b = span(indptr, p)
                if a < 0 or b < a or b > n_postings[s] or b - a > n_docs[s] or not sound(t_off, n_bytes, codes,
                                                                                        bits, p):
                    return s
                if term_equal(data, offsets[i], offsets[i + 1], table, t_off, codes, bits, p):
                    terms[s, i] = p
                    live = b - a
                    if gone.shape[0]:  # minus its deleted documents
                        g = _gallop(gone, p, g if g == 0 or gone[g - 1] < p else 0)
                        if g < gone.shape[0] and gone[g] == p:
                            live -= gone_df[g]
                    df[s, i] = live
                    break
                p += 1
    return -1


@nb.njit(cache=True, nogil=True)
def signals(data, q_offsets, stop, cap):
    """The queries' signals (`text.extract_signals`; query q is data[q_offsets[q]:q_offsets[q + 1]]):
    (sig_of int64[Q + 1]: query q's signals sig_of[q]..sig_of[q + 1] - 1, bytes uint8, offsets int64[n + 1])."""
    nq = q_offsets.shape[0] - 1
    sig_of, sdata, soffsets, _, _, _ = extract_signals(data, q_offsets[:-1], q_offsets[1:],
                                                       np.arange(nq + 1, dtype=np.int64), stop[0], stop[1], stop[2],
                                                       stop[3], cap, True)
    return sig_of, sdata, soffsets


@nb.njit(cache=True, nogil=True)
def group_terms(sdata, soffsets, seed, mask, key_shift, vocabs, checkeds, shift, strict, tables, table_offsets, codess,
                bitss, indptrs, n_postings, n_docs, deleted_terms, deleted_df, terms, df):
    """`lookup_parts` of signals (spans of sdata) in parts sharing one key rule: key = (fnv1a64 with
    seed & mask) >> key_shift in the vocabularies' dtype (`query.prepare`'s). Returns as `lookup_parts`."""
    keys, order = keyed(sdata, soffsets, seed, mask, key_shift, vocabs)
    return lookup_parts(keys, order, sdata, soffsets, vocabs, checkeds, shift, strict, tables, table_offsets, codess,
                        bitss, indptrs, n_postings, n_docs, deleted_terms, deleted_df, terms, df)


@nb.njit(cache=True, nogil=True)
def keyed(sdata, soffsets, seed, mask, key_shift, vocabs):
    """The vocabulary key of each signal (span of sdata): (fnv1a64 with seed & mask) >> key_shift in the
    vocabularies' dtype (`query.prepare`'s rule), and the signals in key order (int64, stable)."""
    n = soffsets.shape[0] - 1
    keys = np.empty(n, dtype=vocabs[0].dtype)
    for i in range(n):
        keys[i] = (fnv1a64(sdata, soffsets[i], soffsets[i + 1], seed) & mask) >> key_shift
    return keys, np.argsort(keys, kind="mergesort")


@nb.njit(cache=True, nogil=True)
def arrange(sig_of, terms, live, df, n_docs):
    """Each query's terms in ascending weight (stable: ties in signal order), per part and over the collection.

    sig_of int64[Q + 1] (as `signals`); terms, live int64[P, n] (`lookup_parts`); df int64[n]: global
    df; n_docs: N of the weights (`query.weight`). Part s takes the signals it has live documents of,
    the collection those of global df > 0. Returns (weights float64[n] (0: df 0), offsets int64[P + 1,
    Q + 1] (row P: the collection's), starts int64[P + 2]: set s is entries starts[s]..starts[s + 1] - 1
    of (terms int64 (the collection's: signal numbers), weights float64, signal numbers int64), and
    int64[P, A]: each part's term of the collection's A entries (-1: no live document there)).
    """
    n_parts, n = terms.shape
    nq = sig_of.shape[0] - 1
    weights = np.zeros(n, dtype=np.float64)
    for i in range(n):
        if df[i] > 0:
            weights[i] = weight(n_docs, df[i])
    starts = np.zeros(n_parts + 2, dtype=np.int64)
    for s in range(n_parts + 1):
        kept = 0
        for i in range(n):
            kept += (live[s, i] > 0) if s < n_parts else (df[i] > 0)
        starts[s + 1] = starts[s] + kept
    offsets = np.zeros((n_parts + 1, nq + 1), dtype=np.int64)
    f_terms = np.empty(starts[-1], dtype=np.int64)
    f_weights = np.empty(starts[-1], dtype=np.float64)
    f_sel = np.empty(starts[-1], dtype=np.int64)
    for s in range(n_parts + 1):
        m = starts[s]
        for q in range(nq):
            a = m
            for i in range(sig_of[q], sig_of[q + 1]):
                if (live[s, i] > 0) if s < n_parts else (df[i] > 0):
                    f_terms[m] = terms[s, i] if s < n_parts else i
                    f_weights[m] = weights[i]
                    f_sel[m] = i
                    m += 1
            _by_weight(f_terms, f_weights, f_sel, a, m)
            offsets[s, q + 1] = m - starts[s]
    a = starts[n_parts]
    shared = np.full((n_parts, starts[-1] - a), -1, dtype=np.int64)
    for s in range(n_parts):
        for j in range(shared.shape[1]):
            i = f_sel[a + j]
            if live[s, i] > 0:
                shared[s, j] = terms[s, i]
    return weights, offsets, starts, f_terms, f_weights, f_sel, shared


@nb.njit(cache=True, nogil=True)
def prepare_parts(data, q_offsets, stop, cap, seed, mask, key_shift, n_live, vocabs, checkeds, shift, strict, tables,
                  table_offsets, codess, bitss, indptrs, n_postings, n_docs, deleted_terms, deleted_df):
    """A batch's query terms over parts of one key rule, from the queries' UTF-8 bytes, in one call:
    `signals`, `group_terms` (every part), global df = the sum of the parts' live df, `arrange` with
    N = n_live. Returns (the first part whose checks failed or -1, signal bytes, signal offsets,
    `arrange`'s tuple)."""
    sig_of, sdata, soffsets = signals(data, q_offsets, stop, cap)
    n = soffsets.shape[0] - 1
    terms = np.zeros((len(vocabs), n), dtype=np.int64)  # (rows after a failed part's are left as they are)
    live = np.zeros((len(vocabs), n), dtype=np.int64)
    bad = group_terms(sdata, soffsets, seed, mask, key_shift, vocabs, checkeds, shift, strict, tables, table_offsets,
                      codess, bitss, indptrs, n_postings, n_docs, deleted_terms, deleted_df, terms, live)
    df = np.zeros(n, dtype=np.int64)
    for s in range(len(vocabs)):
        df += live[s]
    return bad, sdata, soffsets, arrange(sig_of, terms, live, df, n_live)
