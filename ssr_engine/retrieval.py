"""One retrieval interface: the `Retriever` protocol, its result type and the rules every searcher shares.

Every method (`ssr`, the inverted index; `exhaustive`, the forward scan; `bm25`; and the
pure-Python `reference`) answers through the same four calls and returns `SearchResult`s.
Evaluation, agent discovery, the CLI and the benchmarks open one with `open_retriever`
and never ask which class they hold. The rules below are the only copies:

- k: a positive int, or None for every candidate (`check_k`);
- threads: None (all Numba threads) or 1..NUMBA_NUM_THREADS, never clamped (`check_threads`);
  a call that has a single query to spread over threads runs on one thread (`numba_threads`);
- explain: the matched signals (BM25: tokens) with their weights, ascending weight, ties by
  signal (for SSR this is the canonical summation order, so summing the list in order gives
  the score bit for bit);
- a bad argument is an `ArgumentError` (an `SsrError` and a `ValueError`) from every method.

This module is light (no NumPy or Numba at import) so the CLI can use its constants.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import ArgumentError, SsrError

if TYPE_CHECKING:
    import numpy as np

    from .format import Index

METHODS = ("ssr", "levels", "union", "maxscore", "exhaustive", "bm25")
"""Methods of `open_retriever` over an index on disk: ssr (the heaviest lists, then forward probes of
the best candidates where that pays, else as levels), levels (every posting, ranked by term-mask levels),
union (every posting, float accumulators and a heap), maxscore (exact pruning) and exhaustive need an
ssr index, bm25 a bm25 one."""

BM25_K1 = 0.9
BM25_B = 0.4
"""Lucene BM25 defaults (Anserini's MS MARCO setting, DESIGN.md section 5)."""


class SearchResult:
    """One query's results in rank order (score desc, matches desc, id asc); empty when nothing matches.

    Attributes
    ----------
    ids : str ndarray, shape (n,)
        External document ids.
    scores : float64 ndarray, shape (n,)
    matches : int32 ndarray, shape (n,)
        Matched signals (BM25: distinct query terms) of each document.
    docs : int64 ndarray, shape (n,)
        Internal document ids (positions in the collection).

    A batch's results (`split_results`) are views of its flat columns, sliced on first use: four array
    views for each of 6,980 K=10 results took 13.6 ms to make (on the one thread that holds the GIL) and
    1.96 ms to drop, against 4.1 and 0.64 ms as views (benchmarks/RESULTS.md).
    """

    __slots__ = ("_state",)

    def __init__(self, ids: np.ndarray, scores: np.ndarray, matches: np.ndarray, docs: np.ndarray):
        # one slot, replaced whole: a reader on another thread sees either the view or the sliced columns
        self._state: tuple[Any, ...] = (ids, scores, matches, docs)

    @classmethod
    def rows_of(cls, columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], a: int, b: int) -> SearchResult:
        """Rows a:b of a batch's flat (ids, scores, matches, docs), sliced when first read."""
        result = object.__new__(cls)
        result._state = (columns, a, b)
        return result

    def _columns(self) -> tuple[Any, ...]:
        state = self._state
        if len(state) == 3:
            (ids, scores, matches, docs), a, b = state
            state = self._state = (ids[a:b], scores[a:b], matches[a:b], docs[a:b])
        return state

    @property
    def ids(self) -> np.ndarray:
        return self._columns()[0]

    @property
    def scores(self) -> np.ndarray:
        return self._columns()[1]

    @property
    def matches(self) -> np.ndarray:
        return self._columns()[2]

    @property
    def docs(self) -> np.ndarray:
        return self._columns()[3]

    def __len__(self) -> int:
        state = self._state
        return state[2] - state[1] if len(state) == 3 else int(state[3].shape[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return SearchResult, self._columns()  # only this result's rows, never the batch's columns

    def __repr__(self) -> str:
        ids, scores, matches, docs = self._columns()
        return f"SearchResult(ids={ids!r}, scores={scores!r}, matches={matches!r}, docs={docs!r})"

    def rows(self) -> list[tuple[str, float, int]]:
        """(id, score, matches) of each result, as Python values."""
        ids, scores, matches, _ = self._columns()
        return list(zip(ids.tolist(), scores.tolist(), matches.tolist(), strict=True))


def split_results(offsets: np.ndarray, ids: np.ndarray, docs: np.ndarray, scores: np.ndarray,
                  matches: np.ndarray) -> list[SearchResult]:
    """Per-query `SearchResult`s of a kernel's flat output (query q owns rows offsets[q]:offsets[q + 1])."""
    bounds = offsets.tolist()  # Python ints at once: a NumPy scalar per bound cost ~0.2 µs a query
    columns = (ids, scores, matches, docs)
    of = SearchResult.rows_of
    return [of(columns, a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


class BatchFirst:
    """For retrievers whose way in is `search_batch`: `search` is a batch of one query."""

    def search(self, query: str, k: int | None = 10) -> SearchResult:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int | None = 10,
                     threads: int | None = None) -> list[SearchResult]:
        raise NotImplementedError


@runtime_checkable
class Retriever(Protocol):
    """What every method offers. `k=None` means every candidate; `threads=None` all Numba threads."""

    method: str

    @property
    def n_docs(self) -> int: ...

    @property
    def settings(self) -> dict[str, Any]:
        """The method's scoring settings, for reports."""
        ...

    def search(self, query: str, k: int | None = 10) -> SearchResult: ...

    def search_batch(self, queries: Sequence[str], k: int | None = 10,
                     threads: int | None = None) -> list[SearchResult]: ...

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        """Matched signals and weights, ascending weight (ties by signal); [] when the document does not match.

        `doc`: an external id (str), or an internal id (int, as in `SearchResult.docs`: no id look-up).
        """
        ...

    def pool_sizes(self, queries: Sequence[str], threads: int | None = None) -> np.ndarray:
        """int64[Q]: candidates (documents sharing a signal with the query) before the top-k cut."""
        ...

    def doc(self, doc: str | int) -> str:
        """The stored text of a document (external or internal id); `SsrError` when none is kept."""
        ...


class StoredText:
    """`doc` for a searcher over an index on disk: the text kept by `--store-text` (`docstore`)."""

    index: Index
    _doc_store: Any = None

    def doc(self, doc: str | int) -> str:
        """The stored text of a document (external or internal id); `SsrError` without a store or for an
        unknown id."""
        from .docstore import DocStore

        if self._doc_store is None:
            self._doc_store = DocStore(self.index)
        return self._doc_store.text(internal_doc(doc, self.index.internal_id, self.index.path))


def internal_doc(doc: str | int, lookup: Callable[[str], int | None], where: object) -> int:
    """The internal id of `doc` (an int is one already); `SsrError` naming `where` for an unknown id."""
    if not isinstance(doc, str):
        return operator.index(doc)
    found = lookup(doc)
    if found is None:
        raise SsrError(f"{where}: no document with id {doc!r}")
    return found


def check_k(k: int | None) -> None:
    """K >= 1, or None for every candidate; otherwise `ArgumentError`."""
    if k is None:
        return
    try:
        if isinstance(k, bool):
            raise TypeError
        k = operator.index(k)  # ints and NumPy integers; floats and strings are refused
    except TypeError:
        raise ArgumentError(f"k must be a positive integer or None, got {k!r}") from None
    if k < 1:
        raise ArgumentError(f"k must be >= 1, got {k}")


def check_method(method: str, allowed: Sequence[str] = METHODS) -> None:
    if method not in allowed:
        raise ArgumentError(f"unknown method {method!r}; expected one of {', '.join(allowed)}")


def max_threads() -> int:
    """Numba's thread pool size (NUMBA_NUM_THREADS; the machine's cores unless set)."""
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def check_threads(threads: int | None) -> None:
    """None, or 1..NUMBA_NUM_THREADS; otherwise `ArgumentError` (never clamped: a typo should not pass)."""
    if threads is None:
        return
    most = max_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= most:
        raise ArgumentError(f"threads must be in 1..{most}, got {threads!r}")


@contextmanager
def numba_threads(threads: int | None, tasks: int | None = None) -> Iterator[int]:
    """Run a block with `threads` Numba threads (validated); yields the count in force.

    `tasks`: how many independent pieces the block's parallel loop has (queries, for the
    per-query kernels). With one task and no explicit `threads`, the block runs on one thread:
    the other threads would have nothing to do, yet waking them costs milliseconds on a busy
    machine (0.6 ms against 8-20 ms measured for one query over 1,000 cards under load).
    Numba's setting is per calling thread, so other Python threads are unaffected.
    """
    import numba

    check_threads(threads)
    if threads is None and tasks is not None and tasks <= 1:
        threads = 1
    before = numba.get_num_threads()
    if threads is not None:
        numba.set_num_threads(threads)
    try:
        yield numba.get_num_threads()
    finally:
        numba.set_num_threads(before)


def open_retriever(index: str | os.PathLike[str] | Index, method: str = "ssr", *, k1: float = BM25_K1,
                   b: float = BM25_B) -> Retriever:
    """The searcher of `method` over an index directory (or an opened `Index`), plain, live or sharded.

    `ssr`, `levels`, `union`, `maxscore` and `exhaustive` need an index built with scoring "ssr", `bm25` one built with
    scoring "bm25" (k1 and b apply to bm25 only). Raises `ArgumentError` for an unknown method
    and `SsrError` for an index of the other scoring.
    """
    from .format import Index

    check_method(method)
    if not isinstance(index, Index):
        from .distributed.layout import is_sharded

        if is_sharded(index):  # a sharded index, searched in this process (distributed.ShardedSearcher: on Ray)
            from .distributed.search import open_local

            return open_local(index, method, k1=k1, b=b)
    if method == "bm25":
        if not isinstance(index, Index):  # a directory: it may be a live index (live.open_bm25 decides)
            from .live import open_bm25

            return open_bm25(index, k1=k1, b=b)
        from .bm25 import BM25Searcher

        return BM25Searcher(index, k1=k1, b=b)
    if (k1, b) != (BM25_K1, BM25_B):
        raise ArgumentError(f"k1 and b apply to method bm25 only, not {method!r}")
    from .search import Searcher

    return Searcher(index, method=method)
