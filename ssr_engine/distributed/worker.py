"""What a Ray actor computes (`ShardWorker`: one shard or a group of shards) and how the driver merges
the actors' answers (`merge_shards`); neither needs Ray, so both are tested in one process too.

An actor returns its group's exact top k as flat arrays: offsets, and per row its collection document
number, score, matches (one byte where they fit) and, when the driver merges several actors, the
collection-wide id rank (`layout.id_ranks`): 17 bytes a row, 13 without ranks (Ray copies every byte into
its object store, serially, ~0.75 ms a MB here: RESULTS.md). With the ranks the full key (score desc,
matches desc, id asc) of every row is three numbers: the actor merges its shards and the driver the actors
by them alone (`merge_ranked`); one actor's list is final as it comes. The driver reads from the shards' id
tables (mapped in the driver) the ids of the rows it keeps only.

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
from ..pieces import Helpers, even, guided
from ..query_terms import Utf8Queries, lookup_args, signal_args, utf8
from ..retrieval import SearchResult, check_threads, max_threads, numba_threads, split_results
from ..validate import VOCAB_BLOCK_SHIFT, checked_blocks, kernel_guard
from . import layout

T = TypeVar("T")
# a batch of queries: texts (a list, an array of str), or their UTF-8 as the driver sends them
Queries = Sequence[str] | np.ndarray | Utf8Queries
# (offsets int64[Q + 1], and per row docs uint32, scores float64, matches uint8 or int32, id ranks uint32 (empty:
# none asked for, or an index without them))
Lists = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# queries per piece a thread takes at a time (`in_pieces`, `pieces.guided`: big first, small last): at
# least _PIECE[0] (each piece is a few kernel calls), at most _PIECE[1]. A piece reads each of its terms' spans
# once: pieces of 6,980 / 32 queries cost 1.13-1.20x the CPU time of one piece; guided pieces up to 1,024 took 2
# threads 0.86 of the single index's time in process at K=10, 16 even pieces a thread 0.73-0.78 (RESULTS.md)
_PIECE = (16, 1024)
# an order of the shards for every query instead of each query's own (`kernels.shards.search_group`; tests)
_FIXED_ORDER = np.zeros(0, dtype=np.int64)
# whether queries may run one set of levels over a group's shards (`kernels.shards.search_group`; tests)
_ACROSS = True
# the cost rule of `search_group`: probe's, and which queries run one set of levels over the shards
_RULE = np.asarray(RULE_PARTS, dtype=np.float64)
# rows of one piece of the driver's merge (`merge_shards`): a piece's ids (<U7 at 8.8M: 28 bytes a row) stay
# under NumPy's 4 MB huge-page threshold; a K=1000 round's arrays as one piece took 3-6x longer (RESULTS.md)
_MERGE_ROWS = 1 << 16
# rows from which one actor's answer gets its ids and results on the driver's threads: the threads gain on the
# ids' fresh pages (GIL-free) and lose on the results (Python objects, GIL): at 6,980 queries 2 threads took
# 103 ms against 239 at K=1000 (4.7M rows), 22 against 26 at K=100, 22 against 8.5 at K=10 (RESULTS.md)
_THREADED_ROWS = 1 << 18


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

    def search(self, queries: Queries, k: int | None, threads: int | None = None, ranks: bool = True) -> list[Lists]:
        """The group's top k of every query, in pieces of consecutive queries (as the threads took them: not
        joined, since joining was a serial copy of every row and Ray copies each piece into its store
        anyway), each (offsets int64[q + 1], docs uint32 (collection numbers), scores float64, matches
        (uint8 when every one fits, else int32), id ranks uint32 (empty when not `ranks` or for an index
        without them)); the driver reads the ids of the rows it keeps from the shards' id tables itself.
        `queries`: texts, or their UTF-8 (what the driver sends: `query_terms.Utf8Queries`); `threads`: this
        call's (default: the worker's); `ranks`: whether the driver merges this answer with others (one
        actor's is final without them)."""
        check_threads(threads)
        threads = self.threads if threads is None else threads
        if self.searcher.method == "ssr" and k is not None and self.ranks is not None:
            return self.in_pieces(queries if isinstance(queries, Utf8Queries) else list(queries), k, threads,
                                  lambda lists: _wire(lists, ranks))
        with numba_threads(threads, len(queries)):
            offsets, docs, scores, matches = self._parts(texts(queries), k)
        rank = np.zeros(0, np.uint32) if self.ranks is None or not ranks else self._ranks_of(docs)
        return [_wire((offsets, docs, scores, matches, rank), ranks)]

    def in_pieces(self, queries: list[str] | Utf8Queries, k: int, threads: int,
                  finish: Callable[[Lists], T]) -> list[T]:
        """finish(the group's top k of a piece) for pieces of the queries, in query order, each on the thread that
        searched it (its copies of every row then run in parallel too; `ShardWorker.search`'s `_wire`, the
        in-process searcher's ids and results): the queries' terms prepared in one share a thread (`prepare`),
        then searched in guided pieces of each share (`pieces.guided`), each thread with one Numba thread. A
        piece prepared alone looks each of its signals up in every shard again: 22 pieces' preparation took
        1.4x the CPU of one (RESULTS.md)."""
        if threads == 1 or len(queries) <= _PIECE[0]:
            return [finish(self._grouped(queries, k))]
        shares = even(len(queries), threads)

        def prepared(share: tuple[int, int]) -> tuple[np.ndarray, ...]:
            with numba_threads(1):
                return self.prepare(queries[share[0] : share[1]])

        terms = self._helpers.map(prepared, shares, threads)
        jobs = [(j, a, b) for j, (lo, hi) in enumerate(shares) for a, b in guided(hi - lo, threads, *_PIECE)]

        def searched(job: tuple[int, int, int]) -> T:
            with numba_threads(1):
                return finish(self._search_prepared(terms[job[0]], job[1], job[2], k))

        return self._helpers.map(searched, jobs, threads)

    def prepare(self, queries: list[str] | Utf8Queries) -> tuple[np.ndarray, ...]:
        """The queries' terms as `kernels.shards.search_group` takes them, weighed by the collection's df:
        one GIL-free call (`kernels.shards.prepare_group`: the signals once, each shard's look-up, the
        collection's df, `kernels.part_terms.arrange` per shard and over the group), or its steps from
        Python (`_found_per_shard`) where the shards' key rules or array types differ.

        Returns (q_offs int64[S, Q + 1], q_terms, q_weights, g_off int64[Q + 1], g_terms int64[S, A],
        g_weights, each entry's signal number (the shards' entries, then the group's), each signal's df
        per shard int64[S, n])."""
        data, q_offsets = (queries.data, queries.offsets) if isinstance(queries, Utf8Queries) else utf8(queries)
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
                         queries: Queries) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
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

    def _corrupt_terms(self, queries: Queries, ix: Index) -> None:
        """A shard's vocabulary or term offsets failed a check: the long way names the file and entry at fault."""
        self.searcher.query_terms(texts(queries))
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

    def _grouped(self, queries: list[str] | Utf8Queries, k: int) -> Lists:
        """The group's top k of the queries in one GIL-free call on the calling thread (`kernels.shards.
        search_group`: one set of levels over the shards, or shard after shard behind the bar of the
        group's top k so far), so pieces on threads run in parallel."""
        return self._search_prepared(self.prepare(queries), 0, len(queries), k)

    def _search_prepared(self, prepared: tuple[np.ndarray, ...], a: int, b: int, k: int) -> Lists:
        """`_grouped` of queries a..b-1 of those `prepared` (`prepare`'s tuple): their rows of it as
        `search_group` takes them (the shards' terms stay where they are, offsets say where)."""
        q_offs, q_terms, q_weights, g_off, g_terms, g_weights, _, _ = prepared
        if (a, b) != (0, g_off.shape[0] - 1):
            ga, gb = int(g_off[a]), int(g_off[b])
            q_offs, g_off = np.ascontiguousarray(q_offs[:, a : b + 1]), g_off[a : b + 1] - ga
            g_terms, g_weights = np.ascontiguousarray(g_terms[:, ga:gb]), np.ascontiguousarray(g_weights[ga:gb])
        nq = b - a
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

    def pool_sizes(self, queries: Queries) -> np.ndarray:
        return self.searcher.pool_sizes(texts(queries), threads=self.threads)

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


