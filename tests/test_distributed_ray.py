"""Sharded indexes on Ray: shard builds as Ray tasks, actors holding one shard or a group of shards,
faults (an actor killed in the middle of a batch, shards that cannot come back). One local Ray
instance (2 CPUs) for the module."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_identical, write_tsv
from test_distributed import QUERIES, WORDS, random_docs, same_answers

from ssr_engine import build_index
from ssr_engine.cli import main
from ssr_engine.distributed import ShardedResult, ShardedSearcher, build_sharded
from ssr_engine.distributed._ray import connect
from ssr_engine.distributed.layout import read_manifest
from ssr_engine.errors import InputError, SsrError
from ssr_engine.query_terms import Utf8Queries
from ssr_engine.retrieval import Retriever, open_retriever

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[distributed]')")

MANY = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 4)) for i in range(70)] + QUERIES


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module. Its raylet waits a fixed 15 s for its dashboard agent's
    port files (ray-project/ray#65983), which a heavily loaded machine can exceed (seen under nice 19
    at a load average of 11-17): one retry, then a skip saying so."""
    # Ray starts its workers at niceness 15 above the caller's by default; the test run's own priority
    # is enough (nice 19 or 10 already) and the actors otherwise take minutes to start under load
    os.environ.setdefault("RAY_worker_niceness", "0")
    # a worker started again for a killed actor registers in Ray's 60 s by default; at a load average of
    # ~20 (nice 19) one took longer and the actor was declared unschedulable
    os.environ.setdefault("RAY_worker_register_timeout_seconds", "600")
    for attempt in range(2):
        try:
            connect(None, num_cpus=2)  # as the library starts one: its workers import this checkout
            break
        except Exception as exc:  # Ray raises a bare Exception on its start-up timeout
            ray.shutdown()
            if attempt:
                pytest.skip(f"a local Ray instance did not start on this machine: {exc}")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def built(local_ray, tmp_path_factory) -> tuple[Path, Path, list[tuple[str, str]]]:
    """(one index, a 4-shard index built by Ray tasks, the documents): ties across shards, mixed ids."""
    tmp = tmp_path_factory.mktemp("ray")
    docs = random_docs(21, 400, "mixed")
    path = write_tsv(tmp / "c.tsv", docs)
    build_index(path, tmp / "one", quiet=True)
    build_sharded(path, tmp / "s", 4, runner="ray", quiet=True)
    return tmp / "one", tmp / "s", docs


def test_ray_build_and_actors_answer_as_one_index(built) -> None:
    one_path, sharded, _ = built
    assert read_manifest(sharded).build["runner"] == "ray" and len(read_manifest(sharded).shards) == 4
    one = open_retriever(one_path)
    # the default on one node: one actor holding every shard (two threads taking pieces of a round); three
    # actors: groups of two, one and one
    for actors, groups in ((None, [[0, 1, 2, 3]]), (3, [[0, 1], [2], [3]])):
        s = ShardedSearcher(sharded, actors=actors)
        try:
            assert isinstance(s, Retriever) and s.n_docs == one.n_docs and read_manifest(sharded).ranked
            assert s.groups == groups and len(s.actors) == len(groups)
            same_answers(s, one, MANY, (1, 10, None))  # k=None: 16 queries a round, several rounds in flight
            assert s.search_batch([], 10) == []
        finally:
            s.close()


def test_small_rounds_go_inside_the_calls_large_ones_through_the_store(built) -> None:
    one_path, sharded, _ = built
    sent: list[tuple[int, bool]] = []  # per round: its queries' bytes, whether the calls carried them

    class Recording(ShardedSearcher):
        def _payload(self, queries):
            obj = super()._payload(queries)
            sent.append((queries.nbytes, isinstance(obj, Utf8Queries)))
            return obj

    s = Recording(sharded, actors=2)
    try:
        one = open_retriever(one_path)
        for queries in (MANY[:1], MANY * 80):  # one query; one round of 6,080 queries (~0.13 MB of UTF-8)
            assert_identical(s.search_batch(queries, 10), one.search_batch(queries, 10))
        assert [inline for _, inline in sent] == [True, False] and sent[0][0] <= 1 << 16 < sent[1][0]
    finally:
        s.close()


