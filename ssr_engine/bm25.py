"""BM25 over a `scoring="bm25"` index: Lucene's formula (DESIGN.md section 5), bm25s-exact.

    idf(t)    = ln(1 + (N - df + 0.5) / (df + 0.5))
    score(q,d)= sum over query tokens t of idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))

Lucene 8+ dropped the (k1 + 1) numerator factor; bm25s's method "lucene" leaves it out too,
and so does this scorer. A token repeated in the query counts once per occurrence (as in
bm25s given the token list, and in Anserini's bag-of-words queries): the term's weight is
idf times its query frequency. avgdl is the mean of doc_lengths over all N documents
(empty documents included). Query tokens are `stemming.bm25_tokens` with the index's own
stopwords and stemming. Order: the one order of every method (DESIGN.md section 2): score
desc, distinct matched query terms desc, doc_rank asc (the collection's id order).
"""

from __future__ import annotations

import math
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .collector import freeze_once
from .errors import ArgumentError, SsrError
from .format import Index, open_index
from .kernels import bm25 as bm25_kernels
from .kernels.candidates import union_sizes
from .kernels.packed import gather
from .retrieval import (
    BM25_B,
    BM25_K1,
    SearchResult,
    StoredText,
    check_k,
    internal_doc,
    numba_threads,
    split_results,
)
from .stemming import bm25_tokens
from .validate import kernel_guard


def lucene_idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def canonical_order(terms: list[tuple[str, int, float]]) -> list[tuple[str, int, float]]:
    """A query's (token, term id, weight) in the order the kernel adds their shares: ascending weight
    (idf * query frequency), ties by token. Term ids follow the hash seed, which differs between an
    index and a live segment reseeded after a collision; this order does not, so every path adds a
    document's shares alike and equal token sets give identical score bits."""
    return sorted(terms, key=lambda e: (e[2], e[0]))


