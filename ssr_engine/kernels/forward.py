"""The forward rows (each document's term ids, ascending), read here and nowhere else.

fwd = (words uint32[...], width int64), positions p from forward_indptr (document d's row is
p in indptr[d]..indptr[d + 1]). Format 5 packs the term ids at width = `width_for(V)` bits
(`packed.get32`; 25 bits for 20M terms instead of 32), with one spare word at the end; width
`PLAIN` (0): formats 2-4's plain uint32 array, one term id a word.
A term id read here is only as sound as the file: a caller that relies on it being < V checks.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .packed import get32

PLAIN = 0  # formats 2-4: the term ids as they are, uint32


def width_for(n_terms: int) -> int:
    """Bits of one packed term id of an index of n_terms terms (ids 0..n_terms-1)."""
    return max(1, int(n_terms - 1).bit_length())


@nb.njit(cache=True, nogil=True, inline="always")
def term_at(fwd, p):
    """The term id (int64) at position p of the forward rows."""
    words, width = fwd
    if width == PLAIN:
        return np.int64(words[p])
    return get32(words, width, p)


@nb.njit(cache=True, nogil=True, inline="always")
def row_contains(fwd, lo, hi, t):
    """Whether the row at positions lo..hi-1 (ascending term ids) holds term t: binary search."""
    while lo < hi:
        mid = (lo + hi) >> 1
        v = term_at(fwd, mid)
        if v < t:
            lo = mid + 1
        elif v > t:
            hi = mid
        else:
            return True
    return False


@nb.njit(cache=True, nogil=True)
def _gather(fwd, starts, lengths, out):
    o = 0
    for i in range(starts.shape[0]):
        for p in range(starts[i], starts[i] + lengths[i]):
            out[o] = term_at(fwd, p)
            o += 1


def gather(fwd, starts, lengths) -> np.ndarray:
    """int64: the rows at positions starts[i]..starts[i] + lengths[i] - 1, one after another."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.empty(int(lengths.sum()), dtype=np.int64)
    _gather(fwd, starts, lengths, out)
    return out

