"""Live indexes: add, update and delete documents without a rebuild, ranked exactly as a rebuild would.

A live index is an ordinary index directory (`generations`) whose commit point lists several segments, each
with an optional deletion file and its ids to look up (`live_files`). Reading one is `live_search` (`open_snapshot`,
`LiveSearcher`, `open_search`; re-exported here, the one door of layer 3). This module writes: adding (then
merging, `live_merges`), deleting, compacting. Writers (`LiveIndex.add`, `delete`, `compact`, `ssr add|delete|
compact`) take the writer lock, stage their files, publish one new commit point: a crash leaves the last intact.
Over 400 lines because `_publish` is the one place every writer's commit goes through (adds, upserts,
merges, absorbing writes); splitting it would spread one lock-held sequence over two modules.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError, SsrError
from .format import Manifest, resolve_index
from .generations import READERS, Commit, IndexWriter
from .inputs import CHUNK_DOCS
from .live_compact import compact_segment
from .live_files import (
    DELETES_PREFIX,
    IdTable,
    SortedIds,
    Wanted,
    add_deletions,
    segment_ids,
    wanted_ids,
    write_deletes,
)
from .live_merges import absorbing, merge_once
from .live_search import LiveSearcher, Snapshot, current_generation, open_bm25, open_search, open_snapshot
from .live_segments import ScratchStaging, build_segment

__all__ = ["LiveIndex", "LiveSearcher", "Prepared", "Snapshot", "StaleCommit", "current_generation", "open_bm25",
           "open_search", "open_snapshot"]


class StaleCommit(SsrError):
    """`LiveIndex.add(expect_generation=N)` found a newer commit than N (or `publish(replaces=...)` found
    a replaced segment gone or changed): nothing was written."""


@dataclass
class Prepared:
    """A segment built by `LiveIndex.prepare` outside the writer lock, waiting for `publish`."""

    folder: Path
    manifest: Manifest
    label: str


# --------------------------------------------------------------------------------- writing


class LiveIndex:
    """Changes to an index without a rebuild: `add`, `delete`, `compact`; `info` lists the segments.

    Each call takes the index's writer lock (failing fast if another writer holds it), writes its
    files, publishes one new commit point and returns a report (a dict). Searchers opened before
    keep their commit until they reopen.
    """

    def __init__(self, path: str | os.PathLike[str], quiet: bool = True, workers: int | None = None,
                 chunk_docs: int = CHUNK_DOCS, merge: bool = True):
        self.root = resolve_index(path)
        self.merge_after_add = merge  # `add` merges the newest segments after its commit (`merge`)
        self.quiet = quiet
        self.workers = workers or os.cpu_count() or 1
        self.chunk_docs = chunk_docs
        self._last: Snapshot | None = None  # segments are immutable: the next call reuses them
        self._ids: dict[tuple[str, str], IdTable | SortedIds] = {}  # (segment, manifest sha256) -> its ids, likewise

    def share(self, snapshot: Snapshot) -> None:
        """Reuse the segments a reader of this index holds open (`snapshot`, which stays the reader's):
        the next call opens only segments newer than it (an agent registry's writes)."""
        self._last = snapshot

    def _snapshot(self) -> Snapshot:
        snap = open_snapshot(self.root, reuse=self._last)
        self._last = snap
        return snap

    # ----------------------------------------------------------------------- add

    def add(self, docs: Iterable[Any] | None = None, *, collection: str | os.PathLike[str] | None = None,
            fmt: str = "auto", upsert: bool = False, skip_bad_lines: bool = False,
            extra_files: dict[str, tuple[str | os.PathLike[str], str]] | None = None,
            expect_generation: int | None = None) -> dict[str, Any]:
        """Add documents: `docs` ((id, text) pairs or dicts) or a `collection` file (TSV or JSONL).

        An id that is live in the index is an error (nothing is written) unless `upsert`, which
        deletes the old document in the same commit. `extra_files` (name -> (path, format id)) are
        moved into the new segment and registered in its manifest, as `build_index` does (an agent
        registry's card store for the added cards). `expect_generation`: write only if the index is
        still at that commit (checked under the writer lock), else raise `StaleCommit`: a caller that
        re-adds documents it read earlier (an agent registry's merges) never undoes a newer write.
        Built under the writer lock (`prepare` + `publish` build it before taking it); once visible, the newest
        segments are merged as `live_merges.size_plan` says (`merge`; not if merge=False). Returns {"added",
        "replaced", "segment", "generation", "seconds", "merges" (`merge`'s list)}.
        """
        source, label = _source(docs, collection)
        started = time.time()
        with IndexWriter(self.root, append=True) as writer:
            snap = self._snapshot()
            try:
                _check_generation(self.root, snap, expect_generation)
                staged, manifest = build_segment(writer, snap.indexes[0].manifest, source, fmt,
                                                  skip_bad_lines, self.chunk_docs, self.workers, self.quiet,
                                                  extra_files)
                report = self._publish(writer, snap, Prepared(staged, manifest, label), upsert, None, started)
            finally:
                snap.close()
        report["merges"] = self.merge() if self.merge_after_add else []
        return report

    def merge(self) -> list[dict[str, Any]]:
        """Merge the newest segments while `live_merges.size_plan` finds some (one report each,
        `live_merges.merge_once`); one another writer got in the way of is left for later: {"postponed": why}."""
        done: list[dict[str, Any]] = []
        try:
            while (report := merge_once(self)) is not None:
                done.append(report)
        except SsrError as exc:  # StaleCommit, or another process holds the writer lock: later
            done.append({"postponed": str(exc)})
        return done

    @contextmanager
    def prepare(self, docs: Iterable[Any] | None = None, *, collection: str | os.PathLike[str] | None = None,
                fmt: str = "auto", skip_bad_lines: bool = False,
                extra_files: dict[str, tuple[str | os.PathLike[str], str]] | None = None,
                work: Path | None = None) -> Iterator[Prepared]:
        """Build a segment of documents (as `add` would) without the writer lock, in a scratch folder
        beside the index (removed on exit, or by a later writer when this process dies; or in the
        caller's `work` folder, on the index's file system); `publish` commits it, holding the lock
        only for that. Safe beside other threads' `publish` calls."""
        from contextlib import nullcontext

        from .format import read_manifest
        from .generations import read_commit, scratch_dir

        source, label = _source(docs, collection)
        commit = read_commit(self.root)
        if commit is None or not commit.segments:
            raise SsrError(f"{self.root}: not an ssr index with a sound commit point; nothing changed")
        ref = commit.segments[0]  # every segment carries the index's settings: the first one's are read
        base = read_manifest(self.root / ref.name, ref.manifest_sha256)
        with nullcontext(work) if work is not None else scratch_dir(self.root.parent, f".{self.root.name}.build-") \
                as folder:
            staged, manifest = build_segment(ScratchStaging(folder), base, source, fmt, skip_bad_lines,
                                             self.chunk_docs, self.workers, self.quiet, extra_files)
            yield Prepared(staged, manifest, label)

    def publish(self, prepared: Prepared, *, upsert: bool = False, expect_generation: int | None = None,
                replaces: dict[str, str | None] | None = None) -> dict[str, Any]:
        """Commit a `prepare`d segment, as `add` would (`upsert`, `expect_generation` alike).

        `replaces` (segment name -> its deletion file's sha256, None for none): the new segment holds
        exactly the live documents of these segments, which leave the commit with it (a merge). They
        must still be in the index with those deletion files, else `StaleCommit` and nothing written:
        a merge built from an older commit then never undoes a write made meanwhile elsewhere. Other
        segments may have changed; the new segment's ids are not looked up (they were live only there).
        With `upsert` too: a write absorbing those segments (`live_merges.absorbing`).
        """
        started = time.time()
        with IndexWriter(self.root, append=True) as writer:
            snap = self._snapshot()
            try:
                _check_generation(self.root, snap, expect_generation)
                staged = writer.adopt(prepared.folder)
                return self._publish(writer, snap, Prepared(staged, prepared.manifest, prepared.label), upsert,
                                     replaces, started)
            finally:
                snap.close()

    def _publish(self, writer: IndexWriter, snap: Snapshot, new_segment: Prepared, upsert: bool,
                 replaces: dict[str, str | None] | None, started: float) -> dict[str, Any]:
        """The commit of `add` and `publish`: old versions deleted (`upsert`) or segments replaced."""
        staged, manifest, label = new_segment.folder, new_segment.manifest, new_segment.label
        n_new = int(manifest.counts.documents)
        # the new segment's ids from its id table (never opened here: its first reader opens it, once)
        table = IdTable(staged, n_new)
        at = None  # where the new segment goes in the commit: last, or a merge's at its first replaced segment's place
        if replaces is not None and not upsert:
            (refs, at), replaced = _replacing(self.root, snap, replaces, n_new), 0
        else:
            wanted = table.every_id()
            hits = self._find(snap, wanted)
            hits = hits if replaces is None else absorbing(self.root, snap, replaces, hits)
            replaced = sum(len(d) for d in hits.values())
            if replaced and not upsert:
                seg, docs_found = next(iter(hits.items()))
                taken = self._ids[_key(snap, seg)].id_bytes(int(docs_found[0]))
                pos = wanted.encoded.index(taken)
                raise InputError(label, None, f"document id {taken.decode('utf-8', 'surrogatepass')!r} "
                                 f"(document {pos + 1} of the input) is already in the index; use --upsert to "
                                 f"replace it ({replaced} ids in all)")
            refs = [r for r in self._with_deletions(writer, snap, hits, True) if r[0].name not in (replaces or ())]
        at = len(refs) if at is None else at
        refs.insert(at, (staged, n_new, None, None))
        commit = _commit(writer, refs)
        ref = commit.segments[at]
        self._ids[(ref.name, ref.manifest_sha256)] = table  # memory-mapped: the rename left it valid
        return {"added": int(manifest.counts.documents), "replaced": replaced, "segment": ref.name,
                "generation": commit.generation, "seconds": round(time.time() - started, 3)}

    # -------------------------------------------------------------------- delete

    def delete(self, ids: Iterable[str]) -> dict[str, Any]:
        """Delete the live documents with these ids. Unknown ids are counted and listed, never an error.

        Returns {"deleted", "unknown" (count), "unknown_ids" (the first 1,000), "repeated", "generation"}.
        """
        started = time.time()
        wanted: list[str] = []
        seen: set[str] = set()
        repeated = 0
        for i in ids:
            if not isinstance(i, str):
                raise SsrError(f"delete: ids are strings, got {type(i).__name__}")
            if i in seen:
                repeated += 1
                continue
            seen.add(i)
            wanted.append(i)
        asked = wanted_ids([i.encode("utf-8", "surrogatepass") for i in wanted])
        with IndexWriter(self.root, append=True) as writer:
            snap = self._snapshot()
            try:
                hits, found = self._find(snap, asked, with_positions=True)
                deleted = sum(len(d) for d in hits.values())
                generation = snap.generation
                if deleted:
                    refs = self._with_deletions(writer, snap, hits)
                    generation = _commit(writer, refs).generation
            finally:
                snap.close()
        unknown = [wanted[i] for i in np.flatnonzero(~found).tolist()]
        return {"deleted": deleted, "unknown": len(unknown), "unknown_ids": unknown[:1000], "repeated": repeated,
                "generation": generation, "seconds": round(time.time() - started, 3)}

    # ------------------------------------------------------------------- compact

    def compact(self) -> dict[str, Any]:
        """Merge every segment into one, without the deleted documents (memory bounded as a build's)."""
        started = time.time()
        with IndexWriter(self.root, append=True) as writer:
            snap = self._snapshot()
            try:
                before = len(snap.indexes)
                extra = sorted({n for ix in snap.indexes for n in ix.manifest.extra_files})
                if extra:  # their rows follow the documents: only their owner can carry them
                    raise SsrError(f"{self.root}: its segments hold {', '.join(extra)}, which compaction cannot "
                                   "carry; an agent registry compacts with `ssr compact` or LiveRegistry.compact")
                dropped = sum(d.count for d in snap.deletions if d is not None)
                stored = {ix.manifest.doc_store is not None for ix in snap.indexes}
                if len(stored) > 1:  # added segments take the base's setting: a mix is not ours
                    raise SsrError(f"{self.root}: some segments store their texts (--store-text) and some do not; "
                                   "not compacting")
                if snap.plain:  # one segment, nothing deleted: already compact
                    return {"segments_before": 1, "documents": snap.indexes[0].n_docs, "dropped": 0,
                            "generation": snap.generation, "seconds": round(time.time() - started, 3)}
                staged, manifest = compact_segment(writer, snap, self.chunk_docs, self.workers, self.quiet)
                n = manifest.counts.documents
                commit = _commit(writer, [(staged, n, None, None)])
            finally:
                snap.close()
        return {"segments_before": before, "documents": n, "dropped": dropped, "generation": commit.generation,
                "seconds": round(time.time() - started, 3)}

    # ---------------------------------------------------------------------- info

    def info(self) -> dict[str, Any]:
        snap = self._snapshot()
        try:
            segments = []
            for ix, d, ref in zip(snap.indexes, snap.deletions, snap.commit.segments, strict=True):
                segments.append({"name": ref.name, "documents": ix.n_docs, "live": ref.documents,
                                 "deleted": 0 if d is None else d.count, "terms": ix.n_terms,
                                 "postings": ix.manifest.counts.postings})
            return {"generation": snap.generation, "segments": segments,
                    "live": sum(s["live"] for s in segments), "deleted": sum(s["deleted"] for s in segments)}
        finally:
            snap.close()

    # ------------------------------------------------------------------- helpers

    def _find(self, snap: Snapshot, wanted: Wanted, with_positions: bool = False):
        """Live documents with these ids: {segment position: docs}, and (optionally) which ids were found."""
        found = np.zeros(len(wanted.encoded), dtype=bool)
        hits: dict[int, np.ndarray] = {}
        keys = [_key(snap, s) for s in range(len(snap.indexes))]
        self._ids = {key: t for key, t in self._ids.items() if key in keys}
        for s, (ix, d) in enumerate(zip(snap.indexes, snap.deletions, strict=True)):
            table = self._ids.get(keys[s])
            if table is None:
                table = self._ids[keys[s]] = segment_ids(ix.path, ix)
            docs = table.lookup(wanted)
            live = docs >= 0
            if d is not None:
                live[live] = ~d.mask[docs[live]]
            if live.any():
                hits[s] = docs[live]
                found |= live
        return (hits, found) if with_positions else hits

    def _with_deletions(self, writer: IndexWriter, snap: Snapshot, hits: dict[int, np.ndarray], adding: bool = False):
        """The current segments as commit entries, with new deletion files where `hits` deletes documents
        (`adding`: a new segment follows, so every emptied segment may leave)."""
        refs = []
        generation = snap.generation + 1
        for s, (ix, d, ref) in enumerate(zip(snap.indexes, snap.deletions, snap.commit.segments, strict=True)):
            if s not in hits:
                refs.append((ix.path, ref.documents, ref.deletes, ref.deletes_sha256))
                continue
            new = add_deletions(ix, d, hits[s])
            live = ix.n_docs - new.count
            if live == 0 and (adding or len(snap.indexes) > 1):
                continue  # every document deleted: the segment leaves the index (the last one stays, empty)
            name = f"{DELETES_PREFIX}{generation}.npz"
            sha = write_deletes(ix.path / name, new)
            refs.append((ix.path, live, name, sha))
        if not refs and not adding:  # every segment emptied: keep the first, all deleted, so the index stays openable
            ix, ref = snap.indexes[0], snap.commit.segments[0]
            new = add_deletions(ix, snap.deletions[0], hits.get(0, np.zeros(0, dtype=np.int64)))
            name = f"{DELETES_PREFIX}{generation}.npz"
            refs.append((ix.path, 0, name, write_deletes(ix.path / name, new)))
        return refs


def _source(docs: Iterable[Any] | None, collection: str | os.PathLike[str] | None) -> tuple[Any, str]:
    """What the build reads (documents given in Python go as they are: any iterable, read once), and its name."""
    if (docs is None) == (collection is None):
        raise SsrError("add: give documents or a collection file (one of them)")
    return (docs, "documents") if collection is None else (Path(collection), str(collection))


def _check_generation(root: Path, snap: Snapshot, expect: int | None) -> None:
    if expect is not None and snap.generation != expect:
        raise StaleCommit(f"{root}: changed since generation {expect} (now {snap.generation}); nothing written")


def _replacing(root: Path, snap: Snapshot, replaces: dict[str, str | None], n_docs: int) -> tuple[list[Any], int]:
    """The commit entries of every segment but `replaces`, which must be as the caller read them, and the
    position among them of the first replaced one: the merged segment goes there, so segments added in id
    order stay in id order (collection numbers then ascend with ids: the kernels' `monotone` shortcuts)."""
    live = 0
    current = {ref.name: ref for ref in snap.commit.segments}
    for name, sha in replaces.items():
        ref = current.get(name)
        if ref is None or ref.deletes_sha256 != sha:
            raise StaleCommit(f"{root}: {name} changed since it was read (now generation {snap.generation}); "
                              "nothing written")
        live += ref.documents
    if live != n_docs:
        raise SsrError(f"{root}: the new segment holds {n_docs} documents, the segments it replaces {live}; "
                       "nothing written")
    names = [ref.name for ref in snap.commit.segments]
    at = min((names.index(name) for name in replaces), default=len(names) - len(replaces))
    return [(ix.path, ref.documents, ref.deletes, ref.deletes_sha256)
            for ix, ref in zip(snap.indexes, snap.commit.segments, strict=True) if ref.name not in replaces], at


def _key(snap: Snapshot, s: int) -> tuple[str, str]:
    """What `LiveIndex._ids` knows segment `s` of `snap` by (segments are immutable)."""
    ref = snap.commit.segments[s]
    return ref.name, ref.manifest_sha256


def _commit(writer: IndexWriter, refs: list[tuple[Path, int, str | None, str | None]]) -> Commit:
    commit = writer.commit([(p, n) for p, n, _, _ in refs], deletes=[d for _, _, d, _ in refs],
                           deletes_sha256=[s for _, _, _, s in refs])
    _clean_deletions(writer.root, commit)
    return commit


def _clean_deletions(root: Path, commit: Commit) -> None:
    """Remove deletion files the commit does not reference, in segments no reader holds."""
    import fcntl

    for ref in commit.segments:
        seg = root / ref.name
        stale = [p for p in seg.glob(f"{DELETES_PREFIX}*.npz") if p.name != ref.deletes]
        if not stale:
            continue
        try:
            fd = os.open(seg / READERS, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a reader holds the segment (it may still read an older file): next writer
            for p in stale:
                p.unlink(missing_ok=True)
        finally:
            os.close(fd)