def texts(queries: Queries) -> list[str]:
    """The queries as a list of str."""
    return queries.texts() if isinstance(queries, Utf8Queries) else [str(q) for q in queries]


def _wire(piece: Lists, ranks: bool) -> Lists:
    """A piece as an actor sends it: docs uint32, matches narrowed (`_narrow`), id ranks only when `ranks`."""
    o, d, s, m, r = piece
    return o, d.astype(np.uint32), s, _narrow(m), r if ranks else np.zeros(0, np.uint32)


def _narrow(matches: np.ndarray) -> np.ndarray:
    """Matches (counts) in one byte where every one fits: 4 of an actor's 17 bytes a row become 1."""
    return matches.astype(np.uint8) if matches.shape[0] and matches.max() < 256 else matches


def join(pieces: Sequence[Lists]) -> Lists:
    """Pieces of consecutive queries (`ShardWorker.search`'s) as one list; matches int32 (the merges' type)."""
    if len(pieces) == 1:
        o, d, s, m, r = pieces[0]
        return o, d, s, m.astype(np.int32, copy=False), r
    firsts = np.cumsum([0] + [g[1].shape[0] for g in pieces[:-1]])
    offsets = np.concatenate([np.zeros(1, np.int64)] + [g[0][1:] + f for g, f in zip(pieces, firsts, strict=True)])
    return (offsets, *(np.concatenate([g[c] for g in pieces], dtype=t)  # type: ignore[return-value]
                       for c, t in ((1, None), (2, None), (3, np.int32), (4, None))))


