"""Live indexes: add, update and delete documents without a rebuild, ranked exactly as a rebuild would.

A live index is an ordinary index directory (`generations`) whose commit point lists several
segments, each with an optional deletion file:

    seg-M/deletes-G.npz    written by generation G: `bits` (uint8, the deleted documents bit-packed,
                           `np.packbits` order), and the df lost to them, read from the segment's
                           forward index when they were deleted: `terms` (int64, sorted), `df`
                           (int64) and `tokens` (int64[1], BM25's deleted length). Its sha256 is in
                           the commit point; a segment is never rewritten, a new file replaces it.
    seg-M/live-ids.*.npy   the segment's ids for look-ups by a writer: `hash` (uint64[N], sorted
                           fnv1a64 of the UTF-8 id), `doc` (uint32[N], the document of each hash),
                           `offsets` (int64[N + 1]) and `bytes` (uint8) the ids themselves. Listed in
                           the manifest of segments made here; made once, on the first write, for a
                           segment made by `build_index` (a derived table; its sizes are checked).

Searching (`LiveSearcher`, and `Searcher` / `open_retriever` on such an index) goes through
`parts.PartsSearcher`: global N, df and avgdl over the live documents, each segment scored with
those weights, results merged by (score, matches, id). A reader keeps the commit it opened until
`reopen()`; segments it holds are never removed under it (`generations.SegmentHold`).

Writers (`LiveIndex.add`, `delete`, `compact`, and `ssr add|delete|compact`) take the index's writer
lock, stage their new files, and publish them with one new commit point: a crash at any moment
leaves the previous commit and everything it references intact.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import IndexFormatError, InputError, SsrError
from .format import Counts, Index, Manifest, open_segment, resolve_index
from .generations import (
    READERS,
    Commit,
    IndexWriter,
    SegmentHold,
    open_commit,
    read_commit,
)
from .parts import Part, PartsSearcher
from .retrieval import SearchResult

DELETES_PREFIX = "deletes-"
ID_TABLE = ("hash", "doc", "offsets", "bytes")
ID_DTYPES = {"hash": np.uint64, "doc": np.uint32, "offsets": np.int64, "bytes": np.uint8}


class StaleCommit(SsrError):
    """`LiveIndex.add(expect_generation=N)` found a newer commit than N: nothing was written."""


def id_table_file(name: str) -> str:
    return f"live-ids.{name}.npy"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- deletion files


@dataclass
class Deletions:
    """What is deleted from one segment: the mask and the df and tokens it takes away."""

    mask: np.ndarray  # bool[N]
    terms: np.ndarray  # int64, sorted
    df: np.ndarray  # int64
    tokens: int

    @property
    def count(self) -> int:
        return int(np.count_nonzero(self.mask))


def write_deletes(path: Path, d: Deletions) -> str:
    """Write a deletion file atomically; returns its sha256."""
    from .atomic import atomic_write

    buf = io.BytesIO()
    np.savez(buf, bits=np.packbits(d.mask), terms=d.terms.astype(np.int64), df=d.df.astype(np.int64),
             tokens=np.array([d.tokens], dtype=np.int64))
    data = buf.getvalue()
    with atomic_write(path, "wb", encoding=None, newline=None) as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def read_deletes(path: Path, sha256: str | None, index: Index, live: int) -> Deletions:
    """Read and check a deletion file against its commit entry and its segment."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise IndexFormatError(f"{path}: unreadable ({exc.strerror})") from exc
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise IndexFormatError(f"{path}: differs from the checksum in the commit point (edited or corrupt)")
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            bits, terms, df, tokens = z["bits"], z["terms"], z["df"], z["tokens"]
    except (ValueError, KeyError, OSError, EOFError) as exc:
        raise IndexFormatError(f"{path}: corrupt deletion file ({exc})") from exc
    n = index.n_docs
    problem = None
    if bits.dtype != np.uint8 or bits.shape != ((n + 7) // 8,):
        problem = f"{bits.shape[0]} bytes of bits for {n} documents"
    elif terms.dtype != np.int64 or df.dtype != np.int64 or terms.shape != df.shape or tokens.shape != (1,):
        problem = "arrays of the wrong type or shape"
    elif terms.shape[0] and (terms[0] < 0 or terms[-1] >= index.n_terms or np.any(np.diff(terms) <= 0)
                             or df.min() <= 0 or np.any(df > _df_of(index, terms))):
        problem = "deleted df out of range"
    if problem is None:
        mask = np.unpackbits(bits, count=n).astype(bool)
        if n - int(np.count_nonzero(mask)) != live:
            problem = f"{n - int(np.count_nonzero(mask))} live documents, the commit point says {live}"
    if problem is not None:
        raise IndexFormatError(f"{path}: corrupt deletion file ({problem})")
    return Deletions(mask, terms, df, int(tokens[0]))


def _df_of(index: Index, terms: np.ndarray) -> np.ndarray:
    """df of `terms` only: `Index.df()` would read the whole vocabulary's offsets (O(V) per open)."""
    indptr = index.postings_indptr
    return (np.asarray(indptr[terms + 1], dtype=np.int64) - np.asarray(indptr[terms], dtype=np.int64))


def add_deletions(index: Index, old: Deletions | None, docs: np.ndarray) -> Deletions:
    """`old` plus the documents `docs` (not deleted yet), with their df read from the forward index."""
    from .parts import deletion_stats

    mask = np.zeros(index.n_docs, dtype=bool) if old is None else old.mask.copy()
    fresh = np.zeros(index.n_docs, dtype=bool)
    fresh[docs] = True
    terms, df, tokens = deletion_stats(index, fresh)
    mask |= fresh
    if old is not None and old.terms.shape[0]:
        all_terms = np.concatenate([old.terms, terms])
        all_df = np.concatenate([old.df, df])
        terms, inverse = np.unique(all_terms, return_inverse=True)
        df = np.bincount(inverse, weights=all_df).astype(np.int64)
        tokens += old.tokens
    return Deletions(mask, terms, df, tokens)


# ------------------------------------------------------------------------------- id tables


class IdTable:
    """A segment's ids, looked up by hash (memory-mapped `live-ids.*.npy`)."""

    def __init__(self, segment: Path, n_docs: int):
        arrays = {}
        for name in ID_TABLE:
            path = segment / id_table_file(name)
            try:
                arrays[name] = np.load(path, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError) as exc:
                raise IndexFormatError(f"{path}: corrupt id table ({exc})") from exc
            if arrays[name].dtype != ID_DTYPES[name] or arrays[name].ndim != 1:
                raise IndexFormatError(f"{path}: corrupt id table (dtype {arrays[name].dtype})")
        self.hash, self.doc, self.offsets, self.bytes = (arrays[n] for n in ID_TABLE)
        if (self.hash.shape[0] != n_docs or self.doc.shape[0] != n_docs or self.offsets.shape[0] != n_docs + 1
                or int(self.offsets[-1]) != self.bytes.shape[0]):
            raise IndexFormatError(f"{segment}: id table sizes differ from the segment's {n_docs} documents")

    def lookup(self, hashes: np.ndarray, encoded: list[bytes]) -> np.ndarray:
        """The document of each id (-1: not in this segment). `hashes` from `id_hashes(encoded)`."""
        found = np.full(len(encoded), -1, dtype=np.int64)
        n = self.hash.shape[0]
        if n == 0 or not encoded:
            return found
        lo = np.searchsorted(self.hash, hashes, side="left")
        hi = np.searchsorted(self.hash, hashes, side="right")
        for i in np.flatnonzero(hi > lo).tolist():
            for j in range(int(lo[i]), int(hi[i])):  # the strings decide: a shared hash is not a match
                d = int(self.doc[j])
                if not 0 <= d < n:
                    raise IndexFormatError("id table: a document number out of range (corrupt)")
                a, b = int(self.offsets[d]), int(self.offsets[d + 1])
                if self.bytes[a:b].tobytes() == encoded[i]:
                    found[i] = d
                    break
        return found


def id_hashes(encoded: list[bytes]) -> np.ndarray:
    from .hashing import hash_spans

    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    raw = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return hash_spans(raw, offsets, np.uint64(0), np.uint64(2**64 - 1))


def write_id_table(segment: Path, ids: Any) -> None:
    """Write the id table of a segment whose ids (an Arrow string array) are given, atomically per file."""
    import pyarrow as pa

    from .atomic import atomic_write

    ids = ids.cast(pa.large_string()) if ids.type != pa.large_string() else ids
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int64)[ids.offset : ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]] if len(ids) else \
        np.zeros(0, dtype=np.uint8)
    offsets = offsets - offsets[0]
    from .hashing import hash_spans

    hashes = hash_spans(data, offsets.astype(np.int64), np.uint64(0), np.uint64(2**64 - 1))
    order = np.argsort(hashes, kind="stable")
    arrays = {"hash": hashes[order], "doc": order.astype(np.uint32), "offsets": offsets.astype(np.int64),
              "bytes": np.ascontiguousarray(data)}
    for name in ID_TABLE:
        with atomic_write(segment / id_table_file(name), "wb", encoding=None, newline=None) as f:
            np.save(f, arrays[name], allow_pickle=False)


