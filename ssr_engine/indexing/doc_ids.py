"""External document ids during a build: duplicate detection, doc_ids.parquet, doc_rank.

Memory is O(N) small integers (a sorted array of 64-bit id hashes plus the ids as Arrow
strings), never a Python object per document.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..corpus import BadLine, Chunk, select_docs
from ..errors import InputError
from ..format import save_array
from ..hashing import hash_ranges, hash_spans
from ..ids import INTEGER_ID, id_order
from ..query_terms import utf8


class DocIdTable:
    def __init__(self, path: Path | str):
        self.path = path
        self.chunks: list[pa.Array] = []
        self.line_chunks: list[np.ndarray] = []
        self.starts: list[int] = []
        self.n = 0
        # the ids seen so far as sorted runs of (hash, document), sizes halving from the first: a chunk's
        # run is merged with the runs before it no larger than twice its size (a binary counter), so a
        # hash is merged about log2(chunks) times, not copied once per later chunk (np.insert: O(N^2/chunk))
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []
        self.sealed = False

    def _id_at(self, doc: int) -> tuple[str, int]:
        c = bisect.bisect_right(self.starts, doc) - 1
        i = doc - self.starts[c]
        return self.chunks[c][i].as_py(), int(self.line_chunks[c][i])

    def add(self, chunk: Chunk, skip_bad_lines: bool, bad: list[BadLine]) -> Chunk:
        """Check the chunk's ids against all earlier ones; returns it (minus skipped duplicates)."""
        if self.sealed:
            raise RuntimeError("DocIdTable.add after seal: the duplicate check's tables are gone")
        if chunk.n_docs == 0:
            return chunk
        hashes = _id_hashes(chunk.ids)
        keep = np.ones(chunk.n_docs, dtype=bool)
        # candidates: hash seen before, or repeated inside the chunk (not its first occurrence); looked up
        # in hash order (the searches then walk the runs in order, not at random)
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
        candidate = np.zeros(chunk.n_docs, dtype=bool)
        candidate[order[1:][ordered[1:] == ordered[:-1]]] = True
        for seen_hash, _ in self.runs:
            pos = np.minimum(np.searchsorted(seen_hash, ordered), seen_hash.shape[0] - 1)
            candidate[order[seen_hash[pos] == ordered]] = True
        for i in np.flatnonzero(candidate).tolist():
            earlier = self._earlier_line(chunk, i, hashes)
            if earlier is None:
                continue  # same hash, different id
            message = f"duplicate document id {chunk.ids[i]!r} (first at line {earlier})"
            if not skip_bad_lines:
                raise InputError(self.path, int(chunk.lines[i]), message)
            bad.append(BadLine(int(chunk.lines[i]), message))
            keep[i] = False
        if not keep.all():
            chunk = select_docs(chunk, keep)
            hashes = hashes[keep]
            order = np.argsort(hashes, kind="stable")
            ordered = hashes[order]
        self.runs.append((ordered, self.n + order.astype(np.int64)))
        while len(self.runs) > 1 and self.runs[-2][0].shape[0] <= 2 * self.runs[-1][0].shape[0]:
            (h1, d1), (h2, d2) = self.runs.pop(-2), self.runs.pop()
            merged = np.concatenate([h1, h2])
            by_hash = np.argsort(merged, kind="stable")  # two sorted runs: timsort merges them in one pass
            self.runs.append((merged[by_hash], np.concatenate([d1, d2])[by_hash]))
        self.starts.append(self.n)
        self.chunks.append(_string_array(chunk.ids))
        self.line_chunks.append(chunk.lines)
        self.n += chunk.n_docs
        return chunk

    def _earlier_line(self, chunk: Chunk, i: int, hashes: np.ndarray) -> int | None:
        doc_id = chunk.ids[i]
        for j in range(i):  # earlier in this chunk (rare: only on a hash repeat)
            if hashes[j] == hashes[i] and chunk.ids[j] == doc_id:
                return int(chunk.lines[j])
        for seen_hash, seen_doc in self.runs:
            lo = int(np.searchsorted(seen_hash, hashes[i], side="left"))
            hi = int(np.searchsorted(seen_hash, hashes[i], side="right"))
            for k in range(lo, hi):
                other, line = self._id_at(int(seen_doc[k]))
                if other == doc_id:
                    return line
        return None

    def seal(self) -> None:
        """Every chunk is in: drop what only the duplicate check reads (hash, document and line number:
        24 bytes a document, 212 MB at 8.8M), which the rest of the build would otherwise hold through
        its peak."""
        self.sealed = True
        self.runs = []
        self.line_chunks = []

    def finish(self, out_dir: Path) -> tuple[dict[str, Any], pa.Array]:
        """Write doc_ids.parquet and doc_rank.npy; returns the id settings for the manifest, and the ids."""
        ids = pa.chunked_array(self.chunks, type=pa.string()).combine_chunks()
        return write_id_files(out_dir, ids), ids


