"""A collection made of parts: score each part with the collection's global weights, merge by the full key.

A part is one immutable index in the on-disk format (a segment of a live index, a shard) plus the
documents deleted from it. Scores depend on the collection only through N and df (SSR) or N, df and
avgdl (BM25), so a collection split into parts answers exactly as one index over its live documents:

- global N = sum over parts of live documents; global df(s) = sum over parts of df_part(s) minus the
  part's deleted df of s (counted from its forward index when documents are deleted); BM25's avgdl =
  live tokens / live documents. Weights come from `scoring.signal_weight` / `bm25.lucene_idf` on those
  integers, so they are the floats a fresh build computes.
- each part is searched by the ordinary kernels with those weights (per query in ascending weight:
  the canonical summation) and returns its exact local top-k of live documents: the inverted
  kernel takes the live mask; the exhaustive scan and BM25 are asked for k + (deleted documents
  of the part) and the deleted ones dropped after, so none is missed;
- `kernels.merge` merges the parts' lists under (score desc, matches desc, id asc): first on
  (score, matches) alone, keeping the best k and every row tying with the k-th; then only those
  rows' ids are read and the ties ordered by id, compared as the collection's order demands
  (integers only when every live id is one), never by part.

Inside a part, ties are broken by a rank array in the collection's id order (`Part.rank`): the
part's own `doc_rank` when its order is the collection's, else one computed at open.

`Part`, `deletion_stats`, `merge_results` and `parts_search.PartsSearcher` are the reusable pieces
(live indexes use them; a sharded index (`distributed`) passes its precomputed `GlobalStats` instead:
then N, df and avgdl come from its weight table and a searcher may hold only some of the collection's
parts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .format import Index
from .kernels.merge import merge_ranked, select_candidates
from .retrieval import SearchResult, split_results


@dataclass(frozen=True)
class GlobalStats:
    """The collection's N, df and BM25 token count, computed once (a sharded index's weight table).

    tables: per part, int64[V_part]: the global df of each of the part's term ids.
    """

    n_docs: int
    tables: Sequence[np.ndarray]
    tokens: int = 0

    def df(self, part: int, terms: np.ndarray) -> np.ndarray:
        """Global df of the part's term ids `terms` (int64, all >= 0)."""
        return np.asarray(self.tables[part][terms], dtype=np.int64)


@dataclass
class Part:
    """One immutable index and what has been deleted from it.

    deleted: bool[N] (None: nothing); deleted_terms int64 (sorted) and deleted_df int64: for each
    term some deleted document holds, how many deleted documents hold it; deleted_length: tokens
    of the deleted documents (BM25). `deletion_stats` computes the last three from `deleted`.
    """

    index: Index
    deleted: np.ndarray | None = None
    deleted_terms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    deleted_df: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    deleted_length: int = 0
    n_deleted: int = 0

    @classmethod
    def with_deletions(cls, index: Index, deleted: np.ndarray | None) -> Part:
        if deleted is None or not deleted.any():
            return cls(index)
        terms, df, length = deletion_stats(index, deleted)
        return cls(index, deleted, terms, df, length, int(np.count_nonzero(deleted)))

    @property
    def n_docs(self) -> int:
        return self.index.n_docs

    @property
    def n_live(self) -> int:
        return self.n_docs - self.n_deleted

    def live_df(self, terms: np.ndarray) -> np.ndarray:
        """Live document frequency of term ids `terms` (int64, all >= 0)."""
        df = self.index.df_of(terms)
        if self.deleted_terms.shape[0]:
            pos = np.searchsorted(self.deleted_terms, terms)
            pos = np.minimum(pos, self.deleted_terms.shape[0] - 1)
            hit = self.deleted_terms[pos] == terms
            df[hit] -= self.deleted_df[pos[hit]]
        return df

    def total_length(self) -> int:
        """Tokens of the live documents (BM25 indexes)."""
        assert self.index.doc_lengths is not None
        return int(np.asarray(self.index.doc_lengths).sum(dtype=np.int64)) - self.deleted_length