def ensure_id_table(segment: Path, index: Index) -> IdTable:
    """The segment's id table, made now from its doc_ids.parquet when it has none (or a bad one)."""
    try:
        return IdTable(segment, index.n_docs)
    except IndexFormatError:
        write_id_table(segment, index.doc_id_array())
        return IdTable(segment, index.n_docs)


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
        return PartsSearcher(self.snapshot.parts(), method=method or self._method, **self._bm25)  # type: ignore[arg-type]

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


# --------------------------------------------------------------------------------- writing


class LiveIndex:
    """Changes to an index without a rebuild: `add`, `delete`, `compact`; `info` lists the segments.

    Each call takes the index's writer lock (failing fast if another writer holds it), writes its
    files, publishes one new commit point and returns a report (a dict). Searchers opened before
    keep their commit until they reopen.
    """

    def __init__(self, path: str | os.PathLike[str], quiet: bool = True, workers: int | None = None,
                 chunk_docs: int = 100_000):
        self.root = resolve_index(path)
        self.quiet = quiet
        self.workers = workers or os.cpu_count() or 1
        self.chunk_docs = chunk_docs
        self._last: Snapshot | None = None  # segments are immutable: the next call reuses them

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
        Returns {"added", "replaced", "segment", "generation"}.
        """
        if (docs is None) == (collection is None):
            raise SsrError("add: give documents or a collection file (one of them)")
        started = time.time()
        # documents given in Python go to the build as they are (any iterable, read once)
        source: Any = docs if collection is None else Path(collection)
        label = "documents" if collection is None else str(collection)
        with IndexWriter(self.root, append=True) as writer:
            snap = self._snapshot()
            try:
                if expect_generation is not None and snap.generation != expect_generation:
                    raise StaleCommit(f"{self.root}: changed since generation {expect_generation} "
                                      f"(now {snap.generation}); nothing written")
                staged, manifest = _build_segment(writer, snap.indexes[0].manifest, source, fmt,
                                                  skip_bad_lines, self.chunk_docs, self.workers, self.quiet,
                                                  extra_files)
                new = open_segment(staged)
                new_ids = new.doc_id_array()
                encoded = [i.encode("utf-8", "surrogatepass") for i in new_ids.to_pylist()]
                hashes = id_hashes(encoded)
                hits = self._find(snap, hashes, encoded)
                replaced = sum(len(d) for d in hits.values())
                if replaced and not upsert:
                    seg, docs_found = next(iter(hits.items()))
                    pos = _position_of(snap, seg, int(docs_found[0]), hashes, encoded)
                    raise InputError(label, None, f"document id {new_ids[pos].as_py()!r} (document "
                                     f"{pos + 1} of the input) is already in the index; use --upsert to "
                                     f"replace it ({replaced} ids in all)")
                refs = self._with_deletions(writer, snap, hits, adding=True)
                refs.append((staged, new.n_docs, None, None))
                new.close()
                commit = _commit(writer, refs)
            finally:
                snap.close()
        return {"added": int(manifest.counts.documents), "replaced": replaced, "segment": commit.segments[-1].name,
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
        encoded = [i.encode("utf-8", "surrogatepass") for i in wanted]
        hashes = id_hashes(encoded)
        with IndexWriter(self.root, append=True) as writer:
            snap = self._snapshot()
            try:
                hits, found = self._find(snap, hashes, encoded, with_positions=True)
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
                staged, manifest = _compact_segment(writer, snap, self.chunk_docs, self.workers, self.quiet)
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

    def _find(self, snap: Snapshot, hashes: np.ndarray, encoded: list[bytes], with_positions: bool = False):
        """Live documents with these ids: {segment position: docs}, and (optionally) which ids were found."""
        found = np.zeros(len(encoded), dtype=bool)
        hits: dict[int, np.ndarray] = {}
        for s, (ix, d) in enumerate(zip(snap.indexes, snap.deletions, strict=True)):
            docs = ensure_id_table(ix.path, ix).lookup(hashes, encoded)
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


def _position_of(snap: Snapshot, seg: int, doc: int, hashes: np.ndarray, encoded: list[bytes]) -> int:
    """The input position of the new document whose id is segment `seg`'s document `doc`."""
    table = IdTable(snap.indexes[seg].path, snap.indexes[seg].n_docs)
    a, b = int(table.offsets[doc]), int(table.offsets[doc + 1])
    target = table.bytes[a:b].tobytes()
    return encoded.index(target)


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


