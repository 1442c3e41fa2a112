"""The order a group of shards is searched in for each query (`kernels.shards._densest_first`, used by
`search_group`): the shards by descending postings held, ties by position, exactly as a stable
argsort of the negated counts; and the group's answers stay one index's whatever that order is, with
many shards tying on their postings (the groups' ten-word collections of `test_distributed`).
And which shards the group skips behind its bar (`kernels.shards._out_of_reach`): only those none of
whose documents can rank strictly before it, on (score, matches) or, tied on them, on the id. Every group
test runs each way a query can go, forced for every query of at most `levels.MAX_TERMS` terms: `small` over
the shards, one set of levels over them, and shard after shard behind the bar (`search_group`'s `across` off)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_identical, write_tsv
from hypothesis import given, settings
from hypothesis import strategies as st
from test_distributed import QUERIES, random_docs, shard_answers

from ssr_engine import build_index
from ssr_engine.distributed import build_sharded, worker
from ssr_engine.errors import IndexFormatError
from ssr_engine.kernels.live import RULE_PARTS
from ssr_engine.kernels.shards import _densest_first, _out_of_reach
from ssr_engine.retrieval import open_retriever

# `search_group`'s three ways, every query of at most MAX_TERMS terms: `small` over the shards (rule[6] and [7]
# past any postings count and k), one set of levels over them (no `small`: rule[6] and [7] zero; `_levels_pay`
# always: rule[9] past any count), or shard by shard
WAYS = {"small": (True, np.array([*RULE_PARTS[:6], 1e30, 1e30, *RULE_PARTS[8:]], dtype=np.float64)),
        "levels": (True, np.array([*RULE_PARTS[:6], 0.0, 0.0, RULE_PARTS[8], 1e30], dtype=np.float64)),
        "by shard": (False, worker._RULE)}


@contextmanager
def way(name: str) -> Iterator[None]:
    """`ShardWorker`s made inside search their groups the named way (`WAYS`)."""
    saved = worker._ACROSS, worker._RULE
    worker._ACROSS, worker._RULE = WAYS[name]
    try:
        yield
    finally:
        worker._ACROSS, worker._RULE = saved


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
            want = one.search_batch(queries, k)
            for name in WAYS:
                with way(name):
                    assert_identical(shard_answers(Path(tmp) / "s", queries, k, actors=1), want)


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
        want = one.search_batch(queries, k)
        for name in WAYS:
            with way(name):
                assert_identical(shard_answers(tmp_path / "s", queries, k, actors=1), want)


@pytest.mark.parametrize("name", list(WAYS))
def test_a_corrupt_shard_is_an_error_naming_it_either_way(tmp_path: Path, name: str) -> None:
    """A list of the middle shard out of order (one of its postings repeated): the group's search raises an
    error naming that shard, never a crash or an answer; the worker serves a sound batch afterwards."""
    from ssr_engine.distributed.layout import read_manifest
    from ssr_engine.kernels.lists import span
    from ssr_engine.kernels.live import prepare_parts
    from ssr_engine.kernels.packed import gather

    docs = [(str(i), f"common w{i % 5} v{i % 3}") for i in range(60)]
    path = write_tsv(tmp_path / "c.tsv", docs)
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    m = read_manifest(tmp_path / "s")
    with way(name):
        w = worker.ShardWorker(str(tmp_path / "s"), [0, 1, 2], m.generation, "ssr", 1, 1.2, 0.75)
    try:
        queries = ["common w1 v2", "common"]  # k past the documents: every posting of "common" is read
        sound = w.search(np.array(queries), 100)
        ix = w.indexes[1]
        col = ix.postings
        plain = gather(col, np.zeros(1, np.int64), np.array([ix.postings_length])) if isinstance(col, tuple) \
            else np.array(col, dtype=np.uint32)
        t = int(np.argmax(ix.df()))  # "common": in every document
        a, b = span(ix.lists, t)
        assert b - a == ix.n_docs > 2
        plain[b - 1] = plain[a]  # not strictly ascending
        arrays = [(int(w._starts[j]), x.n_docs, x.lists, plain if j == 1 else x.postings, w.ranks[j], None,
                   np.zeros(0, np.int64), x.forward_indptr, x.forward, w.ascending[j]) for j, x in enumerate(w.indexes)]
        good = w._arrays
        w._arrays = prepare_parts(arrays, grank=w._grank)
        with way(name), pytest.raises(IndexFormatError, match=str(ix.path)):
            w.search(np.array(queries), 100)
        w._arrays = good
        with way(name):
            again = w.search(np.array(queries), 100)
        assert all(np.array_equal(x, y) for p, q in zip(sound, again, strict=True) for x, y in zip(p, q, strict=True))
    finally:
        w.close()
