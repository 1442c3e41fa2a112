"""Numba kernels of compaction (`live_segments.compact_segment`): the term frequencies of documents read back
out of a segment (the rows themselves through `kernels.forward.gather`).

Arrays in, arrays out; every kernel accepts read-only (memory-mapped) arrays.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .packed import at


@nb.njit(cache=True, nogil=True)
def _term_frequencies(indptr, docs, tfs, terms, doc_of, out):
    for i in range(terms.shape[0]):
        t = terms[i]
        d = doc_of[i]
        lo = indptr[t]
        hi = indptr[t + 1]
        while lo < hi:  # binary search: d in the term's ascending postings
            mid = (lo + hi) >> 1
            if at(docs, mid) < d:
                lo = mid + 1
            else:
                hi = mid
        if lo < indptr[t + 1] and at(docs, lo) == d:
            out[i] = tfs[lo]
        else:
            out[i] = 0  # the forward and inverted indexes disagree: a corrupt segment


def term_frequencies(indptr, docs, tfs, terms, doc_of):
    """tf of each (term terms[i], document doc_of[i]) pair, read from the postings (uint32[n]).

    indptr int64[V + 1], docs the postings column (`packed`), tfs uint32[P]. A pair missing from the
    postings gets 0 (the caller treats that as corruption).
    """
    terms = np.asarray(terms, dtype=np.int64)
    doc_of = np.asarray(doc_of, dtype=np.int64)
    out = np.empty(terms.shape[0], dtype=np.uint32)
    _term_frequencies(indptr, docs, tfs, terms, doc_of, out)
    return out
