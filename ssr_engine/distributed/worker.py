"""What a shard's Ray actor computes (`ShardWorker`) and how the driver merges the actors' answers
(`merge_shards`); neither needs Ray, so both are tested in one process too.

An actor returns its exact top k as flat arrays, 20 bytes a row: offsets, and per row its shard
document number, score, matches and collection-wide id rank (`layout.id_ranks`). With the ranks the
full key (score desc, matches desc, id asc) of every row is three numbers: the driver merges by them
alone and reads from the shards' id tables (mapped in the driver) the ids of the rows it keeps only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import SsrError
from ..format import Index
from ..kernels import probe
from ..kernels.id_table import gather_ids_ucs4
from ..kernels.merge import merge_keyed
from ..parts import GlobalStats, Part, gather_ids, merge_results
from ..parts_search import PartsSearcher
from ..retrieval import SearchResult, numba_threads
from ..validate import kernel_guard
from . import layout


class ShardWorker:
    """One shard, the body of a Ray actor: the shard mapped, searched with the global weights."""

    def __init__(self, root: str, i: int, generation: int, method: str, threads: int, k1: float, b: float):
        manifest = layout.read_manifest(root)
        if manifest.generation != generation:
            raise SsrError(f"{root}: rebuilt since it was opened (generation {manifest.generation}, "
                           f"not {generation}); open it again")
        ix, table = layout.open_shard(Path(root), manifest, i)
        self.index = ix
        self.threads = threads
        self.ranks = layout.open_ranks(Path(root), manifest, i)
        self._work: list = [None]  # probe's scratch, kept across calls (an actor runs one call at a time)
        stats = GlobalStats(manifest.documents, [table], manifest.tokens)
        self.searcher = PartsSearcher([Part(ix)], method, integer=manifest.integer, stats=stats, k1=k1, b=b)

    def ready(self) -> int:
        return os.getpid()

    def search(self, queries: np.ndarray, k: int | None) -> tuple[np.ndarray, ...]:
        """(offsets int64[Q + 1], docs uint32 (shard numbers), scores float64, matches int32, id ranks
        uint32 in the collection's order (empty for an index without them)): 20 bytes a row; the driver
        reads the ids of the rows it keeps from the shard's id table itself."""
        with numba_threads(self.threads, len(queries)):
            offsets, docs, scores, matches = self._run(queries.tolist(), k)
        ranks = np.zeros(0, np.uint32) if self.ranks is None else np.asarray(self.ranks[docs], dtype=np.uint32)
        return offsets, docs.astype(np.uint32), scores, matches, ranks

    def _run(self, queries: list[str], k: int | None) -> tuple[np.ndarray, ...]:
        """The shard's kernel result, flat. Method ssr runs the single index's kernel (`probe`: one
        shard needs no bar); other methods go through the `PartsSearcher`."""
        s, ix = self.searcher, self.index
        if s.method == "ssr" and k is not None:
            offsets, terms, weights, _ = s.query_terms(queries)[2][0]
            with kernel_guard(ix):
                return probe.search_batch(ix.postings_indptr, ix.postings_docs, s.ranks[0], ix.n_docs,
                                          ix.forward_indptr, ix.forward, offsets, terms, weights, k,
                                          block=s.block, work=self._work, monotone=s.ascending[0])
        res = s.search_batch(queries, k)
        offsets = np.zeros(len(res) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in res], out=offsets[1:])
        if not res or offsets[-1] == 0:
            return offsets, np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int32)
        return (offsets, np.concatenate([r.docs for r in res]), np.concatenate([r.scores for r in res]),
                np.concatenate([r.matches for r in res]))

    def pool_sizes(self, queries: np.ndarray) -> np.ndarray:
        return self.searcher.pool_sizes(queries.tolist(), threads=self.threads)

    def internal_id(self, doc_id: str) -> int | None:
        return self.searcher.internal_id(doc_id)

    def explain(self, query: str, doc: int) -> list[tuple[str, float]]:
        return self.searcher.explain(query, doc)

    def doc(self, doc: int) -> str:
        from ..docstore import DocStore

        return DocStore(self.index).text(doc)



