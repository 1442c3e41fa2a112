"""The order a group of shards is searched in for each query (`kernels.shards._densest_first`, used by
`search_group`): the shards by descending postings held, ties by position, exactly as a stable
argsort of the negated counts; and the group's answers stay one index's whatever that order is, with
many shards tying on their postings (the groups' ten-word collections of `test_distributed`).
And which shards the group skips behind its bar (`kernels.shards._out_of_reach`): only those none of
whose documents can rank strictly before it, on (score, matches) or, tied on them, on the id."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_identical, write_tsv
from hypothesis import given, settings
from hypothesis import strategies as st
from test_distributed import QUERIES, random_docs, shard_answers

from ssr_engine import build_index
from ssr_engine.distributed import build_sharded
from ssr_engine.kernels.shards import _densest_first, _out_of_reach
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


@settings(max_examples=300, deadline=None)
@given(weights=st.lists(st.sampled_from([0.5, 1.25, 2.0, 3.5]), min_size=1, max_size=5),
       bar=st.tuples(st.sampled_from([0.5, 1.75, 2.0, 3.25, 4.0, 5.0, 7.25]), st.integers(1, 6), st.integers(0, 9)),
       first=st.integers(0, 9), monotone=st.booleans())
def test_a_shard_is_out_of_reach_only_when_none_of_its_documents_can_enter(
        weights: list[float], bar: tuple[float, int, int], first: int, monotone: bool) -> None:
    """Against the definition: the shard's best document (every query term it holds: the canonical sum, that
    many matches) and, with ranks ascending, its first document's key, compared with the bar's full key."""
    w = np.array(sorted(weights), dtype=np.float64)
    best = 0.0
    for x in w:  # the canonical sum: ascending weight
        best += x
    bs, bm, rank = bar
    after = (-best, -len(w)) > (-bs, -bm) or (monotone and (best, len(w)) == (bs, bm) and first > rank)
    assert _out_of_reach(w, 0, len(w), bs, bm, np.int64(rank) << 32, np.int64(first) << 32, monotone) == after


@pytest.mark.parametrize("ids", ["ascending", "descending"])
def test_shards_tied_at_the_bar_are_skipped_or_searched_by_their_ids(tmp_path: Path, ids: str) -> None:
    """Every document holds `common`; two of the last shard's also hold `rare`, so that shard goes first and its
    top k ends on `common` alone, tied with every other shard's documents on (score, matches). With ids
    ascending in document order the first shard's documents still beat that bar on their ids (searched), and the
    middle shard's, behind the first's, cannot (skipped); with ids descending the shards are searched by keys."""
    n = 90
    docs = []
    for i in range(n):
        doc_id = str(i) if ids == "ascending" else str(10_000 - i)
        docs.append((doc_id, "common rare" if i in (70, 80) else f"common w{i % 7}"))
    path = write_tsv(tmp_path / "c.tsv", docs)
    build_index(path, tmp_path / "one", quiet=True)
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    one = open_retriever(tmp_path / "one")
    queries = ["common rare", "rare common w3", "common", "w1 common", "w6"]
    for k in (1, 2, 3, 5, 40, 100):
        assert_identical(shard_answers(tmp_path / "s", queries, k, actors=1), one.search_batch(queries, k))
