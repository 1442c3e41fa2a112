"""The signal strings of a build, written compactly (format 4, `kernels.strings`).

`merge_runs` writes every term's string once, in term order, to the work folder; this step
finds the bigrams whose two words are terms of their own (all of them, by the cap rule), numbers
the literal strings (unigrams, and any signal that is not such a pair) and writes the table
(`signal_offsets`, `signal_bytes`) and one code per term (`signal_codes`) to the segment.
Memory: two int32 per term plus a chunk (4M terms) of temporaries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..format import ArrayWriter, array_file
from ..hashing import hash_ranges
from ..kernels.packed import pack
from ..kernels.spans import gather_spans
from ..kernels.strings import find_words, spaces, string_bits

CHUNK = 1 << 22  # terms per step; a multiple of 64, so each chunk's codes fill whole words


def encode_strings(work: Path, out_dir: Path, seed: int, mask: int) -> None:
    """Read the plain string table `work`/signal_{offsets,bytes}.npy and the segment's vocab; write
    the segment's signal_offsets, signal_bytes and signal_codes."""
    offsets = np.load(work / array_file("signal_offsets"), mmap_mode="r")
    data = np.load(work / array_file("signal_bytes"), mmap_mode="r")
    vocab = np.load(out_dir / array_file("vocab"), mmap_mode="r")
    n = vocab.shape[0]
    has_space = np.zeros(n, dtype=np.bool_)
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        has_space[lo:hi] = spaces(offsets, data, lo, hi) >= 0
    word_terms = np.flatnonzero(~has_space)
    word_hashes = np.ascontiguousarray(vocab[word_terms])  # sorted, as the vocabulary
    left = np.full(n, -1, dtype=np.int32)
    right = np.full(n, -1, dtype=np.int32)
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        sp = spaces(offsets, data, lo, hi)
        big = np.flatnonzero(sp >= 0)
        if not big.shape[0]:
            continue
        at = sp[big]
        starts = np.asarray(offsets[lo + big], dtype=np.int64)
        ends = np.asarray(offsets[lo + big + 1], dtype=np.int64)
        for out, s, e in ((left, starts, at), (right, at + 1, ends)):
            h = hash_ranges(data, s, e, np.uint64(seed), np.uint64(mask))
            out[lo + big] = find_words(data, s, e, h, word_hashes, word_terms, offsets)
    paired = (left >= 0) & (right >= 0)
    literal = ~paired
    del has_space, word_hashes
    entry = np.cumsum(literal, dtype=np.int64) - 1  # table entry of each literal term
    n_literals = int(entry[-1]) + 1 if n else 0
    literals = np.flatnonzero(literal)
    table_off, table = gather_spans(data, np.asarray(offsets, dtype=np.int64), literals)
    w_off = ArrayWriter(out_dir, "signal_offsets", last=int(table_off[-1]))
    w_off.append(table_off)
    w_off.close()
    w_bytes = ArrayWriter(out_dir, "signal_bytes")
    w_bytes.append(table)
    w_bytes.close()
    del table, table_off, literals
    codes = ArrayWriter(out_dir, "signal_codes")
    if n_literals < n:  # else every term is its own table entry: bits 0, no codes
        bits = string_bits(n_literals)
        sentinel = np.uint64((1 << bits) - 1)
        for lo in range(0, n, CHUNK):
            hi = min(lo + CHUNK, n)
            lit = literal[lo:hi]
            l_entry = np.where(lit, entry[lo:hi], entry[np.maximum(left[lo:hi], 0)]).astype(np.uint64)
            r_entry = np.where(lit, sentinel, entry[np.maximum(right[lo:hi], 0)].astype(np.uint64))
            words = pack(l_entry | (r_entry << np.uint64(bits)), 2 * bits)
            codes.append(words if hi == n else words[:-1])  # the spare word only once, at the end
    codes.close()