# ----------------------------------------------------------------------- building segments


def _derived_manifest(base: Manifest, counts: dict[str, int], ids: dict[str, Any], source: dict[str, Any],
                      seed: int, seeds_tried: list[dict[str, Any]], build: dict[str, Any],
                      extra_files: dict[str, str] | None = None) -> Manifest:
    """A new segment's manifest: the base segment's signal settings, its own counts and history."""
    h = base.signals.hash
    signals = replace(base.signals, hash=replace(h, seed=seed, collisions=tuple(seeds_tried)))
    return Manifest(scoring=base.scoring, counts=Counts(**counts), signals=signals, ids=ids, input=source,
                    build=build, extra_files=dict(extra_files or {}))


def _build_segment(writer: IndexWriter, base: Manifest, source: Any, fmt: str, skip_bad_lines: bool,
                   chunk_docs: int, workers: int, quiet: bool,
                   extra_files: dict[str, tuple[str | os.PathLike[str], str]] | None = None,
                   header: bool = False) -> tuple[Path, Manifest]:
    """Build a staged segment of `source` (a file or an iterable of documents) with the base segment's
    settings, as `build_index` does (its `_build_into` and `_manifest`)."""
    import pyarrow.parquet as pq

    from .format import write_manifest
    from .indexing.builder import MAX_SEED_ATTEMPTS, BuildConfig, _build_into, _manifest
    from .indexing.runs import HashCollision
    from .signals import DEFAULT_CAP
    from .stopwords import StopwordList

    s = base.signals
    stop = StopwordList(s.stopwords_id, frozenset(s.stopwords))
    if stop.sha256 != s.stopwords_sha256:
        raise IndexFormatError(f"stopword list of the index does not match its checksum {s.stopwords_sha256}")
    config = BuildConfig(fmt=fmt, header=header, stop=stop, cap=s.cap if s.cap is not None else DEFAULT_CAP,
                         chunk_docs=chunk_docs, workers=workers, skip_bad_lines=skip_bad_lines, scoring=base.scoring,
                         stem=s.stem, quiet=quiet, hash_bits=s.hash.bits, store_text=base.doc_store is not None)
    seed = s.hash.seed
    seeds_tried: list[dict[str, Any]] = []
    started = time.time()
    while True:
        tmp = writer.staging()
        try:
            stats = _build_into(tmp, source, config, seed)
            break
        except HashCollision as exc:
            # the new segment takes the next seed; queries are hashed per segment, so it mixes with the others
            seeds_tried.append({"seed": seed, "collision": [exc.first, exc.second]})
            writer.discard(tmp)
            if len(seeds_tried) >= MAX_SEED_ATTEMPTS or not isinstance(source, (str, os.PathLike)):
                # an iterable cannot be read twice
                raise SsrError(f"signal hash collision in the added documents ({exc}); add them from a file") \
                    from exc
            seed += 1
    write_id_table(tmp, pq.read_table(tmp / "doc_ids.parquet", columns=["id"]).column("id").combine_chunks())
    for name, (path, _) in (extra_files or {}).items():
        shutil.move(os.fspath(path), os.fspath(tmp / name))
    manifest = _manifest(config, stats, seed, seeds_tried, started, extra_files or {})
    write_manifest(tmp, manifest)
    return tmp, manifest