def test_an_actor_killed_mid_batch_is_restarted_and_the_batch_retried(built) -> None:
    one_path, sharded, _ = built

    class Killing(ShardedSearcher):
        kills = 0

        def _scatter(self, queries, k):
            sent = super()._scatter(queries, k)
            if self.kills < 2:  # the calls are queued or running on the actor when it dies
                ray.kill(self.actors[self.kills])
                self.kills += 1
            return sent

    s = Killing(sharded, actors=2)
    try:
        old = list(s.actors)
        got = s.search_batch(MANY, None)
        assert s.kills == 2 and s.actors[0] is not old[0] and s.actors[1] is not old[1]
        assert_identical(got, open_retriever(one_path).search_batch(MANY, None))
        assert not any(isinstance(r, ShardedResult) for r in got)
    finally:
        s.close()


def test_a_shard_that_cannot_come_back_is_an_error_or_a_reported_partial(built, tmp_path: Path) -> None:
    one_path, sharded, _ = built
    import shutil

    copy = tmp_path / "s"
    shutil.copytree(sharded, copy)
    # two searchers at once on 2 CPUs: a quarter CPU per actor; one actor a shard, and one actor of two shards
    strict = ShardedSearcher(copy, actor_cpus=0.25, actors=4)
    partial = ShardedSearcher(copy, allow_partial=True, actor_cpus=0.25, actors=2)
    try:
        name = read_manifest(copy).shards[2].name
        (copy / name).rename(tmp_path / "gone")
        for s, actor in ((strict, 2), (partial, 1)):
            ray.kill(s.actors[actor])
        with pytest.raises(SsrError, match=f"shard 2 .*{name}.*allow_partial"):
            strict.search_batch(QUERIES, 10)
        got = partial.search_batch(QUERIES, 10)  # the actor of shard 2 holds shard 3 too: both missing
        assert all(isinstance(r, ShardedResult) and r.shards == (0, 1) and r.missing == (2, 3) for r in got)
        bases = np.cumsum([0] + [e.documents for e in read_manifest(copy).shards])
        for r, full in zip(got, open_retriever(one_path).search_batch(QUERIES, None), strict=True):
            keep = full.docs < bases[2]  # the full ranking without shards 2 and 3's documents
            assert r.ids.tolist() == full.ids[keep][:10].tolist()
            assert r.scores.tobytes() == full.scores[keep][:10].tobytes()
    finally:
        strict.close()
        partial.close()


def test_bm25_on_ray(local_ray, tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(22, 200))
    build_index(path, tmp_path / "one", scoring="bm25", quiet=True)
    build_sharded(path, tmp_path / "s", 3, runner="ray", scoring="bm25", quiet=True)
    s = ShardedSearcher(tmp_path / "s")
    try:
        one = open_retriever(tmp_path / "one", "bm25")
        assert_identical(s.search_batch(MANY, 10), one.search_batch(MANY, 10))
        doc = one.search(QUERIES[0], 1).ids[0]
        assert s.explain(QUERIES[0], doc) == one.explain(QUERIES[0], doc)
    finally:
        s.close()


def test_ray_build_errors_name_file_and_line(local_ray, tmp_path: Path) -> None:
    docs = random_docs(23, 100)
    docs[95] = (docs[3][0], "alpha")
    path = write_tsv(tmp_path / "c.tsv", docs)
    with pytest.raises(InputError) as exc:
        build_sharded(path, tmp_path / "s", 4, runner="ray", quiet=True)
    assert (exc.value.path, exc.value.line) == (str(path), 96) and "first at line 4" in str(exc.value)
    lines = path.read_text().splitlines()
    lines[95] = "broken"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as exc:
        build_sharded(path, tmp_path / "s", 4, runner="ray", quiet=True)
    assert exc.value.line == 96 and "no tab" in str(exc.value)


def test_cli_search_with_ray(built, tmp_path: Path, capsys) -> None:
    one_path, sharded, _ = built
    queries = tmp_path / "q.tsv"
    queries.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(QUERIES)))
    capsys.readouterr()
    out = {}
    for index, extra in ((one_path, []), (sharded, ["--ray"])):
        assert main(["search", "--index", str(index), "--queries", str(queries), "-k", "15", "--quiet",
                     "--run-scores", "exact", "--tag", "t", *extra]) == 0
        out[str(index)] = capsys.readouterr().out
    assert out[str(sharded)] == out[str(one_path)] and out[str(one_path)]
    assert main(["search", "--index", str(one_path), "--ray", "alpha"]) == 2
    assert "sharded index" in capsys.readouterr().err


def test_ray_is_reachable_from_a_worker_of_this_checkout(local_ray) -> None:
    """The actors import the checkout under test (PYTHONPATH), not another install."""
    import ssr_engine

    @ray.remote
    def where() -> str:
        import ssr_engine as e

        return os.path.dirname(e.__file__)

    assert ray.get(where.remote()) == os.path.dirname(ssr_engine.__file__)
