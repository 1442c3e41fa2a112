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
from ssr_engine.reference import ReferenceIndex

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


def check_long_split(run: Kernel, union: Kernel, n_docs, seed, k, deletions, barred, **kw) -> None:
    """Queries of 13-30 terms, most of them rare (`long`: the lightest 12 through levels or probe, the rarest
    terms' documents scored apart), with common words and ties: the heap union's results bit for bit, with
    deletions and behind a bar too, and the reference's."""
    rng = np.random.default_rng(seed)
    holder = rng.integers(n_docs, size=40)  # every rare word is in the vocabulary
    texts = []
    for d in range(n_docs):
        words = [f"c{w}" for w in range(8) if rng.random() < 0.5 / (w + 1)]
        words += [f"r{w}" for w in range(40) if rng.random() < 0.004 or holder[w] == d]
        texts.append(" zz ".join(rng.permutation(words).tolist()))
    ref = ReferenceIndex.from_texts([str(x) for x in rng.permutation(3 * n_docs)[:n_docs]], texts, cap=64)
    arrays = Arrays(ref)
    queries = [" ".join(rng.permutation([f"c{w}" for w in range(8)] + [f"r{w}" for w in rng.choice(40, 22)])
                        [: rng.integers(13, 31)].tolist()) for _ in range(6)]
    assert max(np.diff(arrays.batch(queries)[0])) > levels.MAX_TERMS
    live = rng.random(n_docs) < 0.8 if deletions else None
    bar = None
    if barred:  # each query's 3rd result as the bar (a live index's other segments)
        o, d, s, m = union(arrays, queries, 3, live=live)
        last = [o[i + 1] - 1 if o[i + 1] > o[i] else -1 for i in range(len(queries))]
        bar = (np.array([s[i] if i >= 0 else 0.0 for i in last]), np.array([m[i] if i >= 0 else 0 for i in last]),
               np.array([int(arrays.doc_rank[d[i]]) << 32 | int(d[i]) if i >= 0 else 1 << 62 for i in last]))
    got = run(arrays, queries, k, live=live, bar=bar, **kw)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in union(arrays, queries, k, live=live, bar=bar)]
    if live is None and bar is None:
        assert_equals_reference(arrays, queries, k, got)
