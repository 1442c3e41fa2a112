"""`Searcher`: queries in, ranked external ids out, over a memory-mapped index (DESIGN.md section 4).

The Python side only turns query texts into term ids and weights (in batches: one signal
extraction, one hash pass, one vocabulary search for the whole batch) and external ids back
out; every document-level loop runs in `kernels`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from .kernels import ssr as kernels
from .errors import SsrError
from .format import Index, open_index
from .hashing import hash_mask, hash_spans
from .scoring import check_k, signal_weight
from .stopwords import StopwordList
from .kernels.text import Extractor, pack_values

METHODS = ("ssr", "exhaustive")
# queries per kernel call: bounds the result buffers (k entries, or every candidate, per query)
_BATCH = 1024
_BATCH_ALL = 64
# bytes of per-thread heaps the exhaustive scan may hold for one batch
_EXHAUSTIVE_HEAP_BYTES = 256 << 20


@dataclass
class SearchResult:
    """One query's results in rank order (score desc, matches desc, id asc)."""

    ids: np.ndarray  # external document ids (NumPy str array)
    scores: np.ndarray  # float64
    matches: np.ndarray  # int32, matched signals per document
    docs: np.ndarray  # int64, internal document ids

    def __len__(self) -> int:
        return int(self.docs.shape[0])


@dataclass
class QueryBatch:
    """Query terms as the kernels take them: per query, known terms in ascending weight order."""

    offsets: np.ndarray  # int64[Q + 1]
    terms: np.ndarray  # int64
    weights: np.ndarray  # float64
    df: np.ndarray  # int64, document frequency of each term

    @property
    def postings(self) -> int:
        """Postings the inverted kernel reads for this batch (the sum of the terms' df)."""
        return int(self.df.sum())