def _forward_batch(ix: Index, docs: np.ndarray, keep_tf: bool):
    """The signals of documents `docs` of a segment as a `SignalBatch`, read from its forward index."""
    from .extract import SignalBatch
    from .kernels.live import gather_spans, term_frequencies

    fi = np.asarray(ix.forward_indptr)
    starts = fi[docs]
    lengths = fi[docs + 1] - starts
    doc_offsets = np.zeros(docs.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=doc_offsets[1:])
    terms = gather_spans(ix.forward_terms, starts, lengths).astype(np.int64)
    if terms.shape[0] and int(terms.max()) >= ix.n_terms:  # open checks offsets, not forward contents
        raise IndexFormatError(f"{ix.path}: forward_terms holds a term id >= {ix.n_terms} (corrupt index)")
    data, offsets = gather_strings_of(ix, terms)
    if keep_tf:
        doc_of = np.repeat(docs.astype(np.int64), lengths)
        counts = term_frequencies(ix.postings_indptr, ix.postings_docs, ix.postings_tf, terms, doc_of)
        if counts.shape[0] and int(counts.min()) == 0:
            raise IndexFormatError(f"{ix.path}: the forward index lists a term the postings lack (corrupt)")
        assert ix.doc_lengths is not None  # a BM25 segment
        tokens = np.asarray(ix.doc_lengths[docs], dtype=np.int64)
    else:
        counts = np.ones(terms.shape[0], dtype=np.uint32)
        tokens = np.zeros(docs.shape[0], dtype=np.int64)
    return SignalBatch(doc_offsets=doc_offsets, data=data, offsets=offsets,
                       is_bigram=np.zeros(terms.shape[0], dtype=bool), counts=counts, doc_tokens=tokens)