class BM25Searcher(StoredText):
    """BM25 search over a BM25 index, a directory or an opened `Index` (memory-mapped arrays are
    read, never copied).

    A `retrieval.Retriever` with method "bm25".
    """

    method = "bm25"

    def __init__(self, index: Index | str | os.PathLike[str], k1: float = BM25_K1, b: float = BM25_B):
        index = index if isinstance(index, Index) else open_index(index)
        if index.scoring != "bm25" or index.postings_tf is None or index.doc_lengths is None:
            raise SsrError(
                f"{index.path}: built with scoring={index.scoring!r}, without term frequencies; "
                "BM25 needs an index built with --scoring bm25"
            )
        if not (k1 >= 0.0 and 0.0 <= b <= 1.0):
            raise ArgumentError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1} b={b}")
        self.index = index
        self.k1 = float(k1)
        self.b = float(b)
        settings = index.settings
        self.stopwords = frozenset(settings.stopwords)
        self.stem = settings.stem
        self.seed = settings.hash.seed
        self.bits = settings.hash.bits
        # avgdl and df are read when first needed: a live index's segments are searched with the
        # collection's avgdl, and a query needs the df of its own terms only (not an O(V) array)
        self._avgdl: float | None = None
        self._term_cache: dict[str, int] = {}
        # per-thread accumulators kept across calls (allocated on first use), and the lock that
        # keeps two Python threads from sharing them
        self._workspace: tuple[np.ndarray, np.ndarray] | None = None
        self._lock = threading.Lock()
        freeze_once()  # what lives as long as the index leaves the collector's full passes (`collector`)

    @property
    def n_docs(self) -> int:
        return self.index.n_docs

    @property
    def avgdl(self) -> float:
        if self._avgdl is None:
            assert self.index.doc_lengths is not None
            total = int(np.asarray(self.index.doc_lengths).sum(dtype=np.int64))
            # an index of empty documents has no postings: any positive avgdl gives the same (no) results
            self._avgdl = total / self.n_docs if total else 1.0
        return self._avgdl

    def _df(self, t: int) -> int:
        """df of term id t (a looked-up term: its offsets are checked)."""
        a, b = self.index.span(t)
        return b - a

    @property
    def settings(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "avgdl": self.avgdl, "stem": self.stem}

    def term_id(self, token: str) -> int:
        """Term id of a token, or -1 when the vocabulary lacks it (a hash hit must also match the string)."""
        tid = self._term_cache.get(token)
        if tid is None:
            # signal() (inside term_of) checks the term's offsets (the postings' too) before the kernels read them
            tid = self.index.term_of(token)
            self._term_cache[token] = tid
        return tid

    def query_terms(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(term ids, weights = idf * query frequency) of the query's known terms in `canonical_order`."""
        counts = Counter(bm25_tokens(query, self.stopwords, self.stem))
        known = [(token, self.term_id(token), n) for token, n in counts.items()]
        ordered = canonical_order([(token, t, n * lucene_idf(self.n_docs, self._df(t))) for token, t, n in known
                                   if t >= 0])
        return (np.array([t for _, t, _ in ordered], dtype=np.int64),
                np.array([w for _, _, w in ordered], dtype=np.float64))

    def _flat_terms(self, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets int64[Q + 1], terms int64, weights float64) of a batch, query after query."""
        parts = [self.query_terms(q) for q in queries]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(t) for t, _ in parts], out=offsets[1:])
        terms = np.concatenate([t for t, _ in parts]) if parts else np.zeros(0, dtype=np.int64)
        weights = np.concatenate([w for _, w in parts]) if parts else np.zeros(0, dtype=np.float64)
        return offsets, terms, weights

    def run_kernel(self, queries: Sequence[str], k: int | None = 10, threads: int | None = None):
        """The kernel's flat result: (offsets int64[Q + 1], docs, scores, matches, pool int64[Q])."""
        check_k(k)
        q_offsets, q_terms, q_weights = self._flat_terms(queries)
        return self.run_terms(q_offsets, q_terms, q_weights, k, threads)

    def run_terms(self, q_offsets: np.ndarray, q_terms: np.ndarray, q_weights: np.ndarray, k: int | None,
                  threads: int | None = None, avgdl: float | None = None, doc_rank: np.ndarray | None = None):
        """The kernel over prepared query terms (per query: term ids, weights = idf * query frequency).

        `avgdl` and `doc_rank` default to the index's own; a part of a larger collection (a live
        index's segment) passes the collection's avgdl and its id order.
        """
        idx = self.index
        nq = len(q_offsets) - 1
        with self._lock, numba_threads(threads, nq) as n_threads, kernel_guard(idx):
            chunks = max(1, min(n_threads, nq))
            if self._workspace is None or self._workspace[0].shape[0] < chunks:
                self._workspace = bm25_kernels.bm25_workspace(chunks, self.n_docs)
            return bm25_kernels.bm25_batch(
                q_offsets, q_terms, q_weights, idx.lists, idx.postings, idx.postings_tf,
                idx.doc_lengths, self.avgdl if avgdl is None else avgdl, self.k1, self.b,
                idx.doc_rank if doc_rank is None else doc_rank, 0 if k is None else k,
                n_chunks=chunks, workspace=self._workspace,
            )

    def search_batch(
        self, queries: Sequence[str], k: int | None = 10, threads: int | None = None
    ) -> list[SearchResult]:
        """Top-k of every query (k=None: every candidate); matches = distinct query terms found."""
        offsets, docs, scores, matches, _pool = self.run_kernel(queries, k, threads)
        return split_results(offsets, self.index.ids_of(docs), docs, scores, matches)

    def search(self, query: str, k: int | None = 10) -> SearchResult:
        return self.search_batch([query], k)[0]

    def pool_sizes(self, queries: Sequence[str], threads: int | None = None) -> np.ndarray:
        """int64[Q]: documents holding at least one query term, before the top-k cut."""
        offsets, terms, _ = self._flat_terms(queries)
        ix = self.index
        with numba_threads(threads), kernel_guard(ix):
            return union_sizes(offsets, terms, ix.lists, ix.postings, ix.n_docs)

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        """The query tokens document `doc` (external or internal id) contains, each with its share of the score.

        A share is idf * query frequency * tf / (tf + k1 (1 - b + b dl / avgdl)); ascending share,
        ties by token (the order of every method's explain). The shares add up to the score up to
        rounding: the kernel adds them in `canonical_order`. Empty when the document does not match.
        """
        d = internal_doc(doc, self.index.internal_id, self.index.path)
        return self.shares(query, d, self.n_docs, self.avgdl, lambda token, t: self._df(t))

    def shares(self, query: str, d: int, n_docs: int, avgdl: float,
               df_of: Callable[[str, int], int]) -> list[tuple[str, float]]:
        """`explain` of internal document d under given collection statistics (also the live/sharded path's).

        `df_of(token, t)` gives the document frequency of a query token whose term id here is t.
        """
        ix = self.index
        assert ix.postings_tf is not None and ix.doc_lengths is not None  # checked in __init__
        norm = self.k1 * ((1.0 - self.b) + self.b * float(ix.doc_lengths[d]) / avgdl)
        shares = []
        for token, n in Counter(bm25_tokens(query, self.stopwords, self.stem)).items():
            t = self.term_id(token)
            if t < 0:
                continue
            a, z = ix.span(t)
            p = a + int(np.searchsorted(gather(ix.postings, [a], [z - a]), d))
            if p < z and int(gather(ix.postings, [p], [1])[0]) == d:
                tf = float(ix.postings_tf[p])
                shares.append((token, n * lucene_idf(n_docs, df_of(token, t)) * (tf / (norm + tf))))
        return sorted(shares, key=lambda p: (p[1], p[0]))
