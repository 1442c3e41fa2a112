"""The order a group of shards is searched in for each query (`kernels.shards._densest_first`, used by
`search_group`): the shards by descending postings held, ties by position, exactly as a stable
argsort of the negated counts; and the group's answers stay one index's whatever that order is, with
many shards tying on their postings (the groups' ten-word collections of `test_distributed`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from conftest import assert_identical
from hypothesis import given, settings
from hypothesis import strategies as st
from test_distributed import QUERIES, random_docs, shard_answers

from ssr_engine import build_index
from ssr_engine.distributed import build_sharded
from ssr_engine.kernels.shards import _densest_first
from ssr_engine.retrieval import open_retriever


@settings(max_examples=300, deadline=None)
@given(held=st.lists(st.integers(0, 3), min_size=1, max_size=9))
def test_densest_first_is_a_stable_sort_by_descending_postings(held: list[int]) -> None:
    counts = np.array(held, dtype=np.int64)
    order = np.full(counts.shape[0], -7, dtype=np.int64)  # overwritten in full
    _densest_first(counts, order)
    assert order.tolist() == np.argsort(-counts, kind="mergesort").tolist()


def test_densest_first_reuses_its_buffer_across_queries() -> None:
    """`search_group` keeps one order buffer for every query: the previous query's order must not leak."""
    order = np.empty(4, dtype=np.int64)
    for held in ([1, 5, 5, 0], [0, 0, 0, 0], [9, 1, 9, 2], [0, 0, 0, 7]):
        counts = np.array(held, dtype=np.int64)
        _densest_first(counts, order)
        assert order.tolist() == np.argsort(-counts, kind="mergesort").tolist()


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(20, 120), shards=st.integers(2, 6))
def test_a_group_of_tying_shards_answers_as_one_index(seed: int, n: int, shards: int) -> None:
    """One actor holding every shard (one `search_group` call): ties of score and matches across shards and
    ties of the shards' postings counts (the order), at k small enough that the bar cuts between shards."""
    docs = random_docs(seed, n)
    with tempfile.TemporaryDirectory() as tmp:
        build_index(docs, Path(tmp) / "one", quiet=True)
        build_sharded(docs, Path(tmp) / "s", shards, runner="inline", quiet=True)
        one = open_retriever(Path(tmp) / "one")
        queries = [*QUERIES, "alpha", "beta gamma delta epsilon zeta eta theta iota kappa"]
        for k in (1, 2, 5, 17):
            assert_identical(shard_answers(Path(tmp) / "s", queries, k, actors=1), one.search_batch(queries, k))
