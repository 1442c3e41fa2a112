"""The levels kernel (kernels.levels, method ssr) against the reference and the heap union, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_cases import (
    assert_deleted_never_rank,
    assert_long_queries_take_the_union,
    assert_same_bytes,
    assert_threads_agree_and_corrupt_postings_raise,
    check_long_split,
)
from test_kernels import Arrays, corpus_st, queries_st
from test_prune import assert_equals_reference, tie_heavy_ref

from ssr_engine.kernels import levels, probe
from ssr_engine.kernels import ssr as kernels
from ssr_engine.reference import ReferenceIndex


def run(arrays: Arrays, queries, k, **kw):
    off, terms, weights = arrays.batch(queries)
    return levels.search_batch(arrays.indptr, arrays.postings, arrays.doc_rank, arrays.ref.n_docs, off, terms, weights,
                               k, **kw)


def union(arrays: Arrays, queries, k, **kw):
    off, terms, weights = arrays.batch(queries)
    return kernels.search_batch(arrays.indptr, arrays.postings, arrays.doc_rank, arrays.ref.n_docs, off, terms, weights,
                                k, **kw)


def check(arrays: Arrays, queries, k, **kw):
    assert_equals_reference(arrays, queries, k, run(arrays, queries, k, **kw))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus_st(), queries_st, st.one_of(st.none(), st.integers(1, 45)), st.sampled_from([1, 3, 1 << 16]),
       st.sampled_from([1, 2]), st.sampled_from([1, 4096]))
def test_levels_match_reference(ref, queries, k, block, threads, buffer):
    check(Arrays(ref), queries, k, block=block, n_chunks=threads, buffer=buffer)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(20, 400), st.integers(3, 14), st.integers(0, 10_000), st.integers(1, 500),
       st.sampled_from([1, 7, 64, 1 << 14]), st.sampled_from([1, 16, 4096]))
def test_levels_with_heavy_ties(n_docs, n_words, seed, k, block, buffer):
    """Many terms of equal df (equal weights, so many masks share a level), duplicated documents,
    K from 1 past the pool; a small buffer forces cuts among tied documents by id rank."""
    ref = tie_heavy_ref(n_docs, n_words, seed)
    arrays = Arrays(ref)
    rng = np.random.default_rng(seed + 1)
    queries = [" ".join(f"t{w}" for w in rng.choice(n_words, size=rng.integers(1, n_words + 1), replace=False))
               for _ in range(8)]
    check(arrays, queries, k, block=block, buffer=buffer)
    assert_same_bytes(union(arrays, queries, k, block=block), run(arrays, queries, k, block=block, buffer=buffer))


def test_long_queries_take_the_heap_union():
    assert_long_queries_take_the_union(run, buffer=1)


def test_deleted_documents_never_rank():
    ref = tie_heavy_ref(2000, 12, 3)
    arrays = Arrays(ref)
    rng = np.random.default_rng(8)
    live = rng.random(ref.n_docs) < 0.7
    queries = [" ".join(f"t{w}" for w in rng.choice(12, size=rng.integers(1, 12), replace=False)) for _ in range(50)]
    assert_deleted_never_rank(partial(run, buffer=1), union, arrays, queries, live)


def test_threads_agree_and_corrupt_postings_raise():
    ref = tie_heavy_ref(3000, 12, 9)
    arrays = Arrays(ref)
    rng = np.random.default_rng(2)
    queries = [" ".join(f"t{w}" for w in rng.choice(12, size=rng.integers(0, 12), replace=False)) for _ in range(100)]
    query = " ".join(f"t{w}" for w in range(12))
    assert_threads_agree_and_corrupt_postings_raise(run, arrays, queries, query, arrays.batch([query])[1][0])


def _ranks_before(s, m, key, bar):
    """Whether (s, m, key) ranks strictly before the full key `bar` (score desc, matches desc, key asc)."""
    bs, bm, bk = bar
    return s > bs or (s == bs and (m > bm or (m == bm and key < bk)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(20, 400), st.integers(3, 15), st.integers(0, 10_000), st.integers(1, 500),
       st.sampled_from([1, 7, 1 << 14]), st.sampled_from([1, 16, 4096]), st.booleans(), st.sampled_from([1, 2]))
def test_a_bar_keeps_the_unbarred_results_that_rank_before_it(n_docs, n_words, seed, k, block, buffer, deletions,
                                                              threads):
    """levels (and the heap union it falls back to past MAX_TERMS terms) with a bar == without it, filtered
    by the bar: bars on a tie of score and matches (the id decides), at keys past every id, between
    levels, above every level, or none; heavy ties, deleted documents, buffer cuts."""
    check_bars(run, n_docs, n_words, seed, k, deletions, block=block, buffer=buffer, n_chunks=threads)


def check_bars(kernel, n_docs, n_words, seed, k, deletions, ordered=False, **kw):
    """kernel(arrays, queries, k, bar=, live=, **kw) with random bars == the union without a bar, filtered
    by each bar (see test_a_bar_keeps_the_unbarred_results_that_rank_before_it); `ordered`: ids in row order."""
    from ssr_engine.kernels.topk import doc_key

    arrays = Arrays(tie_heavy_ref(n_docs, n_words, seed, ordered=ordered))
    rng = np.random.default_rng(seed + 7)
    live = rng.random(n_docs) < 0.8 if deletions else None
    queries = [" ".join(f"t{w}" for w in rng.choice(n_words, size=rng.integers(1, n_words + 1), replace=False))
               for _ in range(12)]
    off, d, s, m = union(arrays, queries, None, live=live)  # every live candidate in rank order
    keys = [doc_key(int(arrays.doc_rank[x]), int(x)) for x in d.tolist()]
    nq = len(queries)
    bar = (np.full(nq, -np.inf), np.zeros(nq, dtype=np.int32), np.zeros(nq, dtype=np.int64))
    for q in range(nq):
        kind = rng.integers(5)
        if off[q + 1] == off[q] or kind == 0:
            continue  # no bar
        r = int(rng.integers(off[q], off[q + 1]))
        bar[0][q], bar[1][q], bar[2][q] = s[r], m[r], keys[r]
        if kind == 2:
            bar[2][q] = np.iinfo(np.int64).max  # every tie on score and matches enters
        elif kind == 3:
            bar[0][q] = np.nextafter(s[r], np.inf)  # between two levels: no tie level
        elif kind == 4:
            bar[0][q] = np.inf  # nothing can enter
    got = kernel(arrays, queries, k, bar=bar, live=live, **kw)
    for q in range(nq):
        b = (bar[0][q], bar[1][q], bar[2][q])
        want = [i for i in range(off[q], off[q + 1]) if _ranks_before(s[i], m[i], keys[i], b)][:k]
        a, z = got[0][q], got[0][q + 1]
        assert got[1][a:z].tolist() == d[want].tolist()
        assert got[2][a:z].tobytes() == s[want].tobytes()
        assert got[3][a:z].tolist() == m[want].tolist()


def test_kernels_stay_in_bounds_when_a_block_is_full(tmp_path):
    """Every document of a block touched, then more postings: the branch-free first touch writes one
    entry past the block's distinct documents, so `touched` holds width + 1. Run as Python
    (NUMBA_DISABLE_JIT=1), where NumPy checks every index, in a child process."""
    script = tmp_path / "full_block.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from ssr_engine.kernels import levels, prune
        from ssr_engine.kernels import ssr as kernels
        indptr = np.array([0, 5, 10], dtype=np.int64)  # two terms, each in all 5 documents
        docs = (np.array([0, 1, 2, 3, 4] * 2, dtype=np.uint32), 0)  # the postings column, plain
        rank = np.arange(5, dtype=np.uint32)
        off, terms, w = np.array([0, 2]), np.array([0, 1]), np.array([1.0, 1.0])
        for k in (3, None):
            want = [0, 1, 2] if k else [0, 1, 2, 3, 4]
            for n in (1, 2):
                assert levels.search_batch(indptr, docs, rank, 5, off, terms, w, k, n_chunks=n)[1].tolist() == want
                assert kernels.search_batch(indptr, docs, rank, 5, off, terms, w, k, n_chunks=n)[1].tolist() == want
                assert prune.search_batch(indptr, docs, rank, 5, off, terms, w, k, threads=n)[1].tolist() == want
        print("in bounds")
    """))
    here = str(Path(levels.__file__).parents[2])  # the checkout under test, not an installed copy
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "in bounds"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(30, 1500), st.integers(0, 10_000), st.integers(1, 300), st.sampled_from([1, 7, 64, 1 << 14]),
       st.sampled_from([1, 16, 4096]), st.booleans())
