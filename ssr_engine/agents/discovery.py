"""Discovery: narrow a registry of Agent Cards to a pool of at most K for a query.

A registry on disk is an index directory built from the cards' documents (`build_registry`)
whose segment also holds `agent_cards.parquet` (columns `id` and `card`, the card's structural
fields as JSON), registered in the segment's manifest so that `ssr verify` checks it; the
pool's cards are loaded from it. The search behind a registry is a
`retrieval.Retriever`: the disk index's own method (`open_retriever(index, index.scoring)`:
SSR, or BM25 for an index built with scoring "bm25"), or the pure-Python `ReferenceIndex`
for small in-memory registries.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import IndexFormatError, InputError, SsrError
from ..format import CARD_STORE, CARD_STORE_FORMAT
from ..retrieval import Retriever, SearchResult, check_k
from .cards import AgentCard, capability_values, card_document
from .sources import iter_cards, stored_card, unique_cards

CARD_CACHE = 4096  # parsed cards kept per store


@dataclass(frozen=True)
class Pool:
    """The candidates for one query, best first, with the cards themselves (and, from a live
    registry, the commit's generation and the cards' published texts when asked)."""

    query: str
    k: int | None
    ids: list[str]
    scores: list[float]
    matches: list[int]
    cards: list[AgentCard]
    version: int | None = None
    texts: list[str] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "k": self.k,
            "pool": [
                {"id": i, "score": s, "matches": m}
                for i, s, m in zip(self.ids, self.scores, self.matches, strict=True)
            ],
        }


# ---- the card store --------------------------------------------------------------------------

RELEASE_AFTER = 16 << 20  # bytes: a card store read this large gives Arrow's unused memory back to the system


class CardStore:
    """The cards of a registry by id, parsed on demand from `agent_cards.parquet`."""

    def __init__(self, path: Path, rows: tuple[list[str], list[str]] | None = None):
        """The store at `path`, read; or, given `rows` (its ids and card texts, as `write_card_store` wrote
        them: a small write's own store), those rows, with nothing read."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = path
        if rows is not None:
            self._ids: list[str] = rows[0]
            self._json: Any = pa.array(rows[1], pa.string())
        else:
            try:
                # one thread: Arrow's pool costs more than a small store's whole read on a busy machine
                table = pq.read_table(path, columns=["id", "card"], use_threads=path.stat().st_size > RELEASE_AFTER)
            except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) on garbage
                raise IndexFormatError(f"{path}: unreadable card store ({exc})") from exc
            meta = table.schema.metadata or {}
            if meta.get(b"format") != CARD_STORE_FORMAT.encode():
                raise IndexFormatError(f"{path}: not an agent card store of format {CARD_STORE_FORMAT}")
            self._ids = table.column("id").to_pylist()
            self._json = table.column("card")
            if table.nbytes > RELEASE_AFTER:
                # the read's page buffers, freed, stay with Arrow's allocator otherwise: at 100,000 cards 90 MB
                # of a server's resident memory for good
                pa.default_memory_pool().release_unused()
        self._row = {cid: r for r, cid in enumerate(self._ids)}
        # parsed cards, least recently used first; bounded so a long-running server stays flat
        self._cache: OrderedDict[str, AgentCard] = OrderedDict()

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> list[str]:
        return list(self._ids)

    def row(self, card_id: str) -> int | None:
        """The row (= the segment's document) of the card with this id, or None."""
        return self._row.get(card_id)

    def text(self, card_id: str) -> str:
        """The card's published JSON text (no parsing)."""
        row = self._row.get(card_id)
        if row is None:
            raise IndexFormatError(f"{self.path}: no card {card_id!r} (card store and index disagree)")
        return str(self._json[row].as_py())

    def get(self, card_id: str) -> AgentCard:
        card = self._cache.get(card_id)
        if card is not None:
            self._cache.move_to_end(card_id)
            return card
        text = self.text(card_id)
        card = stored_card(json.loads(text), self.path, self._row[card_id] + 1, text)
        if card.id != card_id:  # the id was chosen at build time (e.g. an explicit one); keep it
            card = dataclasses.replace(card, id=card_id)
        self._cache[card_id] = card
        if len(self._cache) > CARD_CACHE:
            self._cache.popitem(last=False)
        return card

    def __contains__(self, card_id: object) -> bool:
        return card_id in self._row

    def all(self) -> list[AgentCard]:
        return [self.get(i) for i in self._ids]


