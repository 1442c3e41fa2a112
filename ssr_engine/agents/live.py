"""A live registry: the registry on disk plus the cards added, replaced and removed since its build.

Rankings are exactly those of a fresh build over the live cards (DESIGN.md sections 2 and 3):
N and every df are counted over live cards, so a write changes the weights of every card.

- The built index (the base) is searched by the SSR kernels with weights recomputed for the
  live N and df: df(s) = base df - removed base cards holding s + added cards holding s. The
  kernel is asked for k + (removed base cards) results, so that dropping the removed ones
  still leaves the exact top k of the live base cards.
- Added cards (and new versions of replaced ones) are held in memory with their signal sets
  and an inverted map; they are scored in Python with the same canonical sum.
- Both lists are merged under the result order (score desc, matches desc, id asc; ids compare
  as integers only when every live id is one).

Writes are appended to `agent_updates.jsonl` in the registry directory (one JSON object per
line, flushed and fsynced before the write returns) and replayed at open, so `ssr agents add`,
`ssr agents remove` and the server's PUT/DELETE survive a restart. A rebuild
(`ssr agents build`) starts from its own cards and has no journal.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, SsrError
from ..ids import _INTEGER_ID as _INT_ID
from ..retrieval import check_k, numba_threads
from ..scoring import canonical_sum, signal_weight
from .cards import AgentCard, capability_values, parse_card
from .discovery import JOURNAL, Pool, Registry


def _id_key(card_id: str, integer: bool) -> Any:
    return (int(card_id), card_id) if integer else card_id


class LiveRegistry:
    """A registry that takes writes (`put`, `delete`) and answers as a rebuild over its live cards would.

    Thread-safe: reads and writes take one lock, so each answer sees one version (`version`
    counts the writes applied, journal replay included).
    """

    def __init__(self, base: Registry, journal: Path | None = None):
        self.base = base
        self.path = base.path
        self.journal = journal
        self.version = 0
        self._lock = threading.RLock()
        self._deleted: set[int] = set()  # internal ids of base cards removed or replaced
        self._deleted_arr = np.zeros(0, dtype=np.int64)
        self._deleted_terms: Counter[int] = Counter()  # term -> removed base cards holding it
        self._deleted_nonint = 0
        self._delta: dict[str, tuple[AgentCard, frozenset[str]]] = {}
        self._delta_df: Counter[str] = Counter()
        self._delta_post: dict[str, set[str]] = {}
        self._delta_nonint = 0
        self._base_nonint: int | None = None
        self._rows: dict[str, int] | None = None
        self._journal_file: Any = None

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, index_dir: str | os.PathLike[str]) -> LiveRegistry:
        """The registry at `index_dir` with its journal of writes replayed."""
        base = Registry.open(index_dir)
        live = cls(base, Path(index_dir) / JOURNAL)
        live._replay()
        return live

    @property
    def scoring(self) -> str:
        return self.base.scoring

    @property
    def _searcher(self) -> Any:
        from ..search import Searcher

        backend = self.base.backend
        if not isinstance(backend, Searcher) or backend.method != "ssr":
            raise SsrError(f"{self.path}: live updates need an SSR registry on disk (this one is "
                           f"{self.base.scoring}); rebuild it with `ssr agents build`")
        return backend

    def _row_of(self, card_id: str) -> int | None:
        if self._rows is None:
            self._rows = {cid: r for r, cid in enumerate(self.base.card_ids())}
        return self._rows.get(card_id)

    def _base_live(self, card_id: str) -> int | None:
        row = self._row_of(card_id)
        return None if row is None or row in self._deleted else row

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self.base) - len(self._deleted) + len(self._delta)

    def __contains__(self, card_id: object) -> bool:
        if not isinstance(card_id, str):
            return False
        with self._lock:
            return card_id in self._delta or self._base_live(card_id) is not None

    def card(self, card_id: str) -> AgentCard:
        """The live card with this id; KeyError when there is none."""
        with self._lock:
            entry = self._delta.get(card_id)
            if entry is not None:
                return entry[0]
            if self._base_live(card_id) is None:
                raise KeyError(card_id)
            return self.base.card(card_id)

    def card_text(self, card_id: str) -> str:
        """The live card's published JSON text; KeyError when there is none."""
        with self._lock:
            entry = self._delta.get(card_id)
            if entry is not None:
                return entry[0].published()
            if self._base_live(card_id) is None:
                raise KeyError(card_id)
            return self.base.card_text(card_id)

    def cards(self) -> list[AgentCard]:
        """Every live card: base cards in store order, then added ones in the order written."""
        with self._lock:
            base = [c for r, c in enumerate(self.base.cards()) if r not in self._deleted]
            return base + [c for c, _ in self._delta.values()]

    def _dirty(self) -> bool:
        return bool(self._delta or self._deleted)

    def discover(self, query: str, k: int | None = 20, with_cards: bool = True) -> Pool:
        """At most k live cards for the query, best first, exactly as a rebuild would rank them."""
        check_k(k)
        with self._lock:
            if not self._dirty():
                return self.base.discover(query, k, with_cards)
            ids, scores, matches = self._search(query, k)
            cards = [self.card(i) for i in ids] if with_cards else []
            return Pool(query, k, ids, scores, matches, cards)

    def discover_batch(self, queries: Sequence[str], k: int | None = 20, with_cards: bool = True) -> list[Pool]:
        with self._lock:
            if not self._dirty():
                return self.base.discover_batch(queries, k, with_cards)
            return [self.discover(q, k, with_cards) for q in queries]

    def explain(self, query: str, card_id: str) -> list[tuple[str, float]]:
        """The query's signals the card holds, with their live weights (ascending weight, ties by
        signal: the canonical summation order, as every explain)."""
        with self._lock:
            if not self._dirty():
                return self.base.explain(query, card_id)
            if card_id not in self:
                raise KeyError(card_id)
            weights = dict(self._query_weights(query))
            doc = self._signals_of(card_id)
            return sorted(((s, w) for s, w in weights.items() if s in doc), key=lambda t: (t[1], t[0]))

    # ------------------------------------------------------------------ the overlay search

    def _n_live(self) -> int:
        return len(self)

    def _query_terms(self, query: str) -> list[tuple[str, int]]:
        """The query's signals and their base term ids (-1 when the base has no such term)."""
        searcher = self._searcher
        batch, terms = searcher._signal_terms([query])
        return [(batch.signal(i), int(terms[i])) for i in range(len(terms))]

    def _live_df(self, signal: str, term: int) -> int:
        df = self._delta_df.get(signal, 0)
        if term >= 0:
            indptr = self._searcher.index.postings_indptr
            df += int(indptr[term + 1] - indptr[term]) - self._deleted_terms.get(term, 0)
        return df

    def _query_weights(self, query: str) -> list[tuple[str, float]]:
        n = self._n_live()
        out = []
        for s, t in self._query_terms(query):
            df = self._live_df(s, t)
            if df > 0:
                out.append((s, signal_weight(n, df)))
        return out

    def _integer_ids(self) -> tuple[bool, bool]:
        """(base ids all integers, live ids all integers)."""
        if self._base_nonint is None:
            manifest_ids = self._searcher.index.manifest.ids
            if manifest_ids.get("integer"):
                self._base_nonint = 0
            else:
                self._base_nonint = sum(1 for i in self.base.card_ids() if not _INT_ID.fullmatch(i))
        base_int = self._base_nonint == 0
        live_int = self._base_nonint - self._deleted_nonint + self._delta_nonint == 0
        return base_int, live_int

    def _search(self, query: str, k: int | None) -> tuple[list[str], list[float], list[int]]:
        from ..search import QueryBatch

        searcher = self._searcher
        n = self._n_live()
        base_int, live_int = self._integer_ids()
        qsigs: dict[str, float] = {}
        base_terms: list[tuple[float, int, int]] = []
        for s, t in self._query_terms(query):
            df = self._live_df(s, t)
            if df <= 0:
                continue
            w = signal_weight(n, df)
            qsigs[s] = w
            if t >= 0:
                base_df = self._live_df(s, t) - self._delta_df.get(s, 0)
                if base_df > 0:
                    base_terms.append((w, t, base_df))
        rows: list[tuple[float, int, str]] = []
        if base_terms:
            base_terms.sort()
            qb = QueryBatch(
                np.array([0, len(base_terms)], dtype=np.int64),
                np.array([t for _, t, _ in base_terms], dtype=np.int64),
                np.array([w for w, _, _ in base_terms], dtype=np.float64),
                np.array([d for _, _, d in base_terms], dtype=np.int64),
            )
            # removed base cards may fill up to len(deleted) places of the kernel's top list;
            # when the id order changes kind (integer vs string), ask for every candidate
            kk = None if k is None or base_int != live_int else k + len(self._deleted)
            if kk is not None and kk >= searcher.n_docs:
                kk = None
            with numba_threads(None, tasks=1):
                _, docs, scores, matches = searcher.run_kernel(qb, kk)
            if self._deleted_arr.shape[0]:
                keep = ~np.isin(docs, self._deleted_arr)
                docs, scores, matches = docs[keep], scores[keep], matches[keep]
            ids = searcher.external_ids(docs).tolist()
            rows = list(zip(scores.tolist(), matches.tolist(), ids, strict=True))
        found: set[str] = set()
        for s in qsigs:
            found |= self._delta_post.get(s, set())
        for cid in found:
            sigs = self._delta[cid][1]
            ws = [w for s, w in qsigs.items() if s in sigs]
            rows.append((canonical_sum(ws), len(ws), cid))
        rows.sort(key=lambda r: (-r[0], -r[1], _id_key(r[2], live_int)))
        if k is not None:
            rows = rows[:k]
        return [r[2] for r in rows], [r[0] for r in rows], [r[1] for r in rows]

    def _base_signals(self, row: int) -> frozenset[str]:
        index = self._searcher.index
        a, b = int(index.forward_indptr[row]), int(index.forward_indptr[row + 1])
        return frozenset(index.signal(int(t)) for t in index.forward_terms[a:b])

    def _signals_of(self, card_id: str) -> frozenset[str]:
        entry = self._delta.get(card_id)
        if entry is not None:
            return entry[1]
        row = self._base_live(card_id)
        if row is None:
            raise KeyError(card_id)
        return self._base_signals(row)

    def _card_signals(self, card: AgentCard) -> frozenset[str]:
        from ..signals import card_signals

        s = self._searcher
        return card_signals(capability_values(card), s.stopwords.words, s.cap)

    # ------------------------------------------------------------------ writing

    def _remove_base(self, row: int, card_id: str) -> None:
        index = self._searcher.index
        a, b = int(index.forward_indptr[row]), int(index.forward_indptr[row + 1])
        self._deleted_terms.update(int(t) for t in index.forward_terms[a:b])
        self._deleted.add(row)
        self._deleted_arr = np.array(sorted(self._deleted), dtype=np.int64)
        if not _INT_ID.fullmatch(card_id):
            self._deleted_nonint += 1

    def _remove_delta(self, card_id: str) -> None:
        _, sigs = self._delta.pop(card_id)
        for s in sigs:
            self._delta_df[s] -= 1
            if not self._delta_df[s]:
                del self._delta_df[s]
            post = self._delta_post[s]
            post.discard(card_id)
            if not post:
                del self._delta_post[s]
        if not _INT_ID.fullmatch(card_id):
            self._delta_nonint -= 1

    def _apply_put(self, card: AgentCard) -> bool:
        """Add or replace; True when a card with this id existed."""
        sigs = self._card_signals(card)
        existed = False
        if card.id in self._delta:
            self._remove_delta(card.id)
            existed = True
        else:
            row = self._base_live(card.id)
            if row is not None:
                self._remove_base(row, card.id)
                existed = True
        self._delta[card.id] = (card, sigs)
        for s in sigs:
            self._delta_df[s] += 1
            self._delta_post.setdefault(s, set()).add(card.id)
        if not _INT_ID.fullmatch(card.id):
            self._delta_nonint += 1
        return existed

    def _apply_delete(self, card_id: str) -> bool:
        if card_id in self._delta:
            self._remove_delta(card_id)
            return True
        row = self._base_live(card_id)
        if row is None:
            return False
        self._remove_base(row, card_id)
        return True

    def put(self, card: AgentCard, sync: bool = True) -> bool:
        """Add a card, or replace the card with its id; True when it replaced one. Journaled.

        sync=False leaves the journal's fsync to a later `sync()` (a server answers other
        requests meanwhile and acknowledges the write after it).
        """
        return self.put_many([card], sync)[0]

    def put_many(self, cards: Iterable[AgentCard], sync: bool = True) -> list[bool]:
        """`put` for each card, journaled as one append."""
        with self._lock:
            self._searcher  # noqa: B018 - refuse before anything is written (BM25 registries)
            cards = list(cards)
            self._append([{"op": "put", "id": c.id, "card": c.published()} for c in cards], sync)
            out = [self._apply_put(c) for c in cards]
            self.version += len(cards)
            return out

    def delete(self, card_id: str, sync: bool = True) -> bool:
        """Remove the card with this id; False (and nothing written) when there is none."""
        with self._lock:
            if card_id not in self:
                return False
            self._append([{"op": "delete", "id": card_id}], sync)
            self._apply_delete(card_id)
            self.version += 1
            return True

    def delete_many(self, card_ids: Iterable[str]) -> list[str]:
        """Remove each id that is live; returns the ids that were not (nothing written for them)."""
        with self._lock:
            self._searcher  # noqa: B018
            missing: list[str] = []
            present: list[str] = []
            seen: set[str] = set()
            for cid in card_ids:
                if cid in seen:
                    continue
                seen.add(cid)
                (present if cid in self else missing).append(cid)
            self._append([{"op": "delete", "id": cid} for cid in present])
            for cid in present:
                self._apply_delete(cid)
            self.version += len(present)
            return missing

    def _append(self, records: list[dict[str, Any]], sync: bool = True) -> None:
        if self.journal is None or not records:
            return
        text = "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in records)
        if self._journal_file is None:
            self._journal_file = open(self.journal, "a", encoding="utf-8")  # noqa: SIM115 - kept open
        self._journal_file.write(text)
        self._journal_file.flush()  # in the kernel's hands: a crash of this process loses nothing
        if sync:
            self.sync()

    def sync(self) -> None:
        """fsync the journal: every write made so far survives a power loss. Safe from another thread."""
        f = self._journal_file
        if f is not None:
            os.fsync(f.fileno())

    def close(self) -> None:
        if self._journal_file is not None:
            self._journal_file.close()
            self._journal_file = None

    def _replay(self) -> None:
        if self.journal is None or not self.journal.is_file():
            return
        data = self.journal.read_bytes()
        lines = data.split(b"\n")
        if lines and lines[-1] != b"":
            # a torn last line: the write that made it never returned, so it never happened
            print(f"ssr: {self.journal}: ignoring an incomplete last line (an interrupted write)", file=sys.stderr)
        for lineno, raw in enumerate(lines[:-1], 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
                op, cid = rec["op"], rec["id"]
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
                raise InputError(self.journal, lineno, f"corrupt journal record ({exc})") from exc
            if op == "put":
                text = rec.get("card")
                try:
                    obj = json.loads(text)
                except (TypeError, json.JSONDecodeError) as exc:
                    raise InputError(self.journal, lineno, f"corrupt journal record ({exc})") from exc
                card = parse_card(obj, self.journal, lineno, raw=text)
                if card.id != cid:  # an id given at write time (PUT /cards/{id}) wins over the derived one
                    card = dataclasses.replace(card, id=cid)
                self._apply_put(card)
            elif op == "delete":
                self._apply_delete(cid)
            else:
                raise InputError(self.journal, lineno, f"unknown journal operation {op!r}")
            self.version += 1


def open_registry(index_dir: str | os.PathLike[str]) -> LiveRegistry:
    """The registry at `index_dir` as it is live (built cards plus journaled writes)."""
    return LiveRegistry.open(index_dir)
