"""Structural checks of index arrays: single passes, no temporaries (the O(P) ones parallel over ranges).

Each returns the position of the first defect found (in its range order) or -1 when sound. The
callers (`ssr_engine.validate`) turn a position into an error naming the file. `descent` and
`permutation` run at open on the O(N) arrays, every check under `verify`; `search_checked` is
the vocabulary lookup that checks, once per block, the part of the vocabulary a binary search
reads (so the O(V) sort check is paid by the blocks queries use, not at open).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lists import span
from .packed import at

_RANGE = 1 << 20  # entries per parallel work item


@nb.njit(cache=True)
def _first(found):
    """The first non-negative entry of `found` (one per range, in range order), or -1."""
    for r in range(found.shape[0]):
        if found[r] >= 0:
            return found[r]
    return -1


@nb.njit(cache=True)
def descent(a, strict):
    """First i with a[i + 1] < a[i] (strict: <=), or -1.

    a: int32 or int64[n] (CSR offsets: monotone) or uint64[n] (the vocabulary: strictly increasing).
    Serial on purpose: at open it reads only the O(N) forward offsets (tens of ms at 8.8M), and a
    first parallel call would charge the thread pool's start to open.
    """
    for i in range(a.shape[0] - 1):
        if a[i + 1] < a[i] or (strict and a[i + 1] == a[i]):
            return i
    return -1


@nb.njit(cache=True)
def permutation(a):
    """First i at which a (uint32[n]) stops being a permutation of 0..n-1 (a value >= n or a repeat), or -1."""
    n = a.shape[0]
    seen = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        v = np.int64(a[i])
        if v >= n or seen[v]:
            return i
        seen[v] = True
    return -1


@nb.njit(cache=True, parallel=True)
def rows_ascending_below(indptr, rows, bound, n_rows):
    """First row whose values are not strictly ascending or not all < bound, or -1.

    indptr the rows' offsets (`lists.span`: int32 or int64[R + 1], or format 7's postings directory;
    already checked monotone, from 0 to the number of values), rows a column (`packed.at`): the
    postings or the forward rows; n_rows = R.
    """
    n_ranges = (n_rows + _RANGE - 1) // _RANGE
    found = np.full(max(n_ranges, 1), -1, dtype=np.int64)
    for r in nb.prange(n_ranges):
        for row in range(r * _RANGE, min((r + 1) * _RANGE, n_rows)):
            prev = np.int64(-1)
            lo, hi = span(indptr, row)
            for p in range(lo, hi):
                v = at(rows, p)
                if v <= prev or v >= bound:
                    found[r] = row
                    break
                prev = v
            if found[r] >= 0:
                break
    return _first(found)


@nb.njit(cache=True, parallel=True)
def first_zero(a):
    """First i with a[i] == 0 (a: uint32[n], term frequencies), or -1."""
    n = a.shape[0]
    n_ranges = (n + _RANGE - 1) // _RANGE
    found = np.full(max(n_ranges, 1), -1, dtype=np.int64)
    for r in nb.prange(n_ranges):
        for i in range(r * _RANGE, min((r + 1) * _RANGE, n)):
            if a[i] == 0:
                found[r] = i
                break
    return _first(found)


@nb.njit(cache=True, nogil=True)
def block_sound(vocab, b, shift, checked, strict=True):
    """Check block b strictly increasing and ordered against both neighbouring entries, once.

    Returns the first i with vocab[i + 1] <= vocab[i] (not strict: <), or -1 (and remembers the
    block as sound). Format 4's vocabulary keeps 32 bits of each hash: equal neighbours are
    allowed there (strict False), a look-up compares the strings of every entry with the key.
    """
    if checked[b]:
        return -1
    n = vocab.shape[0]
    lo = b << shift
    hi = min(lo + (1 << shift), n - 1)
    for i in range(max(lo - 1, 0), hi):
        if vocab[i + 1] < vocab[i] or (strict and vocab[i + 1] == vocab[i]):
            return i
    checked[b] = 1
    return -1


@nb.njit(cache=True)
def search_checked(vocab, hashes, checked, shift, strict=True):
    """np.searchsorted(vocab, hashes) (side left), checking every vocabulary block it reads.

    vocab uint32 or uint64[V] (keys, `format.Index.keys_of`); hashes: keys of the same width, [n];
    checked uint8[(V >> shift) + 1], the blocks of 2**shift entries already found sorted (kept by
    the caller across calls); strict: equal neighbours are a defect (True for hashes). Every entry a
    search compares is then ordered against its neighbours, so one wrong entry anywhere is either
    found here or leaves the vocabulary sorted: it cannot steer a search away from a term
    (several coordinated edits can; `verify` checks the whole array). Returns (positions
    int64[n], the first defect i with vocab[i + 1] <= vocab[i] (not strict: <), or -1).
    """
    n = vocab.shape[0]
    pos = np.empty(hashes.shape[0], dtype=np.int64)
    for j in range(hashes.shape[0]):
        h = hashes[j]
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            bad = block_sound(vocab, mid >> shift, shift, checked, strict)
            if bad >= 0:
                return pos, bad
            if vocab[mid] < h:
                lo = mid + 1
            else:
                hi = mid
        if lo < n:  # the entry compared for equality: its block may differ from the last probe's
            bad = block_sound(vocab, lo >> shift, shift, checked, strict)
            if bad >= 0:
                return pos, bad
        if lo > 0:  # and the one before it, which the search may not have read
            bad = block_sound(vocab, (lo - 1) >> shift, shift, checked, strict)
            if bad >= 0:
                return pos, bad
        pos[j] = lo
    return pos, np.int64(-1)
