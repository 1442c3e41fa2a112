"""A `Searcher`'s batches of methods ssr and levels, one kernel call a piece (`kernels.answer`).

Texts in, `SearchResult`s out: each piece of queries is prepared, searched and given its id rows by one
GIL-free call, so a thread holds the GIL only to make its pieces' result objects (`pieces.Helpers` runs
the pieces of a threaded batch on the calling thread and kept helpers).
"""

from __future__ import annotations

import threading
from typing import Any

import numba
import numpy as np

from .errors import IndexFormatError
from .format import Index
from .ids import ucs4_ids
from .kernels import levels, probe
from .kernels.answer import BAD_POSTINGS, BAD_TERMS, WIDER, answer
from .kernels.candidates import cap_k
from .pieces import Helpers, guided
from .query_terms import utf8
from .retrieval import SearchResult, split_results
from .validate import kernel_guard

# rows (k a query) up to which a threaded batch's pieces copy their rows into one flat set of arrays: beyond,
# the fresh pages cost more than they give back (6,980 queries at K=1000 on 2 threads: 0.67-0.74x q/s);
# below, the pieces' own arrays, made in the threads' glibc heaps, stayed resident (+300 MiB RssAnon)
_FLAT_MOST = 1 << 20
# queries per piece a thread takes at a time (`pieces.guided`: big first, small last), and per call on one
# thread: at least _PIECE[0], at most _PIECE[1], and at most _PIECE_ROWS result rows (k a query): a call's
# arrays beyond that are fresh pages from the system, each call (one thread at K=1000 in calls of 1,024
# queries: 18-37K page faults a batch of 6,980, none in calls of 65; benchmarks/RESULTS.md)
_PIECE = (16, 1024)
_PIECE_ROWS = 1 << 16
_ONE = np.zeros(2, dtype=np.int64)  # one query's offsets: `levels.plan`'s sizes for a call on one thread


class TermsCheckFailed(IndexFormatError):
    """`kernels.query.prepare`'s vocabulary or offsets check failed: the owner's long way names the file."""