def test_skipped_blocks_change_nothing_when_ranks_ascend(n_docs, seed, k, block, buffer, deletions):
    """Ids in collection order (doc_rank ascending, as MS MARCO's): a light word in most documents,
    alone in most blocks, with rare words; blocks that cannot enter are skipped (`monotone`) and
    the results stay the reference's, and equal the unskipped kernel's bit for bit."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n_docs):
        words = ["common"] if rng.random() < 0.9 else []
        words += [f"r{w}" for w in range(6) if rng.random() < 0.01 * (w + 1)]
        words += ["mid"] if rng.random() < 0.2 else []
        texts.append(" zz ".join(rng.permutation(words).tolist()))
    ref = ReferenceIndex.from_texts([str(d) for d in range(n_docs)], texts, cap=64)
    arrays = Arrays(ref)
    assert probe.ascending(arrays.doc_rank) and not probe.ascending(arrays.doc_rank[::-1].copy())
    queries = ["common r0", "common r1 r2", "common mid r5", "common", "r3 common r4 mid zz", "mid common"]
    live = rng.random(n_docs) < 0.8 if deletions else None
    skipped = run(arrays, queries, k, block=block, buffer=buffer, live=live, monotone=True)
    plain = run(arrays, queries, k, block=block, buffer=buffer, live=live)
    assert [a.tobytes() for a in skipped] == [a.tobytes() for a in plain]
    if live is None:
        assert_equals_reference(arrays, queries, k, skipped)
    else:
        assert live[skipped[1]].all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(30, 800), st.integers(0, 10_000), st.integers(1, 400), st.sampled_from([1, 7, 1 << 14]),
       st.sampled_from([1, 4096]), st.booleans(), st.booleans())
def test_long_queries_split_off_their_rarest_terms(n_docs, seed, k, block, buffer, deletions, barred):
    """Queries of 13-30 terms, most of them rare (`levels.long_one`: the lightest 12 through levels, the
    rarest terms' documents scored apart): `kernel_cases.check_long_split`."""
    check_long_split(run, union, n_docs, seed, k, deletions, barred, block=block, buffer=buffer)
