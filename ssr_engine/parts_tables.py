"""What the kernels read of a collection's parts, made once per `parts_search.PartsSearcher` and kept:
the parts' vocabularies for the queries' one look-up pass (`term_tables`; `prepare` runs it, or `look_up`
for a whole threaded batch and `arranged` for its pieces), their
arrays as `kernels.live.search_parts` takes them (`parts_arrays`), and the collection's ids and id ranks
(`id_tables`). Each is built whole before it is stored, so threads searching meanwhile never see half of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import hashing  # vocab_key_shift read through the module: one key rule for build and query (tests narrow it)
from .errors import IndexFormatError
from .hashing import hash_mask, hash_spans
from .query_terms import utf8
from .search import lookup_terms
from .validate import VOCAB_BLOCK_SHIFT, checked_blocks


def prepare(searcher: Any, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray, tuple]:
    """The queries' signals (bytes, offsets) and `kernels.part_terms.arrange`'s tuple for them over the
    searcher's parts: one GIL-free `prepare_parts` call when every part shares a key rule and the df
    are the parts' own; else its steps one by one, df from `searcher.stats` when given (shards)."""
    from .kernels.part_terms import arrange, group_terms, prepare_parts, signals

    data, q_offsets = utf8(queries)
    stop, cap = _stopwords(searcher)
    groups: Any = term_tables(searcher)  # (rules and tables as the kernels take them)
    if len(groups) == 1 and searcher.stats is None:
        members, rule, tables = groups[0]
        args = (data, q_offsets, stop, cap, *rule, np.int64(searcher.n_live), *tables)
        bad, sdata, soffsets, arranged = prepare_parts(*args)
        _check(searcher, members, bad, sdata, soffsets, rule)
        return sdata, soffsets, arranged
    sig_of, sdata, soffsets = signals(data, q_offsets, stop, cap)
    n = soffsets.shape[0] - 1
    terms = np.empty((len(searcher.parts), n), dtype=np.int64)
    live = np.empty((len(searcher.parts), n), dtype=np.int64)
    for members, rule, tables in groups:
        t, d = np.empty((len(members), n), np.int64), np.empty((len(members), n), np.int64)
        args = (sdata, soffsets, *rule, *tables, t, d)
        _check(searcher, members, group_terms(*args), sdata, soffsets, rule)
        terms[members], live[members] = t, d
    if searcher.stats is None:
        df = live.sum(axis=0)
    else:  # every part holding a signal has the same global df for it
        df = np.zeros(n, dtype=np.int64)
        for i in range(len(searcher.parts)):
            known = np.flatnonzero(terms[i] >= 0)
            df[known] = searcher.stats.df(i, terms[i, known])
    return sdata, soffsets, arrange(sig_of, terms, live, df, np.int64(searcher.n_live))


@dataclass
class Looked:
    """A whole batch's signals looked up in every part at once (`look_up`); `arranged` makes a piece's terms."""

    sig_of: np.ndarray  # int64[Q + 1]: query q's signals are sig_of[q]..sig_of[q + 1] - 1
    sdata: np.ndarray  # uint8: the signals' bytes
    soffsets: np.ndarray  # int64[n + 1]
    terms: np.ndarray  # int64[P, n]: each signal's term in each part (-1: none)
    live: np.ndarray  # int64[P, n]: its live documents there
    df: np.ndarray  # int64[n]: over the collection


