"""The index's array files (part of the format, `format`): names, dtypes, `.npy` writing and reading.

Offset arrays take the narrowest of int32 and int64 that holds their last value (`offsets_dtype`).
Signed on purpose: in Numba, int32 - int32 is int64, where uint32 - uint32 is uint64, which
turns an int64 sum into a float64 in any kernel that adds a length to a total.
"""

from __future__ import annotations

from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np

from .errors import IndexFormatError

# name -> dtype; the arrays every index has
ARRAYS: dict[str, str] = {
    "vocab": "uint32",  # format 4; formats 2 and 3: uint64
    "postings_indptr": "int64",
    "postings_docs": "uint32",
    "forward_indptr": "int64",
    "forward_terms": "uint32",  # format 5: words of term ids packed at `kernels.forward.width_for(V)` bits
    "doc_rank": "uint32",
    "signal_offsets": "int64",
    "signal_bytes": "uint8",
    "signal_codes": "uint64",
    "postings_long": "uint64",  # format 7: which terms have df != 1 (`kernels.lists`)
    "postings_rank": "uint32",  # format 7: the long terms before each word of postings_long
}
# arrays that indexes of older format versions lack (name -> the first version that has it)
SINCE: dict[str, int] = {"signal_codes": 4, "postings_long": 7, "postings_rank": 7}
BM25_ARRAYS: dict[str, str] = {
    "postings_tf": "uint32",
    "doc_lengths": "uint32",
}
# offset arrays: int64 in ARRAYS (the widest), int32 when their last value allows (`offsets_dtype`)
OFFSET_ARRAYS = ("postings_indptr", "signal_offsets", "forward_indptr")


def offsets_dtype(last: int) -> np.dtype:
    """The dtype of an offset array whose last (largest) value is `last`: int32 when it fits."""
    return np.dtype(np.int32) if last < 2**31 else np.dtype(np.int64)


def accepted_dtypes(name: str) -> tuple[np.dtype, ...]:
    """The dtypes an array file may have (the offsets: int32 or int64)."""
    widest = np.dtype({**ARRAYS, **BM25_ARRAYS}[name])
    if name == "vocab":
        return (widest, np.dtype(np.uint64))
    return (np.dtype(np.int32), widest) if name in OFFSET_ARRAYS else (widest,)


def array_file(name: str) -> str:
    return f"{name}.npy"


def save_array(directory: Path, name: str, array: np.ndarray) -> None:
    """Write one array with the dtype the format fixes for it (offsets: `offsets_dtype`)."""
    dtype: str | np.dtype = {**ARRAYS, **BM25_ARRAYS}[name]
    if name in OFFSET_ARRAYS:
        dtype = offsets_dtype(int(array[-1]) if len(array) else 0)
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


def writer_dtype(name: str, last: int | None) -> tuple[np.dtype, int | None]:
    """(dtype, bound) of an appended array `name`: an offset array's dtype fits `last`, its bound."""
    if name in OFFSET_ARRAYS:
        if last is None:
            raise ValueError(f"{name}: an offset array needs a bound on its last value")
        return offsets_dtype(last), last
    return np.dtype({**ARRAYS, **BM25_ARRAYS}[name]), None


def save_lists(directory: Path, df: np.ndarray) -> None:
    """Write format 7's postings directory (`kernels.lists`) of terms of document frequencies df."""
    w = ListsWriter(directory, int(df.sum()))
    w.append(df)
    w.close()


class ListsWriter:
    """Appends terms' document frequencies, in term order, as format 7's postings directory
    (`kernels.lists`: postings_long, postings_rank, and postings_indptr over the long terms only).
    `last` bounds the postings in all."""

    def __init__(self, directory: Path, last: int):
        self.long = ArrayWriter(directory, "postings_long")
        self.rank = ArrayWriter(directory, "postings_rank")
        self.offsets = ArrayWriter(directory, "postings_indptr", last=last)
        self.offsets.append(np.zeros(1, dtype=np.int64))
        self.n_long, self.long_postings = 0, 0
        self.pending = np.zeros(0, dtype=np.int64)  # the last < 64 terms: a word is written whole

    def append(self, df: np.ndarray, last: bool = False) -> None:
        from .kernels.lists import encode

        df = np.concatenate([self.pending, np.asarray(df, dtype=np.int64)])
        cut = df.shape[0] if last else df.shape[0] & ~63
        self.pending = df[cut:]
        long, rank, ends = encode(df[:cut], self.n_long, self.long_postings)
        self.long.append(long)
        self.rank.append(rank)
        self.offsets.append(ends)
        if ends.shape[0]:
            self.n_long += ends.shape[0]
            self.long_postings = int(ends[-1])

    def close(self) -> None:
        try:
            self.append(np.zeros(0, dtype=np.int64), last=True)
            self.rank.append(np.array([self.n_long], dtype=np.int64))
        finally:
            for w in (self.long, self.rank, self.offsets):
                w.close()


class ArrayWriter:
    """Appends to a 1-d .npy file of unknown final length; `close` writes the real header.

    Used by the build to stream arrays larger than memory straight to disk. An offset array
    needs `last`, a bound on its last value, to choose its dtype (`offsets_dtype`).
    """

    def __init__(self, directory: Path, name: str, last: int | None = None):
        self._open(directory / array_file(name), *writer_dtype(name, last))

    @classmethod
    def at(cls, path: Path, dtype: type) -> ArrayWriter:
        """A writer of an array that is not one of the format's: its path and dtype given."""
        writer = cls.__new__(cls)
        writer._open(path, np.dtype(dtype), None)
        return writer

    def _open(self, path: Path, dtype: np.dtype, bound: int | None) -> None:
        self.dtype, self.bound, self.path = dtype, bound, path
        self.count = 0
        self._file = open(self.path, "wb")
        self._file.write(_npy_header(self.dtype, 0))

    def append(self, values: np.ndarray) -> None:
        if self.bound is not None and len(values) and int(values[-1]) > self.bound:
            raise ValueError(f"{self.path}: offset {int(values[-1])} beyond the bound {self.bound} given")
        arr = np.ascontiguousarray(values, dtype=self.dtype)
        self._file.write(arr.data)
        self.count += arr.shape[0]

    def close(self) -> None:
        self._file.seek(0)
        self._file.write(_npy_header(self.dtype, self.count))
        self._file.close()


def npy_data_offset(f: Any) -> int:
    """Byte offset of the data in an open .npy file (the one header reader of the package)."""
    f.seek(0)
    major, _ = np.lib.format.read_magic(f)
    size = 2 if major == 1 else 4
    return 8 + size + int.from_bytes(f.read(size), "little")


def load_mapped(path: Path, what: str = "array file") -> np.ndarray:
    """A .npy file memory-mapped; `IndexFormatError` naming it when it cannot be (a garbled header raises
    ValueError, SyntaxError or tokenize's TokenError in NumPy's parser; data shorter than the header's
    shape, ValueError from mmap), so no read touches a page past the file's end."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError, SyntaxError, TokenError) as exc:
        raise IndexFormatError(f"{path}: corrupt {what} ({exc})") from exc


def read_slice(path: Path, dtype: str | np.dtype, start: int, stop: int) -> np.ndarray:
    """Entries [start, stop) of a 1-d .npy file, read (not mapped) so memory stays bounded."""
    dt = np.dtype(dtype)
    with open(path, "rb") as f:
        f.seek(npy_data_offset(f) + start * dt.itemsize)
        return np.fromfile(f, dtype=dt, count=max(stop - start, 0))
