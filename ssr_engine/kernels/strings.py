"""Signal strings of terms, stored compactly (format 4): a table of literal strings plus one code per term.

table: (data uint8, offsets int32 or int64[U + 1]), the literal strings: the unigrams in term
order, then any signal that cannot be written as two of them. codes: uint64 words
(`kernels.packed`) holding one value per term at 2 * bits bits: left | right << bits, table
entries; right = 2**bits - 1 (`sentinel`) marks a literal term (its string is table entry
left); otherwise the term is the bigram "left right" (two table strings joined by one space).
By DESIGN.md's cap rule both words of an indexed bigram are unigrams of the same text, so every
bigram of a build is a pair. bits = 0 (format 2 and 3 indexes, and tables where every term is
literal): term t is table entry t, and codes may be empty.

Every function here trusts the entries it reads: `sound` (per term) or `first_unsound` (a range)
checks a term's code and table offsets first.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .fnv import FNV_BASIS, FNV_PRIME, fmix64, fnv_bytes
from .packed import get
from .spans import span_equal  # eight bytes a load (a word compare)

SPACE = 32


def string_bits(n_literals: int) -> int:
    """Bits of one table entry in a code: entries 0..n_literals-1 and the sentinel 2**bits - 1."""
    return max(1, int(n_literals).bit_length())


@nb.njit(cache=True, nogil=True, inline="always")
def parts(codes, bits, t):
    """(left, right) table entries of term t (int64); right = -1 for a literal term."""
    if bits == 0:
        return np.int64(t), np.int64(-1)
    c = get(codes, 2 * bits, t)
    sentinel = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    left = np.int64(c & sentinel)
    right = c >> np.uint64(bits)
    if right == sentinel:
        return left, np.int64(-1)
    return left, np.int64(right)


@nb.njit(cache=True, nogil=True, inline="always")
def _entry_sound(offsets, n_bytes, e):
    n = offsets.shape[0] - 1
    if e < 0 or e >= n:
        return False
    a, b = offsets[e], offsets[e + 1]
    return 0 <= a <= b <= n_bytes


@nb.njit(cache=True, nogil=True)
def sound(offsets, n_bytes, codes, bits, t):
    """True when term t's code names table entries whose offsets lie within the n_bytes table bytes."""
    left, right = parts(codes, bits, t)
    return _entry_sound(offsets, n_bytes, left) and (right < 0 or _entry_sound(offsets, n_bytes, right))


@nb.njit(cache=True, nogil=True)
def first_unsound(offsets, n_bytes, codes, bits, terms):
    """The first i such that term terms[i] is not `sound`, or -1."""
    for i in range(terms.shape[0]):
        if not sound(offsets, n_bytes, codes, bits, terms[i]):
            return i
    return -1


@nb.njit(cache=True, nogil=True)
def first_unsound_range(offsets, n_bytes, codes, bits, lo, hi):
    """The first term in lo..hi-1 that is not `sound`, or -1 (`verify`: every term)."""
    for t in range(lo, hi):
        if not sound(offsets, n_bytes, codes, bits, t):
            return t
    return -1


@nb.njit(cache=True, nogil=True, inline="always")
def term_equal(data, a0, a1, table, offsets, codes, bits, t):
    """data[a0:a1] == the string of (sound) term t, byte for byte."""
    left, right = parts(codes, bits, t)
    la, lb = offsets[left], offsets[left + 1]
    if right < 0:
        return span_equal(data, a0, a1, table, la, lb)
    ra, rb = offsets[right], offsets[right + 1]
    mid = a0 + (lb - la)
    if a1 - a0 != (lb - la) + 1 + (rb - ra) or data[mid] != SPACE:
        return False
    return span_equal(data, a0, mid, table, la, lb) and span_equal(data, mid + 1, a1, table, ra, rb)


@nb.njit(cache=True, nogil=True)
def gather(table, offsets, codes, bits, terms):
    """The strings of (sound) terms as (offsets int64[m + 1], data uint8)."""
    m = terms.shape[0]
    out_off = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        left, right = parts(codes, bits, terms[i])
        n = offsets[left + 1] - offsets[left]
        if right >= 0:
            n += 1 + offsets[right + 1] - offsets[right]
        out_off[i + 1] = out_off[i] + n
    out = np.empty(out_off[m], dtype=np.uint8)
    for i in range(m):
        left, right = parts(codes, bits, terms[i])
        p = out_off[i]
        la, lb = offsets[left], offsets[left + 1]
        out[p : p + lb - la] = table[la:lb]
        if right >= 0:
            p += lb - la
            out[p] = SPACE
            ra, rb = offsets[right], offsets[right + 1]
            out[p + 1 : p + 1 + rb - ra] = table[ra:rb]
    return out_off, out


