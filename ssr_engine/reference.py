"""The exhaustive reference scorer: pure Python, no index. The oracle for every other path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .errors import SsrError
from .ids import id_order
from .retrieval import SearchResult, check_k, check_threads, internal_doc
from .scoring import canonical_sum, signal_weight
from .signals import DEFAULT_CAP, card_signals, signals
from .stopwords import StopwordList, resolve_stopwords


class ReferenceIndex:
    """Documents as signal sets; scores every document against each query (DESIGN.md 2).

    A `retrieval.Retriever` (method "reference"); `threads` is accepted and ignored.
    """

    method = "reference"

    def __init__(
        self,
        ids: Sequence[str],
        doc_signals: Sequence[frozenset[str]],
        stopwords: StopwordList | frozenset[str] | None = None,
        cap: int = DEFAULT_CAP,
    ):
        if len(ids) != len(doc_signals):
            raise ValueError("ids and doc_signals differ in length")
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate document ids")
        self.ids = list(ids)
        self.doc_signals = list(doc_signals)
        self.stopwords = resolve_stopwords(stopwords)
        self.cap = cap
        self.texts: list[str] | None = None  # kept by `from_texts`, for `doc`
        self.df: Counter[str] = Counter()
        for sigs in self.doc_signals:
            self.df.update(sigs)
        self._rank = [0] * len(self.ids)
        for r, i in enumerate(id_order(self.ids)):
            self._rank[i] = r

    @classmethod
    def from_texts(
        cls,
        ids: Sequence[str],
        texts: Iterable[str],
        stopwords: StopwordList | frozenset[str] | None = None,
        cap: int = DEFAULT_CAP,
    ) -> ReferenceIndex:
        texts = list(texts)
        index = cls(ids, [signals(t, stopwords, cap) for t in texts], stopwords, cap)
        index.texts = texts
        return index

    @classmethod
    def from_fields(
        cls,
        ids: Sequence[str],
        fields: Iterable[Sequence[str]],
        stopwords: StopwordList | frozenset[str] | None = None,
        cap: int = DEFAULT_CAP,
    ) -> ReferenceIndex:
        return cls(ids, [card_signals(f, stopwords, cap) for f in fields], stopwords, cap)

    @property
    def n_docs(self) -> int:
        return len(self.ids)

    def weight(self, signal: str) -> float:
        return signal_weight(self.n_docs, self.df[signal])

    def query_signals(self, query: str) -> frozenset[str]:
        return signals(query, self.stopwords, self.cap)

    def score(self, query_sigs: frozenset[str], doc: int) -> tuple[float, int]:
        matched = query_sigs & self.doc_signals[doc]
        return canonical_sum([self.weight(s) for s in matched]), len(matched)

    def _position(self, doc_id: str) -> int | None:
        try:
            return self.ids.index(doc_id)
        except ValueError:
            return None

    def doc(self, doc: str | int) -> str:
        """The text of a document, when built by `from_texts`."""
        d = internal_doc(doc, self._position, "reference index")
        if self.texts is None:
            raise SsrError("reference index: built from signal sets or fields, it keeps no text")
        return self.texts[d]

    @property
    def settings(self) -> dict[str, Any]:
        return {"weight": "ln((N + 1) / (df + 1)) + 1", "order": "score desc, matches desc, id asc"}

    def search_signals(self, query_sigs: frozenset[str], k: int | None) -> SearchResult:
        check_k(k)
        scored = []
        for d in range(self.n_docs):
            score, matches = self.score(query_sigs, d)
            if matches:
                scored.append((-score, -matches, self._rank[d], d))
        scored.sort()
        if k is not None:
            scored = scored[:k]
        return SearchResult(
            ids=np.array([self.ids[d] for *_, d in scored], dtype=str),
            scores=np.array([-s for s, *_ in scored], dtype=np.float64),
            matches=np.array([-m for _, m, *_ in scored], dtype=np.int32),
            docs=np.array([d for *_, d in scored], dtype=np.int64),
        )

    def search(self, query: str, k: int | None = 10) -> SearchResult:
        """Top-k documents by score desc, matched signals desc, id asc; empty without a match."""
        return self.search_signals(self.query_signals(query), k)

    def search_batch(self, queries: Sequence[str], k: int | None = 10,
                     threads: int | None = None) -> list[SearchResult]:
        check_threads(threads)
        return [self.search(q, k) for q in queries]

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        """Matched signals and weights in the canonical order (ascending weight, ties by signal)."""
        d = internal_doc(doc, self._position, "reference index")
        matched = self.query_signals(query) & self.doc_signals[d]
        return sorted(((s, self.weight(s)) for s in matched), key=lambda t: (t[1], t[0]))

    def pool_sizes(self, queries: Sequence[str], threads: int | None = None) -> np.ndarray:
        check_threads(threads)
        sizes = []
        for q in queries:
            sigs = self.query_signals(q)
            sizes.append(sum(1 for d in self.doc_signals if sigs & d))
        return np.array(sizes, dtype=np.int64)
