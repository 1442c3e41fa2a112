"""Query signals to term ids in one pass: vocabulary search, range checks and string checks together.

`search.lookup_terms` used to make four calls per batch (the checked binary search, a hash
compare, the offsets check of `validate.check_terms`, `spans.spans_equal`), each with NumPy
temporaries over memory-mapped arrays: ~70 µs for a single query, more than its kernel on short
texts. This kernel does the same checks in one call; when one fails it says so and the caller
repeats the look-up the long way, whose functions name the defect.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lists import span
from .strings import sound, term_equal
from .validate import block_sound


@nb.njit(cache=True, nogil=True)
def _search_all(vocab, keys, checked, shift, strict):
    """`validate.search_checked` (the same entries read, the same blocks checked) with every key's binary
    search advanced one step at a time, in lockstep: their vocabulary loads are independent, so the CPU
    overlaps the cache misses that one search after another waited for (~25 dependent misses a signal in
    a 30M-term vocabulary). Returns (positions int64[n], the first defect found or -1)."""
    n, v = keys.shape[0], vocab.shape[0]
    lo = np.zeros(n, dtype=np.int64)
    hi = np.full(n, v, dtype=np.int64)
    busy = n
    while busy:
        busy = 0
        for j in range(n):
            a, b = lo[j], hi[j]
            if a < b:
                mid = (a + b) >> 1
                bad = block_sound(vocab, mid >> shift, shift, checked, strict)
                if bad >= 0:
                    return lo, bad
                if vocab[mid] < keys[j]:
                    lo[j] = mid + 1
                else:
                    hi[j] = mid
                busy += 1
    for j in range(n):  # the entry compared for equality and the one before it (search_checked's last checks)
        for e in (lo[j], lo[j] - 1):
            if 0 <= e < v:
                bad = block_sound(vocab, e >> shift, shift, checked, strict)
                if bad >= 0:
                    return lo, bad
    return lo, np.int64(-1)


@nb.njit(cache=True, nogil=True)
def lookup(keys, data, offsets, vocab, checked, shift, strict, signal_bytes, signal_offsets, signal_codes, bits, indptr,
           n_postings, n_docs):
    """Term id and df of each signal (span i of (data, offsets), vocabulary key keys[i]); -1 and 0 when unknown.

    vocab uint32 or uint64[V] (sorted keys, `format.Index.keys_of`; blocks of 2**shift entries
    checked once, remembered in `checked`, as `validate.search_checked`, strict for hashes);
    signal_bytes,
    signal_offsets, signal_codes, bits: the terms' strings (`kernels.strings`); indptr int[V + 1]
    over n_postings postings of n_docs documents. Every entry with the signal's key is a candidate
    (keys of 32 bits repeat); it is the term only when the strings agree. Returns (terms int64[n],
    df int64[n], ok): ok False when the vocabulary or a candidate's offsets are out of order or
    range (nothing may be trusted then).
    """
    if keys.shape[0] == 0 or vocab.shape[0] == 0:
        return np.full(keys.shape[0], -1, dtype=np.int64), np.zeros(keys.shape[0], dtype=np.int64), True
    pos, bad = _search_all(vocab, keys, checked, shift, strict)
    if bad >= 0:
        return np.full(keys.shape[0], -1, dtype=np.int64), np.zeros(keys.shape[0], dtype=np.int64), False
    return lookup_at(pos, keys, data, offsets, vocab, checked, shift, strict, signal_bytes, signal_offsets,
                     signal_codes, bits, indptr, n_postings, n_docs)


@nb.njit(cache=True, nogil=True)
def lookup_at(pos, keys, data, offsets, vocab, checked, shift, strict, signal_bytes, signal_offsets, signal_codes, bits,
              indptr, n_postings, n_docs):
    """`lookup` from each key's first position pos[i] (int64[n], np.searchsorted's), as `lookup` returns."""
    n = keys.shape[0]
    terms = np.full(n, -1, dtype=np.int64)
    df = np.zeros(n, dtype=np.int64)
    v = vocab.shape[0]
    n_bytes = signal_bytes.shape[0]
    for i in range(n):
        p = pos[i]
        while p < v and vocab[p] == keys[i]:
            if block_sound(vocab, p >> shift, shift, checked, strict) >= 0:
                return terms, df, False
            a, b = span(indptr, p)
            # validate.check_terms' conditions, for the same terms
            if a < 0 or b < a or b > n_postings or b - a > n_docs or not sound(signal_offsets, n_bytes, signal_codes,
                                                                                bits, p):
                return terms, df, False
            if term_equal(data, offsets[i], offsets[i + 1], signal_bytes, signal_offsets, signal_codes, bits, p):
                terms[i] = p
                df[i] = b - a
                break
            p += 1
    return terms, df, True


@nb.njit(cache=True, nogil=True)
def key_directory(vocab, bits, checked, shift, strict):
    """A directory of a sorted vocabulary by its keys' top `bits` bits, for a searcher that lives long
    (a shard's actor): entry b is the first position whose key's top bits are >= b (int64[2**bits + 1]),
    so a key's first position is a search of its bucket (a few entries) instead of ~log2(V) dependent
    loads. Building it checks every block (`block_sound`, marking `checked`) in one pass. Returns
    (directory, the first defect i or -1)."""
    v = vocab.shape[0]
    for b in range((v >> shift) + 1):
        bad = block_sound(vocab, b, shift, checked, strict)
        if bad >= 0:
            return np.zeros(0, np.int64), bad
    d_shift = np.uint64(vocab.itemsize * 8 - bits)
    out = np.empty((1 << bits) + 1, dtype=np.int64)
    p = 0
    for b in range(1 << bits):
        while p < v and np.int64(np.uint64(vocab[p]) >> d_shift) < b:
            p += 1
        out[b] = p
    out[1 << bits] = v
    return out, np.int64(-1)


@nb.njit(cache=True, nogil=True)
def directory_search(vocab, directory, bits, keys):
    """np.searchsorted(vocab, keys) (side left, int64[n]) through `key_directory`'s directory."""
    d_shift = np.uint64(vocab.itemsize * 8 - bits)
    pos = np.empty(keys.shape[0], dtype=np.int64)
    for j in range(keys.shape[0]):
        top = np.int64(np.uint64(keys[j]) >> d_shift)
        lo, hi = directory[top], directory[top + 1]
        while lo < hi:
            mid = (lo + hi) >> 1
            if vocab[mid] < keys[j]:
                lo = mid + 1
            else:
                hi = mid
        pos[j] = lo
    return pos