class CollectionIds:
    """External ids of a sharded collection by collection number, from the shards' id tables.

    index_of(shard) -> its `format.Index` (opened on demand); bases int64[S + 1]: each shard's first
    number. When every shard's ids are short ASCII (the fixed-width table of `Index.ids_of`), the tables
    are joined once into one (N, longest) table and a batch's ids are one parallel gather (at 8.8M:
    62 MB, against a gather and a string scatter per shard); otherwise each shard's rows are read
    from its own table.
    """

    def __init__(self, index_of: Callable[[int], Index], bases: np.ndarray):
        self.index_of, self.bases = index_of, np.asarray(bases, dtype=np.int64)
        self._table: np.ndarray | None = None
        self._joined = False

    def of(self, shard: int, docs: np.ndarray) -> np.ndarray:
        """The ids of shard `shard`'s documents `docs` (its own numbers)."""
        return self.index_of(shard).ids_of(docs)

    def __call__(self, docs: np.ndarray) -> np.ndarray:
        """The ids of collection numbers `docs` (int64)."""
        table = self._join()
        if table is not None:
            return gather_ids_ucs4(table, docs).view(f"<U{table.shape[1]}").reshape(-1)
        which = np.searchsorted(self.bases, docs, side="right") - 1
        return gather_ids(which, lambda s, where: self.of(s, docs[where] - self.bases[s]))

    def _join(self) -> np.ndarray | None:
        if not self._joined:
            self._joined = True
            try:
                tables = []
                for s in range(self.bases.shape[0] - 1):
                    ix = self.index_of(s)
                    ix._load_ids()  # ids_of's table, built once per index
                    tables.append(ix._id_fixed)
            except SsrError:  # a shard gone (allow_partial): each answering shard's own table
                return None
            fixed = [t for t in tables if t is not None]
            if len(fixed) == len(tables) and fixed:
                table = np.zeros((int(self.bases[-1]), max(t.shape[1] for t in fixed)), dtype=np.uint8)
                for s, t in enumerate(fixed):
                    table[self.bases[s] : self.bases[s + 1], : t.shape[1]] = t
                self._table = table
        return self._table


def merge_shards(results: list[tuple[np.ndarray, ...]], shards: list[int], nq: int, k: int | None,
                 integer: bool, ids: CollectionIds) -> list[SearchResult]:
    """The collection's top k of every query from the lists of `shards` (`ShardWorker.search`'s arrays).

    With id ranks the full key is (score, matches, rank): one numeric k-way merge per query
    (`kernels.merge.merge_keyed`), then the ids of the chosen rows only. Without them (an index built
    before they existed), `parts.merge_results`, which reads ids where (score, matches) tie.
    """
    bases = ids.bases[np.asarray(shards, dtype=np.int64)]
    if not all(r[4].shape[0] == r[1].shape[0] for r in results):
        return merge_results([(o, d.astype(np.int64) + bases[j], s, m) for j, (o, d, s, m, _) in enumerate(results)],
                             lambda j, rows: ids.of(shards[j], results[j][1][rows]), nq, k, integer)
    first = np.cumsum([0] + [r[1].shape[0] for r in results]).astype(np.int64)  # each list's first row
    starts = np.stack([r[0][:-1] + first[j] for j, r in enumerate(results)], axis=1)
    ends = np.stack([r[0][1:] + first[j] for j, r in enumerate(results)], axis=1)
    local, scores, matches, ranks = (np.concatenate([r[c] for r in results]) for c in (1, 2, 3, 4))
    offsets, rows = merge_keyed(starts, ends, scores, matches, ranks, 0 if k is None else k)
    scores, matches = scores[rows], matches[rows]
    docs = local[rows].astype(np.int64) + bases[np.searchsorted(first, rows, side="right") - 1]
    got = ids(docs)
    return [SearchResult(got[a:z], scores[a:z], matches[a:z], docs[a:z])
            for a, z in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
