"""Structural validation of an opened index: corruption is an error, never a crash.

`check_index(index)` runs at every open (`format.open_segment`): the O(N) and O(V) invariants
(each CSR offset array starts at 0, never decreases and ends at its data's length; the
vocabulary is strictly sorted; doc_rank is a permutation of 0..N-1). `full=True` (`ssr verify`,
`Searcher(..., verify=True)`, `ssr search --verify`) adds the O(P) ones: every posting list
strictly ascending with ids < N, every forward row strictly ascending with term ids < V, term
frequencies >= 1. What open does not read (posting and forward contents) the kernels guard as
they read it (`kernels.candidates.CorruptIndexData`), so an index that passes the open checks but lies
still cannot make a kernel read out of bounds; `kernel_guard` turns that into an error naming
the index.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from .errors import IndexFormatError

if TYPE_CHECKING:
    from .format import Index


def _fail(index: Index, name: str, what: str) -> IndexFormatError:
    return IndexFormatError(f"{index.path / (name + '.npy')}: {what} (corrupt index; rebuild it)")


# below this many entries the checks run in NumPy: a parallel kernel's thread launch costs more
# than the check (milliseconds on a busy machine), and a live index opens small segments often
_SMALL = 1 << 16


def _first(bad: np.ndarray) -> int:
    hits = np.flatnonzero(bad)
    return int(hits[0]) if hits.shape[0] else -1


def _offsets(index: Index, name: str, indptr: np.ndarray, length: int, what: str) -> None:
    from .kernels.validate import monotone

    if indptr.shape[0] == 0:
        raise _fail(index, name, "no offsets")
    first, last = int(indptr[0]), int(indptr[-1])
    if first != 0 or last != length:
        raise _fail(index, name, f"offsets must run from 0 to {length} ({what}); found {first}..{last}")
    i = monotone(indptr) if indptr.shape[0] > _SMALL else _first(np.diff(indptr) < 0)
    if i >= 0:
        raise _fail(index, name, f"offsets decrease at entry {i + 1} ({int(indptr[i])} then {int(indptr[i + 1])})")


def check_index(index: Index, full: bool = False) -> None:
    """Raise `IndexFormatError` naming the file and entry of the first structural defect found."""
    from .kernels import validate as kv

    n, v = index.n_docs, index.n_terms
    _offsets(index, "postings_indptr", index.postings_indptr, index.postings_docs.shape[0], "postings")
    _offsets(index, "forward_indptr", index.forward_indptr, index.forward_terms.shape[0], "forward terms")
    _offsets(index, "signal_offsets", index.signal_offsets, index.signal_bytes.shape[0], "signal bytes")
    vocab = index.vocab
    i = kv.strictly_increasing(vocab) if vocab.shape[0] > _SMALL else _first(vocab[1:] <= vocab[:-1])
    if i >= 0:
        raise _fail(index, "vocab", f"not strictly sorted at entry {i + 1}")
    i = kv.permutation(index.doc_rank)
    if i >= 0:
        raise _fail(index, "doc_rank", f"not a permutation of 0..{n - 1} (entry {i} = {int(index.doc_rank[i])})")
    if not full:
        return
    row = kv.rows_ascending_below(index.postings_indptr, index.postings_docs, np.int64(n))
    if row >= 0:
        raise _fail(index, "postings_docs", f"the postings of term {row} are not strictly ascending ids < {n}")
    row = kv.rows_ascending_below(index.forward_indptr, index.forward_terms, np.int64(v))
    if row >= 0:
        raise _fail(index, "forward_terms", f"the terms of document {row} are not strictly ascending ids < {v}")
    if index.postings_tf is not None:
        i = kv.first_zero(index.postings_tf)
        if i >= 0:
            raise _fail(index, "postings_tf", f"term frequency 0 at entry {i}")


@contextmanager
def kernel_guard(index: Index) -> Iterator[None]:
    """Turn a kernel's bounds-guard report into an `IndexFormatError` naming the index."""
    from .kernels.candidates import CorruptIndexData

    try:
        yield
    except CorruptIndexData as exc:
        where = index.root or index.path
        raise IndexFormatError(f"{index.path}: {exc} (corrupt index; `ssr verify {where}` checks every file; "
                               "rebuild it)") from None
