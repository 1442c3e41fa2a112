"""MaxScore pruning (kernels.prune) against the reference and the unpruned union, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kernels import Arrays, corpus_st, expected, queries_st

from ssr_engine.kernels import prune
from ssr_engine.kernels import ssr as kernels
from ssr_engine.reference import ReferenceIndex


def run(arrays: Arrays, queries, k, method="maxscore", **kw):
    off, terms, weights = arrays.batch(queries)
    return prune.search_batch(arrays.indptr, arrays.postings, arrays.doc_rank, arrays.ref.n_docs, off, terms, weights,
                              k, method=method, **kw)


def check(arrays: Arrays, queries, k, **kw):
    assert_equals_reference(arrays, queries, k, run(arrays, queries, k, **kw))


def assert_equals_reference(arrays: Arrays, queries, k, result) -> None:
    """A kernel's flat (offsets, docs, scores, matches) equals the reference's top k, score bits included."""
    off, docs, scores, matches = result
    assert off.shape == (len(queries) + 1,)
    for i, q in enumerate(queries):
        a, b = off[i], off[i + 1]
        exp_ids, exp_scores, exp_matches = expected(arrays.ref, q, k)
        assert [arrays.ref.ids[d] for d in docs[a:b]] == exp_ids, (q, k)
        assert scores[a:b].view(np.uint64).tolist() == np.array(exp_scores, dtype=np.float64).view(np.uint64).tolist()
        assert matches[a:b].tolist() == exp_matches


def tie_heavy_ref(n_docs, n_words, seed, p_dup=0.3, cap=64, ordered=False):
    """Documents over `n_words` words drawn so that many words share one df (equal weights):
    each word's documents are a random set of one of three sizes; some documents repeat others.
    `ordered`: ids in row order (id ranks ascend with document numbers), else shuffled."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([2, max(3, n_docs // 10), max(4, n_docs // 3)], size=n_words)
    words: list[list[str]] = [[] for _ in range(n_docs)]
    for w in range(n_words):
        for d in rng.choice(n_docs, size=min(int(sizes[w]), n_docs), replace=False):
            words[d].append(f"t{w}")
    texts = []
    for d in range(n_docs):
        if d and rng.random() < p_dup:
            texts.append(texts[rng.integers(d)])
        else:
            # interleave with a separator so adjacent words do not form shared bigrams too often
            texts.append(" zz ".join(rng.permutation(words[d]).tolist()))
    ids = [str(x) for x in (range(n_docs) if ordered else rng.permutation(n_docs * 2)[:n_docs])]
    return ReferenceIndex.from_texts(ids, texts, cap=cap)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus_st(), queries_st, st.integers(1, 45), st.sampled_from([1, 3, 1 << 16]), st.sampled_from([1, 2]))
def test_maxscore_matches_reference(ref, queries, k, block, threads):
    check(Arrays(ref), queries, k, block=block, threads=threads)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(20, 400), st.integers(3, 30), st.integers(0, 10_000), st.integers(1, 500),
       st.sampled_from([1, 7, 64, 1 << 14]))
def test_maxscore_with_heavy_ties(n_docs, n_words, seed, k, block):
    """Many terms of equal df (equal weights), duplicated documents, K from 1 past the pool."""
    ref = tie_heavy_ref(n_docs, n_words, seed)
    arrays = Arrays(ref)
    rng = np.random.default_rng(seed + 1)
    queries = [" ".join(f"t{w}" for w in rng.choice(n_words, size=rng.integers(1, n_words + 1), replace=False))
               for _ in range(8)]
    check(arrays, queries, k, block=block)
    # the pruned result equals the union kernel's, byte for byte
    off, terms, weights = arrays.batch(queries)
    union = kernels.search_batch(arrays.indptr, arrays.postings, arrays.doc_rank, ref.n_docs, off, terms, weights, k,
                                 block=block)
    pruned = run(arrays, queries, k, block=block)
    for u, p in zip(union, pruned, strict=True):
        assert u.tobytes() == p.tobytes()


def test_all_candidates_and_long_queries_take_the_union():
    ref = tie_heavy_ref(300, 80, 4, cap=400)  # queries keep more than 64 signals
    arrays = Arrays(ref)
    long_query = " ".join(f"t{w}" for w in range(80))  # more than 64 known terms: no bit masks
    assert len(arrays.batch([long_query])[1]) > prune.MAX_TERMS
    for k in (None, 1, 5, 50, 1000):
        check(arrays, [long_query, "t1 t2 t3", ""], k)


def test_methods_and_threads_agree():
    ref = tie_heavy_ref(3000, 40, 9)
    arrays = Arrays(ref)
    rng = np.random.default_rng(2)
    queries = [" ".join(f"t{w}" for w in rng.choice(40, size=rng.integers(0, 12), replace=False)) for _ in range(100)]
    outs = {}
    for method in prune.METHODS:
        for threads in (1, 2, 3):
            outs[method, threads] = [a.tobytes() for a in run(arrays, queries, 10, method=method, threads=threads)]
    # a postings threshold sends the short queries down the union path, the long ones pruned
    lengths = np.diff(arrays.indptr)[arrays.batch(queries)[1]]
    assert lengths.sum() > 0
    outs["threshold"] = [a.tobytes() for a in run(arrays, queries, 10, prune_from=int(np.median(lengths)) * 3)]
    first = next(iter(outs.values()))
    assert all(v == first for v in outs.values())
    check(arrays, queries[:20], 10)


def test_unknown_method():
    ref = tie_heavy_ref(20, 3, 0)
    with pytest.raises(ValueError, match="unknown method"):
        run(Arrays(ref), ["t1"], 10, method="wand")
