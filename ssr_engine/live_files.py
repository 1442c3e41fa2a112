"""What a live index's segment carries beside its index files: deletion files and the id table.

    seg-M/deletes-G.npz    written by generation G: `bits` (uint8, the deleted documents bit-packed,
                           `np.packbits` order), and the df lost to them, read from the segment's
                           forward index when they were deleted: `terms` (int64, sorted), `df`
                           (int64) and `tokens` (int64[1], BM25's deleted length). Its sha256 is in
                           the commit point; a segment is never rewritten, a new file replaces it.
    seg-M/live-ids.*.npy   the segment's ids for look-ups by a writer: `hash` (uint64[N], sorted
                           fnv1a64 of the UTF-8 id), `doc` (uint32[N], the document of each hash),
                           `offsets` (int64[N + 1]) and `bytes` (uint8) the ids themselves. Written
                           with the segments made here (`add`, `compact`, merges). A segment made by
                           `build_index` has none: its ids are found by binary search in its id
                           order (`SortedIds`, its doc_ids.parquet and doc_rank), no file written.

Readers (`live_search`) read the deletion files; writers (`live`) write both.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import load_mapped
from .errors import IndexFormatError
from .format import Index

DELETES_PREFIX = "deletes-"
ID_TABLE = ("hash", "doc", "offsets", "bytes")
ID_DTYPES = {"hash": np.uint64, "doc": np.uint32, "offsets": np.int64, "bytes": np.uint8}


def id_table_file(name: str) -> str:
    return f"live-ids.{name}.npy"


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
    """Write a deletion file for the next commit; returns its sha256.

    Written plainly, not synced: its name (deletes-G, G the generation to come) is named by no commit yet,
    and the commit that names it fsyncs it and its folder in its one batch (`IndexWriter.commit`); a file
    left by a failed write is never read (its sha256 is in no commit) and a later commit removes it."""
    from .atomic import os_errors

    buf = io.BytesIO()
    np.savez(buf, bits=np.packbits(d.mask), terms=d.terms.astype(np.int64), df=d.df.astype(np.int64),
             tokens=np.array([d.tokens], dtype=np.int64))
    data = buf.getvalue()
    with os_errors(path), open(path, "wb") as f:
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
    return index.df_of(terms)


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


@dataclass
class Wanted:
    """Ids to find: UTF-8 bytes, their hashes (as the id tables hold them) and the same bytes as spans."""

    encoded: list[bytes]
    hashes: np.ndarray  # uint64[M]
    offsets: np.ndarray  # int64[M + 1]
    data: np.ndarray  # uint8


def wanted_ids(encoded: list[bytes]) -> Wanted:
    from .hashing import hash_spans

    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    raw = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return Wanted(encoded, hash_spans(raw, offsets, np.uint64(0), np.uint64(2**64 - 1)), offsets, raw)


class IdTable:
    """A segment's ids, looked up by hash (memory-mapped `live-ids.*.npy`)."""

    def __init__(self, segment: Path, n_docs: int):
        from .validate import check_id_table

        arrays = {}
        for name in ID_TABLE:
            path = segment / id_table_file(name)
            arrays[name] = load_mapped(path, "id table")
            if arrays[name].dtype != ID_DTYPES[name] or arrays[name].ndim != 1:
                raise IndexFormatError(f"{path}: corrupt id table (dtype {arrays[name].dtype})")
        # its files are under the manifest's checksums, which only `ssr verify` reads: a table that lies would make
        # look-ups miss ids silently (an id added twice, a delete reported unknown), so its order is checked here
        self.hash, self.doc, self.offsets, self.bytes = (arrays[n] for n in ID_TABLE)
        check_id_table(segment, self.hash, self.doc, self.offsets, self.bytes, n_docs)

    def every_id(self) -> Wanted:
        """Every id of the segment, row = document (a new segment's ids, looked up in the others)."""
        offsets, data = np.asarray(self.offsets), np.asarray(self.bytes)
        raw = data.tobytes()
        hashes = np.empty(self.hash.shape[0], dtype=np.uint64)
        hashes[np.asarray(self.doc)] = self.hash
        encoded = [raw[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
        return Wanted(encoded, hashes, offsets, data)

    def id_bytes(self, doc: int) -> bytes:
        return self.bytes[int(self.offsets[doc]) : int(self.offsets[doc + 1])].tobytes()

    def lookup(self, wanted: Wanted) -> np.ndarray:
        """The document of each wanted id (-1: not in this segment)."""
        hashes, encoded = wanted.hashes, wanted.encoded
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
                if self.id_bytes(d) == encoded[i]:
                    found[i] = d
                    break
        return found


class SortedIds:
    """A segment's ids found by binary search in its id order (`kernels/id_lookup.find_sorted`) over its
    doc_ids.parquet, read once: no table is written. A built segment has no `live-ids` table, and making
    one on the first change cost 6-8 s at 8.8M ids (a 64-bit sort of their hashes, 227 MB written and
    fsynced); reading the ids costs about 0.55 s there."""

    def __init__(self, index: Index):
        import pyarrow as pa

        ids = index.doc_id_array()
        n = index.n_docs
        wide = pa.types.is_large_string(ids.type)  # doc_id_array gives string's int32 offsets
        self.offsets = np.frombuffer(ids.buffers()[1], dtype=np.int64 if wide else np.int32)[
            ids.offset : ids.offset + n + 1]
        self.data = np.frombuffer(ids.buffers()[2], dtype=np.uint8) if n else np.zeros(0, dtype=np.uint8)
        self.integer = index.manifest.ids.get("order") == "integer"
        self.identity = index.manifest.ids.get("rank") == "identity"
        self.by_rank = np.zeros(0, dtype=np.uint32)
        if not self.identity:
            rank = np.asarray(index.doc_rank)
            if rank.shape[0] != n or (n and int(rank.max()) >= n):
                raise IndexFormatError(f"{index.path}: doc_rank out of range (corrupt)")
            by_rank = np.zeros(n, dtype=np.uint32)
            by_rank[rank] = np.arange(n, dtype=np.uint32)
            if not np.array_equal(rank[by_rank], np.arange(n)):  # every rank taken: a permutation
                raise IndexFormatError(f"{index.path}: doc_rank is not a permutation (corrupt)")
            self.by_rank = by_rank
        self._ids = ids  # owns the buffers viewed above

    def id_bytes(self, doc: int) -> bytes:
        return self.data[int(self.offsets[doc]) : int(self.offsets[doc + 1])].tobytes()

    def lookup(self, wanted: Wanted) -> np.ndarray:
        """The document of each wanted id (-1: not in this segment)."""
        from .kernels.id_lookup import find_sorted

        return find_sorted(self.offsets, self.data, self.by_rank, self.identity, wanted.offsets, wanted.data,
                           self.integer)


def write_id_table(segment: Path, ids: Any, staged: bool = True) -> None:
    """Write the id table of a segment whose ids (an Arrow string array) are given: plainly into a staged
    folder (it appears whole by one rename at commit, as the segment's arrays do), else each file under a
    temporary name, all fsynced at once, then renamed (a committed segment's table appears whole)."""
    import os

    import pyarrow as pa

    from .atomic import fsync_dir, os_errors, tmp_name
    from .generations import fsync_files
    from .hashing import hash_spans
    from .kernels.indexing import radix_argsort_u64

    ids = ids.cast(pa.large_string()) if ids.type != pa.large_string() else ids
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int64)[ids.offset : ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]] if len(ids) else \
        np.zeros(0, dtype=np.uint8)
    offsets = offsets - offsets[0]
    hashes = hash_spans(data, offsets.astype(np.int64), np.uint64(0), np.uint64(2**64 - 1))
    order = radix_argsort_u64(hashes)  # as np.argsort(kind="stable"): 8.8M ids 5.2 s there (nice 19, load 6)
    arrays = {"hash": hashes[order], "doc": order.astype(np.uint32), "offsets": offsets.astype(np.int64),
              "bytes": np.ascontiguousarray(data)}
    if staged:
        for name in ID_TABLE:
            np.save(segment / id_table_file(name), arrays[name], allow_pickle=False)
        return
    temps = {name: tmp_name(segment / id_table_file(name)) for name in ID_TABLE}
    try:
        with os_errors(segment):
            for name in ID_TABLE:
                with open(temps[name], "wb") as f:  # np.save would add ".npy" to a temporary name
                    np.save(f, arrays[name], allow_pickle=False)
            fsync_files([str(t) for t in temps.values()])
            for name in ID_TABLE:
                os.replace(temps[name], segment / id_table_file(name))
            fsync_dir(segment)
    finally:
        for t in temps.values():
            t.unlink(missing_ok=True)


def segment_ids(segment: Path, index: Index) -> IdTable | SortedIds:
    """The segment's ids to look up: its id table, or (a built segment: none) its ids in id order. A table
    that is there but bad is an error naming it (derived: removing its four files is a repair)."""
    if not any((segment / id_table_file(name)).exists() for name in ID_TABLE):
        return SortedIds(index)
    try:
        return IdTable(segment, index.n_docs)
    except IndexFormatError as exc:
        raise IndexFormatError(f"{exc}; its live-ids.*.npy files are derived from doc_ids.parquet: removing them "
                               "all repairs the segment") from exc