def look_up(searcher: Any, queries: Sequence[str], spans: int, run: Any) -> Looked | None:
    """A batch's signals looked up in every part in `spans` contiguous ranges of their keys, on threads
    (`run(fn, items)`, as `pieces.Helpers.map` with its thread count): each range walks every vocabulary
    as densely as the whole batch does, and a signal shared by pieces is looked up once (pieces looking
    up their own: 0.29 of the compacted index's q/s against 0.35 so, 10 segments, 2 threads, RESULTS).
    None where `prepare`'s steps one by one apply (parts of several key rules, or df from `searcher.stats`)."""
    from .kernels.part_terms import keyed, lookup_parts, signals

    groups: Any = term_tables(searcher)
    if len(groups) != 1 or searcher.stats is not None:
        return None
    members, rule, tables = groups[0]
    data, q_offsets = utf8(queries)
    stop, cap = _stopwords(searcher)
    sig_of, sdata, soffsets = signals(data, q_offsets, stop, cap)
    keys, order = keyed(sdata, soffsets, rule[0], rule[1], rule[2], tables[0])
    n = keys.shape[0]
    terms = np.zeros((len(members), n), dtype=np.int64)
    live = np.zeros((len(members), n), dtype=np.int64)
    cuts = [n * i // spans for i in range(spans + 1)]

    def one(ab: tuple[int, int]) -> int:
        args = (keys, order[ab[0] : ab[1]], sdata, soffsets, *tables, terms, live)
        return lookup_parts(*args)

    bad = run(one, list(zip(cuts[:-1], cuts[1:], strict=True)))
    for b in bad:
        _check(searcher, members, b, sdata, soffsets, rule)
    return Looked(sig_of, sdata, soffsets, terms, live, live.sum(axis=0))


def arranged(searcher: Any, looked: Looked, a: int, b: int) -> tuple[np.ndarray, np.ndarray, tuple]:
    """`prepare`'s result for queries a..b - 1 of a batch `look_up` looked up (the signal bytes and offsets:
    the whole batch's; the tuple's signal numbers: the piece's own, from 0)."""
    from .kernels.part_terms import arrange

    lo, hi = int(looked.sig_of[a]), int(looked.sig_of[b])
    return looked.sdata, looked.soffsets, arrange(
        looked.sig_of[a : b + 1] - lo, np.ascontiguousarray(looked.terms[:, lo:hi]),
        np.ascontiguousarray(looked.live[:, lo:hi]), looked.df[lo:hi], np.int64(searcher.n_live))


def _stopwords(searcher: Any) -> tuple[tuple, np.int64]:
    """The searcher's stopword tables and signal cap, as `kernels.part_terms.signals` takes them."""
    ex = searcher._extractor
    return (ex.key1, ex.key2, ex.long_data, ex.long_offsets), np.int64(ex.cap)


def _check(searcher: Any, members: list[int], bad: int, sdata: np.ndarray, soffsets: np.ndarray, rule: tuple) -> None:
    """A failed vocabulary or offsets check of part members[bad]: the long way names the defect."""
    if bad >= 0:
        ix = searcher.parts[members[bad]].index
        lookup_terms(ix, sdata, soffsets, hash_spans(sdata, soffsets, rule[0], rule[1]))
        raise IndexFormatError(f"{ix.path}: a vocabulary or term offsets check failed (corrupt index; rebuild it)")


def term_tables(searcher: Any) -> list[tuple[list[int], tuple, tuple]]:
    """The parts' vocabularies as `lookup_parts` takes them (typed lists, made once), grouped by hash
    key rule and array types: [(part positions, (seed, mask, key shift) as `group_terms` takes them,
    arguments)]."""
    if searcher._terms is None:
        from .kernels.live import _frozen, frozen_lists, typed_list

        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(searcher.parts):
            ix = p.index
            sig = (searcher._hash_keys[i], ix.vocab.dtype.str, ix.signal_offsets.dtype.str, ix.signal_codes.dtype.str,
                   ix.postings_indptr.dtype.str, ix.postings_long is None)
            groups.setdefault(sig, []).append(i)
        made = []
        for sig, members in groups.items():
            lists: list = [[] for _ in range(8)]
            for i in members:
                ix, p = searcher.parts[i].index, searcher.parts[i]
                arrays = [_frozen(a, a.dtype) for a in (ix.vocab, ix.signal_bytes, ix.signal_offsets,
                                                        ix.signal_codes, p.deleted_terms, p.deleted_df)]
                arrays.insert(4, frozen_lists(ix.lists, ix.postings_indptr.dtype))
                arrays.insert(1, checked_blocks(ix))  # written: the blocks found sorted
                for lst, a in zip(lists, arrays, strict=True):
                    lst.append(a)
            lists = [typed_list(lst) for lst in lists]
            ixs = [searcher.parts[i].index for i in members]
            (seed, bits), vocab = sig[0], ixs[0].vocab
            shift = hashing.vocab_key_shift(bits) if vocab.dtype == np.uint32 else 0
            rule = (np.uint64(seed), hash_mask(bits), np.uint64(shift))
            made.append((members, rule, (
                lists[0], lists[1], np.int64(VOCAB_BLOCK_SHIFT), ixs[0].vocab.dtype == np.uint64, lists[2],
                lists[3], lists[4], np.array([ix.string_bits for ix in ixs], dtype=np.int64), lists[5],
                np.array([ix.postings_length for ix in ixs], dtype=np.int64),
                np.array([ix.n_docs for ix in ixs], dtype=np.int64), lists[6], lists[7])))
        searcher._terms = made  # whole or not at all: a thread may read it meanwhile
    return searcher._terms


def parts_arrays(searcher: Any, method: str):
    """The parts' arrays as `kernels.live.search_parts` takes them (`prepare_parts`), made once per method."""
    if method not in searcher._prepared:
        from .kernels.live import prepare_parts

        id_offsets, id_bytes, orders, rank = id_tables(searcher)
        searcher._prepared[method] = prepare_parts(
            [(int(searcher.bases[i]), searcher.parts[i].n_docs, searcher.parts[i].index.lists,
              searcher.parts[i].index.postings, searcher.ranks[i], searcher.live[i], orders[i],
              searcher.parts[i].index.forward_indptr, searcher.parts[i].index.forward, searcher.ascending[i])
             for i in searcher._order], method, rank if searcher.shares(method) else None)
    return searcher._prepared[method]


def id_tables(searcher: Any) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
    """The collection's ids as UTF-8 (offsets int64[N + 1] by collection number, bytes), each
    part's documents in id order, and every document's rank in the collection's id order
    (`kernels.live.collection_rank`); made once per searcher, from each part's pieces (`part_ids`,
    `part_order`: kept on its index, so a new commit of a live index reads only its new segments' ids)."""
    if searcher._ids is None:
        from .kernels.live import collection_rank

        offsets, chunks, orders, total = [np.zeros(1, dtype=np.int64)], [], [], 0
        for i, p in enumerate(searcher.parts):
            off, data = part_ids(p.index)
            offsets.append(np.add(off[1:], total, dtype=np.int64))
            chunks.append(data)
            total += data.shape[0]
            orders.append(part_order(p.index, searcher.ranks[i], searcher.integer))
        id_offsets = np.concatenate(offsets)
        id_bytes = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
        searcher._ids = (id_offsets, id_bytes, orders,
                         collection_rank(orders, searcher.bases[:-1], id_offsets, id_bytes, searcher.integer))
    return searcher._ids


def part_ids(index: Any) -> tuple[np.ndarray, np.ndarray]:
    """One index's ids as UTF-8: offsets (int32 or int64 [n + 1], from 0) and bytes (uint8), views of its
    Arrow id array (nothing copied); kept on the index (an index never changes; a live index's segments
    outlive its commits)."""
    cached = vars(index).get("_id_utf8")
    if cached is None:
        import pyarrow as pa

        index._load_ids()  # ids_of loads them anyway
        ids = index._id_arrow
        wide = ids.type == pa.large_string()
        if not wide and ids.type != pa.string():
            ids, wide = ids.cast(pa.large_string()), True
        off = np.frombuffer(ids.buffers()[1], dtype=np.int64 if wide else np.int32)
        off = off[ids.offset: ids.offset + len(ids) + 1]
        data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[off[0]: off[-1]] if len(ids) else \
            np.zeros(0, dtype=np.uint8)
        cached = vars(index)["_id_utf8"] = (off - off[0] if off[0] else off, data)
    return cached


def part_order(index: Any, rank: np.ndarray, integer: bool) -> np.ndarray:
    """The index's documents in the collection's id order (int64[n], the inverse of `rank`, its
    `parts.part_rank` under the order `integer`); kept on the index per order."""
    key = "_id_order_int" if integer else "_id_order_str"
    order = vars(index).get(key)
    if order is None:
        rank = np.asarray(rank)
        order = np.empty(rank.shape[0], dtype=np.int64)
        order[rank] = np.arange(rank.shape[0], dtype=np.int64)
        vars(index)[key] = order
    return order


def id_rows(searcher: Any) -> np.ndarray | None:
    """The collection's ids as one fixed-width table (uint8[N, w] by collection number, `ids.fixed_width_ids`'
    rule), or None (long or non-ASCII ids): a batch's ids in one gather, as one index's; made once."""
    if searcher._id_rows is None:
        from .ids import FIXED_ID_MAX
        from .kernels.id_table import fixed_table

        id_offsets, id_bytes, _, _ = id_tables(searcher)
        width = int(np.diff(id_offsets).max()) if id_offsets.shape[0] > 1 else 0
        ascii_ = id_bytes.shape[0] == 0 or int(id_bytes.max()) < 0x80
        searcher._id_rows = fixed_table(id_offsets, id_bytes, width) if 0 < width <= FIXED_ID_MAX and ascii_ \
            else False
    return None if searcher._id_rows is False else searcher._id_rows
