"""Query texts to kernel input in one GIL-free call: signals, vocabulary look-up, weights, canonical order.

`search.Searcher` runs every query piece through `prepare`, so two threads preparing pieces run in
parallel (the Python and NumPy steps it replaces held the GIL: ~8 µs a query in a batch, ~40 µs for
a single query, most of it fixed cost per call). The steps are the library's own kernels in a row:
`text.extract_signals` (DESIGN.md section 1), `fnv.fnv1a64` (the signal hash), `terms.lookup`
(keys and exact string checks); the weight is `scoring.signal_weight`'s formula (the same libm
`log` as `math.log`, checked bit for bit by a test) and each query's terms are stably sorted by ascending weight,
the canonical summation order. `prepare` is `signals` then `terms_of`; a group of shards (`distributed`)
makes the signals once and looks them up in each shard, weighed by the collection's df.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .fnv import fnv1a64
from .terms import directory_search, lookup, lookup_at
from .text import extract_signals

_INSERTION = 32  # queries of at most this many known terms are sorted by insertion (stable, no allocation)
_NO_TABLE = np.zeros(0, dtype=np.int64)  # `terms_of` without a global df table
_NO_DIRECTORY = np.zeros(0, dtype=np.int64)  # `found_in` without a key directory: the lockstep search


@nb.njit(cache=True, nogil=True)
def weight(n_docs, df):
    """ln((N + 1) / (df + 1)) + 1 (`scoring.signal_weight`; both operands exact below 2**53)."""
    return np.log(np.float64(n_docs + 1) / np.float64(df + 1)) + 1.0  # a scalar np.log is libm's log in Numba


@nb.njit(cache=True, nogil=True)
def _by_weight(terms, weights, df, a, b):
    """Stable sort of entries a..b-1 of the three arrays by weight (ties keep the signal order)."""
    if b - a <= _INSERTION:
        for i in range(a + 1, b):
            t, w, d = terms[i], weights[i], df[i]
            j = i - 1
            while j >= a and weights[j] > w:
                terms[j + 1], weights[j + 1], df[j + 1] = terms[j], weights[j], df[j]
                j -= 1
            terms[j + 1], weights[j + 1], df[j + 1] = t, w, d
        return
    order = np.argsort(weights[a:b], kind="mergesort") + a
    terms[a:b], weights[a:b], df[a:b] = terms[order], weights[order], df[order]


@nb.njit(cache=True, nogil=True)
def prepare(data, q_offsets, stop, cap, seed, mask, key_shift, vocab, checked, shift, strings, indptr, n_postings,
            n_docs):
    """Known terms of each query in ascending weight, from the queries' UTF-8 bytes.

    data uint8: query q is data[q_offsets[q]:q_offsets[q + 1]] (int64[Q + 1]); stop: the stopword tables
    (`extract.stopword_table`), cap the signal cap (-1: none); seed, mask: the hash settings; keys are
    hash >> key_shift in vocab's dtype (`hashing.vocab_keys`); vocab, checked, shift: as `terms.lookup`
    (strict for 64-bit keys); strings = (signal_bytes, signal_offsets, signal_codes, bits); indptr over
    n_postings postings of n_docs documents (N of the weights).
    Returns (offsets int64[Q + 1], terms int64, weights float64, df int64, ok): ok False when a vocabulary
    or offsets check failed (`search.lookup_terms` then names the defect).
    """
    sig = signals(data, q_offsets, stop, cap, seed, mask)
    return terms_of(sig, key_shift, vocab, checked, shift, strings, indptr, n_postings, n_docs, _NO_TABLE, n_docs)


@nb.njit(cache=True, nogil=True)
def signals(data, q_offsets, stop, cap, seed, mask):
    """The queries' signals and their hashes, once for any number of indexes (a sharded index's group).

    Arguments as `prepare`'s. Returns (sig_of int64[Q + 1]: query q's signals are sig_of[q]:sig_of[q + 1],
    sdata uint8 and soffsets int64[n + 1]: signal i's bytes, hashes uint64[n]: (fnv1a64 & mask)).
    """
    nq = q_offsets.shape[0] - 1
    doc_values = np.arange(nq + 1, dtype=np.int64)
    sig_of, sdata, soffsets, _, _, _ = extract_signals(data, q_offsets[:-1], q_offsets[1:], doc_values, stop[0],
                                                       stop[1], stop[2], stop[3], cap, True)
    n = soffsets.shape[0] - 1
    hashes = np.empty(n, dtype=np.uint64)
    for i in range(n):
        hashes[i] = fnv1a64(sdata, soffsets[i], soffsets[i + 1], seed) & mask
    return sig_of, sdata, soffsets, hashes


@nb.njit(cache=True, nogil=True)
def found_in(sig, key_shift, vocab, checked, shift, strings, indptr, n_postings, n_docs, directory, dir_bits):
    """Each of the signals' (`signals`' tuple `sig`) term id in one index (int64[n], -1: none) and its df
    there (int64[n]), and whether every check passed; the arguments as `prepare`'s, and the vocabulary's
    `terms.key_directory` (its checks made; empty: none, the searches in lockstep)."""
    _, sdata, soffsets, hashes = sig
    n = hashes.shape[0]
    keys = np.empty(n, dtype=vocab.dtype)
    for i in range(n):
        keys[i] = hashes[i] >> key_shift  # key_shift: uint64
    if directory.shape[0] == 0 or n == 0:
        return lookup(keys, sdata, soffsets, vocab, checked, shift, vocab.itemsize == 8, strings[0], strings[1],
                      strings[2], strings[3], indptr, n_postings, n_docs)
    return lookup_at(directory_search(vocab, directory, dir_bits, keys), keys, sdata, soffsets, vocab, checked, shift,
                     vocab.itemsize == 8, strings[0], strings[1], strings[2], strings[3], indptr, n_postings, n_docs)


@nb.njit(cache=True, nogil=True)
def terms_of(sig, key_shift, vocab, checked, shift, strings, indptr, n_postings, n_docs, table, n_weights):
    """`prepare` after the signals (`signals`' tuple `sig`): the look-up in one index and the weights.

    table int64: the global df of each of the index's term ids (a shard's slice of the weight table),
    weighed with N = n_weights; empty: the index's own df and N = n_docs. The other arguments as
    `prepare`'s. Returns `prepare`'s tuple; df is the index's own.
    """
    sig_of = sig[0]
    nq = sig_of.shape[0] - 1
    n = sig[3].shape[0]
    found, found_df, ok = found_in(sig, key_shift, vocab, checked, shift, strings, indptr, n_postings, n_docs,
                                   _NO_DIRECTORY, 0)
    glob = table.shape[0] > 0
    offsets = np.zeros(nq + 1, dtype=np.int64)
    terms = np.empty(n, dtype=np.int64)
    weights = np.empty(n, dtype=np.float64)
    df = np.empty(n, dtype=np.int64)
    m = 0
    for q in range(nq):
        start = m
        for i in range(sig_of[q], sig_of[q + 1]):
            t = found[i]
            if t >= 0:
                terms[m], df[m] = t, found_df[i]
                weights[m] = weight(n_weights, table[t] if glob else found_df[i])
                m += 1
        _by_weight(terms, weights, df, start, m)
        offsets[q + 1] = m
    return offsets, terms[:m], weights[:m], df[:m], ok