def write_card_store(cards: Iterable[AgentCard], out: str | os.PathLike[str], batch: int = 10_000,
                     rows: tuple[list[str], list[str]] | None = None) -> int:
    """Stream cards into a Parquet card store (batches of `batch` rows); returns the count. Written
    plainly: `out` is in a scratch folder, and the store reaches an index inside a staged segment,
    published whole by one rename at commit (as the segment's arrays are). `rows`: two lists that get
    every row's id and card text (`CardStore(out, rows)` then reads nothing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..atomic import os_errors

    schema = pa.schema([("id", pa.string()), ("card", pa.string())], metadata={"format": CARD_STORE_FORMAT})
    n = 0
    with os_errors(out), open(out, "wb") as f:
        with pq.ParquetWriter(f, schema) as writer:
            ids: list[str] = []
            docs: list[str] = []
            for card in cards:
                ids.append(card.id)
                docs.append(card.published())
                if len(ids) >= batch:
                    n += _write_rows(writer, schema, ids, docs, rows)
                    ids, docs = [], []
            if ids or n == 0:
                n += _write_rows(writer, schema, ids, docs, rows)
    return n


def _write_rows(writer: Any, schema: Any, ids: list[str], docs: list[str],
                rows: tuple[list[str], list[str]] | None) -> int:
    import pyarrow as pa

    writer.write_table(pa.table({"id": ids, "card": docs}, schema=schema))
    if rows is not None:
        rows[0].extend(ids)
        rows[1].extend(docs)
    return len(ids)


# ---- the registry ----------------------------------------------------------------------------


class Registry:
    """A searchable registry of Agent Cards: `discover(query, k)` returns the pool."""

    def __init__(self, backend: Retriever, cards: CardStore | dict[str, AgentCard], path: Path | None = None):
        self.backend = backend
        self._cards = cards
        self.path = path

    @property
    def scoring(self) -> str:
        """The method behind the registry: "ssr" (the index or the reference scorer) or "bm25"."""
        return "bm25" if self.backend.method == "bm25" else "ssr"

    @classmethod
    def open(cls, index_dir: str | os.PathLike[str]) -> Registry:
        """A registry built by `build_registry` (or any index plus its card store)."""
        from ..format import open_index
        from ..retrieval import open_retriever

        path = Path(index_dir)
        index = open_index(path)
        if index.manifest.extra_files.get(CARD_STORE) != CARD_STORE_FORMAT:
            raise IndexFormatError(f"{path}: an index without a card store; not an agent registry "
                                   "(use `ssr agents build`)")
        store_path = index.path / CARD_STORE
        store = CardStore(store_path)
        if len(store) != index.n_docs:
            raise IndexFormatError(f"{store_path}: {len(store)} cards, the index has {index.n_docs} documents")
        return cls(open_retriever(index, index.scoring), store, path)

    @classmethod
    def from_cards(cls, cards: Sequence[AgentCard], stopwords: Any = None, cap: int = 64) -> Registry:
        """An in-memory registry over the reference scorer (exact, for small registries)."""
        from ..reference import ReferenceIndex

        by_id = {c.id: c for c in unique_cards(cards)}
        index = ReferenceIndex.from_fields(list(by_id), [capability_values(c) for c in by_id.values()], stopwords, cap)
        return cls(index, by_id)

    def __len__(self) -> int:
        return len(self._cards)

    def card(self, card_id: str) -> AgentCard:
        if isinstance(self._cards, dict):
            return self._cards[card_id]
        return self._cards.get(card_id)

    def __contains__(self, card_id: object) -> bool:
        return card_id in self._cards

    def card_text(self, card_id: str) -> str:
        """The card's published JSON text."""
        if isinstance(self._cards, dict):
            return self._cards[card_id].published()
        return self._cards.text(card_id)

    def card_ids(self) -> list[str]:
        """Every card id, in store order (= internal document order of the index)."""
        if isinstance(self._cards, dict):
            return list(self._cards)
        return self._cards.ids()

    def cards(self) -> list[AgentCard]:
        """Every card of the registry (in store order)."""
        if isinstance(self._cards, dict):
            return list(self._cards.values())
        return self._cards.all()

    def _pool(self, query: str, k: int | None, r: SearchResult, with_cards: bool) -> Pool:
        ids = r.ids.tolist()
        cards = [self.card(i) for i in ids] if with_cards else []
        return Pool(query, k, ids, r.scores.tolist(), r.matches.tolist(), cards)

    def discover(self, query: str, k: int | None = 20, with_cards: bool = True) -> Pool:
        """At most k cards for the query, best first; empty when nothing matches (never padded)."""
        check_k(k)
        return self._pool(query, k, self.backend.search(query, k), with_cards)

    def discover_batch(self, queries: Sequence[str], k: int | None = 20, with_cards: bool = True) -> list[Pool]:
        check_k(k)
        ranked = self.backend.search_batch(list(queries), k)
        return [self._pool(q, k, r, with_cards) for q, r in zip(queries, ranked, strict=True)]

    def explain(self, query: str, card_id: str) -> list[tuple[str, float]]:
        """The query's signals matched by the card, with their weights (ascending weight, as every explain)."""
        return self.backend.explain(query, card_id)


