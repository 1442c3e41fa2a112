"""`PartsSearcher`: exact search over the parts of one collection (`parts`): global weights, every part
through the ordinary kernels, one merge by the full key.

SSR with a k runs every part in one kernel call (`kernels.live.search_parts`), a batch as pieces on Python
threads (`pieces.Helpers`); the scan, BM25 and k=None search part by part and merge with
`parts.merge_results`. Live indexes (`live.LiveSearcher`), shards (`distributed`) and agent registries use it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from . import parts_tables, retrieval
from .collector import freeze_once
from .errors import SsrError
from .extract import Extractor
from .ids import ucs4_ids
from .kernels import levels, probe
from .kernels import ssr as kernels
from .kernels.candidates import CorruptIndexData
from .kernels.id_table import gather_ids_ucs4
from .parts import (
    GlobalStats,
    Part,
    drop_deleted,
    index_settings,
    live_ids_are_integers,
    merge_results,
    part_rank,
    same_settings,
)
from .pieces import Helpers, guided
from .retrieval import BM25_B, BM25_K1, SearchResult, check_k, check_method, internal_doc, numba_threads, split_results
from .search import _THREADED
from .stopwords import StopwordList
from .validate import kernel_guard

# queries per round: a round holds every part's top k of every query (20 bytes a row)
_ROUND_ROWS = 1 << 22
_ROUND_MIN = 32
_ROUND_MAX = 1024
_ROUND_ALL = 16
# queries per piece a thread takes (`_threaded`, `pieces.guided`: big first, small last): at least, at most;
# the batch's terms are looked up before, at once (`parts_tables.look_up`), so a small piece costs no more
_PIECE = (32, 1024)


class PartsSearcher:
    """Exact search over parts of one collection: global weights, per-part kernels, merge by full key.

    `integer`: whether the collection's live ids are all integers (the id order); computed from
    the parts' ids when not given. Result `docs` are collection-wide numbers: the part's first
    number (the sum of the earlier parts' sizes, deleted documents included) plus its doc id.
    """

    def __init__(self, parts: Sequence[Part], method: str | None = None, integer: bool | None = None,
                 block: int = kernels.DEFAULT_BLOCK, k1: float = BM25_K1, b: float = BM25_B,
                 stats: GlobalStats | None = None, shared: bool = False):
        if not parts:
            raise SsrError("a collection needs at least one part")
        self.parts = list(parts)
        first = self.parts[0].index
        for p in self.parts[1:]:
            why = same_settings(first, p.index)
            if why:
                raise SsrError(f"{p.index.path}: cannot be searched with {first.path}: {why}")
        self.scoring = first.scoring
        self.method = method or ("ssr" if self.scoring == "ssr" else "bm25")
        if self.method == "maxscore" and self.scoring == "ssr":
            raise SsrError(f"method 'maxscore' does not run on an index of {len(self.parts)} parts (a live index "
                           "with several segments or deletions) yet; use method 'ssr' (the same results, bit "
                           "for bit) or merge the segments with `ssr compact`")
        check_method(self.method, ("ssr", "levels", "union", "exhaustive") if self.scoring == "ssr" else ("bm25",))
        # the inverted kernel of the method, as `search.Searcher` picks it: levels for ssr, the heap for union
        self._inverted = levels.search_batch if self.method in ("ssr", "levels") else kernels.search_batch
        settings = index_settings(first)
        self.stopwords = StopwordList(settings["stopwords_id"], frozenset(settings["stopwords"]))
        self.cap = int(settings["cap"]) if settings.get("cap") is not None else None
        self.stem = bool(settings.get("stem", False))
        self.block = block
        # stats: N, df and tokens of a whole collection of which these parts may be a few
        self.stats = stats
        # queries of <= levels.MAX_TERMS terms: one set of levels over all parts (live segments) rather than
        # probe or levels part by part behind bars (shards, where probe's skipping pays)
        self.shared = shared
        # the cost rule of `kernels.live.search_parts`: probe's, and which queries go part after part
        from .kernels.live import RULE_PARTS

        self.rule = RULE_PARTS
        self.n_live = stats.n_docs if stats is not None else sum(p.n_live for p in self.parts)
        self.bases = np.cumsum([0] + [p.n_docs for p in self.parts]).astype(np.int64)
        self.integer = live_ids_are_integers(self.parts) if integer is None else bool(integer)
        self.ranks = [part_rank(p.index, self.integer) for p in self.parts]
        self.ascending = [probe.ascending(r) for r in self.ranks]  # ids in row order: probe's `monotone`
        self.live = [None if p.deleted is None else ~p.deleted for p in self.parts]
        # tables made once (`parts_tables`): ids and ranks; the kernel's arrays per method; the vocabularies
        self._ids: tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray] | None = None
        self._id_rows: np.ndarray | bool | None = None  # `parts_tables.id_rows` (False: none)
        self._prepared: dict[str, Any] = {}
        self._terms: list[tuple[list[int], tuple[int, int], tuple]] | None = None
        self._local = threading.local()  # the kernels' workspace, one per calling Python thread (kept)
        self._helpers = Helpers(retrieval.max_threads() - 1, "ssr-parts")  # threaded batches' helper threads
        self._hash_keys = [(int(h["seed"]), int(h.get("bits", 64))) for h in (index_settings(p.index)["hash"]
                                                                               for p in self.parts)]
        if self.scoring == "ssr":
            self._extractor = Extractor(self.stopwords, self.cap)
        else:
            from .bm25 import BM25Searcher

            self._bm25 = [BM25Searcher(p.index, k1=k1, b=b) for p in self.parts]
            tokens = stats.tokens if stats is not None else sum(p.total_length() for p in self.parts)
            # as a fresh build: the mean over all live documents; no tokens gives no results anyway
            self.avgdl = tokens / self.n_live if tokens and self.n_live else 1.0
        freeze_once()  # what lives as long as the parts leaves the collector's full passes (`collector`)

    @property
    def n_docs(self) -> int:
        return self.n_live

    @property
    def settings(self) -> dict[str, Any]:
        if self.scoring == "ssr":
            return {"weight": "ln((N + 1) / (df + 1)) + 1", "order": "score desc, matches desc, id asc",
                    "parts": len(self.parts)}
        b = self._bm25[0]
        return {"k1": b.k1, "b": b.b, "avgdl": self.avgdl, "stem": self.stem, "parts": len(self.parts)}

    # ------------------------------------------------------------------------------- SSR

    def query_terms(self, queries: Sequence[str], looked: tuple[parts_tables.Looked, int, int] | None = None):
        """Per part, the query terms as the kernels take them, with global weights (`parts_tables.prepare`).

        Returns ((signal bytes, offsets), weights float64 per signal (0 where no live document has it),
        per part (offsets, terms, weights) in ascending weight per query, plus the signals' numbers, and
        the same over the collection: (offsets, per part terms aligned with them (-1: no live document
        of the part has the signal), weights), as `kernels.live.search_parts` shares them).
        `looked`: (a batch `parts_tables.look_up` looked up, a, b): these queries are its a..b - 1, their
        terms arranged from it (the signal bytes and offsets returned are then the whole batch's).
        """
        sdata, soffsets, (weights, offsets, starts, terms, w, sel, shared) = (
            parts_tables.prepare(self, queries) if looked is None else parts_tables.arranged(self, *looked))
        sets = [(offsets[s], terms[a:z], w[a:z], sel[a:z])
                for s, (a, z) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True))]
        g_off, _, g_weights, _ = sets.pop()
        return (sdata, soffsets), weights, sets, (g_off, list(shared), g_weights)

    def search(self, query: str, k: int | None = 10) -> SearchResult:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int | None = 10,
                     threads: int | None = None) -> list[SearchResult]:
        """Top-k of every query over all parts (k=None: every candidate), exactly as one index would answer."""
        check_k(k)
        queries = list(queries)
        if self.scoring == "ssr" and self.method in _THREADED and k is not None:
            retrieval.check_threads(threads)
            n = numba.get_num_threads() if threads is None else threads
            if n > 1 and len(queries) > _PIECE[0]:
                return self._threaded(queries, k, n)
        out: list[SearchResult] = []
        # each round holds every part's top k of every query (one top k in `_ssr_barred`): at most _ROUND_ROWS
        rows = None if k is None else k if self._barred(k, self.method) else k * len(self.parts)
        step = _ROUND_ALL if rows is None else max(_ROUND_MIN, min(_ROUND_MAX, _ROUND_ROWS // rows))
        with numba_threads(threads, len(queries)):
            for start in range(0, len(queries), step):
                chunk = queries[start : start + step]
                if self.scoring == "ssr":
                    out += self._ssr_round(chunk, k, self.method)
                else:
                    out += self._bm25_round(chunk, k)
        return out

    def _threaded(self, queries: list[str], k: int, threads: int) -> list[SearchResult]:
        """A batch as pieces of queries on `threads` Python threads (`pieces.Helpers`), each piece wholly on
        one thread (terms, the kernels' serial GIL-free entries, ids), as `search.Searcher._threaded`."""
        for p in self.parts:  # lazy tables, made once here rather than raced for by the threads
            p.index._load_ids()
        parts_tables.term_tables(self)
        if self._barred(k, self.method):
            parts_tables.id_tables(self)
            parts_tables.id_rows(self)
            parts_tables.parts_arrays(self, self.method)
        looked = parts_tables.look_up(self, queries, threads, lambda fn, items: self._helpers.map(fn, items, threads))

        def piece(ab: tuple[int, int]) -> list[SearchResult]:
            a, b = ab
            terms = None if looked is None else self.query_terms(queries[a:b], (looked, a, b))
            return self._ssr_round(queries[a:b], k, self.method, 1, terms)

        done = self._helpers.map(piece, guided(len(queries), threads, *_PIECE), threads)
        return [r for results in done for r in results]

    def _work(self) -> list:
        """The calling thread's kernel workspace holder (`probe.workspace`, made by the kernels on first use)."""
        work = getattr(self._local, "work", None)
        if work is None:
            work = self._local.work = [None]
        return work

    def pool_sizes(self, queries: Sequence[str], threads: int | None = None) -> np.ndarray:
        """int64[Q]: live documents sharing a signal (BM25: a token) with each query."""
        return np.array([len(r) for r in self.search_batch(queries, None, threads)], dtype=np.int64)

    def _ssr_round(self, queries: list[str], k: int | None, method: str,
                   chunks: int | None = None, terms: tuple | None = None) -> list[SearchResult]:
        """One round of queries; `chunks`: the kernels' threads (None: Numba's count; 1: this thread alone);
        `terms`: their `query_terms`, when made already."""
        _, _, per_part, shared = self.query_terms(queries) if terms is None else terms
        if k is not None and self._barred(k, method):
            return self._ssr_barred(len(queries), k, per_part, shared, method, chunks)
        results = []
        for i, (p, (offsets, terms, weights, _)) in enumerate(zip(self.parts, per_part, strict=True)):
            ix = p.index
            with kernel_guard(ix):  # a segment that lies is an error naming it, never a crash
                if method in ("ssr", "levels", "union"):  # the inverted kernel skips deleted documents itself
                    csr = (ix.lists, ix.postings, self.ranks[i], ix.n_docs)
                    if method == "ssr" and k is not None:  # probe, with its forward rows
                        results.append(probe.search_batch(*csr, ix.forward_indptr, ix.forward, offsets, terms,
                                                          weights, k, block=self.block, live=self.live[i],
                                                          monotone=self.ascending[i], n_chunks=chunks,
                                                          work=self._work()))
                    else:
                        results.append(self._inverted(*csr, offsets, terms, weights, k, block=self.block,
                                                      live=self.live[i], n_chunks=chunks))
                    continue
                # the scan (the independent check) is asked for k + deleted and filtered after
                kk = None if k is None else k + p.n_deleted
                res = kernels.exhaustive_batch(ix.forward_indptr, ix.forward, self.ranks[i], ix.n_terms,
                                               offsets, terms, weights, kk)
            off, docs, scores, matches = res
            results.append(drop_deleted(p, off, docs, scores, matches, k))
        return self._merge(results, len(queries), k)

    def shares(self, method: str) -> bool:
        """Whether queries of up to `levels.MAX_TERMS` terms run one set of levels over all parts (
        `kernels.live.search_parts`' shared path) rather than probe or levels part by part."""
        return method in ("ssr", "levels") and self.shared

    def _barred(self, k: int | None, method: str) -> bool:
        """Whether a search runs all parts in one kernel call (`_ssr_barred`)."""
        return self.scoring == "ssr" and method in ("ssr", "levels", "union") and k is not None and len(self.parts) > 1

    def _ssr_barred(self, nq: int, k: int, per_part, shared, method: str, chunks: int | None) -> list[SearchResult]:
        """The parts in one kernel call (`kernels.live.search_parts`): one set of levels per query over all
        parts where `shares` says so, else part after part, largest first, each behind a bar.

        Per query the top k so far bars the next part: a document there must rank strictly before its
        k-th entry (on score and matches, or on a tie, by id), as k known documents rank before it
        otherwise. So later parts keep, and the merge reads, only documents that can still enter the top k.
        """
        from .kernels.live import search_parts

        id_offsets, id_bytes, _, rank = parts_tables.id_tables(self)
        order = self._order
        queries = [per_part[i][:3] for i in order]
        together = (shared[0], [shared[1][i] for i in order], shared[2], rank) if self.shares(method) else None
        off, docs, scores, matches, bad = search_parts(parts_tables.parts_arrays(self, method), queries,
                                                       min(k, int(self.bases[-1])), id_offsets, id_bytes, self.integer,
                                                       self.block, n_chunks=chunks, method=method, shared=together,
                                                       work=self._work(), rule=self.rule)
        if bad >= 0:
            with kernel_guard(self.parts[order[bad]].index):  # a segment that lies is an error naming it
                raise CorruptIndexData("postings_docs.npy: a posting list is not strictly ascending or holds a "
                                       "document id >= N")
        rows = parts_tables.id_rows(self)
        if rows is not None:  # one gather from the collection's table
            ids = ucs4_ids(gather_ids_ucs4(rows, docs))
            return split_results(off, ids, docs, scores, matches)
        part = np.searchsorted(self.bases, docs, side="right") - 1
        width = 1
        id_parts = []
        for s in np.flatnonzero(np.bincount(part, minlength=len(self.parts))).tolist():
            where = np.flatnonzero(part == s)
            id_parts.append((where, self.parts[s].index.ids_of(docs[where] - self.bases[s])))
            width = max(width, id_parts[-1][1].dtype.itemsize // 4)
        ids = np.empty(docs.shape[0], dtype=f"<U{width}")
        for where, a in id_parts:
            ids[where] = a
        return split_results(off, ids, docs, scores, matches)

    @property
    def _order(self) -> list[int]:
        """The parts, largest first (a bar tightens soonest), as `_ssr_barred` hands them to the kernel."""
        return sorted(range(len(self.parts)), key=lambda i: -self.parts[i].n_live)

    # ------------------------------------------------------------------------------ BM25

    def _bm25_round(self, queries: list[str], k: int | None) -> list[SearchResult]:
        from .bm25 import canonical_order, lucene_idf
        from .stemming import bm25_tokens

        counts = [Counter(bm25_tokens(q, self.stopwords.words, self.stem)) for q in queries]
        tokens = sorted({t for c in counts for t in c})
        tid = np.array([[s.term_id(t) for t in tokens] for s in self._bm25], dtype=np.int64).reshape(
            len(self.parts), len(tokens))
        live = np.zeros_like(tid)
        for i, p in enumerate(self.parts):
            known = np.flatnonzero(tid[i] >= 0)
            live[i, known] = p.live_df(tid[i, known])
        df = live.sum(axis=0)
        if self.stats is not None:
            for i in range(len(self.parts)):
                known = np.flatnonzero(tid[i] >= 0)
                df[known] = self.stats.df(i, tid[i, known])
        idf = {t: lucene_idf(self.n_live, int(df[j])) for j, t in enumerate(tokens) if df[j] > 0}
        col = {t: j for j, t in enumerate(tokens)}
        results = []
        for i, p in enumerate(self.parts):
            offsets = np.zeros(len(queries) + 1, dtype=np.int64)
            q_terms: list[int] = []
            q_weights: list[float] = []
            for q, c in enumerate(counts):
                # the canonical order (weight, token), a fresh build's whatever this part's hash seed
                ordered = canonical_order([(t, int(tid[i, col[t]]), n * idf[t]) for t, n in c.items()
                                           if live[i, col[t]] > 0])
                q_terms += [t for _, t, _ in ordered]
                q_weights += [w for _, _, w in ordered]
                offsets[q + 1] = len(q_terms)
            kk = None if k is None else k + p.n_deleted
            off, docs, scores, matches, _ = self._bm25[i].run_terms(
                offsets, np.array(q_terms, dtype=np.int64), np.array(q_weights, dtype=np.float64), kk,
                avgdl=self.avgdl, doc_rank=self.ranks[i])
            results.append(drop_deleted(p, off, docs, scores, matches, k))
        return self._merge(results, len(queries), k)

    # ----------------------------------------------------------------------------- merge

    def _merge(self, results, nq: int, k: int | None) -> list[SearchResult]:
        """The parts' own ranked lists (part document numbers) merged by the full key (`merge_results`)."""
        results = [(off, docs + self.bases[s], scores, matches)
                   for s, (off, docs, scores, matches) in enumerate(results)]

        def ids_of(s: int, rows: np.ndarray) -> np.ndarray:
            return self.parts[s].index.ids_of(results[s][1][rows] - self.bases[s])

        return merge_results(results, ids_of, nq, k, self.integer)

    # --------------------------------------------------------------------------- explain

    def internal_id(self, doc_id: str) -> int | None:
        """The collection-wide number of the live document with external id `doc_id`, or None."""
        for i, p in enumerate(self.parts):
            d = p.index.internal_id(doc_id)
            if d is not None and (p.deleted is None or not p.deleted[d]):
                return int(self.bases[i]) + d
        return None

    def explain(self, query: str, doc: str | int) -> list[tuple[str, float]]:
        """Shared signals (BM25: tokens) of `query` and a live document, with global weights, ascending.

        `doc`: an external id, or a collection-wide number as in `SearchResult.docs`.
        """
        doc = internal_doc(doc, self.internal_id, "collection")
        i = int(np.searchsorted(self.bases, doc, side="right")) - 1
        if not 0 <= doc < int(self.bases[-1]):
            raise SsrError(f"no document number {doc}")
        if self.scoring != "ssr":
            return self._bm25_explain(query, i, doc - int(self.bases[i]))
        d = doc - int(self.bases[i])
        _, _, per_part, _ = self.query_terms([query])
        _, terms, weights, _ = per_part[i]
        ix = self.parts[i].index
        shared = np.isin(terms, ix.forward_row(d))
        pairs = [(ix.signal(t), w) for t, w in zip(terms[shared].tolist(), weights[shared].tolist(), strict=True)]
        return sorted(pairs, key=lambda p: (p[1], p[0]))

    def _bm25_explain(self, query: str, i: int, d: int) -> list[tuple[str, float]]:
        """BM25 shares of the query tokens part i's document d holds, with the collection's idf and avgdl."""

        def df_of(token: str, t: int) -> int:
            if self.stats is not None:
                return int(self.stats.df(i, np.array([t]))[0])
            return sum(int(p.live_df(np.array([b.term_id(token)]))[0])
                       for p, b in zip(self.parts, self._bm25, strict=True) if b.term_id(token) >= 0)

        return self._bm25[i].shares(query, d, self.n_live, self.avgdl, df_of)
