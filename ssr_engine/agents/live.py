"""A live registry: an agent registry on disk that takes writes through the live index (`ssr_engine.live`).

A registry is an index directory whose every segment holds `agent_cards.parquet`, the published
cards of that segment's documents (row = document), registered in the segment's manifest so that
`ssr verify` checks it. Writes are `LiveIndex` calls, one commit each, under the index's writer lock:

- `put_many` (add or replace): the cards' documents and their card store go into one new segment,
  built before any lock is taken (`LiveIndex.prepare`) and committed with the older versions of the
  same ids deleted (`LiveIndex.publish(..., upsert=True)`); the small segments a merge would take next
  go into it too (`merges.absorbable`), so no merge of them runs beside later writes;
- `delete_many`: `LiveIndex.delete`, a new deletion file per touched segment;
- merges (`merge_plan`: tiered by size, capped at `MAX_SEGMENTS`) add the live cards of small
  segments again as one segment that replaces them, built without any lock and committed only if
  those segments are unchanged since they were read (`LiveIndex.publish(replaces=...)`). A server
  merges in the background (`background=True`) once writes pause, so a write's own commit and its
  visibility never wait for a merge it caused (nor for another merge's build); otherwise the write
  merges before it returns;
- `compact`: every live card added again as one segment (what `ssr compact` runs on a registry).

Rankings are those of a fresh build over the live cards, bit for bit: `parts_search.PartsSearcher` scores
every segment with the global N and df of the live documents (DESIGN.md sections 2 and 3). A crash
at any moment leaves the previous commit whole.

Reading goes through a `View`: one commit, its searcher and its card stores. The registry swaps its
view after its own writes (`refresh`), so a write is visible to the next request; `refresh` also
picks up other processes' commits (a server calls it on a timer). Card stores are cached per
segment (segments are immutable).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import IndexFormatError, SsrError
from ..format import CARD_STORE, CARD_STORE_FORMAT
from .cards import AgentCard
from .discovery import CardStore, Pool, build_error, is_registry, write_documents_and_store
from .merges import MAX_SEGMENTS, MERGE_AT, MERGE_QUIET, Merger, absorbable, merge_plan
from .sources import unique_cards
from .view import View

__all__ = ["LiveRegistry", "is_registry", "open_registry"]

LOCK_WAIT = 30.0  # seconds a write waits for another writer (the index's lock is never waited for by itself)
MTIME_SLACK = 100_000_000  # ns: a folder time this recent is read again (file systems stamp with a coarse clock)


class LiveRegistry:
    """An agent registry on disk, live: `discover` and friends read the current `View`; `put_many`,
    `delete_many` write through `LiveIndex` and then show their commit. Thread-safe: writes and view
    swaps take one lock; a reader takes the view once (`view()`) and sees one commit throughout."""

    def __init__(self, path: str | os.PathLike[str], max_segments: int = MAX_SEGMENTS, merge_at: int = MERGE_AT,
                 background: bool = False, merge_quiet: float = MERGE_QUIET,
                 shared_caches: LiveRegistry | None = None):
        from ..format import resolve_index

        self.path = resolve_index(path)
        self.max_segments, self.merge_at = max_segments, merge_at
        self.merges = Merger(self, background, merge_quiet)
        self._lock = threading.RLock()
        self._stores: dict[tuple[str, str], CardStore] = {}
        self._fresh: dict[str, CardStore] = {}  # segment -> the store this process built it with (ids known to match)
        self._integer: dict[tuple[str, str | None], bool] = {}  # (segment, deletion file sha) -> live ids all integers
        if shared_caches is not None:  # a mirror of those segments (`agents.warm`): their stores, read once
            self._stores, self._integer = dict(shared_caches._stores), dict(shared_caches._integer)
        self._writer: Any = None  # one LiveIndex for the registry's life: it reuses opened segments
        self._view = self._open_view()
        self._retired: View | None = None
        self._seen: tuple[int, int] | None = None  # (folder mtime, version) when `stale` last found nothing new

    @classmethod
    def open(cls, path: str | os.PathLike[str], background: bool = False) -> LiveRegistry:
        return cls(path, background=background)

    # ------------------------------------------------------------------ reading

    def view(self) -> View:
        """The current commit's view (keep it for one answer: it never changes)."""
        return self._view

    @property
    def version(self) -> int:
        return self._view.version

    @property
    def scoring(self) -> str:
        return "bm25" if self._view.searcher.method == "bm25" else "ssr"

    def __len__(self) -> int:
        return len(self._view)

    def __contains__(self, card_id: object) -> bool:
        return card_id in self._view

    def card(self, card_id: str) -> AgentCard:
        return self._view.card(card_id)

    def card_text(self, card_id: str) -> str:
        return self._view.card_text(card_id)

    def cards(self) -> list[AgentCard]:
        """Every live card, segment after segment in store order."""
        view = self._view
        return [view.stores[s].get(cid) for s, cid in view.live_ids()]

    def discover(self, query: str, k: int | None = 20, with_cards: bool = True) -> Pool:
        """At most k live cards for the query, best first, exactly as a rebuild would rank them."""
        return self._view.discover(query, k, with_cards)

    def discover_batch(self, queries: Sequence[str], k: int | None = 20, with_cards: bool = True) -> list[Pool]:
        return self._view.discover_batch(queries, k, with_cards)

    def explain(self, query: str, card_id: str) -> list[tuple[str, float]]:
        return self._view.explain(query, card_id)

    def stale(self) -> bool:
        """Whether a newer commit than the view's exists: the index folder's modification time (a stat),
        and when it changed, the commit point's number (a read)."""
        from ..live import current_generation

        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            mtime = None
        seen = self._seen
        # a time within MTIME_SLACK of now may still be shared by a change to come (coarse clocks)
        if mtime is not None and seen == (mtime, self._view.version) and time.time_ns() - mtime > MTIME_SLACK:
            return False
        stale = current_generation(self.path) != self._view.version
        self._seen = None if stale or mtime is None else (mtime, self._view.version)
        return stale

    def refresh(self) -> bool:
        """Move to the newest commit; True when it changed. The view before the last one is closed
        now (a reader may still hold the last one)."""
        with self._lock:
            if not self.stale():
                return False
            new = self._open_view(self._view)
            if self._retired is not None:
                self._retired.close()
            self._retired, self._view = self._view, new
            return True

    def close(self) -> None:
        """Finish a running merge, then close the views."""
        self.merges.closing = True
        self.merges.wait()
        with self._lock:
            for v in (self._retired, self._view):
                if v is not None:
                    v.close()
            self._retired = None

    def _open_view(self, reuse: View | None = None) -> View:
        from ..live import open_snapshot
        from ..parts import live_ids_are_integers
        from ..parts_search import PartsSearcher
        from ..retrieval import open_retriever

        snap = open_snapshot(self.path, reuse=None if reuse is None else reuse.snapshot)
        try:
            stores = [self._store(ix, ref.name, ref.manifest_sha256)
                      for ix, ref in zip(snap.indexes, snap.commit.segments, strict=True)]
            # the caches keep this commit's segments only: a long-running server merges hundreds away
            self._stores = {(ref.name, ref.manifest_sha256): store
                            for ref, store in zip(snap.commit.segments, stores, strict=True)}
            keys = {(ref.name, ref.deletes_sha256) for ref in snap.commit.segments}
            self._integer = {key: v for key, v in self._integer.items() if key in keys}
            searcher: Any
            if snap.plain:  # one segment, nothing deleted: its own searcher (SSR: the levels kernel, faster)
                ix = snap.indexes[0]
                searcher = open_retriever(ix, "bm25" if ix.scoring == "bm25" else "ssr")
            else:
                parts = snap.parts()
                # the id order (integers or strings) of the live cards, remembered per segment and
                # deletion file: recounting 100,000 ids on every write would cost more than the write
                integer = True
                for part, ref in zip(parts, snap.commit.segments, strict=True):
                    key = (ref.name, ref.deletes_sha256)
                    if key not in self._integer:
                        self._integer[key] = live_ids_are_integers([part])
                    if not (integer := self._integer[key]):
                        break  # the rest need not be read (a new segment's ids: its Parquet file)
                searcher = PartsSearcher(parts, integer=integer)
        except BaseException:
            snap.close()
            raise
        self._fresh.clear()  # a store not taken: its segment left before this view
        deleted = [None if d is None else d.mask for d in snap.deletions]
        bases = np.cumsum([0] + [ix.n_docs for ix in snap.indexes]).astype(np.int64)
        return View(snap, searcher, stores, deleted, bases)

    def _store(self, index: Any, name: str, sha256: str) -> CardStore:
        store = self._stores.get((name, sha256))
        if store is not None:
            return store
        if index.manifest.extra_files.get(CARD_STORE) != CARD_STORE_FORMAT:
            raise IndexFormatError(f"{index.path}: a segment without a card store; not an agent registry "
                                   "(use `ssr agents build`; `ssr compact` drops card stores)")
        path = index.path / CARD_STORE
        store = self._fresh.pop(name, None)
        if store is not None:  # built here from the segment's own cards: its rows are the documents
            store.path = path
            if index._id_arrow is None and index._doc_ids is None:
                index._doc_ids = store.ids()  # so the searcher's id tables need not read doc_ids.parquet again
        elif (store := CardStore(path)).ids() != index.doc_id_array().to_pylist():
            raise IndexFormatError(f"{path}: its cards are not the segment's documents ({len(store)} cards, "
                                   f"{index.n_docs} documents)")
        self._stores[(name, sha256)] = store
        return store

    # ------------------------------------------------------------------ writing

    def put(self, card: AgentCard) -> bool:
        """Add a card, or replace the card with its id; True when it replaced one."""
        return self.put_many([card])["replaced"] > 0

    def put_many(self, cards: Iterable[AgentCard], on_duplicate: str = "keep-last") -> dict[str, Any]:
        """Add or replace cards in one commit, shown before returning; returns {"added", "replaced",
        "absorbed" (cards of small segments taken into its segment, `merges.absorbable`), "version" (the
        version this registry shows now), "ms" (where the time went: build, wait for the lock, commit,
        show), "merging" (whether a background merge ran meanwhile)}. Segments are merged after (`merge`)."""
        from ..live import StaleCommit

        cards = list(unique_cards(cards, on_duplicate))
        if not cards:
            return {"added": 0, "replaced": 0, "version": self.version}
        t, mark = [time.perf_counter()], self.merges.overlap()
        with self.merges.writing():
            try:
                return self._put(cards, absorbable(self, cards), t, mark)
            except StaleCommit:  # a segment it absorbs changed meanwhile (another thread's write or merge)
                return self._put(cards, None, t, mark)

    def _put(self, cards: list[AgentCard], absorbed: tuple[dict[str, str | None], list[AgentCard], int] | None,
             t: list[float], mark: tuple[int, int]) -> dict[str, Any]:
        """`put_many`'s commit: `cards` (and the cards of the segments it absorbs) as one new segment."""
        replaces, kept, overridden = absorbed if absorbed is not None else (None, [], 0)
        with self._segment(kept + cards) as (segment, store):  # built before any lock is taken
            t.append(time.perf_counter())
            with self._lock:
                t.append(time.perf_counter())
                report = _waiting(lambda: self._live_index().publish(segment, upsert=True, replaces=replaces))
                t.append(time.perf_counter())
                self._fresh[report["segment"]] = store
                self.refresh()
                self.merges.after_write()
                t.append(time.perf_counter())
                ms = {k: round((t[i + 1] - t[i]) * 1e3, 2) for i, k in enumerate(("build", "wait", "commit", "show"))}
                replaced = report["replaced"] + overridden
                return {"added": len(cards) - replaced, "replaced": replaced, "absorbed": len(kept),
                        "version": self.version, "ms": ms, "merging": self.merges.overlapped(mark)}

    def delete(self, card_id: str) -> bool:
        """Remove the card with this id; False (nothing written) when there is none."""
        return self.delete_many([card_id])["deleted"] > 0

    def delete_many(self, card_ids: Iterable[str]) -> dict[str, Any]:
        """Remove the live cards with these ids in one commit (none: nothing written).

        Returns {"deleted", "unknown" (count), "unknown_ids" (the first 1,000), "version"}."""
        with self._lock:
            card_ids = list(card_ids)
            report = _waiting(lambda: self._live_index().delete(card_ids))
            self.refresh()
            if report["deleted"]:
                self.merges.after_write()
            return {"deleted": report["deleted"], "unknown": report["unknown"], "unknown_ids": report["unknown_ids"],
                    "version": self.version}

    def _live_index(self) -> Any:
        from ..live import LiveIndex

        with self._lock:
            if self._writer is None:
                self._writer = LiveIndex(self.path, workers=1, merge=False)  # merges: its own Merger
            self._writer.share(self._view.snapshot)  # the view's segments are open: not again
            return self._writer

    @contextmanager
    def _segment(self, cards: list[AgentCard], pause: Any = lambda: None) -> Iterator[Any]:
        """A segment of `cards` (documents and card store) built without any lock (`LiveIndex.prepare`),
        to publish while inside the block, and its store opened. A bad card is told as its file and line.
        `pause()` is called between the steps (a background merge yields there to writes under way)."""
        from ..generations import scratch_dir

        with scratch_dir(self.path.parent, f".{self.path.name}.agents-") as work:
            docs, store = work / "documents.jsonl", work / CARD_STORE
            rows: tuple[list[str], list[str]] = ([], [])
            pause()
            write_documents_and_store(cards, docs, store, rows)
            opened = CardStore(store, rows)  # its rows as written: nothing read back
            pause()
            try:
                with self._live_index().prepare(collection=docs, fmt="jsonl-any-id", work=work,
                                                extra_files={CARD_STORE: (store, CARD_STORE_FORMAT)}) as segment:
                    yield segment, opened
            except SsrError as exc:
                told = build_error(exc, docs, [c.source for c in cards])
                if told is exc:
                    raise
                raise told from exc

    def _replace(self, view: View, segments: list[int], wait: float = LOCK_WAIT) -> bool:
        """The live cards of `segments` of `view` added again as one segment that replaces them, built
        without the registry's lock and published (with it) only if those segments are unchanged since
        `view` (`LiveIndex.publish(replaces=...)`): a write made meanwhile is never undone. False when
        they changed (nothing written)."""
        from ..live import StaleCommit

        refs = view.snapshot.commit.segments
        replaces = {refs[s].name: refs[s].deletes_sha256 for s in segments}
        with self._lock:  # a card store's parsed-card cache is not shared between threads
            cards = [view.stores[s].get(cid) for s, cid in view.live_ids(segments)]
        with self._segment(cards, self.merges.yield_to_writes) as (segment, store):
            self.merges.yield_to_writes()  # a write under way commits first
            with self._lock:
                try:
                    report = _waiting(lambda: self._live_index().publish(segment, replaces=replaces), wait)
                except StaleCommit:
                    return False
                self._fresh[report["segment"]] = store
                self.refresh()
        return True

    def compact(self, attempts: int = 5) -> dict[str, Any]:
        """Every live card added again as one segment, in one commit: deleted cards dropped, each card
        store carried (what `ssr compact` runs on a registry; `LiveIndex.compact` knows no card stores).
        Returns {"segments_before", "documents", "dropped", "generation"}."""
        for _ in range(attempts):  # another process wrote meanwhile: read its commit and compact that
            with self._lock:
                self.refresh()
                view = self._view
            before = len(view.stores)
            dropped = int(view.bases[-1]) - len(view)
            if before > 1 or dropped:
                if not len(view):
                    raise SsrError(f"{self.path}: every card is deleted; nothing to compact into (add cards first)")
                if not self._replace(view, list(range(before))):
                    continue
            return {"segments_before": before, "documents": len(self), "dropped": dropped,
                    "generation": self.version}
        raise SsrError(f"{self.path}: other writers kept committing; compaction not done, try again")

    def warm_up(self, writes: bool = True) -> None:
        """Pay a process's first-request costs now (`agents.warm`): one discovery; with `writes`, the
        write path run on a mirror of this registry (removed after; this registry gets no commit)."""
        from .warm import warm_up

        warm_up(self, writes)

    # ------------------------------------------------------------------ merging

    def _plan(self) -> list[int]:
        return merge_plan([ref.documents for ref in self._view.snapshot.commit.segments], self.merge_at,
                          self.max_segments)

    def merge_once(self) -> bool:
        """One merge of the current plan (`merge_plan`): the planned segments' live cards added again
        as one segment replacing them (`_replace`: built without the lock; committed only if they are
        unchanged, so a write made meanwhile is never undone; the merge is then planned again). True
        when a merge was committed."""
        with self._lock:
            self.refresh()
            plan = self._plan()
            if not plan:
                return False
            view = self._view
        return self._replace(view, plan, wait=0.0 if self.merges.background else LOCK_WAIT)

def _waiting(write: Any, wait: float = LOCK_WAIT) -> dict[str, Any]:
    """Run a `LiveIndex` write, retrying while another process holds the writer lock (up to `wait` s)."""
    deadline = time.monotonic() + wait
    delay = 0.005
    while True:
        try:
            return dict(write())
        except SsrError as exc:
            if "another process is writing" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def open_registry(index_dir: str | os.PathLike[str]) -> LiveRegistry:
    """The registry at `index_dir` as it is live (its newest commit)."""
    return LiveRegistry.open(index_dir)