def discover(index_dir: str | os.PathLike[str], query: str, k: int | None = 20) -> Pool:
    """One-shot discovery over a registry on disk (opens it each call; keep a Registry for many)."""
    return Registry.open(index_dir).discover(query, k)


def build_registry(
    cards: str | os.PathLike[str] | Iterable[AgentCard],
    out: str | os.PathLike[str],
    *,
    scoring: str = "ssr",
    force: bool = False,
    quiet: bool = True,
    on_duplicate: str = "error",
    **build_options: Any,
) -> Path:
    """Build an index over cards (a path for `iter_cards`, or cards) and add its card store.

    One streaming pass writes the build's JSONL documents and the card store to a scratch
    folder beside `out` (held by a lock, so one a killed build left is removed by the next);
    the index is built from the documents, with the store moved into its segment.
    `on_duplicate`: "error" (a repeated id names both places) or "keep-last".
    """
    from ..generations import scratch_dir
    from ..indexing import build_index

    out = Path(out)
    source = iter_cards(cards) if isinstance(cards, (str, os.PathLike)) else cards
    with scratch_dir(out.parent, f".{out.name}.agents-") as work:
        docs, store = work / "documents.jsonl", work / CARD_STORE
        seen = _Counted(unique_cards(source, on_duplicate))
        write_documents_and_store(seen, docs, store)
        if seen.n == 0:
            raise SsrError(f"{cards if isinstance(cards, (str, os.PathLike)) else 'cards'}: no cards")
        try:
            # ids are any non-empty string (spaces and Unicode included): cards were validated above
            build_index(docs, out, fmt="jsonl-any-id", scoring=scoring, force=force, quiet=quiet,
                        extra_files={CARD_STORE: (store, CARD_STORE_FORMAT)}, **build_options)
        except InputError as exc:
            told = build_error(exc, docs, seen.sources)
            if told is exc:
                raise
            raise told from exc
    return out


class _Counted:
    def __init__(self, cards: Iterable[AgentCard]):
        self._it = iter(cards)
        self.n = 0
        self.sources: list[str] = []  # where each card was read, in document order

    def __iter__(self) -> _Counted:
        return self

    def __next__(self) -> AgentCard:
        card = next(self._it)
        self.n += 1
        self.sources.append(card.source)
        return card


def write_documents_and_store(cards: Iterable[AgentCard], docs: Path, store: Path,
                              rows: tuple[list[str], list[str]] | None = None) -> int:
    """The build's JSONL documents and the card store in one pass (same order: row = document);
    `rows` as `write_card_store`'s."""
    with open(docs, "w", encoding="utf-8") as f:

        def tee() -> Iterable[AgentCard]:
            for card in cards:
                f.write(json.dumps(card_document(card), ensure_ascii=True))
                f.write("\n")
                yield card

        return write_card_store(tee(), store, rows=rows)


def build_error(exc: SsrError, docs: Path, sources: Sequence[str]) -> SsrError:
    """An error of the build over the internal documents file, told as the card it came from
    (line n of that file is the n-th card); other errors as they are."""
    if not isinstance(exc, InputError) or Path(exc.path) != docs:
        return exc
    where = sources[exc.line - 1] if exc.line and exc.line <= len(sources) else "cards"
    return SsrError(f"{where}: {str(exc).split(': ', 1)[-1]}")


def is_registry(index_dir: str | os.PathLike[str]) -> bool:
    """Whether the newest commit at `index_dir` is an agent registry (its segments hold card stores;
    False for anything else, a missing or broken index included)."""
    from ..format import read_manifest
    from ..generations import read_commit

    root = Path(index_dir)
    try:
        commit = read_commit(root)
        if commit is None or not commit.segments:
            return False
        ref = commit.segments[0]
        return CARD_STORE in read_manifest(root / ref.name, ref.manifest_sha256).extra_files
    except IndexFormatError:  # not an index, or a broken one: the caller's own open says why
        return False
