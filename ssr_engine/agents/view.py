"""One commit of a live registry, as read: its searcher, its card stores, their deletions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..retrieval import check_k
from .cards import AgentCard
from .discovery import CardStore, Pool


@dataclass
class View:
    """One commit of a registry: its snapshot (`live.Snapshot`, segments held), its searcher (the
    segment's own for a one-segment commit, else `parts_search.PartsSearcher`) and each segment's card store."""

    snapshot: Any
    searcher: Any
    stores: list[CardStore]
    deleted: list[np.ndarray | None]
    bases: np.ndarray  # int64[S + 1]: the first collection-wide number of each segment

    @property
    def version(self) -> int:
        """The commit's generation: it grows by one with every write."""
        return int(self.snapshot.generation)

    def __len__(self) -> int:
        return int(self.searcher.n_docs)

    def locate(self, card_id: str) -> tuple[int, int] | None:
        """(segment, row) of the live card with this id, or None."""
        for s in range(len(self.stores) - 1, -1, -1):  # newest first: a replaced card's new version
            row, mask = self.stores[s].row(card_id), self.deleted[s]
            if row is not None and (mask is None or not mask[row]):
                return s, row
        return None

    def __contains__(self, card_id: object) -> bool:
        return isinstance(card_id, str) and self.locate(card_id) is not None

    def card_text(self, card_id: str) -> str:
        """The live card's published JSON text; KeyError when there is none."""
        where = self.locate(card_id)
        if where is None:
            raise KeyError(card_id)
        return self.stores[where[0]].text(card_id)

    def card(self, card_id: str) -> AgentCard:
        where = self.locate(card_id)
        if where is None:
            raise KeyError(card_id)
        return self.stores[where[0]].get(card_id)

    def live_ids(self, segments: Iterable[int] | None = None) -> list[tuple[int, str]]:
        """(segment, id) of every live card (of `segments`, default all), segment after segment in store order."""
        out = []
        for s in range(len(self.stores)) if segments is None else sorted(segments):
            store, mask = self.stores[s], self.deleted[s]
            out += [(s, cid) for r, cid in enumerate(store.ids()) if mask is None or not mask[r]]
        return out

    def discover(self, query: str, k: int | None = 20, with_cards: bool = True, with_texts: bool = False) -> Pool:
        check_k(k)
        return self.discover_batch([query], k, with_cards, with_texts)[0]

    def discover_batch(self, queries: Sequence[str], k: int | None = 20, with_cards: bool = True,
                       with_texts: bool = False) -> list[Pool]:
        check_k(k)
        pools = []
        for q, r in zip(queries, self.searcher.search_batch(list(queries), k), strict=True):
            ids = r.ids.tolist()
            seg = np.searchsorted(self.bases, r.docs, side="right") - 1
            stores = [self.stores[s] for s in seg.tolist()]
            cards = [st.get(i) for st, i in zip(stores, ids, strict=True)] if with_cards else []
            # one scalar read per card: 2 us each; a column `take` copies the chunked column (25 ms)
            texts = [st.text(i) for st, i in zip(stores, ids, strict=True)] if with_texts else None
            pools.append(Pool(q, k, ids, r.scores.tolist(), r.matches.tolist(), cards, self.version, texts))
        return pools

    def explain(self, query: str, card_id: str) -> list[tuple[str, float]]:
        """The query's signals the card holds, with their live weights (ascending weight, ties by signal)."""
        where = self.locate(card_id)
        if where is None:
            raise KeyError(card_id)
        return self.searcher.explain(query, int(self.bases[where[0]]) + where[1])

    def close(self) -> None:
        self.snapshot.close()
