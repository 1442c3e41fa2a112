"""Chunk inversion: one chunk of documents -> one sorted run of files on disk.

A run holds, for its distinct signal hashes in ascending order: the hash, the chunk-level df,
the signal string, the offsets of its postings, and the postings (global doc ids, ascending);
plus, for the forward CSR, each document's local term indexes, ascending.

Runs, and the other work arrays of a build (the merge's term maps and plain string table), live
in a work folder of .npy files, or in memory (`MemoryRuns`: a small build, such as a live index's
write of a few documents, then opens no temporary file). The build's steps reach them only through
`save_work`, `load_work`, `read_work`, `work_writer` and `term_map` (run arrays: `run_file` names),
so both kinds run the same code and write the same index files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..arrays import ArrayWriter, array_file, npy_data_offset, read_slice, writer_dtype
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


class MemoryRuns(dict[str, np.ndarray]):
    """A build's work arrays kept in memory, by file name, in place of a work folder."""


Work = Path | MemoryRuns  # where a build's runs and other work arrays are


def run_file(directory: Work, index: int, name: str) -> str:
    """The file name of a run's array (in `directory`: `save_work` and friends take it)."""
    return f"run{index:05d}.{name}.npy"


RUN_DTYPES = {
    "uniq_hash": "uint64", "uniq_df": "int64", "str_off": "int64", "str_bytes": "uint8", "post_off": "int64",
    "post_docs": "uint32", "post_tf": "uint32", "local": "uint32", "doc_offsets": "int64", "doc_tokens": "uint32",
    "term_map": "uint32",
}


def save_work(work: Work, file: str, array: np.ndarray) -> None:
    if isinstance(work, MemoryRuns):
        work[file] = array
    else:
        np.save(work / file, array, allow_pickle=False)


def load_work(work: Work, file: str, mapped: bool = False) -> np.ndarray:
    """A whole work array (`mapped`: a file's is memory-mapped, not read)."""
    if isinstance(work, MemoryRuns):
        return work[file]
    return np.load(work / file, mmap_mode="r" if mapped else None)


def read_work(work: Work, file: str, dtype: str | np.dtype, start: int, stop: int) -> np.ndarray:
    """Entries [start, stop) of a work array (a file's read, not mapped: memory stays bounded)."""
    if isinstance(work, MemoryRuns):
        return np.asarray(work[file][start:stop], dtype=dtype)
    return read_slice(work / file, dtype, start, stop)


class _MemoryWriter:
    """`ArrayWriter`'s appends into a `MemoryRuns` array (same dtype and bound), stored at `close`."""

    def __init__(self, work: MemoryRuns, name: str, last: int | None):
        self.work, self.file = work, array_file(name)
        self.dtype, self.bound = writer_dtype(name, last)
        self.parts: list[np.ndarray] = []

    def append(self, values: np.ndarray) -> None:
        if self.bound is not None and len(values) and int(values[-1]) > self.bound:
            raise ValueError(f"{self.file}: offset {int(values[-1])} beyond the bound {self.bound} given")
        self.parts.append(np.array(values, dtype=self.dtype))

    def close(self) -> None:
        self.work[self.file] = np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=self.dtype)


def work_writer(work: Work, name: str, last: int | None = None) -> Any:
    """An `ArrayWriter` of the work array `name` (in memory: the same appends, kept)."""
    return _MemoryWriter(work, name, last) if isinstance(work, MemoryRuns) else ArrayWriter(work, name, last)


def term_map(work: Work, run: RunInfo) -> Callable[[int, np.ndarray], None]:
    """A zero-filled term map of `run` (its entries' final term ids) and its writer: put(first entry, ids)."""
    file = run_file(work, run.index, "term_map")
    if isinstance(work, MemoryRuns):
        array = work[file] = np.zeros(run.n_terms, dtype=np.uint32)

        def put_memory(first: int, ids: np.ndarray) -> None:
            array[first : first + ids.shape[0]] = ids

        return put_memory
    path = work / file
    # a zero-filled map file (written through the page cache; an msync here cost 10 ms a small build)
    np.lib.format.open_memmap(path, mode="w+", dtype=np.uint32, shape=(run.n_terms,))
    with open(path, "rb") as f:
        offset = npy_data_offset(f)

    def put_file(first: int, ids: np.ndarray) -> None:
        with open(path, "r+b") as f:
            f.seek(offset + first * 4)
            f.write(np.ascontiguousarray(ids, dtype=np.uint32).data)

    return put_file


def write_run(
    directory: Work, index: int, batch: SignalBatch, first_doc: int, seed: int, mask: np.uint64, keep_tf: bool
) -> RunInfo:
    """Invert one chunk's signals and save the run; raises HashCollision."""
    hashes = hash_spans(batch.data, batch.offsets, np.uint64(seed), mask)
    if hashes.shape[0] >= 2**32:
        raise ValueError(f"{hashes.shape[0]} signals in one chunk: more than a run can address (lower chunk_docs)")
    keys, payloads = radix_sort_u64(hashes, signal_payloads(batch.doc_offsets))
    per_doc = np.diff(batch.doc_offsets)
    del hashes
    uniq_hash, uniq_df, uniq_rep, post_docs, post_tf, local, rows = invert_chunk(
        keys, payloads, np.int64(first_doc), batch.counts, keep_tf, batch.doc_offsets
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
        "post_off": post_off, "post_docs": post_docs, "local": rows, "doc_offsets": batch.doc_offsets,
        "doc_tokens": batch.doc_tokens.astype(np.uint32),
    }
    if keep_tf:
        arrays["post_tf"] = post_tf
    for name, arr in arrays.items():
        save_work(directory, run_file(directory, index, name), arr)
    return RunInfo(
        index=index,
        n_docs=int(per_doc.shape[0]),
        n_terms=int(uniq_hash.shape[0]),
        n_postings=int(post_docs.shape[0]),
        empty_docs=int(np.count_nonzero(per_doc == 0)),
        seed=int(seed),
        mask=int(mask),
    )
