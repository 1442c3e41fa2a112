"""The cyclic garbage collector and the objects that live as long as an opened index (one rule, here).

A process that opens an index holds ~135,000 objects the collector tracks (tuples, functions, dicts of the
modules imported: NumPy, Numba, llvmlite, PyArrow, ...; 59,000 before the open, most of the rest imported
by it), and none of them ever becomes garbage. Every full collection walks them all: 39 ms on a 145 ms
batch of 6,980 queries on one thread (1.1M short texts), about one round in ten, and ~75 ms at 8.8M
(benchmarks/RESULTS.md). A batch's results (a `SearchResult` a query) are what fills the young generations.

`freeze_once` takes what is alive once the process's first searcher has opened out of the collector's
passes (`gc.freeze`), so that a full collection walks only what was made since: once a process, by each
searcher's constructor. Frozen objects are still freed when their reference count falls to zero (a dropped
searcher goes as before: none of them holds a cycle, `tests/test_generations.py`); only a cycle that
one of them is part of is never collected. `SSR_GC_FREEZE=0` in the environment turns it off (it is also
skipped while the collector is disabled).
"""

from __future__ import annotations

import gc
import os
import threading

ENV = "SSR_GC_FREEZE"

_lock = threading.Lock()
_frozen = False


def freeze_survivors() -> None:
    """Take every object alive now out of the collector's passes (`gc.freeze`), then collect once more.

    The first collection keeps garbage out of the frozen set. The second matters as much: CPython (to 3.13)
    starts a full collection only when the objects promoted since the last exceed a quarter of those it
    counted then; counted before the freeze (a served registry of 100,000 cards: ~230,000 objects), that
    quarter was ~57,000 objects, which piled up unfrozen and took 57-137 ms a pass under load. Counted
    after it, full passes come often and walk only what was made since."""
    gc.collect()
    gc.freeze()
    gc.collect()


def freeze_once() -> bool:
    """`freeze_survivors` the first time it is called in a process (the collector enabled and `SSR_GC_FREEZE`
    not "0"); True when this call froze. Costs one full collection, once (~35 ms after an open)."""
    global _frozen
    if _frozen or os.environ.get(ENV, "1") == "0" or not gc.isenabled():
        return False
    with _lock:
        if _frozen:
            return False
        _frozen = True
    freeze_survivors()
    return True
