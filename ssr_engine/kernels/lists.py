"""Where each term's postings list is: `span(lists, t)`, the one reader every kernel calls.

`lists` is either a plain offsets array int[V + 1] (formats 2-6 and what a build holds in memory:
term t's postings are offsets[t]..offsets[t + 1]), or format 7's `(long, rank, offsets)`. Most
terms (bigrams) have df = 1, so only the others, the "long" terms (df != 1), get an offset:

    long     uint64[W], W = ceil(V / 64): bit t % 64 of word t // 64 set when df(t) != 1 (bits past V zero)
    rank     uint32[W + 1]: the long terms before word w (rank[W] = R, the long terms in all)
    offsets  int[R + 1]: offsets[r] = the postings of the long terms before the r-th one

With r the long terms before t, every other term before t holds one posting, so t's list starts at
offsets[r] + (t - r), and ends at offsets[r + 1] + (t - r) when t is long, else one later. A plain
array is a `lists` whose every term is long (`as_tuple` wraps one so, without a copy).

`span` picks its reader by the argument's type when a kernel compiles (as `packed.at` does): a plain
array costs the two loads it always did; format 7 adds a word, a rank and a popcount per term.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_ONE = np.uint64(1)


@nb.njit(cache=True, nogil=True, inline="always")
def popcount(x):
    """Set bits of the uint64 x (int64)."""
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


def span(lists, t):
    """(start, end) int64 of term t's postings in the postings column."""
    if isinstance(lists, tuple):
        long, rank, offsets = lists
        w, j = t >> 6, t & 63
        word = int(long[w])
        r = int(rank[w]) + bin(word & ((1 << j) - 1)).count("1")
        start = int(offsets[r]) + t - r
        return (start, int(offsets[r + 1]) + t - r) if word >> j & 1 else (start, start + 1)
    return int(lists[t]), int(lists[t + 1])


@nb.extending.overload(span, inline="always")
def _span(lists, t):
    if isinstance(lists, nb.types.Array):
        return lambda lists, t: (np.int64(lists[t]), np.int64(lists[t + 1]))

    def tuple_span(lists, t):
        long, rank, offsets = lists
        w = t >> 6
        j = np.uint64(t & 63)
        word = long[w]
        r = np.int64(rank[w]) + popcount(word & ((_ONE << j) - _ONE))
        start = np.int64(offsets[r]) + t - r
        if (word >> j) & _ONE:
            return start, np.int64(offsets[r + 1]) + t - r
        return start, start + 1

    return tuple_span


@nb.njit(cache=True, nogil=True, inline="always")
def length(lists, t):
    """Term t's document frequency (its list's length, int64)."""
    a, b = span(lists, t)
    return b - a


@nb.njit(cache=True, nogil=True)
def spans(lists, terms):
    """(starts, ends) int64[n] of terms (int64[n], each in 0..V-1)."""
    a = np.empty(terms.shape[0], dtype=np.int64)
    b = np.empty(terms.shape[0], dtype=np.int64)
    for i in range(terms.shape[0]):
        a[i], b[i] = span(lists, terms[i])
    return a, b


def lengths(lists, terms):
    """int64[n]: the document frequency of each of terms (int64[n], each in 0..V-1)."""
    a, b = spans(lists, terms)
    return b - a


@nb.njit(cache=True, nogil=True)
def decode(lists, n_terms):
    """The plain offsets int64[V + 1] of `lists` (V = n_terms)."""
    out = np.empty(n_terms + 1, dtype=np.int64)
    out[0] = 0
    for t in range(n_terms):
        out[t + 1] = span(lists, t)[1]
    return out


@nb.njit(cache=True, nogil=True)
def encode(df, first_rank, first_offset):
    """Format 7's arrays for terms of document frequencies df (int64[n], n a multiple of 64 unless these
    are the last terms): (long uint64[ceil(n / 64)], rank int64[ceil(n / 64)] counted from first_rank,
    the long terms' list ends int64[R'] counted from first_offset). `ListsWriter` appends them."""
    n = df.shape[0]
    n_w = (n + 63) >> 6
    long = np.zeros(n_w, dtype=np.uint64)
    rank = np.empty(n_w, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    r, o = np.int64(0), np.int64(first_offset)
    for w in range(n_w):
        rank[w] = first_rank + r
        word = np.uint64(0)
        for j in range(min(64, n - w * 64)):
            d = df[w * 64 + j]
            if d != 1:
                word |= _ONE << np.uint64(j)
                o += d
                ends[r] = o
                r += 1
        long[w] = word
    return long, rank, ends[:r].copy()


def as_tuple(lists):
    """`lists` as format 7's tuple: a plain array wrapped with every term long (no copy of it), so that
    parts of mixed formats share one type in a typed list."""
    if isinstance(lists, tuple):
        return lists
    n_terms = lists.shape[0] - 1
    n_w = (n_terms + 63) >> 6
    long = np.full(n_w, np.uint64(2**64 - 1), dtype=np.uint64)
    if n_terms & 63:
        long[-1] = np.uint64((1 << (n_terms & 63)) - 1)
    return long, np.minimum(np.arange(n_w + 1, dtype=np.int64) * 64, n_terms).astype(np.uint32), lists