def deletion_stats(index: Index, deleted: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(terms int64 sorted, df int64, tokens) of the documents flagged in `deleted` (bool[N]).

    Read from the forward index: only the deleted documents' rows are touched.
    """
    from .kernels.forward import gather

    docs = np.flatnonzero(deleted)
    fi = index.forward_indptr
    will_need(fi, docs, docs + 2)
    starts = np.asarray(fi[docs], dtype=np.int64)
    ends = np.asarray(fi[docs + 1], dtype=np.int64)
    width = index.forward_width
    if width:  # the words holding bits start * width .. end * width (`kernels.forward`)
        will_need(index.forward_terms, starts * width // 32, (ends * width + 31) // 32 + 1)
    else:
        will_need(index.forward_terms, starts, ends)
    terms = gather(index.forward, starts, ends - starts)
    uniq, counts = np.unique(terms, return_counts=True)
    tokens = 0
    if index.doc_lengths is not None:
        tokens = int(np.asarray(index.doc_lengths[docs]).sum(dtype=np.int64))
    return uniq.astype(np.int64), counts.astype(np.int64), tokens


def same_settings(a: Index, b: Index) -> str | None:
    """Why two indexes cannot be parts of one collection, or None when they can."""
    if a.scoring != b.scoring:
        return f"scoring {a.scoring!r} vs {b.scoring!r}"
    sa, sb = index_settings(a), index_settings(b)
    for key in ("stopwords_sha256", "cap", "bigrams", "stem"):
        if sa.get(key) != sb.get(key):
            return f"signal setting {key}: {sa.get(key)!r} vs {sb.get(key)!r}"
    if sa["hash"].get("name") != sb["hash"].get("name") or sa["hash"].get("bits") != sb["hash"].get("bits"):
        return "hash function or width differs"
    return None


def merge_results(results, id_arrays, nq: int, k: int | None,
                  integer: bool) -> list[SearchResult]:
    """The collection's top-k of every query from the parts' own ranked lists (`kernels.merge`).

    results: per part (offsets int64[Q + 1], docs int64 in collection numbering, scores float64,
    matches int32), each query's rows in rank order; id_arrays: per part, the external ids of
    those rows (str arrays), or a function (part, row positions int64) -> their ids, called for
    the selected rows only; integer: the collection's id order (see `live_ids_are_integers`).
    Rows are first selected on (score, matches) alone (the best k and the ties with the k-th), so
    only those rows' ids are read: with many parts most rows never need theirs.
    Shards (`distributed`) merge through here.
    """
    if len(results) == 1:
        offsets, docs, scores, matches = results[0]
        ids = id_arrays(0, np.arange(docs.shape[0])) if callable(id_arrays) else id_arrays[0]
        return split_results(offsets, ids, docs, scores, matches)
    n_parts = len(results)
    sizes = np.stack([np.diff(r[0]) for r in results], axis=1)  # [Q, S]
    table = np.zeros((nq, n_parts + 1), dtype=np.int64)
    np.cumsum(sizes, axis=1, out=table[:, 1:])
    starts = np.concatenate([[0], np.cumsum(table[:, -1])[:-1]]).astype(np.int64)
    table += starts[:, None]
    total = int(table[-1, -1]) if nq else 0
    scores = np.empty(total, dtype=np.float64)
    matches = np.empty(total, dtype=np.int32)
    docs = np.empty(total, dtype=np.int64)
    source = np.empty(total, dtype=np.int64)  # the row's position in its part's arrays
    part = np.empty(total, dtype=np.int32)
    for s, (offsets, d, sc, m) in enumerate(results):
        query_of = np.repeat(np.arange(nq, dtype=np.int64), np.diff(offsets))
        local = np.arange(d.shape[0], dtype=np.int64)
        dest = table[query_of, s] + (local - offsets[query_of])
        scores[dest], matches[dest], docs[dest], source[dest], part[dest] = sc, m, d, local, s
    kk = 0 if k is None else k
    if kk:
        # the rows that can be in a top k: those at least as good as the k-th on (score, matches). In
        # each part's list they are a prefix, so the kept rows stay as parts' ranked lists and the
        # merge by full key below reads only their ids
        sel, rows = select_candidates(table, scores, matches, kk)
        query_of = np.repeat(np.arange(nq, dtype=np.int64), np.diff(sel))
        counts = np.bincount(query_of * n_parts + part[rows], minlength=nq * n_parts).astype(np.int64)
        kept = np.zeros(counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=kept[1:])
        keep = np.repeat(table[:, :-1].ravel() - kept[:-1], counts) + np.arange(int(kept[-1]), dtype=np.int64)
        scores, matches, docs, source, part = scores[keep], matches[keep], docs[keep], source[keep], part[keep]
        table = np.concatenate([kept[:-1].reshape(nq, n_parts), kept[n_parts::n_parts].reshape(nq, 1)], axis=1)
    ids = gather_ids(part, lambda s, where: id_arrays(s, source[where]) if callable(id_arrays)
                     else id_arrays[s][source[where]])
    codes = ids.view(np.uint32).reshape(part.shape[0], ids.dtype.itemsize // 4)
    out_offsets, pos = merge_ranked(table, scores, matches, codes, kk, integer)
    ids, scores, matches, docs = ids[pos], scores[pos], matches[pos], docs[pos]
    return split_results(out_offsets, ids, docs, scores, matches)


def gather_ids(part: np.ndarray, ids_of) -> np.ndarray:
    """The ids of rows held by several parts as one str array: part int[n], each row's part;
    ids_of(s, where) -> the ids of rows `where` (int64, all of part s), called once per part present."""
    gathered = []
    for s in np.unique(part).tolist():
        where = np.flatnonzero(part == s)
        gathered.append((where, ids_of(s, where)))
    width = max([a.dtype.itemsize // 4 for _, a in gathered] + [1])
    ids = np.empty(part.shape[0], dtype=f"<U{width}")
    for where, a in gathered:
        ids[where] = a
    return ids


def drop_deleted(part: Part, offsets, docs, scores, matches, k: int | None):
    """A part's kernel result without its deleted documents, each query cut to k."""
    if part.deleted is None:
        return offsets, docs, scores, matches
    nq = offsets.shape[0] - 1
    query_of = np.repeat(np.arange(nq, dtype=np.int64), np.diff(offsets))
    keep = ~part.deleted[docs]
    if k is not None:
        kept_before = np.cumsum(keep) - keep  # kept rows before each row, over the whole batch
        first = np.concatenate([[0], np.cumsum(keep)])[offsets[:-1]]  # kept rows before each query
        keep &= (kept_before - first[query_of]) < k
    counts = np.bincount(query_of[keep], minlength=nq)
    new = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(counts, out=new[1:])
    return new, docs[keep], scores[keep], matches[keep]


def live_ids_are_integers(parts: Sequence[Part]) -> bool:
    """Whether every live id of the collection is a base-10 integer."""
    import pyarrow.compute as pc

    from .ids import INTEGER_ID

    for p in parts:
        if _ids_info(p.index).get("integer"):
            continue  # every id of the part is an integer, deleted or not
        is_int = pc.match_substring_regex(p.index.doc_id_array(), f"^{INTEGER_ID}$").to_numpy(zero_copy_only=False)
        if p.deleted is not None:
            is_int = is_int | p.deleted
        if not bool(np.all(is_int)):
            return False
    return True


def part_rank(index: Index, integer: bool) -> np.ndarray:
    """The part's documents ranked in the collection's id order (its own doc_rank when the orders agree)."""
    if bool(_ids_info(index).get("integer")) == integer:
        return index.doc_rank
    key = "_rank_int" if integer else "_rank_str"  # kept: a live index ranks its segments again at every commit
    rank = vars(index).get(key)
    if rank is None:
        from .indexing.doc_ids import rank_ids

        rank = vars(index)[key] = rank_ids(index.doc_id_array(), integer)
    return rank


def index_settings(index: Index) -> dict:
    """The index's signal settings as a plain dict (the manifest may hold them typed); read-only.

    Kept on the index object: a segment never changes, and `asdict` copies the stopword list (a
    searcher over many segments asked for it several times per segment at every reopen).
    """
    cached = vars(index).get("_settings_dict")
    if cached is None:
        s = index.settings
        if isinstance(s, dict):
            cached = s
        else:
            from dataclasses import asdict

            cached = asdict(s)
        vars(index)["_settings_dict"] = cached
    return cached


def _ids_info(index: Index) -> dict:
    m = index.manifest
    return dict(m.get("ids", {})) if isinstance(m, dict) else dict(m.ids)


def will_need(array: np.ndarray, firsts: np.ndarray, ends: np.ndarray) -> None:
    """Ask the system to read elements firsts[i]..ends[i] - 1 of a memory-mapped array now, every range
    at once (`posix_fadvise` WILLNEED; nothing for an array in memory): the page faults that follow then
    find the pages read, where one fault at a time waited on the disk for each (a first delete of 1,000
    documents at 8.8M: 1.6-8 s of wall time for 0.2-0.3 s of CPU)."""
    import os

    name = getattr(array, "filename", None)
    if name is None or not hasattr(os, "posix_fadvise") or not len(firsts):
        return
    size, offset = array.itemsize, int(getattr(array, "offset", 0))
    # inside the array only: a corrupt offsets array is the readers' to report, never a hint's
    firsts, ends = np.clip(firsts, 0, array.shape[0]), np.clip(ends, 0, array.shape[0])
    try:
        fd = os.open(name, os.O_RDONLY)
    except OSError:
        return
    try:
        for a, z in zip(firsts.tolist(), ends.tolist(), strict=True):
            if z > a:
                os.posix_fadvise(fd, offset + a * size, (z - a) * size, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)