class Searcher:
    """Opens an SSR index (memory-mapped) and answers queries with the index's own settings."""

    def __init__(self, index: str | os.PathLike[str] | Index, block: int = kernels.DEFAULT_BLOCK):
        self.index = index if isinstance(index, Index) else open_index(index)
        if self.index.scoring != "ssr":
            raise SsrError(f"{self.index.path}: a {self.index.scoring!r} index; SSR search needs an 'ssr' index")
        settings = self.index.settings
        self.stopwords = StopwordList(settings["stopwords_id"], frozenset(settings["stopwords"]))
        self.cap = int(settings["cap"])
        self.seed = np.uint64(int(settings["hash"]["seed"]))
        self.mask = hash_mask(int(settings["hash"].get("bits", 64)))
        self.block = block
        self._extractor = Extractor(self.stopwords, self.cap)

    @property
    def n_docs(self) -> int:
        return self.index.n_docs

    # ------------------------------------------------------------------ query terms

    def _signal_terms(self, queries: Sequence[str]):
        """Signals of every query, and the term id of each (-1 when not in the vocabulary)."""
        texts = [[q.encode("utf-8", "surrogatepass")] for q in queries]
        batch = self._extractor.extract(*pack_values(texts))
        hashes = hash_spans(batch.data, batch.offsets, self.seed, self.mask)
        vocab = self.index.vocab
        terms = np.full(hashes.shape[0], -1, dtype=np.int64)
        if vocab.shape[0] and hashes.shape[0]:
            pos = np.searchsorted(vocab, hashes)
            inside = np.flatnonzero(pos < vocab.shape[0])
            same_hash = inside[vocab[pos[inside]] == hashes[inside]]
            # a hash hit is a match only when the strings agree (the vocabulary has no collisions,
            # but a query signal outside it may share a hash with a term)
            same = kernels.spans_equal(batch.data, batch.offsets, same_hash, self.index.signal_bytes,
                                       self.index.signal_offsets, pos[same_hash])
            terms[same_hash[same]] = pos[same_hash[same]]
        return batch, terms

    def query_batch(self, queries: Sequence[str]) -> QueryBatch:
        """Term ids and weights of each query, in ascending weight (the canonical summation order)."""
        batch, terms = self._signal_terms(queries)
        query_of = np.repeat(np.arange(len(queries), dtype=np.int64), np.diff(batch.doc_offsets))
        known = terms >= 0
        terms, query_of = terms[known], query_of[known]
        indptr = self.index.postings_indptr
        df = (indptr[terms + 1] - indptr[terms]).astype(np.int64)
        uniq, inverse = np.unique(terms, return_inverse=True)
        udf = np.zeros(len(uniq), dtype=np.int64)
        udf[inverse] = df
        n = self.n_docs
        # weights from the one scoring function, so math.log's rounding is shared by every path
        uw = np.array([signal_weight(n, d) for d in udf.tolist()], dtype=np.float64)
        weights = uw[inverse] if len(uniq) else np.zeros(0, dtype=np.float64)
        order = np.lexsort((weights, query_of))
        offsets = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum(np.bincount(query_of, minlength=len(queries)), out=offsets[1:])
        return QueryBatch(offsets, terms[order], weights[order], df[order])

    # ------------------------------------------------------------------------ search

    def search(self, query: str, k: int | None = 10, method: str = "ssr") -> SearchResult:
        """Top-k documents for one query; `k=None` gives every candidate. Empty when nothing matches."""
        return self.search_batch([query], k, method=method)[0]

    def search_batch(
        self, queries: Sequence[str], k: int | None = 10, threads: int | None = None, method: str = "ssr"
    ) -> list[SearchResult]:
        """Top-k of every query, in parallel over queries (`threads` Numba threads; default: all)."""
        _check(k, method)
        queries = list(queries)
        most = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
        if threads is not None and not 1 <= threads <= most:
            raise SsrError(f"threads must be in 1..{most}, got {threads}")
        before = numba.get_num_threads()
        if threads is not None:
            numba.set_num_threads(threads)
        try:
            results: list[SearchResult] = []
            step = self._batch_size(k, method)
            for start in range(0, len(queries), step):
                qb = self.query_batch(queries[start : start + step])
                results += self._results(*self.run_kernel(qb, k, method))
            return results
        finally:
            numba.set_num_threads(before)

    def _batch_size(self, k: int | None, method: str) -> int:
        if k is None:
            return _BATCH_ALL
        if method == "exhaustive":
            per_query = 20 * k * numba.get_num_threads()  # score + matches + doc per heap entry
            return max(1, min(_BATCH * 4, _EXHAUSTIVE_HEAP_BYTES // per_query))
        return _BATCH

    def run_kernel(self, qb: QueryBatch, k: int | None, method: str = "ssr"):
        """The kernel's flat result for a prepared batch: (offsets, docs, scores, matches)."""
        ix = self.index
        if method == "ssr":
            return kernels.search_batch(ix.postings_indptr, ix.postings_docs, ix.doc_rank, self.n_docs,
                                        qb.offsets, qb.terms, qb.weights, k, block=self.block)
        return kernels.exhaustive_batch(ix.forward_indptr, ix.forward_terms, ix.doc_rank, ix.n_terms,
                                        qb.offsets, qb.terms, qb.weights, k)

    def _results(self, offsets, docs, scores, matches) -> list[SearchResult]:
        ids = self.external_ids(docs)
        out = []
        for q in range(len(offsets) - 1):
            a, b = int(offsets[q]), int(offsets[q + 1])
            out.append(SearchResult(ids[a:b], scores[a:b], matches[a:b], docs[a:b]))
        return out

    # --------------------------------------------------------------------------- ids

    def external_ids(self, docs: np.ndarray) -> np.ndarray:
        """External ids (a NumPy str array) of internal document ids."""
        return self.index.ids_of(docs)

    def internal_id(self, doc_id: str) -> int:
        found = self.index.internal_id(doc_id)
        if found is None:
            raise SsrError(f"{self.index.path}: no document with id {doc_id!r}")
        return found

    # ----------------------------------------------------------------------- explain

    def explain(self, query: str, doc_id: str) -> list[tuple[str, float]]:
        """The signals `query` and document `doc_id` share, with their weights.

        In the canonical order (ascending weight, ties by signal), so adding the weights in list
        order gives the document's score bit for bit. Empty when the document does not match.
        """
        return self.explain_internal(query, self.internal_id(doc_id))

    def explain_internal(self, query: str, d: int) -> list[tuple[str, float]]:
        """`explain` for the internal document id `d` (as in `SearchResult.docs`)."""
        qb = self.query_batch([query])
        a, b = int(self.index.forward_indptr[d]), int(self.index.forward_indptr[d + 1])
        doc_terms = np.asarray(self.index.forward_terms[a:b], dtype=np.int64)
        shared = np.isin(qb.terms, doc_terms)
        terms, weights = qb.terms[shared].tolist(), qb.weights[shared].tolist()
        pairs = [(self.index.signal(t), w) for t, w in zip(terms, weights, strict=True)]
        return sorted(pairs, key=lambda p: (p[1], p[0]))


def _check(k: int | None, method: str) -> None:
    try:
        check_k(k)
    except ValueError as exc:
        raise SsrError(str(exc)) from exc
    if method not in METHODS:
        raise SsrError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
