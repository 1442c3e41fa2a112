"""The probing kernel (kernels.probe: heavy lists first, then bounded forward probes) against the
reference and the levels kernel, bit for bit; and proof that it prunes."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_cases import (
    assert_deleted_never_rank,
    assert_long_queries_take_the_union,
    assert_same_bytes,
    assert_threads_agree_and_corrupt_postings_raise,
    check_long_split,
    tie_queries,
)
from test_kernels import Arrays, corpus_st, queries_st
from test_levels import check_bars, union
from test_levels import run as by_levels
from test_prune import assert_equals_reference, tie_heavy_ref

from ssr_engine.kernels import levels, probe
from ssr_engine.reference import ReferenceIndex

# every query of two or more terms tries pruning, and probes are cheap (the default rule leaves small
# collections to levels); no query takes `small` (but one-term queries with ids in row order)
EAGER = (0.0, 0.0, 0.0, 1.0, 1.0, 0.5, 0.0, 64.0, 16.0)
# every query of two or more terms tries, and probes cost so much that `_complete` reads the other lists,
# finding the survivors in them by binary search (COMPLETE) or by scans (COMPLETE_SCAN)
COMPLETE = (0.0, 0.0, 0.0, 1e9, 0.0, 0.5, 0.0, 64.0, 0.0)
COMPLETE_SCAN = (*COMPLETE[:8], float("inf"))
# every query of at most MAX_TERMS terms takes `small`
SMALL = (*probe.RULE[:6], float("inf"), float("inf"), probe.RULE[8])
# the default rule with no `small`: small collections go to levels
LEVELS = (*probe.RULE[:6], 0.0, 0.0, probe.RULE[8])


def run(arrays: Arrays, queries, k, forward=True, rule=EAGER, **kw):
    off, terms, weights = arrays.batch(queries)
    fi = arrays.fwd_indptr if forward else np.zeros(0, dtype=np.int64)
    return probe.search_batch(arrays.indptr, arrays.postings, arrays.doc_rank, arrays.ref.n_docs, fi,
                              arrays.fwd, off, terms, weights, k, rule=rule, **kw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus_st(), queries_st, st.one_of(st.none(), st.integers(1, 45)), st.sampled_from([1, 3, 1 << 16]),
       st.sampled_from([1, 2]), st.sampled_from([1, 4, 1 << 20]),
       st.sampled_from([EAGER, COMPLETE, COMPLETE_SCAN, SMALL, probe.RULE]))
def test_probe_matches_reference(ref, queries, k, block, threads, candidates, rule):
    arrays = Arrays(ref)
    assert_equals_reference(arrays, queries, k, run(arrays, queries, k, block=block, n_chunks=threads,
                                                    candidates=candidates, rule=rule))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(20, 600), st.integers(3, 14), st.integers(0, 10_000), st.integers(1, 700),
       st.sampled_from([1, 7, 64, 1 << 14]), st.booleans(), st.sampled_from([EAGER, COMPLETE, COMPLETE_SCAN, SMALL]))
def test_probe_with_heavy_ties(n_docs, n_words, seed, k, block, ordered, rule):
    """Many terms of equal df (equal weights: many masks share a level and bounds tie with the k-th
    entry), duplicated documents, K from 1 past the pool; ids shuffled, or in row order (`monotone`)."""
    ref = tie_heavy_ref(n_docs, n_words, seed, ordered=ordered)
    arrays = Arrays(ref)
    assert bool(np.all(np.diff(arrays.doc_rank.astype(np.int64)) > 0)) == ordered
    queries = tie_queries(n_words, seed + 1, longest=levels.MAX_TERMS)
    got = run(arrays, queries, k, block=block, monotone=ordered, rule=rule)
    assert_equals_reference(arrays, queries, k, got)
    assert_same_bytes(by_levels(arrays, queries, k, block=block), got)
    if ordered:  # ranks ascending but not 0..N-1 (a part's collection-wide ranks): the same order
        arrays.doc_rank = arrays.doc_rank * np.uint32(3) + np.uint32(5)
        assert_same_bytes(got, run(arrays, queries, k, block=block, monotone=True, rule=rule))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(20, 400), st.integers(3, 15), st.integers(0, 10_000), st.integers(1, 500),
       st.sampled_from([1, 7, 1 << 14]), st.booleans(), st.sampled_from([1, 2]),
       st.sampled_from([EAGER, COMPLETE, COMPLETE_SCAN, SMALL, probe.RULE]), st.booleans())
def test_a_bar_keeps_the_unbarred_results_that_rank_before_it(n_docs, n_words, seed, k, block, deletions, threads,
                                                              rule, ordered):
    """As levels' test of the same name: probe with a bar == the union without it, filtered by the bar
    (ties at the bar, keys past every id, between levels, above every level, none); ids in row order too."""
    check_bars(run, n_docs, n_words, seed, k, deletions, ordered=ordered, block=block, n_chunks=threads, rule=rule,
               monotone=ordered)


def test_one_light_list_and_rare_ones_finish_without_levels():
    """Ids in row order (`monotone`): a query of one list holding most documents and a few rare ones reads
    the rare lists, then only as much of the light list as fills the top k (no levels), exactly."""
    rng = np.random.default_rng(3)
    n = 3000
    texts = [" zz ".join(["common"] + [f"r{w}" for w in rng.choice(400, size=rng.integers(0, 2), replace=False)])
             if rng.random() < 0.9 else "other" for _ in range(n)]
    arrays = Arrays(ReferenceIndex.from_texts([str(i) for i in range(n)], texts))
    queries = [f"common r{a} r{b}" for a, b in rng.choice(400, size=(30, 2))] + ["common r1", "common"]
    off, terms, _ = arrays.batch(queries)
    total = np.add.reduceat(arrays.indptr[terms + 1] - arrays.indptr[terms], off[:-1])
    for k in (1, 10, 100, 3000):
        stats = np.zeros((len(queries), probe.STATS), dtype=np.int64)
        assert_equals_reference(arrays, queries, k, run(arrays, queries, k, monotone=True, stats=stats))
        several = np.diff(off) > 1
        if k <= 10:  # the light list is read only as far as the top k needs
            assert (stats[several, 3] == 0).all() and (stats[several, 0] < total[several]).all(), stats
        live = rng.random(n) < 0.8
        assert_same_bytes(by_levels(arrays, queries, k, live=live), run(arrays, queries, k, monotone=True, live=live))


def test_it_prunes_and_its_stats_count():
    """On skewed lists most postings are never read and only some candidates are probed; without a
    forward index every posting is read, as levels does."""
    ref = tie_heavy_ref(4000, 12, 5, p_dup=0.05)
    arrays = Arrays(ref)
    queries = tie_queries(12, 6, count=60)
    off, terms, _ = arrays.batch(queries)
    df = arrays.indptr[terms + 1] - arrays.indptr[terms]
    total = np.add.reduceat(df, off[:-1]) * (np.diff(off) > 0)
    for k in (1, 10, 100):
        stats = np.zeros((len(queries), probe.STATS), dtype=np.int64)
        assert_equals_reference(arrays, queries, k, run(arrays, queries, k, stats=stats))
        if k == 1:  # larger k on lists this short: the cost rule reads them rather than probe
            assert (stats[:, 0] < 0.5 * total).sum() >= len(queries) // 4, (k, stats[:, 0], total)
            assert 0 < stats[:, 1].sum() < stats[:, 0].sum()
        # the default rule without `small`: these queries are too small to try
        default = np.zeros_like(stats)
        assert_equals_reference(arrays, queries, k, run(arrays, queries, k, stats=default, rule=LEVELS))
        assert default[:, 2].sum() == 0 and default[:, 0].tolist() == total.tolist()
        full = np.zeros_like(stats)
        assert_equals_reference(arrays, queries, k, run(arrays, queries, k, stats=full, forward=False))
        assert full[:, 0].tolist() == total.tolist()
        assert full[:, 1].sum() == 0
        # a one-entry candidate buffer: only lists of one posting may be pruned
        assert_equals_reference(arrays, queries, k, run(arrays, queries, k, candidates=1))


def test_long_queries_and_every_candidate_take_the_union():
    assert_long_queries_take_the_union(run)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(30, 800), st.integers(0, 10_000), st.integers(1, 400), st.sampled_from([1, 7, 1 << 14]),
       st.booleans(), st.booleans(), st.sampled_from([EAGER, COMPLETE, COMPLETE_SCAN, SMALL, probe.RULE]))
def test_long_queries_split_off_their_rarest_terms(n_docs, seed, k, block, deletions, barred, rule):
    """Queries of 13-30 terms (`probe._long`: the lightest 12 through `search_one`, pruned or not, the rarest
    terms' documents scored apart): the heap union's results, with deletions and behind a bar."""
    check_long_split(run, union, n_docs, seed, k, deletions, barred, block=block, rule=rule)


def test_deleted_documents_never_rank():
    ref = tie_heavy_ref(2000, 12, 3)
    arrays = Arrays(ref)
    live = np.random.default_rng(8).random(ref.n_docs) < 0.7
    assert_deleted_never_rank(run, by_levels, arrays, tie_queries(12, 9, count=50), live)


def test_threads_agree_and_corrupt_postings_raise():
    ref = tie_heavy_ref(3000, 12, 9)
    arrays = Arrays(ref)
    query = " ".join(f"t{w}" for w in range(12))
    heaviest = arrays.batch([query])[1][-1]  # the rarest list: always read by the probing path
    assert_threads_agree_and_corrupt_postings_raise(run, arrays, tie_queries(12, 2, count=100), query, heaviest)


def test_small_queries_read_what_the_top_k_needs():
    """`small` (the rule's last number: every query here): exact with deletions, ids shuffled or in row order;
    a rare list and a common one read only as far as the top k needs; corrupt postings of the rarest list,
    which it reads first, raise."""
    ref = tie_heavy_ref(2000, 12, 4, p_dup=0.05)
    arrays = Arrays(ref)
    queries = tie_queries(12, 11, count=60)
    def small(arrays, queries, k, **kw):
        return run(arrays, queries, k, rule=SMALL, **kw)
    live = np.random.default_rng(2).random(ref.n_docs) < 0.7
    assert_deleted_never_rank(small, by_levels, arrays, queries, live)
    rng = np.random.default_rng(5)
    n = 3000
    texts = [" zz ".join(["common"] + [f"r{w}" for w in rng.choice(400, size=rng.integers(0, 2), replace=False)])
             for _ in range(n)]
    rare = Arrays(ReferenceIndex.from_texts([str(i) for i in range(n)], texts))
    pairs = [f"common r{a}" for a in rng.choice(400, size=30)] + ["common"]
    off, terms, _ = rare.batch(pairs)
    total = np.add.reduceat(rare.indptr[terms + 1] - rare.indptr[terms], off[:-1])
    for ordered in (True, False):
        stats = np.zeros((len(pairs), probe.STATS), dtype=np.int64)
        assert_equals_reference(rare, pairs, 5, small(rare, pairs, 5, monotone=ordered, stats=stats))
        assert (stats[:, 5] == 1).all()
        if ordered:  # the rare list, then the common one only until 5 documents beat the rest
            assert (stats[:, 0] < total / 10).all(), (stats[:, 0], total)
    query = " ".join(f"t{w}" for w in range(12))
    heaviest = arrays.batch([query])[1][-1]
    assert_threads_agree_and_corrupt_postings_raise(small, arrays, queries, query, heaviest)
