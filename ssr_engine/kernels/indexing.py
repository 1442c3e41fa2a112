"""Numba kernels of the build: chunk inversion into runs, bucket merge, forward CSR.

Arrays in, arrays out; imports nothing from the package but other kernels (`spans`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .spans import picked_offsets, span_equal


@nb.njit(cache=True, nogil=True)
def signal_payloads(doc_offsets):
    """uint64[S]: (document within the chunk << 32) | signal index, for each of a chunk's S signals.

    Sorted along with the hashes (`radix_sort_u64`), it lets `invert_chunk` read each signal's
    document in sorted order instead of looking it up at a random place."""
    n_docs = doc_offsets.shape[0] - 1
    out = np.empty(doc_offsets[n_docs], dtype=np.uint64)
    for d in range(n_docs):
        for s in range(doc_offsets[d], doc_offsets[d + 1]):
            out[s] = (np.uint64(d) << np.uint64(32)) | np.uint64(s)
    return out


@nb.njit(cache=True, nogil=True, inline="always")
def _grouped(n_groups, n_postings, n_entries, keep_tf):
    """The outputs of grouping hash-sorted entries (a chunk's signals, a bucket's run entries): per
    group hash uint64, df int64 (zeroed), representative int64; per posting doc uint32 and tf uint32
    (empty unless keep_tf); per entry its group uint32."""
    return (np.empty(n_groups, dtype=np.uint64), np.zeros(n_groups, dtype=np.int64),
            np.empty(n_groups, dtype=np.int64), np.empty(n_postings, dtype=np.uint32),
            np.empty(n_postings if keep_tf else 0, dtype=np.uint32), np.empty(n_entries, dtype=np.uint32))


@nb.njit(cache=True, nogil=True)
def invert_chunk(keys, payloads, first_doc, counts, keep_tf, doc_offsets):
    """Group a chunk's signals into a run. keys uint64[S]: the hashes sorted ascending;
    payloads uint64[S]: `signal_payloads` sorted with them (stably); doc_offsets int64[D + 1]: each
    document's signals.

    Returns (uniq_hash, uniq_df, uniq_rep (signal index of each term's first occurrence),
    post_docs uint32 (global doc ids, grouped by term, ascending), post_tf uint32 (empty unless
    `keep_tf`), local uint32 (term index of each signal, in signal order), rows uint32 (each
    document's term indexes, ascending: terms are met in ascending order here, so placing each at
    its document's next slot sorts the rows; the merge numbers terms in the same hash order, so the
    forward rows come out sorted)). Equal hashes are grouped without looking at the strings: the
    caller checks them (`runs.write_run`).
    """
    n = keys.shape[0]
    n_uniq = 0
    for j in range(n):
        if j == 0 or keys[j] != keys[j - 1]:
            n_uniq += 1
    uniq_hash, uniq_df, uniq_rep, post_docs, post_tf, local = _grouped(n_uniq, n, n, keep_tf)
    rows = np.empty(n, dtype=np.uint32)
    slot = doc_offsets[:-1].copy()
    low = np.uint64(0xFFFFFFFF)
    g = -1
    for j in range(n):
        s = np.int64(payloads[j] & low)
        d = np.int64(payloads[j] >> np.uint64(32))
        if j == 0 or keys[j] != keys[j - 1]:
            g += 1
            uniq_hash[g] = keys[j]
            uniq_rep[g] = s
        uniq_df[g] += 1
        post_docs[j] = first_doc + d
        if keep_tf:
            post_tf[j] = counts[s]
        local[s] = g
        rows[slot[d]] = g
        slot[d] += 1
    return uniq_hash, uniq_df, uniq_rep, post_docs, post_tf, local, rows


@nb.njit(cache=True, nogil=True)
def term_strings(data, offsets, local, uniq_rep):
    """The terms' strings, checked: (str_off int64[U + 1], str_bytes uint8, the first signal whose string
    differs from its term's (a hash collision) or -1).

    data/offsets: the chunk's S signal strings; local uint32[S] and uniq_rep int64[U] (`invert_chunk`: each
    term's representative is its first occurrence). One walk in signal order reads the signals' bytes
    sequentially: a term's first occurrence is copied into its place in str_bytes, every later one compared
    with it (a separate gather of the representatives read them at random places first: ~8% of a chunk's
    inversion), eight bytes a load (`span_equal`: 2.7x faster than byte by byte on a 100,000-passage chunk).
    """
    str_off = picked_offsets(offsets, uniq_rep)
    str_bytes = np.empty(str_off[-1], dtype=np.uint8)
    for s in range(local.shape[0]):
        g = local[s]
        a = offsets[s]
        n = offsets[s + 1] - a
        at = str_off[g]
        if uniq_rep[g] == s:
            for i in range(n):
                str_bytes[at + i] = data[a + i]
        elif not span_equal(data, a, a + n, str_bytes, at, str_off[g + 1]):
            return str_off, str_bytes, s
    return str_off, str_bytes, -1


@nb.njit(cache=True, nogil=True)
def merge_bucket(order, hashes, dfs, str_off, str_bytes, post_off, post_docs, post_tf, keep_tf):
    """Merge the bucket's entries from all runs (concatenated in run order; `order` sorts them
    by hash, stably, so equal hashes keep run order and their doc lists concatenate ascending).

    Returns (vocab, term_df, rep (entry holding each term's string), docs, tf (empty unless
    `keep_tf`), term_of_entry uint32 (term ids counted from 0 in the bucket), collision (an entry
    index whose string differs, or -1)).
    """
    n = order.shape[0]
    n_terms = 0
    total = 0
    for j in range(n):
        if j == 0 or hashes[order[j]] != hashes[order[j - 1]]:
            n_terms += 1
        total += dfs[order[j]]
    vocab, term_df, rep, docs, tf, term_of_entry = _grouped(n_terms, total, n, keep_tf)
    g = -1
    pos = 0
    collision = -1
    for j in range(n):
        e = order[j]
        if j == 0 or hashes[e] != hashes[order[j - 1]]:
            g += 1
            vocab[g] = hashes[e]
            rep[g] = e
        elif collision < 0:
            r = rep[g]
            if not span_equal(str_bytes, str_off[e], str_off[e + 1], str_bytes, str_off[r], str_off[r + 1]):
                collision = e
        term_df[g] += dfs[e]
        a = post_off[e]
        b = post_off[e + 1]
        docs[pos : pos + b - a] = post_docs[a:b]
        if keep_tf:
            tf[pos : pos + b - a] = post_tf[a:b]
        pos += b - a
        term_of_entry[e] = g
    return vocab, term_df, rep, docs, tf, term_of_entry, collision


@nb.njit(cache=True, nogil=True)
def forward_terms(term_map, local, doc_offsets):
    """Term ids of each document's signals, ascending within each document (a run's rows come sorted,
    `invert_chunk`: then the sort below only checks them, one comparison a term)."""
    out = np.empty(local.shape[0], dtype=np.uint32)
    for i in range(local.shape[0]):
        out[i] = term_map[local[i]]
    for d in range(doc_offsets.shape[0] - 1):
        a = doc_offsets[d]
        b = doc_offsets[d + 1]
        if b - a > 64:
            out[a:b] = np.sort(out[a:b])
            continue
        for i in range(a + 1, b):  # insertion sort: short lists (at most `cap` for SSR)
            v = out[i]
            j = i - 1
            while j >= a and out[j] > v:
                out[j + 1] = out[j]
                j -= 1
            out[j + 1] = v
    return out


@nb.njit(cache=True, nogil=True)
def radix_argsort_u64(keys):
    """Stable argsort of uint64 keys (`radix_sort_u64` carrying the positions)."""
    return radix_sort_u64(keys, np.arange(keys.shape[0], dtype=np.uint64))[1].astype(np.int64)


TOP_BITS = 11  # the first pass: 2,048 buckets on the top bits


@nb.njit(cache=True, nogil=True)
def radix_sort_u64(keys, payloads):
    """Stable sort of uint64 keys, each carrying a uint64 payload: (sorted keys, their payloads).

    One pass scatters the entries into 2,048 buckets on their top 11 bits (MSD); each bucket (a
    few thousand entries for a chunk's hashes: in cache) is then sorted on the other 53 bits by
    `_lsd_sort`. Against six LSD passes over the whole array (RESULTS.md: build, issue 13) this
    moves the data through memory once instead of six times. It releases the GIL, and hands
    back keys and payloads in order so that callers read them sequentially.
    """
    n = keys.shape[0]
    size = 1 << TOP_BITS
    shift = np.uint64(64 - TOP_BITS)
    starts = np.zeros(size + 1, dtype=np.int64)
    for i in range(n):
        starts[np.int64(keys[i] >> shift) + 1] += 1
    for b in range(size):
        starts[b + 1] += starts[b]
    pos = starts[:size].copy()
    k = np.empty(n, dtype=np.uint64)
    o = np.empty(n, dtype=np.uint64)
    for i in range(n):
        key = keys[i]
        b = np.int64(key >> shift)
        j = pos[b]
        k[j] = key
        o[j] = payloads[i]
        pos[b] = j + 1
    scratch_k = np.empty(n, dtype=np.uint64)
    scratch_o = np.empty(n, dtype=np.uint64)
    counts = np.zeros((7, 256), dtype=np.int64)
    for b in range(size):
        if starts[b + 1] - starts[b] > 1:
            _lsd_sort(k, o, scratch_k, scratch_o, starts[b], starts[b + 1], counts)
    return k, o


@nb.njit(cache=True, nogil=True)
def _lsd_sort(k, o, tk, to, lo, hi, counts):
    """Stable LSD sort of k[lo:hi] (with o) on their low 56 bits, seven passes of 8 bits through the
    scratch arrays tk/to; a pass where every key has the same digit is skipped."""
    mask = np.uint64(255)
    counts[:] = 0
    for i in range(lo, hi):
        key = k[i]
        for p in range(7):
            counts[p, np.int64((key >> np.uint64(8 * p)) & mask)] += 1
    src_k, src_o, dst_k, dst_o = k, o, tk, to
    swapped = False
    for p in range(7):
        total = lo
        same = False
        for d in range(256):
            c = counts[p, d]
            if c == hi - lo:
                same = True
                break
            counts[p, d] = total
            total += c
        if same:
            continue
        shift = np.uint64(8 * p)
        for i in range(lo, hi):
            key = src_k[i]
            d = np.int64((key >> shift) & mask)
            j = counts[p, d]
            dst_k[j] = key
            dst_o[j] = src_o[i]
            counts[p, d] = j + 1
        src_k, src_o, dst_k, dst_o = dst_k, dst_o, src_k, src_o
        swapped = not swapped
    if swapped:
        k[lo:hi] = src_k[lo:hi]
        o[lo:hi] = src_o[lo:hi]
