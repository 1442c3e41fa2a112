"""Searching a sharded index: in this process (`open_local`: one `worker.ShardWorker` holding every
shard) or through Ray actors, each holding a group of shards (`ShardedSearcher`). Both are
`retrieval.Retriever`s and answer exactly as one index over the collection would, ids, scores,
matches and document numbers alike.

Each shard is a `parts.Part` with the index's `GlobalStats` (N, BM25 tokens and the shard's slice of
the weight table), so no statistics travel at query time.
Through Ray, the driver sends a round's queries as their UTF-8 (`query_terms.Utf8Queries`): inside the
calls when small, else put in the object store once for every actor. Every actor (`worker.ShardWorker`)
returns its group's exact top-k in pieces of flat arrays (per row its collection number, score, matches in
a byte and, when several actors answer, the collection-wide id rank: 13 or 17 bytes), and the driver
merges several actors' by the full key as numbers (`worker.merge_shards`; one actor's answer is final),
reading from the shards' id tables (mapped in the driver, which sees the index directory as the actors
do) only the ids of the rows it keeps.
Rounds are bounded and two are in flight: actors search while the driver merges.
Document numbers are collection-wide: shard i's first number is the sum of the earlier shards'
sizes, which for a file split into byte ranges is the document's position in the file.

Faults: an actor that dies (a crash, `ray.kill`) is started again and its share of the batch sent
again (`retries` times); an actor that still fails raises an `SsrError` naming its shards, unless
`allow_partial=True`: then the results are `ShardedResult`s listing the shards that answered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SsrError
from ..pieces import Helpers
from ..query_terms import Utf8Queries
from ..retrieval import (
    BM25_B,
    BM25_K1,
    BatchFirst,
    SearchResult,
    check_k,
    check_method,
    check_threads,
    internal_doc,
    max_threads,
)
from . import layout
from .worker import CollectionIds, Lists, ShardWorker, merge_shards

_ROUND_ROWS = 1 << 22  # rows (per shard) of one round: k * queries
# queries per round: at most _ROUND_MAX (a round is one call per actor; 6,980 queries at K=10 as one round
# took 0.7x the actor CPU time of four rounds of 2,048, under load), at least _ROUND_MIN; k=None: _ROUND_ALL
_ROUND_MIN, _ROUND_MAX, _ROUND_ALL = 32, 16384, 16
_IN_FLIGHT = 2  # rounds sent before the first is gathered: actors work while the driver merges
# a round's queries up to this size go inside the calls (Ray inlines arguments under 100 KB): a `ray.put`
# first cost a single query 1.5 ms of its 6.3 ms through one actor, and the actor's fetch from the store
# more (RESULTS.md); larger rounds go to the object store once, shared by the actors
_INLINE_BYTES = 1 << 16


class ShardedResult(SearchResult):
    """A result that may lack some shards (`allow_partial=True`): `shards` answered, `missing` did not."""

    __slots__ = ("shards", "missing")

    def __init__(self, ids: np.ndarray, scores: np.ndarray, matches: np.ndarray, docs: np.ndarray,
                 shards: tuple[int, ...] = (), missing: tuple[int, ...] = ()):
        super().__init__(ids, scores, matches, docs)
        self.shards = shards
        self.missing = missing

    def __reduce__(self) -> tuple[Any, ...]:
        return ShardedResult, (*self._columns(), self.shards, self.missing)


def _methods(scoring: str) -> tuple[str, ...]:
    return ("ssr", "exhaustive") if scoring == "ssr" else ("bm25",)


class LocalSharded(BatchFirst):
    """A sharded index searched in this process: every shard mapped, searched as one actor holding them
    all would (`ShardWorker`), ids read by the driver's `CollectionIds`."""

    def __init__(self, path: str | os.PathLike[str], method: str | None = None, k1: float = BM25_K1,
                 b: float = BM25_B):
        self.root = Path(path).absolute()
        self.manifest = m = layout.read_manifest(self.root)
        self.method = method or ("bm25" if m.scoring == "bm25" else "ssr")
        check_method(self.method, _methods(m.scoring))
        self._worker = ShardWorker(str(self.root), list(range(len(m.shards))), m.generation, self.method,
                                   max_threads(), k1, b)
        self._parts = self._worker.searcher
        self.indexes = self._worker.indexes
        self._ids = CollectionIds(self.indexes.__getitem__, np.cumsum([0] + [s.documents for s in m.shards]))

    @property
    def n_docs(self) -> int:
        return self.manifest.documents

    @property
    def settings(self) -> dict[str, Any]:
        return {**self._parts.settings, "shards": len(self.indexes)}

    def search_batch(self, queries: Sequence[str], k: int | None = 10,
                     threads: int | None = None) -> list[SearchResult]:
        check_k(k)
        queries = list(queries)
        if self.method != "ssr" or k is None or self._worker.ranks is None:
            return self._parts.search_batch(queries, k, threads)
        check_threads(threads)
        integer, ids = self.manifest.integer, self._ids

        def finish(lists: Lists) -> list[SearchResult]:  # a piece's ids and results
            return merge_shards([[lists]], lists[0].shape[0] - 1, k, integer, ids)

        # every step on the threads, as one index's batch: the ids and results too
        parts = self._worker.in_pieces(queries, k, max_threads() if threads is None else threads, finish)
        return [r for part in parts for r in part]

    def pool_sizes(self, queries: Sequence[str], threads: int | None = None) -> np.ndarray:
        return self._parts.pool_sizes(queries, threads)

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        return self._parts.explain(query, doc)

    def doc(self, doc: str | int) -> str:
        from ..docstore import DocStore

        d = internal_doc(doc, self._parts.internal_id, self.root)
        i = int(np.searchsorted(self._parts.bases, d, side="right")) - 1
        if not 0 <= d < self.n_docs:
            raise SsrError(f"no document number {d}")
        return DocStore(self.indexes[i]).text(d - int(self._parts.bases[i]))

    def close(self) -> None:
        for ix in self.indexes:
            ix.close()


