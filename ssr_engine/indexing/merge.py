"""Merge of sorted runs into the final CSR, bucket by bucket over the hash space.

Each run's hashes are sorted, so a bucket (a range of hash values) is a contiguous slice of
every run: a bucket is read (not mapped), merged in memory, appended to the outputs, and
freed. Memory is set by the bucket size, not by the corpus.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..format import ArrayWriter, ListsWriter
from ..hashing import vocab_keys
from ..kernels.forward import width_for
from ..kernels.indexing import forward_terms, merge_bucket, radix_argsort_u64
from ..kernels.packed import PLAIN, byte_width_for, pack32
from ..kernels.spans import gather_spans
from .pools import pool as make_pool
from .runs import RUN_DTYPES, HashCollision, RunInfo, Work, load_work, read_work, run_file, term_map, work_writer
from .strings import encode_strings

BUCKET_ENTRIES = 4_000_000  # target run entries per bucket
BUCKET_POSTINGS = 16_000_000  # and postings per bucket (frequent unigrams make BM25 buckets heavy)


def bucket_cuts(run_dir: Work, runs: list[RunInfo], n_buckets: int) -> np.ndarray:
    """cuts[r, b] = first entry of run r whose hash falls in bucket b (b = 0..n_buckets)."""
    shift = 64 - int(np.log2(n_buckets))
    bounds = np.array([b << shift for b in range(1, n_buckets)], dtype=np.uint64) if n_buckets > 1 else None
    cuts = np.zeros((len(runs), n_buckets + 1), dtype=np.int64)
    for r, run in enumerate(runs):
        cuts[r, n_buckets] = run.n_terms
        if bounds is not None:
            hashes = load_work(run_dir, run_file(run_dir, run.index, "uniq_hash"), mapped=True)
            cuts[r, 1:n_buckets] = np.searchsorted(hashes, bounds)
            del hashes
    return cuts


def merge_runs(
    run_dir: Work,
    out_dir: Path,
    runs: list[RunInfo],
    keep_tf: bool,
    progress: Callable[[int], None] = lambda n: None,
    workers: int = 1,
    strings: bool = True,
    *,
    n_docs: int,
    hashes_to: Path | None = None,
) -> tuple[int, int]:
    """Write vocab, postings, signal strings (`strings.encode_strings`) and per-run term maps; returns (V, P).
    `hashes_to`: also every term's full hash (uint64[V], term order: the vocabulary keeps 32 bits of it) as
    a .npy file there (a sharded build's weight table matches shards by them).

    The postings' doc ids are packed at `packed.byte_width_for(n_docs)` bits (format 6; plain past 2**24).

    Buckets are read and merged on `workers` threads (the kernels release the GIL), at most
    `workers + 1` in memory, and appended to the outputs in order by this thread.
    """
    total = sum(r.n_terms for r in runs)
    postings = sum(r.n_postings for r in runs)
    n_buckets = 1
    while n_buckets * BUCKET_ENTRIES < total or n_buckets * BUCKET_POSTINGS < postings:
        n_buckets *= 2
    cuts = bucket_cuts(run_dir, runs, n_buckets)
    maps = [term_map(run_dir, run) for run in runs]

    def merged(b: int) -> _Bucket:
        return _merge_bucket(run_dir, runs, cuts[:, b], cuts[:, b + 1], keep_tf)

    string_bytes = sum(int(read_work(run_dir, run_file(run_dir, r.index, "str_off"), "int64", r.n_terms,
                                     r.n_terms + 1)[0]) for r in runs)  # the runs' strings: a bound on the merged ones
    vocab = ArrayWriter(out_dir, "vocab")
    bits = int(runs[0].mask if runs else 2**64 - 1).bit_length()  # of the hashes: the keys keep 32
    indptr = ListsWriter(out_dir, last=postings)  # format 7's postings directory (`kernels.lists`)
    docs = ArrayWriter(out_dir, "postings_docs")
    packer = PackedAppender(docs.append, byte_width_for(n_docs))
    tfs = ArrayWriter(out_dir, "postings_tf") if keep_tf else None
    # every term's string, in term order, to the work folder: encode_strings makes the compact form
    sig_off = work_writer(run_dir, "signal_offsets", last=string_bytes)
    sig_bytes = work_writer(run_dir, "signal_bytes")
    sig_off.append(np.zeros(1, dtype=np.int64))
    full = None if hashes_to is None else ArrayWriter.at(hashes_to, np.uint64)
    n_terms = 0
    n_postings = 0
    n_bytes = 0
    pending: deque[Future[_Bucket]] = deque()

    def append(m: _Bucket) -> None:
        nonlocal n_terms, n_postings, n_bytes
        vocab.append(vocab_keys(m.vocab, bits))
        if full is not None:
            full.append(m.vocab)
        indptr.append(m.df)
        packer.append(m.docs)
        if tfs is not None:
            tfs.append(m.tf)
        sig_off.append(n_bytes + m.str_off[1:])
        sig_bytes.append(m.str_bytes)
        for r, put in enumerate(maps):
            part = m.term_of_entry[m.entry_runs[r] : m.entry_runs[r + 1]]
            if part.shape[0]:
                put(int(m.first_entry[r]), part + np.uint32(n_terms))
        n_terms += int(m.vocab.shape[0])
        n_postings += int(m.docs.shape[0])
        n_bytes += int(m.str_bytes.shape[0])
        progress(m.entries)

    try:
        with make_pool(workers, "ssr-merge") as pool:
            try:
                for b in range(n_buckets):
                    pending.append(pool.submit(merged, b))
                    while len(pending) >= max(workers, 2):  # bounded: memory is a few buckets
                        append(pending.popleft().result())
                while pending:
                    append(pending.popleft().result())
                packer.close()
            finally:
                for f in pending:
                    f.cancel()
    finally:
        for w in (vocab, indptr, docs, tfs, sig_off, sig_bytes, full):
            if w is not None:
                w.close()
    if strings:  # else the caller runs `encode_strings` itself (the build times it as a phase)
        encode_strings(run_dir, out_dir, runs[0].seed if runs else 0, runs[0].mask if runs else 2**64 - 1)
    return n_terms, n_postings


@dataclass
class _Bucket:
    """One merged bucket: its terms (ids from 0), postings, strings, and each entry's term."""

    vocab: np.ndarray
    df: np.ndarray
    docs: np.ndarray
    tf: np.ndarray
    str_off: np.ndarray
    str_bytes: np.ndarray
    term_of_entry: np.ndarray
    entry_runs: np.ndarray
    first_entry: np.ndarray
    entries: int


def _merge_bucket(run_dir: Work, runs: list[RunInfo], lo: np.ndarray, hi: np.ndarray, keep_tf: bool) -> _Bucket:
    """Read one bucket from every run and merge it; raises HashCollision."""
    parts = _read_bucket(run_dir, runs, lo, hi, keep_tf)
    hashes, dfs, str_off, str_bytes, post_off, post_docs, post_tf, entry_runs = parts
    order = radix_argsort_u64(hashes)
    v, df, rep, d, tf, term_of_entry, collision = merge_bucket(
        order, hashes, dfs, str_off, str_bytes, post_off, post_docs, post_tf, keep_tf
    )
    if collision >= 0:
        first = int(rep[int(term_of_entry[collision])])
        raise HashCollision(_entry_string(str_off, str_bytes, first), _entry_string(str_off, str_bytes, collision))
    s_off, s_bytes = gather_spans(str_bytes, str_off, rep)
    return _Bucket(v, df, d, tf, s_off, s_bytes, term_of_entry, entry_runs, lo.copy(), int(hashes.shape[0]))


def _entry_string(str_off: np.ndarray, str_bytes: np.ndarray, e: int) -> str:
    return str_bytes[str_off[e] : str_off[e + 1]].tobytes().decode("utf-8", "replace")


def _read_bucket(run_dir: Work, runs: list[RunInfo], lo: np.ndarray, hi: np.ndarray, keep_tf: bool):
    hashes, dfs, offs, strs, poffs, pdocs, ptfs = [], [], [], [], [], [], []
    entry_runs = np.zeros(len(runs) + 1, dtype=np.int64)
    str_base = 0
    post_base = 0
    for r, run in enumerate(runs):
        a, b = int(lo[r]), int(hi[r])
        entry_runs[r + 1] = entry_runs[r] + (b - a)
        if a == b:
            continue

        def f(name: str, s: int, e: int, index: int = run.index) -> np.ndarray:
            return read_work(run_dir, run_file(run_dir, index, name), RUN_DTYPES[name], s, e)

        hashes.append(f("uniq_hash", a, b))
        dfs.append(f("uniq_df", a, b))
        so = f("str_off", a, b + 1)
        strs.append(f("str_bytes", int(so[0]), int(so[-1])))
        offs.append(so[:-1] - so[0] + str_base)
        str_base += int(so[-1] - so[0])
        po = f("post_off", a, b + 1)
        pdocs.append(f("post_docs", int(po[0]), int(po[-1])))
        if keep_tf:
            ptfs.append(f("post_tf", int(po[0]), int(po[-1])))
        poffs.append(po[:-1] - po[0] + post_base)
        post_base += int(po[-1] - po[0])

    def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    str_off = np.append(cat(offs, np.int64), str_base).astype(np.int64)
    post_off = np.append(cat(poffs, np.int64), post_base).astype(np.int64)
    post_docs = cat(pdocs, np.uint32)
    post_tf = cat(ptfs, np.uint32) if keep_tf else np.zeros(0, dtype=np.uint32)
    return (
        cat(hashes, np.uint64), cat(dfs, np.int64), str_off, cat(strs, np.uint8), post_off, post_docs, post_tf,
        entry_runs,
    )


class PackedAppender:
    """Packs values arriving in pieces (runs, buckets) at `width` bits (`kernels.packed.pack32`) into `write`.

    A piece is packed up to its last whole group of 32 values (32 values fill `width` words, so the
    pieces join without shifting); the rest waits for the next piece; `close` adds it and the spare word.
    Width `PLAIN`: the values are written as they are.
    """

    def __init__(self, write: Callable[[np.ndarray], None], width: int) -> None:
        self.write, self.width = write, width
        self.rest = np.zeros(0, dtype=np.uint32)

    def append(self, values: np.ndarray) -> None:
        if self.width == PLAIN:  # nothing to pack (postings past 2**24 documents)
            self.write(values)
            return
        if self.rest.shape[0]:
            values = np.concatenate([self.rest, values])
        whole = values.shape[0] // 32 * 32
        if whole:
            self.write(pack32(values[:whole], self.width, False))
        self.rest = np.array(values[whole:], dtype=np.uint32)

    def close(self) -> None:
        if self.width != PLAIN:
            self.write(pack32(self.rest, self.width, True))


def write_forward(run_dir: Work, out_dir: Path, runs: list[RunInfo], keep_lengths: bool, n_terms: int,
                  workers: int = 1) -> None:
    """forward_indptr / forward_terms (packed at `forward.width_for(n_terms)` bits; and BM25
    doc_lengths), run by run in document order; runs are read and sorted on `workers` threads (at
    most `workers + 1` in memory), written in order."""

    def forward(run: RunInfo) -> tuple[np.ndarray, np.ndarray]:
        def load(name: str) -> np.ndarray:
            return load_work(run_dir, run_file(run_dir, run.index, name))

        doc_offsets = load("doc_offsets")
        return forward_terms(load("term_map"), load("local"), doc_offsets), doc_offsets

    fwd_ptr = ArrayWriter(out_dir, "forward_indptr", last=sum(r.n_postings for r in runs))
    fwd_terms = ArrayWriter(out_dir, "forward_terms")
    packer = PackedAppender(fwd_terms.append, width_for(n_terms))
    lengths = ArrayWriter(out_dir, "doc_lengths") if keep_lengths else None
    fwd_ptr.append(np.zeros(1, dtype=np.int64))
    base = 0
    pending: deque[tuple[RunInfo, Future[tuple[np.ndarray, np.ndarray]]]] = deque()

    def append(run: RunInfo, terms: np.ndarray, doc_offsets: np.ndarray) -> None:
        nonlocal base
        packer.append(terms)
        fwd_ptr.append(base + doc_offsets[1:])
        base += int(doc_offsets[-1])
        if lengths is not None:
            lengths.append(load_work(run_dir, run_file(run_dir, run.index, "doc_tokens")))

    try:
        with make_pool(workers, "ssr-forward") as pool:
            try:
                for run in runs:
                    pending.append((run, pool.submit(forward, run)))
                    while len(pending) > max(workers, 1):
                        done, future = pending.popleft()
                        append(done, *future.result())
                while pending:
                    done, future = pending.popleft()
                    append(done, *future.result())
                packer.close()
            finally:
                for _, f in pending:
                    f.cancel()
    finally:
        for w in (fwd_ptr, fwd_terms, lengths):
            if w is not None:
                w.close()
