"""Numba kernels of compaction by merging (`live_compact`): the segments' inverted and forward indexes are
read as they are (never inverted again); each term's live postings are copied, segment after segment, into
the new numbering, and each live row's term ids are renamed.

Arrays in, arrays out; every kernel accepts read-only (memory-mapped) arrays. A posting or a row entry
that points outside its segment is reported (a returned index), never read past.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lists import span
from .packed import at


@nb.njit(cache=True, nogil=True)
def live_df(indptr, v, docs, deleted):
    """Live postings of each term of a segment.

    indptr the postings directory of V = v terms (`lists.span`); docs its postings column (`packed`,
    (words, width)); deleted uint8[n] (1 = deleted),
    or empty when nothing is. Returns (df int64[V], the first term whose postings name a document >= n, or -1).
    """
    out = np.empty(v, dtype=np.int64)
    n = deleted.shape[0]
    for t in range(v):
        lo, hi = span(indptr, t)
        if n == 0:
            out[t] = hi - lo
            continue
        c = 0
        for p in range(lo, hi):
            d = at(docs, p)
            if d >= n:
                return out, t
            c += 1 - deleted[d]
        out[t] = c
    return out, -1


@nb.njit(cache=True, nogil=True)
def merge_terms(hashes, starts):
    """Number the terms of S segments by one merge of their hashes.

    hashes uint64[E]: segment s's terms at starts[s]..starts[s + 1] - 1, each slice ascending; starts
    int64[S + 1]. Equal hashes are one term; of those, the lowest segment's entry comes first. Returns
    (new int64[E]: each entry's new term id, first int64[V']: each new term's first entry, (a, b): two
    entries of one segment with equal hashes (a collision under this seed), or (-1, -1)).
    """
    s_n = starts.shape[0] - 1
    e_n = starts[s_n]
    heads = starts[:s_n].copy()
    new = np.empty(e_n, dtype=np.int64)
    first = np.empty(e_n, dtype=np.int64)
    v = -1
    last_h = np.uint64(0)
    last_e = last_s = -1
    for _ in range(e_n):
        best = -1
        for s in range(s_n):  # S is small (a live index keeps few segments): a scan beats a heap
            if heads[s] < starts[s + 1] and (best < 0 or hashes[heads[s]] < hashes[heads[best]]):
                best = s
        e = heads[best]
        heads[best] += 1
        h = hashes[e]
        if v < 0 or h != last_h:
            v += 1
            first[v] = e
        elif last_s == best:
            return new, first[:0].copy(), last_e, e
        new[e] = v
        last_h, last_e, last_s = h, e, best
    return new, first[: v + 1].copy(), -1, -1


@nb.njit(cache=True, nogil=True)
def copy_postings(indptr, docs, tfs, deleted, newdoc, terms, new_ids, cursor, out_docs, out_tf):
    """Append one segment's live postings of some terms to a piece of the merged lists.

    indptr, docs: the segment's CSR (docs a `packed` column); tfs uint32[P] or empty (no tf); deleted as
    in `live_df`; newdoc uint32[n]: each document's number in the new segment; terms int64[m]: its terms
    to copy, new_ids int64[m] their new ids within the piece; cursor int64: where each new term's next
    posting goes in out_docs (and out_tf), advanced. Returns the first term with a posting naming a
    document >= n, or -1.
    """
    n = newdoc.shape[0]
    nd = deleted.shape[0]
    with_tf = tfs.shape[0] > 0
    for j in range(terms.shape[0]):
        t = terms[j]
        nt = new_ids[j]
        o = cursor[nt]
        lo, hi = span(indptr, t)
        for p in range(lo, hi):
            d = at(docs, p)
            if d >= n:
                return t
            if nd == 0 or deleted[d] == 0:
                out_docs[o] = newdoc[d]
                if with_tf:
                    out_tf[o] = tfs[p]
                o += 1
        cursor[nt] = o
    return -1


@nb.njit(cache=True, nogil=True)
def rename_rows(rows, offsets, term_map, sort):
    """Forward rows in new term ids.

    rows int64 (the rows' term ids, one after another), offsets int64[m + 1]; term_map int64[V]: each
    term's new id, -1 for a term left out; sort: re-sort each row (the new ids do not follow the old order).
    Returns (uint32 ids, the first row naming a term out of range or left out (the indexes disagree:
    corrupt), or -1).
    """
    out = np.empty(rows.shape[0], dtype=np.uint32)
    v = term_map.shape[0]
    for i in range(offsets.shape[0] - 1):
        for p in range(offsets[i], offsets[i + 1]):
            t = rows[p]
            if t < 0 or t >= v or term_map[t] < 0:
                return out, i
            out[p] = term_map[t]
        if sort:
            out[offsets[i] : offsets[i + 1]].sort()
    return out, -1
