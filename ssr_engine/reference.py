"""The exhaustive reference scorer: pure Python, no index. The oracle for every other path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .scoring import canonical_sum, check_k, id_order, signal_weight
from .signals import DEFAULT_CAP, card_signals, signals
from .stopwords import StopwordList, resolve_stopwords


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    matches: int


class ReferenceIndex:
    """Documents as signal sets; scores every document against each query (DESIGN.md 2)."""

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
        return cls(ids, [signals(t, stopwords, cap) for t in texts], stopwords, cap)

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

    def search_signals(self, query_sigs: frozenset[str], k: int | None) -> list[Hit]:
        check_k(k)
        scored = []
        for d in range(self.n_docs):
            score, matches = self.score(query_sigs, d)
            if matches:
                scored.append((-score, -matches, self._rank[d], d))
        scored.sort()
        if k is not None:
            scored = scored[:k]
        return [Hit(self.ids[d], -s, -m) for s, m, _, d in scored]

    def search(self, query: str, k: int | None = 10) -> list[Hit]:
        """Top-k documents by score desc, matched signals desc, id asc; [] without a match."""
        return self.search_signals(self.query_signals(query), k)
