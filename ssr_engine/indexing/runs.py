"""Chunk inversion: one chunk of documents -> one sorted run of files on disk.

A run holds, for its distinct signal hashes in ascending order: the hash, the chunk-level df,
the signal string, the offsets of its postings, and the postings (global doc ids, ascending);
plus, for the forward CSR, each signal's local term index in document order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..extract import SignalBatch
from ..hashing import hash_spans
from ..kernels.indexing import invert_chunk, radix_sort_u64, signal_payloads, term_strings


class HashCollision(Exception):
    """Two distinct signals share a hash under the current seed."""

    def __init__(self, first: str, second: str):
        super().__init__(f"signals {first!r} and {second!r} share a hash")
        self.first, self.second = first, second


@dataclass
class RunInfo:
    index: int
    n_docs: int
    n_terms: int
    n_postings: int
    empty_docs: int
    seed: int = 0  # the hash of its signals (`merge_runs` splits bigrams into words with it)
    mask: int = 2**64 - 1


def run_file(directory: Path, index: int, name: str) -> Path:
    return directory / f"run{index:05d}.{name}.npy"


def write_run(
    directory: Path, index: int, batch: SignalBatch, first_doc: int, seed: int, mask: np.uint64, keep_tf: bool
) -> RunInfo:
    """Invert one chunk's signals and save the run; raises HashCollision."""
    hashes = hash_spans(batch.data, batch.offsets, np.uint64(seed), mask)
    if hashes.shape[0] >= 2**32:
        raise ValueError(f"{hashes.shape[0]} signals in one chunk: more than a run can address (lower chunk_docs)")
    keys, payloads = radix_sort_u64(hashes, signal_payloads(batch.doc_offsets))
    per_doc = np.diff(batch.doc_offsets)
    del hashes
    uniq_hash, uniq_df, uniq_rep, post_docs, post_tf, local = invert_chunk(
        keys, payloads, np.int64(first_doc), batch.counts, keep_tf
    )
    del keys, payloads
    # The terms' strings and the collision check in one walk of the signals in their own order (their bytes
    # read sequentially), not in hash order, where each comparison cost two cache misses.
    str_off, str_bytes, s = term_strings(batch.data, batch.offsets, local, uniq_rep)
    if s >= 0:
        raise HashCollision(batch.signal(int(uniq_rep[local[s]])), batch.signal(int(s)))
    post_off = np.zeros(uniq_df.shape[0] + 1, dtype=np.int64)
    np.cumsum(uniq_df, out=post_off[1:])
    arrays = {
        "uniq_hash": uniq_hash, "uniq_df": uniq_df, "str_off": str_off, "str_bytes": str_bytes,
        "post_off": post_off, "post_docs": post_docs, "local": local, "doc_offsets": batch.doc_offsets,
        "doc_tokens": batch.doc_tokens.astype(np.uint32),
    }
    if keep_tf:
        arrays["post_tf"] = post_tf
    for name, arr in arrays.items():
        np.save(run_file(directory, index, name), arr, allow_pickle=False)
    return RunInfo(
        index=index,
        n_docs=int(per_doc.shape[0]),
        n_terms=int(uniq_hash.shape[0]),
        n_postings=int(post_docs.shape[0]),
        empty_docs=int(np.count_nonzero(per_doc == 0)),
        seed=int(seed),
        mask=int(mask),
    )
