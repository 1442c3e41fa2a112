"""The on-disk index format: the only module that knows file names, dtypes and the manifest.

An index is a directory:

    manifest.json          format version, counts, settings, build parameters, checksums
    vocab.npy              uint64[V]   sorted signal hashes; term id = position
    postings_indptr.npy    int64[V+1]  CSR over terms
    postings_docs.npy      uint32[P]   internal doc ids, ascending within each term
    forward_indptr.npy     int64[N+1]  CSR over documents (the exhaustive mode's input)
    forward_terms.npy      uint32[P]   term ids, ascending within each document
    doc_rank.npy           uint32[N]   position of each document's external id in id order
    signal_offsets.npy     int64[V+1]  signal strings of the terms, as byte spans ...
    signal_bytes.npy       uint8[...]  ... (memory-mapped: exact query look-up and --explain)
    signals.parquet        hash, signal: the same strings, for tools and debugging
    doc_ids.parquet        id: external document ids, row = internal doc id

BM25 indexes (scoring "bm25") add term frequencies and document lengths:

    postings_tf.npy        uint32[P]   term frequency aligned with postings_docs
    doc_lengths.npy        uint32[N]   tokens per document
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import IndexFormatError

FORMAT_NAME = "ssr-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

# name -> dtype; the arrays every index has
ARRAYS: dict[str, str] = {
    "vocab": "uint64",
    "postings_indptr": "int64",
    "postings_docs": "uint32",
    "forward_indptr": "int64",
    "forward_terms": "uint32",
    "doc_rank": "uint32",
    "signal_offsets": "int64",
    "signal_bytes": "uint8",
}
BM25_ARRAYS: dict[str, str] = {
    "postings_tf": "uint32",
    "doc_lengths": "uint32",
}
TABLES = ("signals.parquet", "doc_ids.parquet")


def array_file(name: str) -> str:
    return f"{name}.npy"


def sha256_file(path: Path, block: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


def save_array(directory: Path, name: str, array: np.ndarray) -> None:
    """Write one array with the dtype the format fixes for it."""
    dtype = {**ARRAYS, **BM25_ARRAYS}[name]
    np.save(directory / array_file(name), np.ascontiguousarray(array, dtype=dtype), allow_pickle=False)


HEADER_BYTES = 128  # every array file's .npy header, padded to this size so it can be rewritten


def _npy_header(dtype: np.dtype, n: int) -> bytes:
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n,)}
    text = repr(header).encode("latin1")
    body = HEADER_BYTES - 10  # magic (6) + version (2) + length (2)
    if len(text) + 1 > body:
        raise ValueError("npy header too long")
    text = text + b" " * (body - len(text) - 1) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


class ArrayWriter:
    """Appends to a 1-d .npy file of unknown final length; `close` writes the real header.

    Used by the build to stream arrays larger than memory straight to disk.
    """

    def __init__(self, directory: Path, name: str):
        self.dtype = np.dtype({**ARRAYS, **BM25_ARRAYS}[name])
        self.path = directory / array_file(name)
        self.count = 0
        self._file = open(self.path, "wb")
        self._file.write(_npy_header(self.dtype, 0))

    def append(self, values: np.ndarray) -> None:
        arr = np.ascontiguousarray(values, dtype=self.dtype)
        self._file.write(arr.data)
        self.count += arr.shape[0]

    def close(self) -> None:
        self._file.seek(0)
        self._file.write(_npy_header(self.dtype, self.count))
        self._file.close()


def read_slice(path: Path, dtype: str | np.dtype, start: int, stop: int) -> np.ndarray:
    """Entries [start, stop) of a 1-d .npy file, read (not mapped) so memory stays bounded."""
    dt = np.dtype(dtype)
    with open(path, "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        size = 2 if major == 1 else 4
        data_start = 8 + size + int.from_bytes(f.read(size), "little")
        f.seek(data_start + start * dt.itemsize)
        return np.fromfile(f, dtype=dt, count=max(stop - start, 0))


def file_record(directory: Path, name: str) -> dict[str, Any]:
    path = directory / name
    return {"bytes": path.stat().st_size, "sha256": sha256_file(path)}


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Write manifest.json with a record (size, sha256) of every other file; atomically."""
    files = sorted(
        p.name for p in directory.iterdir() if p.is_file() and p.name != MANIFEST and not p.name.endswith(".tmp")
    )
    manifest = dict(manifest)
    manifest["format"] = FORMAT_NAME
    manifest["format_version"] = FORMAT_VERSION
    manifest["files"] = {name: file_record(directory, name) for name in files}
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, directory / MANIFEST)