def merge_ranked(lists: Sequence[Lists], k: int | None) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Ranked lists with id ranks merged by the full key (`kernels.merge.merge_keyed`): (offsets int64[Q + 1],
    the chosen rows, the lists' columns docs, scores, matches, ranks end to end, which the rows index). The lists
    are `join`'s (matches int32)."""
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


def merge_shards(results: Sequence[Sequence[Lists]], nq: int, k: int | None, integer: bool, ids: CollectionIds,
                 helpers: Helpers | None = None, threads: int = 1) -> list[SearchResult]:
    """The collection's top k of every query from the actors' answers (`ShardWorker.search`'s pieces).

    One actor's answer is final: each piece's rows get their ids and become results. Several actors'
    answers are joined per actor and merged: with id ranks by the full key (score, matches, rank), one
    numeric k-way merge per query (`merge_ranked`), then the ids of the chosen rows only; without them (an
    index built before they existed), by `parts.merge_results`, which reads ids where (score, matches)
    tie. The queries go in spans of at most `_MERGE_ROWS` rows, so no span's arrays reach NumPy's
    huge-page size; one actor's spans (ids and results only) go on `threads` threads of `helpers`, one Numba
    thread each.
    """
    for answer in results:  # (a protocol check: each actor answers every query, once)
        if sum(p[0].shape[0] - 1 for p in answer) != nq:
            raise SsrError(f"an actor answered {sum(p[0].shape[0] - 1 for p in answer)} queries, not {nq}")
    if len(results) == 1:
        jobs = [([piece], a, b) for piece in results[0] for a, b in _spans([piece])]
    else:
        lists = [join(r) for r in results]
        jobs = [(lists, a, b) for a, b in _spans(lists)]
    # threads for one actor's answer only: several lists merge in parallel kernels (`merge_keyed`,
    # `parts.merge_results`), which Numba's workqueue threading layer (a machine without OpenMP or TBB) must
    # not be entered by two threads at once; and for many rows only (`_THREADED_ROWS`)
    rows = sum(int(p[0][-1]) for p in results[0])
    if helpers is None or threads == 1 or len(jobs) == 1 or len(results) > 1 or rows < _THREADED_ROWS:
        return [r for job in jobs for r in _merge_span(*job, k, integer, ids)]

    def one(job: tuple[list[Lists], int, int]) -> list[SearchResult]:
        with numba_threads(1):
            return _merge_span(*job, k, integer, ids)

    return [r for part in helpers.map(one, jobs, threads) for r in part]


def _spans(lists: Sequence[Lists]) -> list[tuple[int, int]]:
    """Spans [a, b) of the lists' queries (all of them, in order) of at most `_MERGE_ROWS` rows (or one query)."""
    nq = lists[0][0].shape[0] - 1
    if nq <= 0:
        return [(0, max(0, nq))]
    ends = np.sum([r[0][1:] for r in lists], axis=0)
    cuts = np.unique(np.searchsorted(ends, np.arange(_MERGE_ROWS, int(ends[-1]), _MERGE_ROWS), side="right"))
    return [(a, b) for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), nq], strict=True) if b > a]


def _merge_span(results: Sequence[Lists], a: int, b: int, k: int | None, integer: bool,
                ids: CollectionIds) -> list[SearchResult]:
    """`merge_shards` of queries a..b-1 of the lists: their rows (views), merged."""
    lists: list[Lists] = []
    for o, d, s, m, r in results:
        lo, hi = int(o[a]), int(o[b])
        lists.append((o[a : b + 1] - lo, d[lo:hi], s[lo:hi], m[lo:hi], r[lo:hi] if r.shape[0] else r))
    if len(lists) == 1:  # one actor's answer is final (its shards merged by the full key): copies of its columns
        _, d, s, m, _ = lists[0]  # (which may be read-only views of Ray's store)
        docs, scores, matches = d.astype(np.int64), s.copy(), m.astype(np.int32)
        return split_results(lists[0][0], ids(docs), docs, scores, matches)
    if not all(r[4].shape[0] == r[1].shape[0] for r in lists):
        return merge_results([(o, d.astype(np.int64), s, m) for o, d, s, m, _ in lists],
                             lambda j, rows: ids(lists[j][1][rows].astype(np.int64)), b - a, k, integer)
    offsets, rows, (docs, scores, matches, _) = merge_ranked(lists, k)
    docs, scores, matches = docs[rows].astype(np.int64), scores[rows], matches[rows]
    return split_results(offsets, ids(docs), docs, scores, matches)