@nb.njit(cache=True, nogil=True)
def term_hashes(table, offsets, codes, bits, n_terms, seed, mask):
    """The signal hash (`hashing`: FNV-1a 64 and fmix64) of every term's string, ANDed with mask, read through
    the codes instead of gathered first (`gather` then `hashing.hash_spans` wrote every string: at 8.8M a
    shard's 10.4M terms took ~5.6 s). Returns (uint64[n_terms], the first term that is not `sound`, or -1:
    then no hash is to be trusted)."""
    out = np.empty(n_terms, dtype=np.uint64)
    n_bytes = table.shape[0]
    basis = FNV_BASIS ^ fmix64(np.uint64(seed))
    for t in range(n_terms):
        if not sound(offsets, n_bytes, codes, bits, t):
            return out, np.int64(t)
        left, right = parts(codes, bits, t)
        h = fnv_bytes(basis, table, offsets[left], offsets[left + 1])
        if right >= 0:
            h ^= np.uint64(SPACE)
            h *= FNV_PRIME
            h = fnv_bytes(h, table, offsets[right], offsets[right + 1])
        out[t] = fmix64(h) & mask
    return out, np.int64(-1)


@nb.njit(cache=True, nogil=True, inline="always")
def _byte(table, offsets, left, right, j):
    """Byte j of the string of a term of entries (left, right): left's bytes, a space, right's."""
    la, lb = offsets[left], offsets[left + 1]
    if j < lb - la:
        return table[la + j]
    if j == lb - la:
        return np.uint8(SPACE)
    return table[offsets[right] + j - (lb - la) - 1]


@nb.njit(cache=True, nogil=True, inline="always")
def _length(offsets, left, right):
    n = offsets[left + 1] - offsets[left]
    return n if right < 0 else n + 1 + offsets[right + 1] - offsets[right]


@nb.njit(cache=True, nogil=True)
def terms_equal(a_table, a_offsets, a_codes, a_bits, a_terms, b_table, b_offsets, b_codes, b_bits, b_terms):
    """bool[m]: whether term a_terms[i] of one table and b_terms[i] of another have the same string, compared
    through their codes (no strings gathered). Both sets of terms must be `sound` (`term_hashes` checks a
    whole vocabulary)."""
    m = a_terms.shape[0]
    out = np.zeros(m, dtype=np.bool_)
    for i in range(m):
        al, ar = parts(a_codes, a_bits, a_terms[i])
        bl, br = parts(b_codes, b_bits, b_terms[i])
        a0, a1, b0, b1 = a_offsets[al], a_offsets[al + 1], b_offsets[bl], b_offsets[bl + 1]
        if (ar < 0) == (br < 0) and a1 - a0 == b1 - b0:  # the same shape (the common case): part by part, by words
            same = span_equal(a_table, a0, a1, b_table, b0, b1)
            if same and ar >= 0:
                same = span_equal(a_table, a_offsets[ar], a_offsets[ar + 1], b_table, b_offsets[br], b_offsets[br + 1])
            out[i] = same
            continue
        n = _length(a_offsets, al, ar)  # a literal against a pair, or words split apart: byte by byte
        if n != _length(b_offsets, bl, br):
            continue
        same = True
        for j in range(n):
            if _byte(a_table, a_offsets, al, ar, j) != _byte(b_table, b_offsets, bl, br, j):
                same = False
                break
        out[i] = same
    return out


# ---- the build: which terms are pairs ---------------------------------------------------------


@nb.njit(cache=True, nogil=True)
def spaces(offsets, data, lo, hi):
    """Position in data of the first space of each term lo..hi-1 of a plain string table, or -1. int64[hi - lo]."""
    out = np.full(hi - lo, -1, dtype=np.int64)
    for t in range(lo, hi):
        for p in range(offsets[t], offsets[t + 1]):
            if data[p] == SPACE:
                out[t - lo] = p
                break
    return out


def word_directory(word_hashes: np.ndarray, hash_bits: int) -> tuple[np.ndarray, int]:
    """(first int64[2**b + 1], shift): the sorted word hashes whose top b bits are j start at first[j]
    (b about log2 U, so a look-up searches ~1 entry instead of log2 U mostly missing cache)."""
    u = word_hashes.shape[0]
    b = min(hash_bits, max(1, int(u).bit_length()))
    shift = hash_bits - b
    first = np.empty((1 << b) + 1, dtype=np.int64)
    first[:-1] = np.searchsorted(word_hashes, np.arange(1 << b, dtype=np.uint64) << np.uint64(shift))
    first[-1] = u  # (2**b) << shift may not fit 64 bits
    return first, shift


@nb.njit(cache=True, parallel=True)
def find_words(data, starts, ends, hashes, word_hashes, word_data, word_offsets, first, shift):
    """The word (index into the word table) of each span data[starts[i]:ends[i]] (hash hashes[i]), or -1.

    word_hashes uint64[U] sorted: the hashes of the words (word_data, word_offsets); (first, shift)
    their `word_directory`. A hash hit counts only when the strings agree.
    """
    n = hashes.shape[0]
    out = np.full(n, -1, dtype=np.int64)
    u = word_hashes.shape[0]
    for i in nb.prange(n):
        h = hashes[i]
        j = np.int64(h >> np.uint64(shift))
        lo, hi = first[j], first[j + 1]
        while lo < hi:
            mid = (lo + hi) >> 1
            if word_hashes[mid] < h:
                lo = mid + 1
            else:
                hi = mid
        if lo < u and word_hashes[lo] == h and span_equal(data, starts[i], ends[i], word_data, word_offsets[lo],
                                                            word_offsets[lo + 1]):
            out[i] = lo
    return out
