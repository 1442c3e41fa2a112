"""A `Searcher`'s batches of methods ssr and levels, GIL-free kernel calls (`kernels.answer`).

Texts in, `SearchResult`s out: each piece of queries is prepared, searched and given its id rows by one
GIL-free call. A threaded batch runs on the calling thread and kept helpers (`pieces.Helpers`); up to
_FLAT_MOST rows each helper answers all its pieces in one GIL-free call (`kernels.answer_pieces`) and only
the calling thread holds the GIL, to make the result objects.
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
from .kernels.answer import BAD_POSTINGS, BAD_TERMS, WIDER, Held, answer_held, answer_pieces, stop_taking
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
        self._ints: dict[int, np.int64] = {}  # `_int64`

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
        table = self._id_table()
        data, q_offsets = utf8(queries)
        width, k, entries = self._sized(k)
        longest = 0
        while True:
            work, held = self._held(width, longest, entries, table)
            offsets, docs, scores, matches, rows, status, longest = answer_held(
                data, q_offsets, held, self._int64(k), self._int64(width), self.monotone, method == "ssr")
            if status != WIDER:
                break
        self._check(status, work)
        return offsets, docs, scores, matches, self._ids(rows, docs)

    def _ids(self, rows: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """The external ids of `answer`'s id rows (UCS-4), or of its docs when the index has no id table."""
        return ucs4_ids(rows) if rows.shape[1] else self.index.ids_of(docs)

    def _held(self, width: int, longest: int, entries: int, table: np.ndarray) -> tuple[tuple[Any, ...], Held]:
        """The calling thread's workspace fitted to a call of these sizes (`_work`) and its `kernels.answer.Held`
        (made again with the workspace). The last call's pair is reused as it is while it serves (same block
        and buffer, enough cursor rows, still the thread's workspace): checking costs less than refitting."""
        held = getattr(self._local, "held", None)
        holder = getattr(self._local, "work", None)
        if (held is None or holder is None or held[0] is not holder[0] or held[2] != (width, entries)
                or longest > held[3]):
            work = self._work(width, longest, entries)
            held = self._local.held = (work, Held(self._prepare_args, self._ix, work, probe._RULE, table),
                                       (width, entries), work[2].shape[1])
        return held[0], held[1]

    def _int64(self, n: int) -> np.int64:
        """n as a NumPy int64 (a call's k and width: made once each)."""
        got = self._ints.get(n)
        if got is None:
            got = self._ints[n] = np.int64(n)
        return got

    def _sized(self, k: int) -> tuple[int, int, int]:
        """A call's (block width, k as the kernels take it, buffer entries) for this k (made once a k)."""
        if k not in self._sizes:
            _, _, width, most, _, entries = levels.plan(self.index.n_docs, _ONE, k, self._block, 1, levels._BUFFER)
            self._sizes[k] = (width, most, entries)
        return self._sizes[k]

    def _work(self, width: int, longest: int, entries: int) -> tuple[Any, ...]:
        """The calling thread's workspace, fitted to a call of these sizes (`probe.fit_workspace`)."""
        holder = getattr(self._local, "work", None)
        if holder is None:
            holder = self._local.work = [None]
        return probe.fit_workspace(holder, 1, width, self.index.n_docs, longest, entries)

    def _check(self, status: int, work: tuple[Any, ...]) -> None:
        """Raise the error a kernel's failed status names (`kernels.answer`); nothing for OK."""
        if status == BAD_TERMS:
            raise TermsCheckFailed(f"{self.index.path}: a vocabulary or term offsets check failed (corrupt index; "
                                   "rebuild it)")
        if status == BAD_POSTINGS:
            with kernel_guard(self.index):
                levels.corrupt(work)

    def batch(self, queries: list[str], k: int, method: str, threads: int | None) -> list[SearchResult]:
        """Every query's top k (k >= 1) on `threads` threads (None: Numba's current count); one query or one
        thread runs on the calling thread (no thread to wake)."""
        pieces = max(1, -(-len(queries) // _PIECE[0]))
        if pieces > 1:  # (Numba's thread count costs ~1 µs: not asked for one query)
            pieces = min(numba.get_num_threads() if threads is None else threads, pieces)
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
        """A batch on `threads` threads taking pieces of queries one at a time. Results in query order.

        Every thread runs one GIL-free call (`kernels.answer_pieces`) that takes pieces, and only the calling
        thread holds the GIL: so no thread waits for it while a thread preempted by another process holds it
        (benchmarks/RESULTS.md). Up to _FLAT_MOST rows (k a query) the pieces write their rows into the batch's
        flat arrays (the results are views of them, which go back to the system whole when dropped) and the
        caller makes the results of the pieces written so far (in order) after each of its own; beyond, each
        piece keeps its own arrays (fresh pages for a flat set cost more) and the caller makes its own pieces'
        results as it goes. The rest are made at the end.
        """
        width, most, entries = self._sized(k)
        spans = guided(len(queries), threads, _PIECE[0], self._piece_most(k))
        flat = len(queries) * most <= _FLAT_MOST
        total = len(queries) * most if flat else 0
        table = self._id_table()
        ends, docs = np.empty(len(queries) if flat else 0, np.int64), np.empty(total, np.int64)
        scores, matches = np.empty(total, np.float64), np.empty(total, np.int32)
        rows = np.empty((total if table.shape[1] else 0, table.shape[1]), np.uint32)
        ids = ucs4_ids(rows) if table.shape[1] else None
        data, q_offsets = utf8(queries)
        cut = np.array(spans, dtype=np.int64)
        shared = np.zeros(len(spans) + 2, dtype=np.int64)  # `answer_pieces`: next piece, written flags, split up to
        fixed = (self._prepare_args, self._ix, np.int64(most), np.int64(width))
        after = (probe._RULE, self.monotone, method == "ssr", table, flat, ends, docs, scores, matches, rows)
        kept: dict[int, tuple[np.ndarray, ...]] = {}  # not flat: a piece's own arrays
        out: dict[int, list[SearchResult]] = {}

        def results(p: int) -> list[SearchResult]:
            if not flat:
                offsets, d, s, m, got = kept.pop(p)
                return split_results(offsets, self._ids(got, d), d, s, m)
            a, b = spans[p]
            bounds = np.empty(b - a + 1, dtype=np.int64)
            bounds[0] = a * most
            bounds[1:] = ends[a:b]
            if ids is not None:
                return split_results(bounds, ids, docs, scores, matches)
            r0, r1 = bounds[0], bounds[-1]  # ids without a fixed width: the piece's own
            return split_results(bounds - r0, self.index.ids_of(docs[r0:r1]), docs[r0:r1], scores[r0:r1],
                                 matches[r0:r1])

        def run(thread: int) -> None:
            try:
                taking(thread)
            except BaseException:
                stop_taking(shared)  # the other threads stop after their current piece
                raise

        def taking(thread: int) -> None:
            first, longest, written = -1, 0, 0
            while True:
                work = self._work(width, longest, entries)
                status, p, longest, written, own = answer_pieces(data, q_offsets, cut, shared, first, thread == 0,
                                                                 *fixed, work, *after)
                kept.update((x[0], x[1:]) for x in own)
                first = p if status == WIDER else -1
                self._check(status, work)
                if p < 0:
                    return
                if thread == 0:  # only this thread holds the GIL: its piece, and those written so far (in order)
                    for q in (p, *range(shared[-1], written)):
                        if q not in out:
                            out[q] = results(q)
                    shared[-1] = written

        self._helpers.each(run, threads)
        return [r for p in range(len(spans)) for r in (out[p] if p in out else results(p))]
