"""Query signals to term ids in every part of a collection in one call (live segments, shards).

`terms.lookup` answers one index; a live index of P segments called it P times a batch, each call
with its own argument set-up and a binary search from scratch per signal (~0.06 ms a query at 10
segments). Here the batch's signals are visited once in key order: equal signals are looked up once,
and each part's vocabulary is walked front to back, every search galloping on from where the last
one ended (the vocabulary pages, offsets and strings are then read in order). The checks are
`terms.lookup`'s (every vocabulary block a search reads, every candidate's offsets and code); when
one fails the caller repeats that part's look-up the long way, whose functions name the defect.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .spans import span_equal
from .strings import sound, term_equal
from .validate import block_sound


@nb.njit(cache=True, nogil=True)
def _first_at_least(vocab, key, lo, checked, shift, strict):
    """The first position >= lo whose key is >= key (galloping from lo, then a binary search), checking
    every block it reads (`validate.search_checked`); (-1 - defect position) when a block is unsound."""
    n = vocab.shape[0]
    step = 1
    hi = lo
    while hi < n:  # gallop: vocab[lo..hi) < key
        bad = block_sound(vocab, hi >> shift, shift, checked, strict)
        if bad >= 0:
            return -1 - bad
        if vocab[hi] >= key:
            break
        lo = hi + 1
        hi += step
        step <<= 1
    hi = min(hi, n)
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
def lookup_parts(keys, order, data, offsets, vocabs, checkeds, shift, strict, tables, table_offsets, codess, bitss,
                 indptrs, n_postings, n_docs, deleted_terms, deleted_df, terms, df):
    """Term id and live df in each part of each signal (span i of (data, offsets), vocabulary key keys[i]).

    keys: uint32 or uint64[n], the same rule in every part (`format.Index.keys_of`); order int64[n]:
    the signals by key (np.argsort(keys)). Per part s (typed lists): vocabs[s] (sorted keys),
    checkeds[s] (its checked blocks), tables[s], table_offsets[s], codess[s], bitss[s] (its strings,
    `kernels.strings`), indptrs[s] over n_postings[s] postings of n_docs[s] documents, deleted_terms[s]
    (sorted int64) with deleted_df[s] (`parts.Part`). Writes terms[s, i] (-1 when unknown) and df[s, i]
    (live documents; 0 when unknown). Returns -1, or the first part whose vocabulary or offsets failed a
    check (its rows are then not to be trusted).
    """
    n = keys.shape[0]
    for s in range(len(vocabs)):
        vocab, checked, table, t_off, codes, bits = vocabs[s], checkeds[s], tables[s], table_offsets[s], codess[s], \
            bitss[s]
        indptr, gone, gone_df = indptrs[s], deleted_terms[s], deleted_df[s]
        v = vocab.shape[0]
        n_bytes = table.shape[0]
        lo = 0
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
                a, b = indptr[p], indptr[p + 1]
                if a < 0 or b < a or b > n_postings[s] or b - a > n_docs[s] or not sound(t_off, n_bytes, codes,
                                                                                        bits, p):
                    return s
                if term_equal(data, offsets[i], offsets[i + 1], table, t_off, codes, bits, p):
                    terms[s, i] = p
                    live = b - a
                    if gone.shape[0]:  # minus its deleted documents
                        x = np.searchsorted(gone, p)
                        if x < gone.shape[0] and gone[x] == p:
                            live -= gone_df[x]
                    df[s, i] = live
                    break
                p += 1
    return -1
