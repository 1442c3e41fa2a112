"""What a Ray actor computes (`ShardWorker`: one shard or a group of shards) and how the driver merges
the actors' answers (`merge_shards`); neither needs Ray, so both are tested in one process too.

An actor returns its group's exact top k as flat arrays, 20 bytes a row: offsets, and per row its
collection document number, score, matches and collection-wide id rank (`layout.id_ranks`). With the
ranks the full key (score desc, matches desc, id asc) of every row is three numbers: the actor merges
its shards and the driver the actors by them alone (`merge_ranked`), and the driver reads from the
shards' id tables (mapped in the driver) the ids of the rows it keeps only.

A group's shards are searched as one (method ssr with a k and id ranks: `kernels.shards.search_group`, one
GIL-free call a piece of queries): per query shard after shard, each through `probe`, the single index's
kernel, given the collection's id ranks as its ranks (a slice of them orders the shard's documents as its
own ranks would, and keys of different shards compare), behind the k-th of the group's top k so far as the
bar a later shard's document must rank strictly before. So later shards stop sooner and the actor sends k
rows a query, not k per shard.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..errors import IndexFormatError, SsrError
from ..format import Index
from ..kernels import levels, probe
from ..kernels.candidates import cap_k
from ..kernels.id_table import gather_ids_ucs4
from ..kernels.live import RULE_PARTS
from ..kernels.merge import merge_keyed
from ..kernels.part_terms import arrange
from ..kernels.query import found_in, signals
from ..kernels.shards import prepare_group, search_group
from ..parts import GlobalStats, Part, gather_ids, merge_results
from ..parts_search import PartsSearcher
from ..pieces import Helpers
from ..query_terms import lookup_args, signal_args, utf8
from ..retrieval import SearchResult, check_threads, max_threads, numba_threads, split_results
from ..validate import VOCAB_BLOCK_SHIFT, checked_blocks, kernel_guard
from . import layout

T = TypeVar("T")
# per row: (offsets int64[Q + 1], docs, scores float64, matches int32, id ranks uint32 (empty: none))
Lists = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# queries per piece a thread takes at a time (`_pieces`): at least _PIECE[0] (each piece is a few kernel
# calls), aiming at _PIECE[1] pieces per thread (balance: 6,980 queries at K=1000 in process under
# load took 0.80x the CPU time of 4 pieces a thread)
_PIECE = (16, 16)
# an order of the shards for every query instead of each query's own (`kernels.shards.search_group`; tests)
_FIXED_ORDER = np.zeros(0, dtype=np.int64)
# whether queries may run one set of levels over a group's shards (`kernels.shards.search_group`; tests)
_ACROSS = True
# the cost rule of `search_group`: probe's, and which queries run one set of levels over the shards
_RULE = np.asarray(RULE_PARTS, dtype=np.float64)
# rows of one piece of the driver's merge (`merge_shards`): a piece's ids (<U7 at 8.8M: 28 bytes a row) stay
# under NumPy's 4 MB huge-page threshold; a K=1000 round's arrays as one piece took 3-6x longer (RESULTS.md)
_MERGE_ROWS = 1 << 16


class ShardWorker:
    """Shards of a sharded index (one, or a group), the body of a Ray actor: mapped, searched with the
    global weights; document numbers in and out are the collection's."""

    def __init__(self, root: str, shards: int | Sequence[int], generation: int, method: str, threads: int,
                 k1: float, b: float):
        manifest = layout.read_manifest(root)
        if manifest.generation != generation:
            raise SsrError(f"{root}: rebuilt since it was opened (generation {manifest.generation}, "
                           f"not {generation}); open it again")
        self.shards = [shards] if isinstance(shards, int) else [int(s) for s in shards]
        opened: list[tuple[Index, np.ndarray]] = []
        try:
            for i in self.shards:
                opened.append(layout.open_shard(Path(root), manifest, i))
            ranks = [layout.open_ranks(Path(root), manifest, i) for i in self.shards]
        except BaseException:
            for ix, _ in opened:
                ix.close()
            raise
        self.indexes = [ix for ix, _ in opened]
        self.bases = np.cumsum([0] + [s.documents for s in manifest.shards])[self.shards].astype(np.int64)
        self.threads = threads
        # the collection's id ranks of each shard's documents (None: an index built before them)
        self.ranks = None if any(r is None for r in ranks) else [r for r in ranks if r is not None]
        self.ascending = [] if self.ranks is None else [probe.ascending(r) for r in self.ranks]
        self._per_thread = threading.local()  # per thread: probe's scratch, kept across calls
        self._helpers = Helpers(max(threads, max_threads()) - 1, "ssr-shards")
        stats = GlobalStats(manifest.documents, [t for _, t in opened], manifest.tokens)
        self.searcher = PartsSearcher([Part(ix) for ix in self.indexes], method, integer=manifest.integer,
                                      stats=stats, k1=k1, b=b)
        if self.searcher.scoring == "ssr":  # `_grouped`'s query preparation: each shard's kernel arguments
            extractor = self.searcher._extractor
            self._signal_args = [signal_args(extractor, ix) for ix in self.indexes]
            # + the collection's df of the shard's terms and its N: the collection's weights
            self._lookup_args = [lookup_args(ix) + (np.asarray(t).view(np.ndarray), np.int64(manifest.documents))
                                 for ix, t in opened]
            self._directories = [self._directory(ix) for ix in self.indexes]
            self._group_args = self._group_lookup(manifest.documents)
        if self.searcher.scoring == "ssr" and self.ranks is not None:  # `_grouped`'s shards, as one kernel takes them
            from ..kernels.live import prepare_parts

            none = np.zeros(0, dtype=np.int64)  # (no deletions; the documents' id order is not read)
            sizes = [ix.n_docs for ix in self.indexes]
            # the group's numbers: its shards end to end, ranked by the collection's id ranks (one set of levels)
            self._starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
            grank = np.concatenate(self.ranks) if sizes else np.zeros(0, np.uint32)
            self._arrays = prepare_parts([(int(self._starts[j]), ix.n_docs, ix.lists, ix.postings,
                                           self.ranks[j], None, none, ix.forward_indptr, ix.forward,
                                           self.ascending[j]) for j, ix in enumerate(self.indexes)], grank=grank)
            self._grank = grank
            # one set of levels reads the shards in about the collection's id order (by each one's middle rank)
            middle = [int(r[len(r) // 2]) if len(r) else 0 for r in self.ranks]
            self._scan_order = np.argsort(np.array(middle, dtype=np.int64), kind="stable").astype(np.int64)

    @staticmethod
    def _directory(ix: Index) -> tuple[np.ndarray, int]:
        """The shard's `kernels.terms.key_directory` (4-8 vocabulary entries a bucket: 16 MB at a shard of 8.8M's
        10.4M terms), checking its vocabulary whole once: an actor lives long, and a signal's look-up is then a
        bucket's search, not ~24 dependent loads in lockstep (RESULTS.md)."""
        from ..kernels.terms import key_directory

        bits = max(1, int(ix.vocab.shape[0] // 8).bit_length())
        directory, bad = key_directory(ix.vocab.view(np.ndarray), bits, checked_blocks(ix), VOCAB_BLOCK_SHIFT,
                                       ix.vocab.dtype == np.uint64)
        if bad >= 0:
            raise IndexFormatError(f"{ix.path}: vocab.npy: entry {bad + 1} is not above entry {bad} (corrupt index; "
                                   "rebuild it)")
        return directory, bits

    def _group_lookup(self, n_weights: int) -> tuple | None:
        """`kernels.shards.prepare_group`'s arguments after the queries (typed lists of the shards' arrays),
        when the shards share one key rule and array types (one build makes them so); else None (`prepare`
        looks up shard by shard)."""
        from ..kernels.live import _frozen, frozen_lists, typed_list

        args, sigs = self._lookup_args, self._signal_args
        kinds = {(int(s[2]), int(s[3]), int(a[0]), a[1].dtype.str, a[2].dtype.str,
                  tuple(x.dtype.str for x in a[4][:3]),
                  tuple(x.dtype.str for x in (a[5] if isinstance(a[5], tuple) else (a[5],))))
                 for a, s in zip(args, sigs, strict=True)}
        if len(kinds) != 1:
            return None
        return (*sigs[0], args[0][0], typed_list([_frozen(a[1], a[1].dtype) for a in args]),
                typed_list([a[2] for a in args]), args[0][3],
                typed_list([tuple(_frozen(x, x.dtype) for x in a[4][:3]) + (a[4][3],) for a in args]),
                typed_list([frozen_lists(a[5], ix.postings_indptr.dtype) for a, ix in zip(args, self.indexes,
                                                                                          strict=True)]),
                np.array([a[6] for a in args], dtype=np.int64), np.array([a[7] for a in args], dtype=np.int64),
                typed_list([_frozen(a[8], np.int64) for a in args]), typed_list([d for d, _ in self._directories]),
                np.array([b for _, b in self._directories], dtype=np.int64), np.int64(n_weights))

    def ready(self) -> int:
        return os.getpid()

    def search(self, queries: np.ndarray, k: int | None, threads: int | None = None) -> Lists:
        """The group's top k of every query: (offsets int64[Q + 1], docs uint32 (collection numbers),
        scores float64, matches int32, id ranks uint32 (empty for an index without them)): 20 bytes a
        row; the driver reads the ids of the rows it keeps from the shards' id tables itself.
        `threads`: this call's (default: the worker's)."""
        check_threads(threads)
        threads = self.threads if threads is None else threads
        if self.searcher.method == "ssr" and k is not None and self.ranks is not None:
            offsets, docs, scores, matches, ranks = self._pieces(queries.tolist(), k, threads)
        else:
            with numba_threads(threads, len(queries)):
                offsets, docs, scores, matches = self._parts(queries.tolist(), k)
            ranks = np.zeros(0, np.uint32) if self.ranks is None else self._ranks_of(docs)
        return offsets, docs.astype(np.uint32), scores, matches, ranks

    def in_pieces(self, fn: Callable[[list[str]], T], queries: list[str], threads: int) -> list[T]:
        """fn(piece) for pieces of the queries on `threads` threads (`pieces.Helpers`), in order; each
        thread with one Numba thread, so the steps between the kernel calls run in parallel too."""
        size = max(_PIECE[0], -(-len(queries) // (_PIECE[1] * threads)))

        def one(piece: list[str]) -> T:
            with numba_threads(1):
                return fn(piece)

        return self._helpers.map(one, [queries[a : a + size] for a in range(0, len(queries), size)], threads)

    def _pieces(self, queries: list[str], k: int, threads: int) -> Lists:
        """`_grouped` in pieces (`in_pieces`), joined."""
        if threads == 1 or len(queries) <= _PIECE[0]:
            return self._grouped(queries, k)
        got = self.in_pieces(lambda piece: self._grouped(piece, k), queries, threads)
        firsts = np.cumsum([0] + [g[1].shape[0] for g in got[:-1]])
        offsets = np.concatenate([np.zeros(1, np.int64)] + [g[0][1:] + f for g, f in zip(got, firsts, strict=True)])
        return (offsets, *(np.concatenate([g[c] for g in got]) for c in (1, 2, 3, 4)))  # type: ignore[return-value]

    def prepare(self, queries: list[str]) -> tuple[np.ndarray, ...]:
        """The queries' terms as `kernels.shards.search_group` takes them, weighed by the collection's df:
        one GIL-free call (`kernels.shards.prepare_group`: the signals once, each shard's look-up, the
        collection's df, `kernels.part_terms.arrange` per shard and over the group), or its steps from
        Python (`_found_per_shard`) where the shards' key rules or array types differ.

        Returns (q_offs int64[S, Q + 1], q_terms, q_weights, g_off int64[Q + 1], g_terms int64[S, A],
        g_weights, each entry's signal number (the shards' entries, then the group's), each signal's df
        per shard int64[S, n])."""
        data, q_offsets = utf8(queries)
        n_shards = len(self.indexes)
        if self._group_args is not None:  # one GIL-free call
            bad, arranged, own = prepare_group(data, q_offsets, *self._group_args)
            if bad >= 0:
                self._corrupt_terms(queries, self.indexes[bad])
        else:
            found, own, df, sig = self._found_per_shard(data, q_offsets, queries)
            arranged = arrange(sig[0], found, own, df, self._lookup_args[0][9])
        _, offsets, starts, f_terms, f_weights, f_sel, shared = arranged
        q_offs = offsets[:n_shards] + starts[:n_shards, None]
        a = starts[n_shards]
        return (q_offs, f_terms[:a], f_weights[:a], offsets[n_shards], shared, f_weights[a:], f_sel, own)

    def _found_per_shard(self, data: np.ndarray, q_offsets: np.ndarray,
                         queries: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
        """`prepare`'s look-up from Python, for shards of different key rules or array types: the signals
        made once per hash setting, each shard's vocabulary searched through its key directory (`found_in`;
        one search of a union of the shards' vocabularies a signal cost more, RESULTS.md). Returns (terms
        int64[S, n], the shards' own df, the collection's df int64[n], the signals)."""
        sigs: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
        sig: tuple[np.ndarray, ...] = ()
        n_shards = len(self.indexes)
        found = own = np.zeros((n_shards, 0), np.int64)
        df = np.zeros(0, np.int64)
        for j, ix in enumerate(self.indexes):
            args = self._signal_args[j]
            key = (int(args[2]), int(args[3]))
            if key not in sigs:
                sigs[key] = signals(data, q_offsets, *args)
            sig = sigs[key]
            if j == 0:
                n = sig[3].shape[0]
                found, own = np.empty((n_shards, n), np.int64), np.empty((n_shards, n), np.int64)
                df = np.zeros(n, np.int64)
            looked: tuple[Any, ...] = (*self._lookup_args[j][:8], *self._directories[j])  # (one flat tuple: mypy)
            t, d, ok = found_in(sig, *looked)
            if not ok:
                self._corrupt_terms(queries, ix)
            found[j], own[j] = t, d
            known = t >= 0
            df[known] = self._lookup_args[j][8][t[known]]  # the collection's df: the same in every shard
        return found, own, df, sig

    def _corrupt_terms(self, queries: list[str], ix: Index) -> None:
        """A shard's vocabulary or term offsets failed a check: the long way names the file and entry at fault."""
        self.searcher.query_terms(queries)
        raise IndexFormatError(f"{ix.path}: a vocabulary or term offsets check failed (corrupt index; rebuild it)")

    def terms(self, queries: list[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per shard the queries' terms (`prepare`) as one index's kernels take them: (offsets int64[Q + 1],
        terms int64, weights float64 (the collection's), the shard's own df int64), each query's in ascending
        weight."""
        q_offs, q_terms, q_weights, _, _, _, sel, own = self.prepare(queries)
        out = []
        for s in range(q_offs.shape[0]):
            a, b = int(q_offs[s, 0]), int(q_offs[s, -1])
            out.append((q_offs[s] - a, q_terms[a:b], q_weights[a:b], own[s, sel[a:b]]))
        return out

    def _grouped(self, queries: list[str], k: int) -> Lists:
        """The group's top k of the queries in one GIL-free call on the calling thread (`kernels.shards.
        search_group`: one set of levels over the shards, or shard after shard behind the bar of the
        group's top k so far), so pieces on threads run in parallel."""
        q_offs, q_terms, q_weights, g_off, g_terms, g_weights, _, _ = self.prepare(queries)
        nq = len(queries)
        lists, starts, sizes = self._arrays[:3]
        widest = max(1, int(sizes.max()))
        kk = cap_k(k, int(sizes.sum()))
        width = min(max(1, self.searcher.block), widest)
        longest = max(1, int(np.diff(q_offs, axis=1).max()), int(np.diff(g_off).max())) if nq else 1
        holder = self._per_thread.__dict__.setdefault("work", [None])  # this thread's probe workspace
        work = probe.fit_workspace(holder, 1, width, widest, longest, max(levels._BUFFER, 4 * kk))
        offsets, docs, scores, matches, ranks, _, bad = search_group(
            lists[0], lists[1], lists[2], lists[3], lists[5], lists[6], self.bases, starts, sizes, self._arrays[3],
            q_offs, q_terms, q_weights, g_off, g_terms, g_weights, self._grank, self._arrays[6], self._scan_order,
            np.int64(kk), np.int64(width), work, _RULE, _FIXED_ORDER, _ACROSS)
        if bad >= 0:
            with kernel_guard(self.indexes[bad]):  # a shard that lies is an error naming it, never a crash
                levels.corrupt(work)
        return offsets, docs, scores, matches, ranks

    def _parts(self, queries: list[str], k: int | None) -> tuple[np.ndarray, ...]:
        """Other methods, or shards without id ranks: the group's `PartsSearcher`, flat."""
        res = self.searcher.search_batch(queries, k)
        offsets = np.zeros(len(res) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in res], out=offsets[1:])
        if not res or offsets[-1] == 0:
            return offsets, np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int32)
        return (offsets, self.collection_doc(np.concatenate([r.docs for r in res])),
                np.concatenate([r.scores for r in res]), np.concatenate([r.matches for r in res]))

    def collection_doc(self, docs: np.ndarray) -> np.ndarray:
        """Collection numbers of the group's numbers (the `PartsSearcher`'s: its shards end to end)."""
        bases = self.searcher.bases
        j = np.searchsorted(bases, docs, side="right") - 1
        return np.asarray(docs, dtype=np.int64) - bases[j] + self.bases[j]

    def _local(self, doc: int) -> tuple[int, int]:
        """(position in the group, the shard's own number) of collection number `doc`; an error when not here."""
        for j in range(len(self.shards)):
            if 0 <= doc - int(self.bases[j]) < self.indexes[j].n_docs:
                return j, doc - int(self.bases[j])
        raise SsrError(f"no document number {doc} in shards {self.shards}")

    def _ranks_of(self, docs: np.ndarray) -> np.ndarray:
        out = np.empty(docs.shape[0], dtype=np.uint32)
        for j in range(len(self.shards)):
            where = np.flatnonzero((docs >= self.bases[j]) & (docs < self.bases[j] + self.indexes[j].n_docs))
            out[where] = self.ranks[j][docs[where] - self.bases[j]]  # type: ignore[index]
        return out

    def pool_sizes(self, queries: np.ndarray) -> np.ndarray:
        return self.searcher.pool_sizes(queries.tolist(), threads=self.threads)

    def internal_id(self, doc_id: str) -> int | None:
        """The collection number of the document with id `doc_id` when one of these shards holds it."""
        d = self.searcher.internal_id(doc_id)
        return None if d is None else int(self.collection_doc(np.array([d]))[0])

    def explain(self, query: str, doc: int) -> list[tuple[str, float]]:
        j, d = self._local(doc)
        return self.searcher.explain(query, int(self.searcher.bases[j]) + d)

    def doc(self, doc: int) -> str:
        from ..docstore import DocStore

        j, d = self._local(doc)
        return DocStore(self.indexes[j]).text(d)

    def close(self) -> None:
        for ix in self.indexes:
            ix.close()


def merge_ranked(lists: Sequence[Lists], k: int | None) -> tuple[np.ndarray, np.ndarray | None, list[np.ndarray]]:
    """Ranked lists with id ranks merged by the full key (`kernels.merge.merge_keyed`): (offsets int64[Q + 1],
    the chosen rows (None: every row, in order), the lists' columns docs, scores, matches, ranks end to end,
    which the rows index)."""
    if len(lists) == 1 and (k is None or not lists[0][0].shape[0] > 1 or np.diff(lists[0][0]).max() <= k):
        return lists[0][0], None, list(lists[0][1:])  # merged already (one actor): no gather
    first = np.cumsum([0] + [r[1].shape[0] for r in lists]).astype(np.int64)  # each list's first row
    starts = np.stack([r[0][:-1] + first[j] for j, r in enumerate(lists)], axis=1)
    ends = np.stack([r[0][1:] + first[j] for j, r in enumerate(lists)], axis=1)
    cols = [np.concatenate([r[c] for r in lists]) for c in (1, 2, 3, 4)]
    offsets, rows = merge_keyed(starts, ends, cols[1], cols[2], cols[3], 0 if k is None else k)
    return offsets, rows, cols


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
        self._lock = threading.Lock()  # pieces on threads ask at once: the table is joined once

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
        with self._lock:
            return self._join_once()

    def _join_once(self) -> np.ndarray | None:
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


def merge_shards(results: Sequence[Lists], nq: int, k: int | None, integer: bool, ids: CollectionIds,
                 helpers: Helpers | None = None, threads: int = 1) -> list[SearchResult]:
    """The collection's top k of every query from the actors' lists (`ShardWorker.search`'s arrays).

    With id ranks the full key is (score, matches, rank): one numeric k-way merge per query
    (`merge_ranked`), then the ids of the chosen rows only. Without them (an index built before they
    existed), `parts.merge_results`, which reads ids where (score, matches) tie. The queries go in pieces
    of at most `_MERGE_ROWS` rows, so no piece's arrays reach NumPy's huge-page size; one actor's pieces
    (ids and results only) go on `threads` threads of `helpers`, one Numba thread each.
    """
    ends = np.sum([r[0][1:] for r in results], axis=0) if nq else np.zeros(0, np.int64)
    cuts = np.unique(np.searchsorted(ends, np.arange(_MERGE_ROWS, int(ends[-1]) if nq else 0, _MERGE_ROWS),
                                     side="right"))
    spans = [(a, b) for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), nq], strict=True) if b > a] or [(0, nq)]
    # threads for one actor's ranked lists only: other lists merge in parallel kernels (`merge_keyed`,
    # `parts.merge_results`), which Numba's workqueue threading layer (a machine without OpenMP or TBB) must
    # not be entered by two threads at once
    ranked_one = len(results) == 1 and results[0][4].shape[0] == results[0][1].shape[0]
    if helpers is None or threads == 1 or len(spans) == 1 or not ranked_one:
        return [r for a, b in spans for r in _merge_span(results, a, b, k, integer, ids)]

    def one(span: tuple[int, int]) -> list[SearchResult]:
        with numba_threads(1):
            return _merge_span(results, span[0], span[1], k, integer, ids)

    return [r for part in helpers.map(one, spans, threads) for r in part]


def _merge_span(results: Sequence[Lists], a: int, b: int, k: int | None, integer: bool,
                ids: CollectionIds) -> list[SearchResult]:
    """`merge_shards` of queries a..b-1: the lists' rows of those queries (views), merged."""
    lists: list[Lists] = []
    for o, d, s, m, r in results:
        lo, hi = int(o[a]), int(o[b])
        lists.append((o[a : b + 1] - lo, d[lo:hi], s[lo:hi], m[lo:hi], r[lo:hi] if r.shape[0] else r))
    if not all(r[4].shape[0] == r[1].shape[0] for r in lists):
        return merge_results([(o, d.astype(np.int64), s, m) for o, d, s, m, _ in lists],
                             lambda j, rows: ids(lists[j][1][rows].astype(np.int64)), b - a, k, integer)
    offsets, rows, (docs, scores, matches, _) = merge_ranked(lists, k)
    if rows is None:  # copies (an actor's arrays may be read-only views of Ray's store), not gathers
        docs, scores, matches = docs.astype(np.int64), scores.copy(), matches.copy()
    else:
        docs, scores, matches = docs[rows].astype(np.int64), scores[rows], matches[rows]
    return split_results(offsets, ids(docs), docs, scores, matches)