def gather_strings_of(ix: Index, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signal strings of term ids, as (bytes uint8, offsets int64[len + 1])."""
    from .kernels.live import gather_spans
    from .validate import check_terms

    check_terms(ix, terms)  # their offsets (postings and strings) are read next: open checks only the ends
    so = np.asarray(ix.signal_offsets)
    starts = so[terms]
    lengths = so[terms + 1] - starts
    offsets = np.zeros(terms.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return gather_spans(ix.signal_bytes, starts, lengths), offsets


def _live_chunks(snap: Snapshot, chunk_docs: int) -> Iterator[tuple[int, np.ndarray]]:
    """(segment, live document numbers) in chunks of at most `chunk_docs`, segment after segment."""
    for s, (ix, d) in enumerate(zip(snap.indexes, snap.deletions, strict=True)):
        for lo in range(0, ix.n_docs, chunk_docs):
            docs = np.arange(lo, min(lo + chunk_docs, ix.n_docs), dtype=np.int64)
            if d is not None:
                docs = docs[~d.mask[docs]]
            if docs.shape[0]:
                yield s, docs


def _compact_segment(writer: IndexWriter, snap: Snapshot, chunk_docs: int, workers: int,
                     quiet: bool) -> tuple[Path, Manifest]:
    """One staged segment of every live document of `snap`: the build's runs and merge, fed from
    the segments' forward indexes instead of text (no re-tokenising, no re-capping)."""
    import pyarrow as pa
    from tqdm import tqdm

    from . import __version__
    from .format import write_manifest
    from .hashing import hash_mask
    from .indexing.builder import MAX_SEED_ATTEMPTS
    from .indexing.doc_ids import write_id_files
    from .indexing.merge import merge_runs, write_forward
    from .indexing.runs import HashCollision, RunInfo, write_run

    base = snap.indexes[0].manifest
    keep_tf = base.scoring == "bm25"
    seed = base.signals.hash.seed
    mask = hash_mask(base.signals.hash.bits)
    seeds_tried: list[dict[str, Any]] = []
    started = time.time()
    while True:
        tmp = writer.staging()
        run_dir = tmp / "runs"
        run_dir.mkdir()
        runs: list[RunInfo] = []
        ids: list[Any] = []
        n_docs = 0

        def process(index: int, s: int, docs: np.ndarray, first: int, seed: int = seed,
                    run_dir: Path = run_dir) -> RunInfo:
            batch = _forward_batch(snap.indexes[s], docs, keep_tf)
            return write_run(run_dir, index, batch, first, seed, mask, keep_tf)

        store = texts = None
        if base.doc_store is not None:  # --store-text: the live documents' texts, in the new numbering
            from .docstore import DocStore, DocStoreWriter

            store, texts = DocStoreWriter(tmp), [DocStore(ix) for ix in snap.indexes]
        total = sum(ix.n_docs - (0 if d is None else d.count) for ix, d in zip(snap.indexes, snap.deletions,
                                                                                strict=True))
        bar = tqdm(total=total, desc="ssr compact: invert", unit=" docs", unit_scale=True, disable=quiet,
                   file=sys.stderr)
        pending: deque[Future[RunInfo]] = deque()
        try:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ssr-compact") as pool:
                try:
                    for s, docs in _live_chunks(snap, chunk_docs):
                        ids.append(_ids_of(snap.indexes[s], docs))
                        if store is not None and texts is not None:
                            store.add_rows(texts[s].rows(docs))
                        pending.append(pool.submit(process, len(runs) + len(pending), s, docs, n_docs))
                        n_docs += docs.shape[0]
                        while len(pending) > workers:
                            runs.append(pending.popleft().result())
                            bar.update(runs[-1].n_docs)
                    while pending:
                        runs.append(pending.popleft().result())
                        bar.update(runs[-1].n_docs)
                finally:
                    for f in pending:
                        f.cancel()
            break
        except HashCollision as exc:
            seeds_tried.append({"seed": seed, "collision": [exc.first, exc.second]})
            writer.discard(tmp)
            if len(seeds_tried) >= MAX_SEED_ATTEMPTS:
                raise SsrError(f"compact: signal hash collisions under {MAX_SEED_ATTEMPTS} seeds; last: {exc}") \
                    from exc
            seed += 1
        finally:
            bar.close()
    doc_store = store.close() if store is not None else None
    if n_docs == 0:
        raise SsrError(f"{snap.root}: every document is deleted; nothing to compact into (add documents first)")
    entries = sum(r.n_terms for r in runs)
    with tqdm(total=entries, desc="ssr compact: merge", unit=" terms", unit_scale=True, disable=quiet,
              file=sys.stderr) as merge_bar:
        n_terms, n_postings = merge_runs(run_dir, tmp, runs, keep_tf, merge_bar.update)
    write_forward(run_dir, tmp, runs, keep_lengths=keep_tf)
    shutil.rmtree(run_dir)
    all_ids = pa.chunked_array(ids, type=pa.string()).combine_chunks()
    id_info = write_id_files(tmp, all_ids)
    write_id_table(tmp, all_ids)
    counts = {"documents": n_docs, "terms": n_terms, "postings": n_postings,
              "empty_documents": sum(r.empty_docs for r in runs)}
    names = [ref.name for ref in snap.commit.segments]
    source = {"path": f"compaction of {', '.join(names)} (generation {snap.generation})", "format": "segments",
              "bytes": 0, "lines_skipped": 0, "compacted_from": names, "generation": snap.generation}
    manifest = _derived_manifest(base, counts, id_info, source, seed, seeds_tried, {
        "ssr_engine_version": __version__, "operation": "compact", "chunk_docs": chunk_docs, "workers": workers,
        "runs": len(runs), "seconds": round(time.time() - started, 3), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    manifest = replace(manifest, doc_store=doc_store)
    write_manifest(tmp, manifest)
    return tmp, manifest


def _ids_of(ix: Index, docs: np.ndarray) -> Any:
    import pyarrow as pa

    ix._load_ids()
    return ix._id_arrow.take(pa.array(docs))