def read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    if not directory.is_dir():
        raise IndexFormatError(f"{directory}: no index here (not a directory)")
    if not path.is_file():
        raise IndexFormatError(f"{path}: missing; {directory} is not an ssr index (or its build did not finish)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"{path}: corrupt manifest ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise IndexFormatError(f"{path}: not an ssr index manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{path}: index format version {version}, this ssr_engine reads version {FORMAT_VERSION}; rebuild the index"
        )
    return manifest


@dataclass
class Index:
    """An opened index: memory-mapped arrays plus the manifest."""

    path: Path
    manifest: dict[str, Any]
    vocab: np.ndarray
    postings_indptr: np.ndarray
    postings_docs: np.ndarray
    forward_indptr: np.ndarray
    forward_terms: np.ndarray
    doc_rank: np.ndarray
    signal_offsets: np.ndarray
    signal_bytes: np.ndarray
    postings_tf: np.ndarray | None = None
    doc_lengths: np.ndarray | None = None
    _doc_ids: list[str] | None = field(default=None, repr=False)
    _id_arrow: Any = field(default=None, repr=False)
    _id_fixed: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_docs(self) -> int:
        return int(self.manifest["counts"]["documents"])

    @property
    def n_terms(self) -> int:
        return int(self.vocab.shape[0])

    @property
    def scoring(self) -> str:
        return str(self.manifest.get("scoring", "ssr"))

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.manifest["signals"])

    def df(self) -> np.ndarray:
        """Document frequency of every term (derived from the CSR)."""
        return np.diff(self.postings_indptr)

    def signal(self, term: int) -> str:
        a, b = int(self.signal_offsets[term]), int(self.signal_offsets[term + 1])
        return self.signal_bytes[a:b].tobytes().decode("utf-8")

    def doc_id_array(self) -> Any:
        """External ids as one Arrow string array (about 10 bytes per id), row = internal doc id."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path / "doc_ids.parquet", columns=["id"]).column("id").combine_chunks()

    def ids_of(self, docs: np.ndarray) -> np.ndarray:
        """External ids of internal doc ids, as a NumPy str array (`<U{longest id}`).

        Short ASCII ids (MS MARCO's pids) are gathered from a fixed-width byte table built once
        (~1 byte per id character) by a parallel kernel, where an Arrow -> object conversion makes
        one Python str per result (7M of them for 6,980 queries at K=1000).
        """
        docs = np.asarray(docs, dtype=np.int64)
        self._load_ids()
        if self._id_fixed is not None:
            from .kernels.id_table import gather_ids_ucs4

            width = self._id_fixed.shape[1]
            return gather_ids_ucs4(self._id_fixed, docs).view(f"<U{width}").reshape(-1)
        if docs.shape[0] == 0:
            return np.empty(0, dtype="U1")
        return np.array(self._id_arrow.take(docs).to_pylist(), dtype=str)

    def internal_id(self, doc_id: str) -> int | None:
        """The internal id of an external id, or None."""
        import pyarrow.compute as pc

        self._load_ids()
        found = pc.index(self._id_arrow, str(doc_id)).as_py()
        return None if found is None or found < 0 else int(found)

    def _load_ids(self) -> None:
        if self._id_arrow is None:
            if self._doc_ids is not None:  # an index held in memory (tests, in-memory registries)
                import pyarrow as pa

                self._id_arrow = pa.array(self._doc_ids, type=pa.string())
            else:
                self._id_arrow = self.doc_id_array()
            self._id_fixed = _fixed_width_ids(self._id_arrow)

    def doc_ids(self) -> list[str]:
        """External ids as a Python list (convenient for small indexes; cached)."""
        if self._doc_ids is None:
            self._doc_ids = self.doc_id_array().to_pylist()
        return self._doc_ids


FIXED_ID_MAX = 32  # ids up to this many bytes (ASCII) get the fixed-width table


def _fixed_width_ids(ids: Any) -> np.ndarray | None:
    """An Arrow string array as a zero-padded uint8[N, longest] table, or None (non-ASCII or long ids)."""
    if len(ids) == 0:
        return None
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32)[ids.offset : ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    lengths = np.diff(offsets)
    width = int(lengths.max())
    if width == 0 or width > FIXED_ID_MAX or (data.size and int(data.max()) >= 0x80):
        return None
    fixed = np.zeros((len(ids), width), dtype=np.uint8)
    rows = np.repeat(np.arange(len(ids)), lengths)
    cols = np.arange(data.shape[0]) - np.repeat(offsets[:-1] - offsets[0], lengths)
    fixed[rows, cols] = data
    return fixed


def _open_array(directory: Path, name: str, dtype: str, record: dict[str, Any] | None) -> np.ndarray:
    path = directory / array_file(name)
    if not path.is_file():
        raise IndexFormatError(f"{path}: missing file")
    if record is None:
        raise IndexFormatError(f"{path}: not listed in the manifest")
    size = path.stat().st_size
    if size != record["bytes"]:
        raise IndexFormatError(f"{path}: {size} bytes, the manifest says {record['bytes']} (truncated or replaced)")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise IndexFormatError(f"{path}: corrupt array file ({exc})") from exc
    if arr.dtype != np.dtype(dtype) or arr.ndim != 1:
        raise IndexFormatError(f"{path}: dtype {arr.dtype} shape {arr.shape}, expected 1-d {dtype}")
    return arr


def open_index(path: str | os.PathLike[str]) -> Index:
    """Open an index memory-mapped; checks version, presence and size of every file.

    Sizes are checked here (cheap); full checksums with `verify_index`.
    """
    directory = Path(path)
    manifest = read_manifest(directory)
    records = manifest.get("files", {})
    for name in TABLES:
        if not (directory / name).is_file():
            raise IndexFormatError(f"{directory / name}: missing file")
        if (directory / name).stat().st_size != records.get(name, {}).get("bytes"):
            raise IndexFormatError(f"{directory / name}: size differs from the manifest (truncated or replaced)")
    names = dict(ARRAYS)
    if manifest.get("scoring", "ssr") == "bm25":
        names.update(BM25_ARRAYS)
    arrays = {n: _open_array(directory, n, d, records.get(array_file(n))) for n, d in names.items()}
    counts = manifest["counts"]
    n, v, p = counts["documents"], counts["terms"], counts["postings"]
    expected = {
        "vocab": v, "postings_indptr": v + 1, "postings_docs": p, "forward_indptr": n + 1,
        "forward_terms": p, "doc_rank": n, "signal_offsets": v + 1, "postings_tf": p, "doc_lengths": n,
    }
    for name, arr in arrays.items():
        if name in expected and arr.shape[0] != expected[name]:
            raise IndexFormatError(f"{directory / array_file(name)}: {arr.shape[0]} entries, expected {expected[name]}")
    return Index(
        path=directory, manifest=manifest, vocab=arrays["vocab"], postings_indptr=arrays["postings_indptr"],
        postings_docs=arrays["postings_docs"], forward_indptr=arrays["forward_indptr"],
        forward_terms=arrays["forward_terms"], doc_rank=arrays["doc_rank"], signal_offsets=arrays["signal_offsets"],
        signal_bytes=arrays["signal_bytes"], postings_tf=arrays.get("postings_tf"),
        doc_lengths=arrays.get("doc_lengths"),
    )


def verify_index(path: str | os.PathLike[str]) -> list[str]:
    """Recompute every file's checksum; returns a list of problems (empty when sound)."""
    directory = Path(path)
    manifest = read_manifest(directory)
    problems = []
    for name, record in sorted(manifest.get("files", {}).items()):
        p = directory / name
        if not p.is_file():
            problems.append(f"{p}: missing")
        elif p.stat().st_size != record["bytes"]:
            problems.append(f"{p}: {p.stat().st_size} bytes, expected {record['bytes']}")
        elif sha256_file(p) != record["sha256"]:
            problems.append(f"{p}: checksum mismatch (corrupt)")
    return problems