def _string_array(ids: list[str]) -> pa.Array:
    """The ids as an Arrow string array, made from their UTF-8 bytes: `pa.array` of a list imports pandas
    (0.3-0.6 CPU s, in a live index's first `add` in a process, where no other step needs it)."""
    data, offsets = utf8(ids)
    return pa.LargeStringArray.from_buffers(len(ids), pa.py_buffer(offsets), pa.py_buffer(data)).cast(pa.string())


def _values(arr: pa.Array, dtype: Any) -> np.ndarray:
    """A primitive Arrow array without nulls as a NumPy view: its `to_numpy` imports pandas, as `pa.array` does."""
    if len(arr) == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset : arr.offset + len(arr)]


def _id_hashes(ids: list[str]) -> np.ndarray:
    """uint64[len(ids)]: each id's UTF-8 bytes hashed (seed 0, 64 bits)."""
    raw = np.frombuffer("\n".join(ids).encode("utf-8"), dtype=np.uint8)
    cuts = np.flatnonzero(raw == 10)  # one encode for all (a TSV id holds no newline)
    if cuts.shape[0] == len(ids) - 1:
        starts = np.concatenate([np.zeros(1, dtype=np.int64), cuts + 1])
        ends = np.append(cuts, raw.shape[0])
        return hash_ranges(raw, starts, ends, np.uint64(0), np.uint64(2**64 - 1))
    encoded = [i.encode("utf-8") for i in ids]  # an id with a newline (JSONL, Python): one at a time
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return hash_spans(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets, np.uint64(0), np.uint64(2**64 - 1))


def write_id_files(out_dir: Path, ids: pa.Array) -> dict[str, Any]:
    """doc_ids.parquet and doc_rank.npy of a segment whose ids (row = doc) are `ids`; the manifest's id settings.

    When the rows are already in id order (MS MARCO's pids 0..N-1, the common case) doc_rank is the
    identity: no file, and the manifest says `"rank": "identity"` (format 4; `format.open_segment`).
    """
    # each id as its difference from the one before (ids in order share prefixes), zstd: 0.74 MiB for
    # 8.8M MS MARCO-style ids against 40.6 with the default dictionary and snappy, and faster to read
    pq.write_table(pa.table({"id": ids}), out_dir / "doc_ids.parquet", compression="zstd", use_dictionary=False,
                   column_encoding={"id": "DELTA_BYTE_ARRAY"})
    integer = ids_are_integer(ids)
    rank = rank_ids(ids, integer)
    info: dict[str, Any] = {"integer": integer, "order": "integer" if integer else "string"}
    if np.array_equal(rank, np.arange(rank.shape[0], dtype=np.uint32)):
        info["rank"] = "identity"
    else:
        save_array(out_dir, "doc_rank", rank)
    return info


def ids_are_integer(ids: pa.Array) -> bool:
    """True when every id is a base-10 integer (the collection's ids then sort as integers)."""
    return bool(pc.all(pc.match_substring_regex(ids, f"^{INTEGER_ID}$")).as_py())


def rank_ids(ids: pa.Array, integer: bool) -> np.ndarray:
    """Position of each id in ascending id order (uint32[len(ids)]): as integers (equal values by
    their strings) when `integer`, else as strings. Under `integer`, ids that are not integers
    (deleted documents of a live index may be) come last, in string order.
    """
    order: np.ndarray
    if integer:
        is_int = _values(pc.match_substring_regex(ids, f"^{INTEGER_ID}$").cast(pa.uint8()), np.uint8).astype(bool)
        if not is_int.all():
            rows = np.flatnonzero(is_int)
            rest = np.flatnonzero(~is_int)
            head = rows[np.argsort(rank_ids(ids.take(pa.array(rows)), True), kind="stable")]
            tail = rest[np.argsort(rank_ids(ids.take(pa.array(rest)), False), kind="stable")]
            order = np.concatenate([head, tail])
        else:
            try:
                values = pc.cast(ids, pa.int64())
                table = pa.table({"value": values, "id": ids})
                order = _values(pc.sort_indices(table, sort_keys=[("value", "ascending"), ("id", "ascending")]),
                                np.uint64)
            except pa.ArrowInvalid:  # beyond int64: Python integers
                order = np.array(id_order(ids.to_pylist()), dtype=np.int64)
    else:
        order = _values(pc.sort_indices(ids), np.uint64)  # UTF-8 byte order = code point order = Python str order
    rank = np.empty(len(ids), dtype=np.uint32)
    rank[order] = np.arange(len(ids), dtype=np.uint32)
    return rank
