"""The signal strings of a build, written compactly (format 4, `kernels.strings`).

`merge_runs` writes every term's string once, in term (hash) order, to the work folder; this step
reads it in chunks (never mapped: memory stays bounded) and writes the segment's table and codes:
table entries 0..U-1 are the words (terms without a space: unigrams) in term order, then the rare
terms that are not two words joined by a space; every bigram whose two words are terms (all of
them, by DESIGN.md's cap rule) is coded as that pair. Memory: two int32 per term, the words'
strings, and one chunk (1M terms) of temporaries.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..format import ArrayWriter, array_file
from ..hashing import hash_ranges, hash_spans
from ..kernels.packed import pack
from ..kernels.spans import gather_spans
from ..kernels.strings import find_words, spaces, string_bits, word_directory
from .runs import Work, load_work, read_work

CHUNK = 1 << 20  # terms per step; a multiple of 64, so each chunk's codes fill whole words. At 1 << 22 the 8.8M
# build peaked here (strings beside the forward rows): 2.017 GiB RSS, against 1.723 GiB (peak then in invert)


def _chunks(work: Work, n: int, dtype: np.dtype) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(first term, offsets int64 from 0, bytes) of the plain string table, CHUNK terms at a time."""
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        off = read_work(work, array_file("signal_offsets"), dtype, lo, hi + 1).astype(np.int64)
        data = read_work(work, array_file("signal_bytes"), "uint8", int(off[0]), int(off[-1]))
        yield lo, off - off[0], data


def encode_strings(work: Work, out_dir: Path, seed: int, mask: int) -> None:
    """Read the plain string table `work`/signal_{offsets,bytes}.npy; write the segment's
    signal_offsets, signal_bytes (the table) and signal_codes."""
    head = load_work(work, array_file("signal_offsets"), mapped=True)
    n, dtype = head.shape[0] - 1, head.dtype
    del head
    words_off: list[np.ndarray] = []
    words_data: list[np.ndarray] = []
    for _, off, data in _chunks(work, n, dtype):
        w_off, w_data = gather_spans(data, off, np.flatnonzero(spaces(off, data, 0, off.shape[0] - 1) < 0))
        words_off.append(w_off[1:] + sum(d.shape[0] for d in words_data))
        words_data.append(w_data)
    w_data = np.concatenate(words_data) if words_data else np.zeros(0, dtype=np.uint8)
    w_off = np.concatenate([np.zeros(1, dtype=np.int64), *words_off])
    del words_off, words_data
    u = w_off.shape[0] - 1
    w_hash = hash_spans(w_data, w_off, np.uint64(seed), np.uint64(mask))  # ascending: terms are in hash order
    first, shift = word_directory(w_hash, int(mask).bit_length())
    left = np.full(n, -1, dtype=np.int32)  # table entries; right -1: a literal
    right = np.full(n, -1, dtype=np.int32)
    extra_off: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    extra_data: list[np.ndarray] = []
    n_extra = word = 0
    for lo, off, data in _chunks(work, n, dtype):
        sp = spaces(off, data, 0, off.shape[0] - 1)
        ones = np.flatnonzero(sp < 0)
        left[lo + ones] = np.arange(word, word + ones.shape[0], dtype=np.int32)
        word += ones.shape[0]
        big = np.flatnonzero(sp >= 0)
        at = sp[big]
        lookup = (w_hash, w_data, w_off, first, shift)
        l_word = find_words(data, off[big], at, hash_ranges(data, off[big], at, np.uint64(seed), np.uint64(mask)),
                            *lookup)
        r_word = find_words(data, at + 1, off[big + 1], hash_ranges(data, at + 1, off[big + 1], np.uint64(seed),
                                                                   np.uint64(mask)), *lookup)
        pair = (l_word >= 0) & (r_word >= 0)
        left[lo + big[pair]], right[lo + big[pair]] = l_word[pair], r_word[pair]
        lone = big[~pair]  # not two words: a literal of its own, after the words
        if lone.shape[0]:
            left[lo + lone] = np.arange(u + n_extra, u + n_extra + lone.shape[0], dtype=np.int32)
            e_off, e_data = gather_spans(data, off, lone)
            extra_off.append(e_off[1:] + extra_off[-1][-1])
            extra_data.append(e_data)
            n_extra += lone.shape[0]
    table_off = np.concatenate([w_off, *(e[...] + w_off[-1] for e in extra_off[1:])])
    w_offsets = ArrayWriter(out_dir, "signal_offsets", last=int(table_off[-1]))
    w_offsets.append(table_off)
    w_offsets.close()
    w_bytes = ArrayWriter(out_dir, "signal_bytes")
    for part in (w_data, *extra_data):
        w_bytes.append(part)
    w_bytes.close()
    del table_off, w_data, extra_data, w_hash
    codes = ArrayWriter(out_dir, "signal_codes")
    if n_extra or u < n:  # else every term is a word, in term order (no bigrams): bits 0, no codes
        bits = string_bits(u + n_extra)
        sentinel = np.uint64((1 << bits) - 1)
        for lo in range(0, n, CHUNK):
            hi = min(lo + CHUNK, n)
            r = right[lo:hi]
            values = left[lo:hi].astype(np.uint64) | (np.where(r < 0, sentinel, r.astype(np.uint64)) <<
                                                       np.uint64(bits))
            words = pack(values, 2 * bits)
            codes.append(words if hi == n else words[:-1])  # the spare word only once, at the end
    codes.close()
