"""BM25 over a `scoring="bm25"` index: Lucene's formula (DESIGN.md section 5), bm25s-exact.

    idf(t)    = ln(1 + (N - df + 0.5) / (df + 0.5))
    score(q,d)= sum over query tokens t of idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))

Lucene 8+ dropped the (k1 + 1) numerator factor; bm25s's method "lucene" leaves it out too,
and so does this scorer. A token repeated in the query counts once per occurrence (as in
bm25s given the token list, and in Anserini's bag-of-words queries): the term's weight is
idf times its query frequency. avgdl is the mean of doc_lengths over all N documents
(empty documents included). Query tokens are `stemming.bm25_tokens` with the index's own
stopwords and stemming. Ties: doc_rank ascending (the collection's id order).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np

from .kernels import bm25 as bm25_kernels
from .errors import SsrError
from .hashing import signal_hash
from .scoring import check_k
from .search import SearchResult
from .stemming import bm25_tokens

if TYPE_CHECKING:
    from .format import Index

DEFAULT_K1 = 0.9
DEFAULT_B = 0.4


def lucene_idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


@dataclass
class BM25Batch:
    """Flat results of a batch: query q owns rows offsets[q]:offsets[q + 1], best first."""

    offsets: np.ndarray  # int64[Q + 1]
    docs: np.ndarray  # int64 internal doc ids
    scores: np.ndarray  # float64
    matches: np.ndarray  # int32 distinct query terms the document contains
    pool: np.ndarray  # int64[Q] candidates (documents with a query term) before the top-k cut


class BM25Searcher:
    """BM25 search over an opened BM25 index (memory-mapped arrays are read, never copied)."""

    def __init__(self, index: Index, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        if index.scoring != "bm25" or index.postings_tf is None or index.doc_lengths is None:
            raise SsrError(
                f"{index.path}: built with scoring={index.scoring!r}, without term frequencies; "
                "BM25 needs an index built with --scoring bm25"
            )
        if not (k1 >= 0.0 and 0.0 <= b <= 1.0):
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1} b={b}")
        self.index = index
        self.k1 = float(k1)
        self.b = float(b)
        settings = index.settings
        self.stopwords = frozenset(settings.get("stopwords", ()))
        self.stem = bool(settings.get("stem", False))
        self.seed = int(settings["hash"]["seed"])
        self.bits = int(settings["hash"]["bits"])
        self.n_docs = index.n_docs
        total = int(np.asarray(index.doc_lengths).sum(dtype=np.int64))
        # an index of empty documents has no postings: any positive avgdl gives the same (no) results
        self.avgdl = total / self.n_docs if total else 1.0
        self._df = index.df()
        self._term_cache: dict[str, int] = {}
        # per-thread accumulators kept across calls (allocated on first use), and the lock that
        # keeps two Python threads from sharing them
        self._workspace: tuple[np.ndarray, np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def settings(self) -> dict[str, object]:
        return {"k1": self.k1, "b": self.b, "avgdl": self.avgdl, "stem": self.stem}

    def term_id(self, token: str) -> int:
        """Term id of a token, or -1 when the vocabulary lacks it (a hash hit must also match the string)."""
        tid = self._term_cache.get(token)
        if tid is None:
            vocab = self.index.vocab
            h = np.uint64(signal_hash(token, self.seed, self.bits))
            i = int(np.searchsorted(vocab, h))
            tid = i if i < vocab.shape[0] and vocab[i] == h and self.index.signal(i) == token else -1
            self._term_cache[token] = tid
        return tid

    def query_terms(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(term ids ascending, weights = idf * query frequency) of the query's known terms."""
        counts = Counter(bm25_tokens(query, self.stopwords, self.stem))
        pairs = sorted((self.term_id(t), n) for t, n in counts.items())
        terms = np.array([t for t, _ in pairs if t >= 0], dtype=np.int64)
        weights = np.array([n * lucene_idf(self.n_docs, int(self._df[t])) for t, n in pairs if t >= 0],
                           dtype=np.float64)
        return terms, weights

    def search_arrays(self, queries: Sequence[str], k: int | None = 10, threads: int | None = None) -> BM25Batch:
        """Top-k of every query (k=None: every candidate) as flat arrays."""
        check_k(k)
        parts = [self.query_terms(q) for q in queries]
        q_offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(t) for t, _ in parts], out=q_offsets[1:])
        q_terms = np.concatenate([t for t, _ in parts]) if parts else np.zeros(0, dtype=np.int64)
        q_weights = np.concatenate([w for _, w in parts]) if parts else np.zeros(0, dtype=np.float64)
        idx = self.index
        with self._lock, _numba_threads(threads):
            chunks = max(1, min(numba.get_num_threads(), len(parts)))
            if self._workspace is None or self._workspace[0].shape[0] < chunks:
                self._workspace = bm25_kernels.bm25_workspace(chunks, self.n_docs)
            out = bm25_kernels.bm25_batch(
                q_offsets, q_terms.astype(np.int64), q_weights.astype(np.float64), idx.postings_indptr,
                idx.postings_docs, idx.postings_tf, idx.doc_lengths, self.avgdl, self.k1, self.b, idx.doc_rank,
                0 if k is None else k, n_chunks=chunks, workspace=self._workspace,
            )
        return BM25Batch(*out)

    def search_batch(
        self, queries: Sequence[str], k: int | None = 10, threads: int | None = None
    ) -> list[SearchResult]:
        """Top-k of every query, in the Searcher's result shape (matches = distinct query terms found)."""
        batch = self.search_arrays(queries, k, threads)
        ids = self.index.ids_of(batch.docs)
        hits = []
        for q in range(len(queries)):
            a, z = batch.offsets[q], batch.offsets[q + 1]
            hits.append(SearchResult(ids[a:z], batch.scores[a:z], batch.matches[a:z], batch.docs[a:z]))
        return hits

    def search(self, query: str, k: int | None = 10) -> SearchResult:
        return self.search_batch([query], k, threads=1)[0]


class _numba_threads:
    """Run a block with `n` Numba threads (None: leave the setting alone)."""

    def __init__(self, n: int | None):
        self.n = n
        self.old: int | None = None

    def __enter__(self) -> None:
        if self.n is not None:
            import numba

            if self.n < 1:
                raise ValueError(f"threads must be >= 1, got {self.n}")
            self.old = numba.get_num_threads()
            numba.set_num_threads(min(self.n, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        if self.old is not None:
            import numba

            numba.set_num_threads(self.old)
