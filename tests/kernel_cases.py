"""Checks shared by the kernel tests (test_levels, test_probe): query sets over `tie_heavy_ref`'s words,
deleted documents, thread counts and corrupt postings, each run against any batch kernel."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from test_kernels import Arrays
from test_prune import assert_equals_reference, tie_heavy_ref

from ssr_engine.kernels import levels
from ssr_engine.kernels.candidates import CorruptIndexData

Kernel = Callable[..., tuple]  # (arrays, queries, k, **kw) -> flat (offsets, docs, scores, matches)


def tie_queries(n_words, seed, count=8, longest=None):
    """`count` queries of 1..`longest` distinct words t0..t{n_words-1}, drawn with `seed`."""
    rng = np.random.default_rng(seed)
    hi = n_words if longest is None else min(n_words, longest)
    return [" ".join(f"t{w}" for w in rng.choice(n_words, size=rng.integers(1, hi + 1), replace=False))
            for _ in range(count)]


def assert_same_bytes(want, got) -> None:
    """Two kernels' flat results are identical array by array, score bits included."""
    for a, b in zip(want, got, strict=True):
        assert a.tobytes() == b.tobytes()


def assert_deleted_never_rank(run: Kernel, other: Kernel, arrays: Arrays, queries, live) -> None:
    """`run` with a live mask returns live documents only, and exactly what `other` returns with it."""
    for k in (1, 10, 300):
        got = run(arrays, queries, k, live=live)
        assert live[got[1]].all()
        assert_same_bytes(other(arrays, queries, k, live=live), got)


def assert_threads_agree_and_corrupt_postings_raise(run: Kernel, arrays: Arrays, queries, query, term) -> None:
    """1, 2 and 3 threads give the same bytes; a posting past N, then a list out of order in `term`'s
    postings (a term of `query` that `run` reads), raise CorruptIndexData. Corrupts `arrays.docs`."""
    outs = [[a.tobytes() for a in run(arrays, queries, 10, n_chunks=n)] for n in (1, 2, 3)]
    assert outs[0] == outs[1] == outs[2]
    last = arrays.indptr[term + 1] - 1
    arrays.docs[last] = arrays.ref.n_docs + 5  # a posting past N
    with pytest.raises(CorruptIndexData):
        run(arrays, [query] * 4, 10)
    arrays.docs[last] = arrays.docs[arrays.indptr[term]]  # not ascending
    with pytest.raises(CorruptIndexData):
        run(arrays, [query] * 4, 10)


def assert_long_queries_take_the_union(run: Kernel, **kw) -> None:
    """A query of more than `levels.MAX_TERMS` known terms (beside a short and an empty one) is answered
    exactly, for k from None to past the pool."""
    ref = tie_heavy_ref(300, 40, 4, cap=400)
    arrays = Arrays(ref)
    queries = [" ".join(f"t{w}" for w in range(40)), "t1 t2 t3", ""]
    assert len(arrays.batch(queries[:1])[1]) > levels.MAX_TERMS
    for k in (None, 1, 5, 50, 1000):
        assert_equals_reference(arrays, queries, k, run(arrays, queries, k, **kw))
