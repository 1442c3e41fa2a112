"""Where a build's work runs: a thread pool, or the calling thread for a one-worker build.

Why: a live index's small writes (an agent registry's one-card PUT) build with one worker, and
starting a pool thread, or waking Numba's OpenMP team for a parallel kernel, cost 5-15 ms each on
a busy 2-core machine (measured under load 10: a parallel `find_words` call on two strings 5.9 ms
p50, the same call on one thread 0.04 ms), more than the whole build of a few cards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

SMALL = 1 << 16  # items below which a parallel kernel runs on the calling thread


class _Inline(Executor):
    """An executor that runs each call at `submit`, on the calling thread (its future is done)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller by `result()`, as a pool's future would
            future.set_exception(exc)
        return future


def pool(workers: int, name: str) -> Executor:
    """A `ThreadPoolExecutor` of `workers` threads named `name`; one worker: the calling thread."""
    return _Inline() if workers <= 1 else ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)


@contextmanager
def serial_if_small(items: int) -> Iterator[None]:
    """Numba's parallel kernels run on the calling thread alone while inside, when `items` < SMALL."""
    from ..retrieval import numba_threads

    with numba_threads(1 if items < SMALL else None):
        yield


def serial_call(items: int, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) under `serial_if_small(items)` (Numba's thread count is the calling thread's own: this
    runs where `fn` runs, a pool thread included)."""
    with serial_if_small(items):
        return fn(*args)
