"""Numba kernels for live indexes: reading documents back out of a segment (compaction), and the
id look-up that turns a segment's bar into its own rank (`count_below`).

Arrays in, arrays out; every kernel accepts read-only (memory-mapped) arrays.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .merge import span_compare


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




@nb.njit(cache=True, parallel=True)
def _count_below(order, base, id_offsets, id_bytes, probes, integer, out):
    n = order.shape[0]
    for q in nb.prange(probes.shape[0]):
        pa = id_offsets[probes[q]]
        pz = id_offsets[probes[q] + 1]
        lo = 0
        hi = n
        while lo < hi:  # the first position whose id is not before the probe's
            mid = (lo + hi) >> 1
            d = base + order[mid]
            if span_compare(id_bytes, id_offsets[d], id_offsets[d + 1], id_bytes, pa, pz, integer) < 0:
                lo = mid + 1
            else:
                hi = mid
        out[q] = lo


def count_below(order, base, id_offsets, id_bytes, probes, integer):
    """For each probe document, how many of a part's documents have an id sorting before its id (int64[P]).

    Ids of the whole collection as UTF-8: document g's is id_bytes[id_offsets[g]:id_offsets[g + 1]]
    (id_offsets int64[N + 1]); the part's documents are base + order[i], in id order (int64[n]);
    probes int64[P]: documents (any part); integer: the collection's id order (`kernels.merge`).
    """
    out = np.empty(len(probes), dtype=np.int64)
    _count_below(np.asarray(order, dtype=np.int64), np.int64(base), id_offsets, id_bytes,
                 np.asarray(probes, dtype=np.int64), bool(integer), out)
    return out


@nb.njit(cache=True, parallel=True)
def _merge_two(a_off, b_off, n_a, docs, scores, matches, id_offsets, id_bytes, integer, out_off, out_rows):
    for q in nb.prange(a_off.shape[0] - 1):
        i, ie = a_off[q], a_off[q + 1]
        j, je = b_off[q] + n_a, b_off[q + 1] + n_a
        for o in range(out_off[q], out_off[q + 1]):
            take_a = j >= je
            if not take_a and i < ie:
                if scores[i] != scores[j]:
                    take_a = scores[i] > scores[j]
                elif matches[i] != matches[j]:
                    take_a = matches[i] > matches[j]
                else:
                    x, y = docs[i], docs[j]
                    take_a = span_compare(id_bytes, id_offsets[x], id_offsets[x + 1], id_bytes, id_offsets[y],
                                          id_offsets[y + 1], integer) < 0
            if take_a:
                out_rows[o] = i
                i += 1
            else:
                out_rows[o] = j
                j += 1


def merge_two(a_off, b_off, docs, scores, matches, k, id_offsets, id_bytes, integer):
    """Merge two ranked lists per query (rows of list a, then of list b, in `docs`/`scores`/`matches`)
    by the full key into each query's best k; ids compared through the collection's UTF-8 ids
    (`count_below`), docs being collection-wide numbers.

    Returns (out_offsets int64[Q + 1], rows int64 into the concatenated arrays).
    """
    counts = np.minimum(np.diff(a_off) + np.diff(b_off), k)
    out_off = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out_off[1:])
    rows = np.empty(int(out_off[-1]), dtype=np.int64)
    _merge_two(np.asarray(a_off, dtype=np.int64), np.asarray(b_off, dtype=np.int64), np.int64(a_off[-1]), docs,
               scores, matches, id_offsets, id_bytes, bool(integer), out_off, rows)
    return out_off, rows