class Answers:
    """`kernels.answer` for one opened index (a `search.Searcher`'s): its arguments made once, a workspace kept
    per calling thread, the index's id table read once.

    It holds what the kernel reads and nothing of its owner: a reference back to the `Searcher` would make a
    cycle that keeps a dropped searcher's segment holds (and so the segments a writer wants to remove) alive
    until the garbage collector runs.
    """

    def __init__(self, index: Index, csr: tuple[Any, ...], fwd: tuple[Any, ...], prepare_args: tuple[Any, ...],
                 block: int, helpers: Helpers):
        self.index = index
        self._ix = (*csr, np.int64(index.n_docs), *fwd)
        self._prepare_args = prepare_args
        self._block = block
        self._local = threading.local()
        self._table: np.ndarray | None = None  # uint8[N, w], or 0 columns: ids without a fixed width
        self._ascending: bool | None = None
        self._helpers = helpers
        self._sizes: dict[int, tuple[int, int, int]] = {}  # k: a call's (block width, k, buffer entries)

    @property
    def monotone(self) -> bool:
        """Whether id ranks ascend in row order (ids in row order): the kernels' `monotone` (one pass, once)."""
        if self._ascending is None:
            self._ascending = bool(probe.ascending(self._ix[2]))
        return self._ascending

    def _id_table(self) -> np.ndarray:
        """The id table (read on first use)."""
        if self._table is None:
            table = self.index.id_table()
            self._table = np.zeros((0, 0), np.uint8) if table is None else table
        return self._table

    def __call__(self, queries: list[str], k: int, method: str):
        """(offsets, docs, scores, matches, ids) of the queries' top k (k >= 1), on the calling thread."""
        index = self.index
        table = self._id_table()
        data, q_offsets = utf8(queries)
        if k not in self._sizes:
            _, _, width, most, _, entries = levels.plan(index.n_docs, _ONE, k, self._block, 1, levels._BUFFER)
            self._sizes[k] = (width, most, entries)
        width, k, entries = self._sizes[k]
        holder = getattr(self._local, "work", None)
        if holder is None:
            holder = self._local.work = [None]
        longest = 0
        while True:
            work = probe.fit_workspace(holder, 1, width, index.n_docs, longest, entries)
            offsets, docs, scores, matches, rows, status, longest = answer(
                data, q_offsets, self._prepare_args, self._ix, np.int64(k), np.int64(width), work, probe._RULE,
                self.monotone, method == "ssr", table)
            if status != WIDER:
                break
        if status == BAD_TERMS:
            raise TermsCheckFailed(f"{index.path}: a vocabulary or term offsets check failed (corrupt index; rebuild "
                                   "it)")
        if status == BAD_POSTINGS:
            with kernel_guard(index):
                levels.corrupt(work)
        ids = ucs4_ids(rows) if table.shape[1] else index.ids_of(docs)
        return offsets, docs, scores, matches, ids

    def batch(self, queries: list[str], k: int, method: str, threads: int | None) -> list[SearchResult]:
        """Every query's top k (k >= 1) on `threads` threads (None: Numba's current count); one query or one
        thread runs on the calling thread (no thread to wake)."""
        n = numba.get_num_threads() if threads is None else threads
        pieces = max(1, min(n, -(-len(queries) // _PIECE[0])))
        if pieces > 1:
            return self.threaded(queries, k, method, pieces)
        step = self._piece_most(k)  # calls of at most _PIECE_ROWS rows: their scratch comes back warm from the heap
        return [r for a in range(0, len(queries), step) for r in self.serial(queries[a : a + step], k, method)]

    def _piece_most(self, k: int) -> int:
        """Queries in one call at most: _PIECE[1], and _PIECE_ROWS rows (k a query) but never under _PIECE[0]."""
        return max(_PIECE[0], min(_PIECE[1], _PIECE_ROWS // cap_k(k, self.index.n_docs)))

    def serial(self, queries: list[str], k: int, method: str) -> list[SearchResult]:
        """The queries' results on the calling thread alone."""
        offsets, docs, scores, matches, ids = self(queries, k, method)
        return split_results(offsets, ids, docs, scores, matches)

    def threaded(self, queries: list[str], k: int, method: str, threads: int) -> list[SearchResult]:
        """A batch on `threads` threads taking pieces of queries one at a time. Below _FLAT_MOST rows each
        piece copies its rows into its region (k rows a query) of one flat set of arrays for the batch: the
        results are views of four arrays that go back to the system whole when dropped. Results in query
        order."""
        most = cap_k(k, self.index.n_docs)
        spans = guided(len(queries), threads, _PIECE[0], self._piece_most(k))
        if len(queries) * most > _FLAT_MOST:
            parts = self._helpers.map(lambda ab: self.serial(queries[ab[0] : ab[1]], k, method), spans, threads)
            return [r for part in parts for r in part]
        total = len(queries) * most
        docs, scores, matches = (np.empty(total, dtype=t) for t in (np.int64, np.float64, np.int32))
        table = self._id_table()
        ids = np.empty(total, dtype=f"<U{table.shape[1]}" if table.shape[1] else self.index.ids_of(
            np.zeros(min(1, self.index.n_docs), dtype=np.int64)).dtype)

        def piece(ab: tuple[int, int]) -> list[SearchResult]:
            a = ab[0]
            offsets, d, s, m, got = self(queries[a : ab[1]], k, method)
            b = a * most
            e = b + d.shape[0]
            docs[b:e], scores[b:e], matches[b:e] = d, s, m
            if got.dtype.itemsize > ids.dtype.itemsize:  # ids wider than the first (ids without a fixed width)
                return split_results(offsets, got, d, s, m)
            ids[b:e] = got
            return split_results(offsets + b, ids, docs, scores, matches)

        parts = self._helpers.map(piece, spans, threads)
        return [r for part in parts for r in part]
