"""Work cut into pieces that the calling thread and kept helper threads take one at a time (`Helpers.map`).

For work whose heavy steps release the GIL (Numba `nogil` kernels): each thread runs every step of
its piece, so the steps that hold the GIL overlap with other threads' kernels instead of running
serially between parallel kernel calls; a thread slowed by another process simply takes fewer pieces.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def even(n: int, parts: int) -> list[tuple[int, int]]:
    """Spans [a, b) covering range(n), in order: `parts` of about equal size, the empty ones dropped."""
    cuts = [n * i // parts for i in range(parts + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def guided(n: int, threads: int, least: int, most: int) -> list[tuple[int, int]]:
    """Spans [a, b) covering range(n), in order, for `threads` threads taking them one at a time.

    Each takes a share of what is left (a 2 * threads-th), within [least, most]: the first pieces are big
    (few hand-offs between threads, few calls' fixed costs), the last small, so the threads finish
    together whichever was slowed.
    """
    spans = []
    a = 0
    while a < n:
        b = min(n, a + max(least, min(most, -(-(n - a) // (2 * threads)))))
        spans.append((a, b))
        a = b
    return spans


class Helpers:
    """A pool of helper threads, made on first use and kept (one per owner, e.g. a `Searcher`)."""

    def __init__(self, most: int, name: str):
        self._most = max(1, most)
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def map(self, fn: Callable[[T], R], pieces: Sequence[T], threads: int) -> list[R]:
        """[fn(p) for p in pieces] on `threads` threads (the caller and threads - 1 helpers), in order.

        The first exception stops the taking of pieces and is raised once every thread has stopped
        (nothing still runs when this returns or raises).
        """
        out: list[R | None] = [None] * len(pieces)
        taken = itertools.count()  # next() on a count is atomic under the GIL
        failed = threading.Event()

        def work() -> None:
            try:
                for i in iter(taken.__next__, None):
                    if i >= len(pieces) or failed.is_set():
                        return
                    out[i] = fn(pieces[i])
            except BaseException:
                failed.set()
                raise

        self.each(lambda _: work(), min(threads, len(pieces)))
        return out  # type: ignore[return-value]  # every piece ran: no None is left

    def each(self, fn: Callable[[int], None], threads: int) -> None:
        """fn(0) on the calling thread and fn(1) .. fn(threads - 1) on helpers, at once.

        Returns once every call has returned; the calling thread's exception, else the first helper's,
        is raised after every call has stopped.
        """
        helpers = [self._executor().submit(fn, i) for i in range(1, threads)]
        try:
            fn(0)
        finally:
            for h in helpers:  # wait for each helper whatever happened here
                h.exception()
        for h in helpers:
            h.result()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._most, thread_name_prefix=self._name)
            return self._pool
