"""Reading a live index: one commit opened (`Snapshot`, segments held) and searched (`LiveSearcher`).

Searching (`LiveSearcher`, and `Searcher` / `open_retriever` on such an index) goes through
`parts_search.PartsSearcher`: global N, df and avgdl over the live documents, each segment scored with
those weights, results merged by (score, matches, id). A reader keeps the commit it opened until
`reopen()`; segments it holds are never removed under it (`generations.SegmentHold`). `open_search`
and `open_bm25` pick the searcher of any index directory (plain, live or sharded).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import IndexFormatError, SsrError
from .format import Index, open_segment, resolve_index
from .generations import (
    Commit,
    SegmentHold,
    open_commit,
    read_commit,
)
from .live_files import Deletions, read_deletes
from .parts import Part
from .parts_search import PartsSearcher
from .retrieval import SearchResult

# ------------------------------------------------------------------------------- snapshots


@dataclass
class Snapshot:
    """One commit of an index, opened: its segments (memory-mapped, held) and their deletions."""

    root: Path
    commit: Commit
    indexes: list[Index]
    deletions: list[Deletions | None]
    holds: list[SegmentHold]

    @property
    def generation(self) -> int:
        return self.commit.generation

    @property
    def plain(self) -> bool:
        """One segment and nothing deleted: the ordinary searchers answer it."""
        return len(self.indexes) == 1 and self.deletions[0] is None

    def parts(self) -> list[Part]:
        out = []
        for ix, d in zip(self.indexes, self.deletions, strict=True):
            if d is None:
                out.append(Part(ix))
            else:
                out.append(Part(ix, d.mask, d.terms, d.df, d.tokens, d.count))
        return out

    def close(self) -> None:
        for h in self.holds:
            h.close()
        self.holds = []


def open_snapshot(path: str | os.PathLike[str], reuse: Snapshot | None = None, attempts: int = 20) -> Snapshot:
    """Open the newest commit of the index at `path`; segments already open in `reuse` are shared."""
    root = resolve_index(path)
    known = {}
    if reuse is not None:
        known = {(ix.path.name, ref.manifest_sha256): ix for ix, ref in zip(reuse.indexes, reuse.commit.segments,
                                                                             strict=True)}
    for _ in range(attempts):
        commit, holds = open_commit(root)
        try:
            if not commit.segments:
                raise IndexFormatError(f"{commit.path}: no segments")
            indexes, deletions = [], []
            for ref in commit.segments:
                ix = known.get((ref.name, ref.manifest_sha256)) or open_segment(root / ref.name, ref.manifest_sha256)
                d = None
                if ref.deletes is not None:
                    d = read_deletes(root / ref.name / ref.deletes, ref.deletes_sha256, ix, ref.documents)
                elif ref.documents != ix.n_docs:
                    raise IndexFormatError(f"{commit.path}: {ref.name} has {ix.n_docs} documents, the commit "
                                           f"point says {ref.documents} and lists no deletions")
                ix.root, ix.commit = root, commit
                indexes.append(ix)
                deletions.append(d)
            return Snapshot(root, commit, indexes, deletions, holds)
        except FileNotFoundError:
            for h in holds:
                h.close()
            continue  # a writer replaced a deletion file meanwhile: read the new commit
        except BaseException:
            for h in holds:
                h.close()
            raise
    raise IndexFormatError(f"{root}: files keep changing while opening (a writer is busy); try again")


def current_generation(path: str | os.PathLike[str]) -> int | None:
    commit = read_commit(resolve_index(path))
    return None if commit is None else commit.generation


class LiveSearcher:
    """A `retrieval.Retriever` over one commit of a (live) index; `reopen()` moves to the newest.

    method: "ssr" or "exhaustive" (an ssr index), "bm25" (a bm25 index); default by the index.
    refresh=True: reopen before every search (a cheap check of the newest commit's number).
    """

    def __init__(self, path: str | os.PathLike[str], method: str | None = None, refresh: bool = False,
                 k1: float | None = None, b: float | None = None, snapshot: Snapshot | None = None):
        self.path = Path(path)
        self.refresh = refresh
        self._method = method
        self._bm25 = {k: v for k, v in (("k1", k1), ("b", b)) if v is not None}
        self.snapshot = snapshot if snapshot is not None else open_snapshot(self.path)
        self._searcher = self._make()
        self._others: dict[str, PartsSearcher] = {}
        self._stores: dict[int, Any] = {}  # docstore.DocStore per part, opened on the first `doc`

    def _make(self, method: str | None = None) -> PartsSearcher:
        # segments: one set of levels per query over all of them (measured faster than probe segment by segment)
        return PartsSearcher(self.snapshot.parts(), method=method or self._method,  # type: ignore[arg-type]
                             shared=True, **self._bm25)  # type: ignore[arg-type]

    @property
    def method(self) -> str:
        return self._searcher.method

    @property
    def generation(self) -> int:
        return self.snapshot.generation

    @property
    def n_docs(self) -> int:
        return self._searcher.n_docs

    @property
    def settings(self) -> dict[str, Any]:
        return {**self._searcher.settings, "generation": self.generation}

    def reopen(self) -> bool:
        """Move to the newest commit; True when it changed. Segments still in use stay mapped."""
        if current_generation(self.path) == self.generation:
            return False
        old = self.snapshot
        self.snapshot = open_snapshot(self.path, reuse=old)
        self._searcher = self._make()
        self._others = {}
        self._stores = {}
        old.close()
        return True

    def _maybe_refresh(self) -> None:
        if self.refresh:
            self.reopen()

    def search(self, query: str, k: int | None = 10) -> SearchResult:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries, k: int | None = 10, threads: int | None = None,
                     method: str | None = None) -> list[SearchResult]:
        """Top-k of every query; `method` ("ssr" or "exhaustive") overrides the searcher's for this call."""
        self._maybe_refresh()
        searcher = self._searcher
        if method is not None and method != searcher.method:
            if method not in self._others:
                self._others[method] = self._make(method)
            searcher = self._others[method]
        return searcher.search_batch(queries, k, threads)

    def pool_sizes(self, queries, threads: int | None = None) -> np.ndarray:
        self._maybe_refresh()
        return self._searcher.pool_sizes(queries, threads)

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        return self._searcher.explain(query, doc)

    def doc(self, doc: str | int) -> str:
        """The stored text (`--store-text`) of a live document: an external id or a number of `SearchResult.docs`."""
        from .docstore import DocStore
        from .retrieval import internal_doc

        s = self._searcher
        number = internal_doc(doc, s.internal_id, "collection")
        i = int(np.searchsorted(s.bases, number, side="right")) - 1
        deleted = s.parts[i].deleted
        if not 0 <= number < int(s.bases[-1]) or (deleted is not None and deleted[number - int(s.bases[i])]):
            raise SsrError(f"no live document number {number}")
        if i not in self._stores:
            self._stores[i] = DocStore(s.parts[i].index)
        return self._stores[i].text(number - int(s.bases[i]))

    def close(self) -> None:
        self.snapshot.close()


def open_bm25(path: str | os.PathLike[str], k1: float | None = None, b: float | None = None):
    """BM25 over the index directory `path`: `bm25.BM25Searcher` for one segment without deletions,
    else a `LiveSearcher`. Either keeps the commit it opened for its whole life."""
    from .bm25 import BM25Searcher

    snap = open_snapshot(path)
    try:
        if snap.indexes[0].scoring != "bm25":
            raise SsrError(f"{snap.root}: built with scoring={snap.indexes[0].scoring!r}; BM25 needs an index "
                           "built with --scoring bm25")
        if not snap.plain:
            return LiveSearcher(path, "bm25", k1=k1, b=b, snapshot=snap)
        kw = {k: v for k, v in (("k1", k1), ("b", b)) if v is not None}
        searcher = BM25Searcher(snap.indexes[0], **kw)
    except BaseException:
        snap.close()
        raise
    searcher._snapshot = snap  # type: ignore[attr-defined]  # the segment hold lives as long as the searcher
    return searcher


def open_search(path: str | os.PathLike[str], method: str | None = None, verify: bool = False, **bm25: Any):
    """The retriever of `method` (default: by the index's scoring) over the index directory `path`:
    the ordinary searchers for a plain index, a `LiveSearcher` for one with several segments or
    deletions, `distributed.LocalSharded` for a sharded index. `verify`: the full byte check first. `bm25`: k1, b."""
    from .distributed.layout import is_sharded, verify_sharded
    from .format import open_index, verify_index
    from .retrieval import open_retriever

    sharded = is_sharded(path)
    if verify:
        problems = verify_sharded(path) if sharded else verify_index(path)
        if problems:
            raise IndexFormatError("; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)"
                                                              if len(problems) > 5 else ""))
    if sharded:  # searched in this process; `ssr search --ray` uses distributed.ShardedSearcher
        from .distributed.search import open_local

        return open_local(path, method, **bm25)
    snap = open_snapshot(path)
    scoring = snap.indexes[0].scoring
    method = method or ("bm25" if scoring == "bm25" else "ssr")
    if not snap.plain:
        return LiveSearcher(path, method, snapshot=snap, **bm25)
    snap.close()
    return open_retriever(open_index(path, verify=verify), method, **bm25)