def open_local(path: str | os.PathLike[str], method: str | None = None, k1: float = BM25_K1,
               b: float = BM25_B) -> LocalSharded:
    """A sharded index searched in this process (no Ray)."""
    return LocalSharded(path, method, k1, b)


def open_sharded(path: str | os.PathLike[str], method: str | None = None, ray: bool = False,
                 ray_address: str | None = None, k1: float = BM25_K1, b: float = BM25_B) -> Any:
    """`ShardedSearcher` (Ray actors) when `ray` or `ray_address` is given, else `LocalSharded`."""
    if ray or ray_address:
        return ShardedSearcher(path, ray_address, method=method, k1=k1, b=b)
    return LocalSharded(path, method, k1, b)


class ShardedSearcher(BatchFirst):
    """A sharded index searched through Ray: actors holding consecutive groups of shards, results
    merged in this process.

    `ray_address`: a running cluster (every node must see `path` at the same place); None starts a
    local Ray instance unless this process is connected already. `actors`: how many (default: one
    per node of the cluster, at most one per shard; the shards are split among them in consecutive
    groups of near-equal size). `allow_partial`: when an actor fails after `retries` restarts,
    answer from the others (`ShardedResult.missing` names the shards absent) instead of raising.
    `actor_cpus`: CPUs reserved per actor (default: the cluster's CPUs shared among the actors, at
    most a node's); each actor runs max(1, int(actor_cpus)) Numba threads. Actors that cannot be
    placed within `ready_timeout` seconds are an error.
    """

    def __init__(self, path: str | os.PathLike[str], ray_address: str | None = None, allow_partial: bool = False,
                 method: str | None = None, k1: float = BM25_K1, b: float = BM25_B, retries: int = 1,
                 actor_cpus: float | None = None, ready_timeout: float = 300.0, actors: int | None = None):
        from ._ray import connect

        self._ray = ray = connect(ray_address)
        self.root = Path(path).absolute()
        self.manifest = m = layout.read_manifest(self.root)
        self.method = method or ("bm25" if m.scoring == "bm25" else "ssr")
        check_method(self.method, _methods(m.scoring))
        self.allow_partial = allow_partial
        self.retries = retries
        self.bases = np.cumsum([0] + [s.documents for s in m.shards]).astype(np.int64)
        cpus = max(1.0, float(ray.cluster_resources().get("CPU", 1)))
        if actors is not None and (isinstance(actors, bool) or not isinstance(actors, int) or actors < 1):
            raise SsrError(f"actors must be a positive integer, got {actors!r}")
        nodes = [c for c in (float(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")) if c > 0]
        # one actor per node by default: a group's later shards run behind its bar and it sends k rows a
        # query, so fewer, larger groups cost less (measured in benchmarks/RESULTS.md)
        n_actors = min(len(m.shards), max(1, len(nodes)) if actors is None else actors)
        # consecutive shards per actor: a group's document numbers and id ranks are one range
        self.groups = [g.tolist() for g in np.array_split(np.arange(len(m.shards)), n_actors)]
        # the cluster's CPUs shared among the actors, no more than the smallest node has (else unplaceable)
        self.actor_cpus = actor_cpus if actor_cpus is not None else min(min(nodes, default=1.0), cpus / n_actors)
        self._args = (str(self.root), m.generation, self.method, max(1, int(self.actor_cpus)), k1, b)
        self._k1, self._b = k1, b
        # NumPy asks for transparent huge pages on arrays of 4 MB and more; with the kernel's `defrag=madvise`
        # (this machine's) a page fault then compacts memory first: joining an actor's K=1000 round took
        # 0.17-0.56 s instead of 0.03-0.07 s (RESULTS.md). The actor's process is ours: it asks for none.
        self._cls = ray.remote(num_cpus=self.actor_cpus, max_restarts=0,
                               runtime_env={"env_vars": {"NUMPY_MADVISE_HUGEPAGE": "0"}})(ShardWorker)
        self._helpers = Helpers(max_threads() - 1, "ssr-merge")  # the driver's merge in pieces (`merge_shards`)
        self._indexes: list[Any] = [None] * len(m.shards)
        self._ids = CollectionIds(self._id_table, self.bases)
        self.actors: list[Any] = [self._start(i) for i in range(n_actors)]
        # id ranks travel only where the driver merges lists (one actor's list is final): 4 of 17 bytes a row
        self._ranked = n_actors > 1
        # every shard opens (or a clear error) before the first query; an actor Ray cannot place
        # (too few CPUs left for actor_cpus) would wait for ever
        ready = [a.ready.remote() for a in self.actors]
        _, waiting = ray.wait(ready, num_returns=len(ready), timeout=ready_timeout)
        if waiting:
            self.close()
            raise SsrError(f"{self.root}: {len(waiting)} actor(s) not started after {ready_timeout:.0f} s "
                           f"(each reserves {self.actor_cpus} CPU; the cluster has {cpus:g})")
        for i, ref in enumerate(ready):
            self._call(i, "ready", ref=ref)

    def _id_table(self, i: int) -> Any:
        """Shard i's index opened in the driver, for its id table (mapped; read on first use)."""
        if self._indexes[i] is None:
            self._indexes[i] = layout.open_shard(self.root, self.manifest, i)[0]
        return self._indexes[i]

    def _start(self, i: int) -> Any:
        return self._cls.remote(self._args[0], self.groups[i], *self._args[1:])

    @property
    def n_docs(self) -> int:
        return self.manifest.documents

    @property
    def settings(self) -> dict[str, Any]:
        s: dict[str, Any] = {"shards": len(self.manifest.shards), "actors": len(self.groups), "ray": True}
        if self.manifest.scoring == "ssr":
            return {"weight": "ln((N + 1) / (df + 1)) + 1", "order": "score desc, matches desc, id asc", **s}
        avgdl = self.manifest.tokens / self.n_docs if self.manifest.tokens and self.n_docs else 1.0
        return {"k1": self._k1, "b": self._b, "avgdl": avgdl, **s}

    # ------------------------------------------------------------------------- faults

    def _call(self, i: int, name: str, *args: Any, ref: Any = None) -> Any:
        """ray.get of actor i's `name`(*args) (`ref`: the call already sent); a dead actor is started
        again and the call sent again, `retries` times; then an `SsrError` naming its shards."""
        ray = self._ray
        for attempt in range(self.retries + 1):
            if ref is None:
                ref = getattr(self.actors[i], name).remote(*args)
            try:
                return ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                error: BaseException = exc
                if attempt < self.retries:
                    self.actors[i] = self._start(i)
                    ref = None
                    continue
            except ray.exceptions.RayTaskError as exc:
                error = exc.cause if isinstance(getattr(exc, "cause", None), SsrError) else exc
                break
        names = ", ".join(f"shard {s} ({self.root / self.manifest.shards[s].name})" for s in self.groups[i])
        raise _ShardFailed(i, f"{names} failed: "
                              f"{str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__}")

    # ------------------------------------------------------------------------- search

    def search_batch(self, queries: Sequence[str], k: int | None = 10,
                     threads: int | None = None) -> list[SearchResult]:
        """Top-k of every query over all shards, exactly as one index would answer (`threads` is
        unused: each actor runs its own threads)."""
        check_k(k)
        queries = list(queries)
        step = _ROUND_ALL if k is None else max(_ROUND_MIN, min(_ROUND_MAX, _ROUND_ROWS // k))
        rounds = [Utf8Queries.of(queries[a : a + step]) for a in range(0, len(queries), step)]
        out: list[SearchResult] = []
        sent: list[tuple[Utf8Queries, Any, list[Any]]] = []
        for r in range(len(rounds) + _IN_FLIGHT):
            if r < len(rounds):
                sent.append(self._scatter(rounds[r], k))
            if r >= _IN_FLIGHT - 1 and sent:
                out += self._gather(*sent.pop(0), k)
        return out

    def _scatter(self, queries: Utf8Queries, k: int | None) -> tuple[Utf8Queries, Any, list[Any]]:
        """Send one round to every actor: (queries, what the calls carry, the calls)."""
        obj = self._payload(queries)
        return queries, obj, [a.search.remote(obj, k, None, self._ranked) for a in self.actors]

    def _payload(self, queries: Utf8Queries) -> Any:
        """The queries as the actors' calls take them: their UTF-8 itself when small, else its object in Ray's
        store (`_INLINE_BYTES`)."""
        return queries if queries.nbytes <= _INLINE_BYTES else self._ray.put(queries)

    def _gather(self, queries: Utf8Queries, obj: Any, refs: list[Any], k: int | None) -> list[SearchResult]:
        results, answered = [], []
        for i, ref in enumerate(refs):
            try:
                results.append(self._call(i, "search", obj, k, None, self._ranked, ref=ref))
            except _ShardFailed as exc:
                if not self.allow_partial:
                    raise SsrError(f"{exc} (no partial results: pass allow_partial=True to accept them)") from None
                continue
            answered.append(i)
        if not results:
            raise SsrError(f"{self.root}: no shard answered")
        merged = self.merge(results, len(queries), k)
        if len(answered) == len(self.groups) and not self.allow_partial:
            return merged
        shards = tuple(s for i in answered for s in self.groups[i])
        missing = tuple(sorted(set(range(len(self.manifest.shards))) - set(shards)))
        return [ShardedResult(r.ids, r.scores, r.matches, r.docs, shards, missing) for r in merged]

    def merge(self, results: list[list[Lists]], nq: int, k: int | None) -> list[SearchResult]:
        """The collection's top k of every query from the actors' answers (`merge_shards`)."""
        return merge_shards(results, nq, k, self.manifest.integer, self._ids, self._helpers, max_threads())

    def pool_sizes(self, queries: Sequence[str], threads: int | None = None) -> np.ndarray:
        obj = self._payload(Utf8Queries.of(list(queries)))
        refs = [a.pool_sizes.remote(obj) for a in self.actors]
        sizes = [self._call(i, "pool_sizes", obj, ref=ref) for i, ref in enumerate(refs)]
        return np.sum(sizes, axis=0).astype(np.int64)

    # ------------------------------------------------------------------------ explain

    def _locate(self, doc: str | int) -> tuple[int, int]:
        """(the actor holding it, its collection number) of an external id or a collection number."""
        if isinstance(doc, str):
            for i in range(len(self.actors)):
                d = self._call(i, "internal_id", doc)
                if d is not None:
                    return i, int(d)
            raise SsrError(f"{self.root}: no document with id {doc!r}")
        d = internal_doc(doc, lambda _: None, self.root)
        if not 0 <= d < self.n_docs:
            raise SsrError(f"no document number {d}")
        shard = int(np.searchsorted(self.bases, d, side="right")) - 1
        return next(i for i, g in enumerate(self.groups) if shard in g), d

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        i, d = self._locate(doc)
        return self._call(i, "explain", query, d)

    def doc(self, doc: str | int) -> str:
        i, d = self._locate(doc)
        return self._call(i, "doc", d)

    def close(self) -> None:
        """Stop the actors (the Ray instance stays up) and release the driver's id tables."""
        for a in self.actors:
            self._ray.kill(a)
        self.actors = []
        for ix in self._indexes:
            if ix is not None:
                ix.close()
        self._indexes = [None] * len(self._indexes)


class _ShardFailed(SsrError):
    def __init__(self, shard: int, message: str):
        self.shard = shard
        super().__init__(message)
