"""`Searcher`: queries in, ranked external ids out, over a memory-mapped index (DESIGN.md section 4).

Query texts become term ids and weights in one kernel call (`kernels.query.prepare`), results become
external ids in another (`format.Index.ids_of`); every document-level loop runs in `kernels`."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from .answer import Answers, TermsCheckFailed
from .collector import freeze_once
from .errors import IndexFormatError, SsrError
from .extract import Extractor
from .format import Index, verify_index, verify_opened
from .hashing import hash_mask, hash_spans
from .kernels import levels, probe, prune
from .kernels import ssr as kernels
from .kernels.candidates import union_sizes
from .kernels.query import prepare
from .kernels.terms import lookup
from .pieces import Helpers
from .query_terms import QueryBatch, lookup_args, signal_args, utf8
from .retrieval import METHODS as RETRIEVAL_METHODS
from .retrieval import (
    SearchResult,
    StoredText,
    check_k,
    check_method,
    check_threads,
    internal_doc,
    max_threads,
    numba_threads,
    split_results,
)
from .stopwords import StopwordList
from .validate import (
    VOCAB_BLOCK_SHIFT,
    check_terms,
    checked_blocks,
    kernel_guard,
    term_candidates,
)

METHODS = tuple(m for m in RETRIEVAL_METHODS if m != "bm25")
"""The methods a `Searcher` runs (the `retrieval.METHODS` that read an ssr index): ssr reads the
heaviest lists and probes their best candidates' forward rows where a query's cost rule says that
pays, else what levels reads (`kernels.probe`, the fastest measured); levels reads every posting of
the query's terms as term masks ranked by levels (`kernels.levels`); union reads them into float
accumulators and a heap (`kernels.ssr`, the check); maxscore prunes exactly (MaxScore in document
order, `kernels.prune`); exhaustive scans the forward index. All give identical results, bit for bit."""
_BATCH_ALL = 64
# queries per kernel call of the other methods (`run_kernel`): bounds the result buffers (k entries a query)
BATCH = 1024
# methods answered one kernel call a piece (`answer`), their batches on Python threads
_THREADED = ("ssr", "levels")
# bytes of per-thread heaps the exhaustive scan may hold for one batch
_EXHAUSTIVE_HEAP_BYTES = 256 << 20


class Searcher(StoredText):
    """Opens an SSR index (memory-mapped) and answers queries with the index's own settings.

    A `retrieval.Retriever`: `method` "ssr", "levels", "union" or "maxscore" (the inverted index) or
    "exhaustive" (a scan of the forward CSR, the independent check); all give the same results bit
    for bit.
    """

    def __init__(self, index: str | os.PathLike[str] | Index, block: int = kernels.DEFAULT_BLOCK,
                 method: str = "ssr", verify: bool = False, refresh: bool = False):
        check_method(method, METHODS)
        self.method = method
        self.block = block
        # an index directory is read at one commit until reopen() (refresh=True: before every search);
        # a live one (several segments, or deletions) is answered through live.LiveSearcher
        self.refresh = refresh
        self._source: str | os.PathLike[str] | None = None if isinstance(index, Index) else index
        self._live: Any = None  # live.LiveSearcher for an index of several segments or with deletions
        self._snapshot: Any = None  # live.Snapshot: the commit this searcher reads
        if isinstance(index, Index):
            if verify:
                verify_opened(index)
            self._open(index)
        else:
            if verify:
                problems = verify_index(index)
                if problems:
                    raise IndexFormatError("; ".join(problems[:5]) + (
                        f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
            self._open_source()
        freeze_once()  # what lives as long as the index leaves the collector's full passes (`collector`)

    def _open_source(self, reuse=None) -> None:
        from .live import LiveSearcher, open_snapshot

        assert self._source is not None
        snap = open_snapshot(self._source, reuse=reuse)
        self._snapshot = snap
        self.generation: int | None = snap.generation
        if snap.plain:
            self._live = None
            snap.indexes[0]._holds = snap.holds  # Index.close() releases the segment, as after open_index
            self._open(snap.indexes[0])
        else:
            self._live = LiveSearcher(self._source, method=self.method, snapshot=snap)
            self.index = snap.indexes[0]

    def _open(self, index: Index) -> None:
        self.index = index
        if self.index.scoring != "ssr":
            raise SsrError(f"{self.index.path}: a {self.index.scoring!r} index; method {self.method!r} needs an "
                           "index built with --scoring ssr")
        settings = self.index.settings
        if settings.cap is None:
            raise SsrError(f"{self.index.path}: an SSR index without a signal cap (corrupt manifest)")
        self.stopwords = StopwordList(settings.stopwords_id, frozenset(settings.stopwords))
        self.cap = settings.cap
        self.seed = np.uint64(settings.hash.seed)
        self.mask = hash_mask(settings.hash.bits)
        # the pruning kernel's per-thread accumulators, kept across calls (one call at a time)
        self._work: tuple[np.ndarray, ...] | None = None
        self._work_lock = threading.Lock()
        self._extractor = Extractor(self.stopwords, self.cap)
        # kernels.query.prepare's arguments after the queries
        self._prepare_args = signal_args(self._extractor, index) + lookup_args(index)
        # the levels kernel's scratch, one per calling Python thread (kept: allocating it per call showed)
        self._local = threading.local()
        self._helpers = Helpers(max_threads() - 1, "ssr-search")  # threaded batches' helper threads
        # the arrays the kernels read, as plain ndarrays: a np.memmap costs every NumPy operation and
        # every kernel call extra work (subclass wrapping; Numba's slow type path): ~0.5 µs an argument
        self._csr = (index.lists, index.postings, index.doc_rank.view(np.ndarray))
        self._fwd = (index.forward_indptr.view(np.ndarray), index.forward)  # probe's forward rows, as plain arrays
        self._answers = Answers(index, self._csr, self._fwd, self._prepare_args, self.block, self._helpers)

    def reopen(self) -> bool:
        """Move to the index's newest commit (after `ssr add`, `delete`, `compact` or a rebuild).

        Returns True when the commit changed. Segments in both commits stay mapped, not reopened.
        A Searcher made from an `Index` object has nothing to reopen (False).
        """
        if self._source is None:
            return False
        from .live import current_generation

        if current_generation(self._source) == self.generation:
            return False
        old = self._snapshot
        self._open_source(reuse=old)
        if old is not None:
            old.close()
        return True

    def _maybe_refresh(self) -> None:
        if self.refresh:
            self.reopen()

    @property
    def n_docs(self) -> int:
        if self._live is not None:
            return self._live.n_docs
        return self.index.n_docs

    @property
    def monotone(self) -> bool:
        """Whether id ranks ascend in row order (ids in row order): the kernels' `monotone` (one pass, once)."""
        return self._answers.monotone

    @property
    def settings(self) -> dict[str, Any]:
        return {"weight": "ln((N + 1) / (df + 1)) + 1", "order": "score desc, matches desc, id asc"}

    # ------------------------------------------------------------------ query terms

    def query_batch(self, queries: Sequence[str]) -> QueryBatch:
        """Term ids and weights of each query, in ascending weight (the canonical summation order).

        One GIL-free kernel call (`kernels.query.prepare`) from the queries' bytes to the kernels' input.
        """
        data, q_offsets = utf8(queries)
        offsets, terms, weights, df, ok = prepare(data, q_offsets, *self._prepare_args)
        if not ok:  # a vocabulary or offsets check failed: the long way names the file at fault
            batch = self._extractor.extract(data, q_offsets[:-1], q_offsets[1:],
                                            np.arange(len(q_offsets), dtype=np.int64))
            lookup_terms(self.index, batch.data, batch.offsets, hash_spans(batch.data, batch.offsets, self.seed,
                                                                           self.mask))
            raise IndexFormatError(f"{self.index.path}: a vocabulary or term offsets check failed (corrupt index; "
                                   "rebuild it)")
        return QueryBatch(offsets, terms, weights, df)

    # ------------------------------------------------------------------------ search

    def search(self, query: str, k: int | None = 10, method: str | None = None) -> SearchResult:
        """Top-k documents for one query; `k=None` gives every candidate. Empty when nothing matches."""
        return self.search_batch([query], k, method=method)[0]

    def search_batch(
        self, queries: Sequence[str], k: int | None = 10, threads: int | None = None, method: str | None = None
    ) -> list[SearchResult]:
        """Top-k of every query, in parallel (`threads` Numba threads; see `retrieval.numba_threads`).

        `method` overrides the searcher's own for this call.
        """
        method = self.method if method is None else method
        check_k(k)
        check_method(method, METHODS)
        self._maybe_refresh()
        if self._live is not None:
            return self._live.search_batch(queries, k, threads, method=method)
        queries = list(queries)
        if method in _THREADED and k is not None:  # one kernel call a piece (`answer`)
            check_threads(threads)
            try:
                return self._answers.batch(queries, k, method, threads)
            except TermsCheckFailed:
                self.query_batch(queries)  # the long way names the file at fault
                raise
        # the inverted kernel is parallel over queries, the scan over documents
        with numba_threads(threads, len(queries) if method != "exhaustive" else None):
            results: list[SearchResult] = []
            step = self._batch_size(k, method)
            for start in range(0, len(queries), step):
                qb = self.query_batch(queries[start : start + step])
                offsets, docs, scores, matches = self.run_kernel(qb, k, method)
                results += split_results(offsets, self.external_ids(docs), docs, scores, matches)
            return results

    def pool_sizes(self, queries: Sequence[str], threads: int | None = None) -> np.ndarray:
        """int64[Q]: documents sharing a signal with each query (score > 0), before the top-k cut."""
        self._maybe_refresh()
        if self._live is not None:
            return self._live.pool_sizes(queries, threads)
        qb = self.query_batch(list(queries))
        with numba_threads(threads), kernel_guard(self.index):
            ix = self.index
            return union_sizes(qb.offsets, qb.terms, ix.lists, ix.postings, ix.n_docs)

    def _batch_size(self, k: int | None, method: str) -> int:
        if k is None:
            return _BATCH_ALL
        if method == "exhaustive":
            per_query = 20 * k * numba.get_num_threads()  # score + matches + doc per heap entry
            return max(1, min(BATCH * 4, _EXHAUSTIVE_HEAP_BYTES // per_query))
        return BATCH

    def run_kernel(self, qb: QueryBatch, k: int | None, method: str | None = None, threads: int | None = None):
        """The kernel's flat result for a prepared batch: (offsets, docs, scores, matches).

        `threads`: None, Numba's current count (see `retrieval.numba_threads`).
        """
        ix = self.index
        method = self.method if method is None else method
        with kernel_guard(ix):
            if method in ("ssr", "levels"):
                work = getattr(self._local, method, None)  # each kernel's scratch, kept per calling thread
                if work is None:
                    work = [None]
                    setattr(self._local, method, work)
                indptr, docs, doc_rank = self._csr
            if method == "ssr":
                return probe.search_batch(indptr, docs, doc_rank, self.n_docs, *self._fwd,
                                          qb.offsets, qb.terms, qb.weights, k, block=self.block, n_chunks=threads,
                                          work=work, monotone=self.monotone)
            if method == "levels":
                return levels.search_batch(indptr, docs, doc_rank, self.n_docs, qb.offsets, qb.terms, qb.weights, k,
                                           block=self.block, n_chunks=threads, work=work, monotone=self.monotone)
            if method == "union":
                return kernels.search_batch(ix.lists, ix.postings, ix.doc_rank, self.n_docs,
                                            qb.offsets, qb.terms, qb.weights, k, block=self.block)
            if method == "maxscore":
                width = min(max(1, self.block), max(self.n_docs, 1))
                with self._work_lock:
                    if self._work is None or self._work[0].shape[1] != width:
                        self._work = prune.workspace(width)
                    return prune.search_batch(ix.lists, ix.postings, ix.doc_rank, self.n_docs,
                                              qb.offsets, qb.terms, qb.weights, k, block=self.block,
                                              work=self._work)
            return kernels.exhaustive_batch(ix.forward_indptr, ix.forward, ix.doc_rank, ix.n_terms,
                                            qb.offsets, qb.terms, qb.weights, k)

    # --------------------------------------------------------------------------- ids

    def external_ids(self, docs: np.ndarray) -> np.ndarray:
        """External ids (a NumPy str array) of internal document ids."""
        return self.index.ids_of(docs)

    # ----------------------------------------------------------------------- explain

    def doc(self, doc: str | int) -> str:
        """The stored text (`--store-text`) of `doc` (external id, or internal id as in `SearchResult.docs`)."""
        if self._live is not None:
            return self._live.doc(doc)
        return super().doc(doc)

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        """The signals `query` and document `doc` (external id, or internal id as in `SearchResult.docs`) share.

        With their weights, in the canonical order (ascending weight, ties by signal), so adding
        the weights in list order gives the document's score bit for bit. Empty when the
        document does not match.
        """
        if self._live is not None:
            return self._live.explain(query, doc)
        d = internal_doc(doc, self.index.internal_id, self.index.path)
        qb = self.query_batch([query])
        shared = np.isin(qb.terms, self.index.forward_row(d))
        terms, weights = qb.terms[shared].tolist(), qb.weights[shared].tolist()
        pairs = [(self.index.signal(t), w) for t, w in zip(terms, weights, strict=True)]
        return sorted(pairs, key=lambda p: (p[1], p[0]))


def lookup_terms(index: Index, data: np.ndarray, offsets: np.ndarray, hashes: np.ndarray, with_df: bool = False):
    """Term id in `index` of each signal (bytes data[offsets[i]:offsets[i + 1]], hash hashes[i]).

    -1 when the vocabulary lacks it. A key hit is a match only when the strings agree (keys of
    32 bits repeat, and a query signal outside the vocabulary may share a hash with a term).
    Returns int64[len(hashes)] (with_df: and each term's df, int64, 0 for unknown signals). One
    kernel call (`kernels.terms.lookup`); if its checks fail, the validate functions name the defect.
    """
    terms, df, ok = lookup(index.keys_of(hashes), data, offsets, index.vocab.view(np.ndarray),
                           checked_blocks(index), VOCAB_BLOCK_SHIFT, index.vocab.dtype == np.uint64,
                           index.signal_bytes.view(np.ndarray),
                           index.signal_offsets.view(np.ndarray), index.signal_codes.view(np.ndarray),
                           index.string_bits, index.lists,
                           index.postings_length, index.n_docs)
    if not ok:
        _lookup_checked(index, data, offsets, hashes)  # raises IndexFormatError naming the file
        raise IndexFormatError(f"{index.path}: a vocabulary or term offsets check failed (corrupt index; rebuild it)")
    return (terms, df) if with_df else terms


def _lookup_checked(index: Index, data: np.ndarray, offsets: np.ndarray, hashes: np.ndarray) -> None:
    """The look-up step by step through `validate`, whose checks name the file and entry at fault."""
    check_terms(index, term_candidates(index, index.keys_of(hashes)))
