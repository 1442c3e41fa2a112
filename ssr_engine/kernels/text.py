"""Bulk fast path for signals: UTF-8 bytes in, signal strings (as byte spans) out, in Numba.

It must give exactly what `signals.card_signals` gives on any input. The only non-ASCII
code points that `str.lower()` maps to ASCII are U+0130 (to "i" plus U+0307, a separator)
and U+212A KELVIN SIGN (to "k"); every other non-ASCII code point is a separator. That is
checked over all of Unicode by a test, so a new Python version that changes it fails loudly.

Stopwords arrive as the tables `extract.stopword_table` builds (this module, like every
kernel module, imports nothing from the package outside `kernels`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .spans import load_u64, span_compare, span_equal, store_u64

_EMPTY = -1
LOW32 = (1 << 32) - 1  # a pair key's low half: the right word's rank
PACKED = 16  # tokens up to this many bytes are compared and looked up as two packed uint64 keys

# byte -> lower-case ASCII token byte, or 0 for a separator (every byte >= 0x80 is 0 here;
# the two multi-byte exceptions are handled in _tokenize_value)
_LOWER = np.zeros(256, dtype=np.uint8)
for _c in range(ord("a"), ord("z") + 1):
    _LOWER[_c] = _c
    _LOWER[_c - 32] = _c
for _c in range(ord("0"), ord("9") + 1):
    _LOWER[_c] = _c
# token byte -> 6 bits, in byte order (0: padding past the token's end); `_sort_tokens`
_RANK = np.zeros(256, dtype=np.int64)
for _i, _c in enumerate(sorted(set(_LOWER.tolist()) - {0})):
    _RANK[_c] = _i + 1


@nb.njit(cache=True, nogil=True, inline="always")
def table_slot(k1, k2, mask):
    """Slot of the packed word (k1, k2) in an open-addressing table of size mask + 1."""
    h = k1 * np.uint64(0x9E3779B97F4A7C15) + (k2 ^ (k2 >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)
    return np.int64((h >> np.uint64(32)) & np.uint64(mask))


@nb.njit(cache=True, nogil=True)
def _is_long_stopword(buf, start, end, long_data, long_offsets):
    """Stopwords over 16 bytes (rare: only user lists have them), compared byte by byte."""
    for w in range(long_offsets.shape[0] - 1):
        if span_equal(long_data, long_offsets[w], long_offsets[w + 1], buf, start, end):
            return True
    return False


# Hot loops below are written out by hand rather than split into small functions: a call that
# passes arrays costs reference-count updates, ~100 ns, which dominated per-token work.
@nb.njit(cache=True, nogil=True)
def _tokenize_value(data, start, end, low, low_pos, tok_start, tok_len, tok_k1, tok_k2, ntok,
                    key1, key2, long_data, long_offsets):
    """Append the kept tokens of one value to low/tok_*; returns (low_pos, ntok)."""
    cur = low_pos  # start of the token being read, in `low`
    pos = low_pos
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    mask = key1.shape[0] - 1
    has_long = long_offsets.shape[0] > 1
    i = start
    while i <= end:
        close_after = False
        if i < end:
            b = data[i]
            c = _LOWER[b]
            i += 1
            if c == 0 and b >= 0xC0:
                # multi-byte UTF-8: U+0130 lowers to "i" + U+0307 (a separator), U+212A to "k"
                if b == 0xC4 and i < end and data[i] == 0xB0:
                    c = np.uint8(0x69)
                    close_after = True
                elif b == 0xE2 and i + 1 < end and data[i] == 0x84 and data[i + 1] == 0xAA:
                    c = np.uint8(0x6B)
                i += 1 if b < 0xE0 else (2 if b < 0xF0 else 3)
            if c != 0:
                n = pos - cur
                if n < 8:
                    k1 |= np.uint64(c) << np.uint64(56 - 8 * n)
                elif n < 16:
                    k2 |= np.uint64(c) << np.uint64(120 - 8 * n)
                low[pos] = c
                pos += 1
                if not close_after:
                    continue
        else:
            i += 1  # end of value: close the last token
        n = pos - cur
        if n >= 2:
            stop = False
            if n <= 16:
                slot = table_slot(k1, k2, mask)
                while key1[slot] != 0:
                    if key1[slot] == k1 and key2[slot] == k2:
                        stop = True
                        break
                    slot = (slot + 1) & mask
            elif has_long:
                stop = _is_long_stopword(low, cur, pos, long_data, long_offsets)
            if not stop:
                tok_start[ntok] = cur
                tok_len[ntok] = n
                tok_k1[ntok] = k1
                tok_k2[ntok] = k2
                ntok += 1
                cur = pos
        pos = cur
        k1 = np.uint64(0)
        k2 = np.uint64(0)
    return cur, ntok


@nb.njit(cache=True, nogil=True, inline="always")
def _before(a, b, low, tok_start, tok_len, tok_k1, tok_k2):
    """Whether token a sorts before token b or equals it (by string: packed keys, then bytes past 16)."""
    if tok_k1[a] != tok_k1[b]:
        return tok_k1[a] < tok_k1[b]
    if tok_k2[a] != tok_k2[b]:
        return tok_k2[a] < tok_k2[b]
    if tok_len[a] <= 16 and tok_len[b] <= 16:
        return tok_len[a] <= tok_len[b]
    return span_compare(low, tok_start[a], tok_len[a], low, tok_start[b], tok_len[b]) <= 0


@nb.njit(cache=True, nogil=True, inline="always")
def _all_same(order, j, e, tok_k2, tok_len):
    """Whether the tokens order[j:e] (equal in their first 8 bytes) are one word repeated (to 16 bytes)."""
    first = order[j]
    for a in range(j + 1, e):
        t = order[a]
        if tok_k2[t] != tok_k2[first] or tok_len[t] != tok_len[first] or tok_len[t] > 16:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _sort_tokens(order, tmp, low, tok_start, tok_len, tok_k1, tok_k2, n):
    """Stable sort of token indexes 0..n-1 into `order` by token string (`tmp`: scratch).

    A token's first 8 bytes ([0-9a-z] or padding) fit in 48 bits (6 a byte, in order), and its index in
    the 15 below: one sort of plain integers orders the tokens by those bytes, stably; tokens sharing
    them (a word repeated, mostly) are then ordered by the rest, stably, by insertion; documents of 32,768
    tokens or more, or with over 64 distinct tokens sharing 8 bytes, take the merge sort below."""
    if n >= 1 << 15:
        for t in range(n):
            order[t] = t
        _merge_sort_tokens(order, tmp, low, tok_start, tok_len, tok_k1, tok_k2, n)
        return
    for t in range(n):
        k = tok_k1[t]
        code = np.int64(0)
        for i in range(8):
            code = (code << 6) | _RANK[(k >> np.uint64(56 - 8 * i)) & np.uint64(255)]
        tmp[t] = (code << 15) | t
    keys = tmp[:n]
    keys.sort()
    for j in range(n):
        order[j] = keys[j] & 0x7FFF
    j = 0
    while j < n:
        e = j + 1
        while e < n and keys[e] >> 15 == keys[j] >> 15:
            e += 1
        if e - j > 64 and not _all_same(order, j, e, tok_k2, tok_len):
            # many distinct tokens sharing 8 bytes: insertion would take quadratic time; the merge sort
            for t in range(n):
                order[t] = t
            _merge_sort_tokens(order, tmp, low, tok_start, tok_len, tok_k1, tok_k2, n)
            return
        for a in range(j + 1, e):  # a stable insertion sort of the run sharing 8 bytes
            x = order[a]
            b = a - 1
            while b >= j and not _before(order[b], x, low, tok_start, tok_len, tok_k1, tok_k2):
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        j = e


@nb.njit(cache=True, nogil=True)
def _merge_sort_tokens(order, tmp, low, tok_start, tok_len, tok_k1, tok_k2, n):
    """Stable merge sort of token indexes by token string (packed keys; bytes past 16).

    The same bottom-up merge as `merge._sort_group` (ids), kept apart: a shared sort would take
    its comparison as a function argument, and this one's is written inline (two packed keys,
    then lengths, then bytes) for the reason given above `_tokenize_value`. Measured: a shared
    `merge_sort(idx, tmp, lo, hi, before, ctx)` (inlined, insertion-sorted runs of 16, the
    comparison's five arrays in a tuple) made this sort 4.2x slower and the whole extraction 2.0x
    (300K passages, one thread, under load): unpacking the tuple counts references on each array."""
    width = 1
    src = order
    dst = tmp
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if _before(src[a], src[b], low, tok_start, tok_len, tok_k1, tok_k2):
                    dst[k] = src[a]
                    a += 1
                else:
                    dst[k] = src[b]
                    b += 1
                k += 1
            while a < mid:
                dst[k] = src[a]
                a += 1
                k += 1
            while b < hi:
                dst[k] = src[b]
                b += 1
                k += 1
            lo += 2 * width
        src, dst = dst, src
        width *= 2
    if src is not order:
        order[:n] = src[:n]


@nb.njit(cache=True, nogil=True, inline="always")
def _copy(dst, at, src, start, n):
    """dst[at:at + n] = src[start:start + n] in whole words: reads and writes up to 7 bytes past both (the
    caller's slack; the bytes written past are overwritten by the next copy or cut off). A byte loop
    mispredicted its exit on every signal."""
    for i in range(0, n, 8):
        store_u64(dst, at + i, load_u64(src, start + i))


@nb.njit(cache=True, nogil=True)
def _grow(buf, need):
    if need <= buf.shape[0]:
        return buf
    size = buf.shape[0] * 2
    while size < need:
        size *= 2
    out = np.empty(size, dtype=buf.dtype)
    out[: buf.shape[0]] = buf
    return out


# extract_signals is one long function on purpose (about 150 lines): tokenising, the stopword look-up,
# counting, sorting and the cap run in one pass over each document's bytes with no call that passes
# arrays (each costs ~100 ns of reference counting, which dominated per-token work when it was split).
@nb.njit(cache=True, nogil=True)
def extract_signals(data, value_starts, value_ends, doc_values, key1, key2, long_data, long_offsets, cap, bigrams):
    """Signals of each document, as byte strings.

    data: UTF-8 bytes; value v is data[value_starts[v]:value_ends[v]]; document d is made of
    values doc_values[d] .. doc_values[d + 1] - 1 (a plain text is one value).
    cap < 0 means no cap; bigrams=False gives unigrams only (the BM25 vocabulary).
    Returns (doc_offsets int64[n_docs + 1] into signals, signal bytes uint8[:],
    signal offsets int64[n_signals + 1] into those bytes, is_bigram bool[n_signals],
    counts uint32[n_signals] (occurrences in the document), doc_tokens int64[n_docs]
    (kept tokens per document)).
    """
    n_docs = doc_values.shape[0] - 1
    longest = 1
    total = 0  # bytes of the values read: the outputs' first size (a caller may pass a slice of a larger buffer)
    for d in range(n_docs):
        size = 0
        for v in range(doc_values[d], doc_values[d + 1]):
            size += value_ends[v] - value_starts[v]
        total += size
        if size + 1 > longest:
            longest = size + 1
    low = np.empty(longest + 8, dtype=np.uint8)  # + 8: `_copy` reads whole words
    tok_start = np.empty(longest, dtype=np.int64)
    tok_len = np.empty(longest, dtype=np.int64)
    tok_k1 = np.empty(longest, dtype=np.uint64)
    tok_k2 = np.empty(longest, dtype=np.uint64)
    bi_count = np.empty(longest, dtype=np.uint32)
    tok_value = np.empty(longest, dtype=np.int64)
    order = np.empty(longest, dtype=np.int64)
    tmp = np.empty(longest, dtype=np.int64)
    rank = np.empty(longest, dtype=np.int64)
    uniq_first = np.empty(longest, dtype=np.int64)
    uniq_count = np.empty(longest, dtype=np.int64)
    pair_keys = np.empty(longest, dtype=np.int64)
    uni_keys = np.empty(longest, dtype=np.int64)

    doc_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    out_bytes = np.empty(max(16, 2 * total), dtype=np.uint8)
    out_offsets = np.zeros(max(16, total // 2), dtype=np.int64)
    out_bigram = np.zeros(out_offsets.shape[0], dtype=np.bool_)
    out_counts = np.zeros(out_offsets.shape[0], dtype=np.uint32)
    doc_tokens = np.zeros(n_docs, dtype=np.int64)
    n_out = 0
    byte_pos = 0

    for d in range(n_docs):
        pos = 0
        ntok = 0
        for v in range(doc_values[d], doc_values[d + 1]):
            before = ntok
            pos, ntok = _tokenize_value(
                data, value_starts[v], value_ends[v], low, pos, tok_start, tok_len, tok_k1, tok_k2, ntok,
                key1, key2, long_data, long_offsets,
            )
            for t in range(before, ntok):
                tok_value[t] = v
        # distinct unigrams: sort tokens by bytes, give each token the rank of its string
        _sort_tokens(order, tmp, low, tok_start, tok_len, tok_k1, tok_k2, ntok)
        n_uni = 0
        for j in range(ntok):
            t = order[j]
            new = j == 0
            if not new:
                p = order[j - 1]
                new = tok_k1[p] != tok_k1[t] or tok_k2[p] != tok_k2[t] or tok_len[p] != tok_len[t]
                if not new and tok_len[t] > 16:
                    new = span_compare(low, tok_start[p], tok_len[p], low, tok_start[t], tok_len[t]) != 0
            if new:
                uniq_first[n_uni] = t
                uniq_count[n_uni] = 0
                n_uni += 1
            rank[t] = n_uni - 1
            uniq_count[n_uni - 1] += 1
        # distinct bigrams: adjacent tokens of one value; (left rank, right rank) order equals
        # the string order of "left right" because " " sorts before [a-z0-9]
        doc_tokens[d] = ntok
        n_pairs = 0
        for t in range(ntok - 1 if bigrams else 0):
            if tok_value[t] == tok_value[t + 1]:
                pair_keys[n_pairs] = (rank[t] << 32) | rank[t + 1]  # shifts: a division cost ~30 cycles
                n_pairs += 1
        keys = pair_keys[:n_pairs]
        keys.sort()
        bi_count[:n_pairs] = 0
        n_bi = 0
        for j in range(n_pairs):
            if j == 0 or keys[j] != keys[j - 1]:
                keys[n_bi] = keys[j]
                n_bi += 1
            bi_count[n_bi - 1] += 1
        # the cap: unigrams by frequency desc then string asc, then bigrams by string asc
        if cap >= 0 and n_uni + n_bi > cap:
            for u in range(n_uni):
                uni_keys[u] = ((ntok - uniq_count[u]) << 32) | u
            ukeys = uni_keys[:n_uni]
            ukeys.sort()
            keep_uni = min(n_uni, cap)
            for u in range(keep_uni):
                uni_keys[u] = ukeys[u] & LOW32
            keep_bi = cap - keep_uni
        else:
            keep_uni = n_uni
            for u in range(n_uni):
                uni_keys[u] = u
            keep_bi = n_bi
        # emit (growth checked inline: the rare call is the only one)
        need_sig = n_out + keep_uni + keep_bi + 1
        if need_sig > out_offsets.shape[0]:
            out_offsets = _grow(out_offsets, need_sig)
            out_bigram = _grow(out_bigram, need_sig)
            out_counts = _grow(out_counts, need_sig)
        need_bytes = byte_pos
        for u in range(keep_uni):
            need_bytes += tok_len[uniq_first[uni_keys[u]]]
        for j in range(keep_bi):
            need_bytes += tok_len[uniq_first[keys[j] >> 32]] + 1 + tok_len[uniq_first[keys[j] & LOW32]]
        if need_bytes + 8 > out_bytes.shape[0]:  # + 8: `_copy` writes whole words
            out_bytes = _grow(out_bytes, need_bytes + 8)
        for u in range(keep_uni):
            t = uniq_first[uni_keys[u]]
            _copy(out_bytes, byte_pos, low, tok_start[t], tok_len[t])
            byte_pos += tok_len[t]
            out_bigram[n_out] = False
            out_counts[n_out] = uniq_count[uni_keys[u]]
            n_out += 1
            out_offsets[n_out] = byte_pos
        for j in range(keep_bi):
            left = uniq_first[keys[j] >> 32]
            right = uniq_first[keys[j] & LOW32]
            _copy(out_bytes, byte_pos, low, tok_start[left], tok_len[left])
            byte_pos += tok_len[left]
            out_bytes[byte_pos] = 0x20
            byte_pos += 1
            _copy(out_bytes, byte_pos, low, tok_start[right], tok_len[right])
            byte_pos += tok_len[right]
            out_bigram[n_out] = True
            out_counts[n_out] = bi_count[j]
            n_out += 1
            out_offsets[n_out] = byte_pos
        doc_offsets[d + 1] = n_out
    return (
        doc_offsets, out_bytes[:byte_pos], out_offsets[: n_out + 1], out_bigram[:n_out], out_counts[:n_out], doc_tokens
    )
