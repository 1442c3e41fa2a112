"""What the kernels read of a collection's parts, made once per `parts_search.PartsSearcher` and kept:
the parts' vocabularies for the one look-up pass (`term_tables`, `lookup`), their arrays as
`kernels.live.search_parts` takes them (`parts_arrays`), and the collection's ids and id ranks
(`id_tables`). Each is built whole before it is stored, so threads searching meanwhile never see half of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import IndexFormatError
from .hashing import hash_mask, hash_spans
from .search import lookup_terms
from .validate import VOCAB_BLOCK_SHIFT, checked_blocks


def lookup(searcher: Any, batch: Any) -> tuple[np.ndarray, np.ndarray]:
    """Term ids (int64[P, n], -1: unknown) and live df (int64[P, n]) of the batch's signals in every part:
    one `kernels.part_terms.lookup_parts` call per group of parts sharing a key rule and dtypes."""
    from .kernels.part_terms import lookup_parts

    n = batch.offsets.shape[0] - 1
    terms = np.empty((len(searcher.parts), n), dtype=np.int64)
    live = np.empty((len(searcher.parts), n), dtype=np.int64)
    hashes: dict[tuple[int, int], np.ndarray] = {}
    for members, key, tables in term_tables(searcher):
        if key not in hashes:
            hashes[key] = hash_spans(batch.data, batch.offsets, np.uint64(key[0]), hash_mask(key[1]))
        keys = searcher.parts[members[0]].index.keys_of(hashes[key])
        t, d = np.empty((len(members), n), np.int64), np.empty((len(members), n), np.int64)
        args = (keys, np.argsort(keys, kind="stable"), batch.data, batch.offsets, *tables, t, d)
        bad = lookup_parts(*args)
        if bad >= 0:  # the long way names the defect
            lookup_terms(searcher.parts[members[bad]].index, batch.data, batch.offsets, hashes[key])
            raise IndexFormatError(f"{searcher.parts[members[bad]].index.path}: a vocabulary or term offsets check "
                                   "failed (corrupt index; rebuild it)")
        terms[members], live[members] = t, d
    return terms, live


def term_tables(searcher: Any) -> list[tuple[list[int], tuple[int, int], tuple]]:
    """The parts' vocabularies as `lookup_parts` takes them (typed lists, made once), grouped by hash
    key rule and array types: [(part positions, (seed, bits), arguments)]."""
    if searcher._terms is None:
        import numba as nb

        from .kernels.live import _frozen

        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(searcher.parts):
            ix = p.index
            sig = (searcher._hash_keys[i], ix.vocab.dtype.str, ix.signal_offsets.dtype.str, ix.signal_codes.dtype.str,
                   ix.postings_indptr.dtype.str)
            groups.setdefault(sig, []).append(i)
        made = []
        for sig, members in groups.items():
            lists = [nb.typed.List() for _ in range(8)]
            for i in members:
                ix, p = searcher.parts[i].index, searcher.parts[i]
                arrays = [_frozen(a, a.dtype) for a in (ix.vocab, ix.signal_bytes, ix.signal_offsets,
                                                        ix.signal_codes, ix.postings_indptr, p.deleted_terms,
                                                        p.deleted_df)]
                arrays.insert(1, checked_blocks(ix))  # written: the blocks found sorted
                for lst, a in zip(lists, arrays, strict=True):
                    lst.append(a)
            ixs = [searcher.parts[i].index for i in members]
            made.append((members, sig[0], (
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
            [(int(searcher.bases[i]), searcher.parts[i].n_docs, searcher.parts[i].index.postings_indptr,
              searcher.parts[i].index.postings, searcher.ranks[i], searcher.live[i], orders[i],
              searcher.parts[i].index.forward_indptr, searcher.parts[i].index.forward, searcher.ascending[i])
             for i in searcher._order], method, rank if searcher.shares(method) else None)
    return searcher._prepared[method]


def id_tables(searcher: Any) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
    """The collection's ids as UTF-8 (offsets int64[N + 1] by collection number, bytes), each
    part's documents in id order, and every document's rank in the collection's id order
    (`kernels.live.collection_rank`); made once per searcher."""
    if searcher._ids is None:
        import pyarrow as pa

        from .kernels.live import collection_rank

        offsets, chunks, orders, total = [np.zeros(1, dtype=np.int64)], [], [], 0
        for i, p in enumerate(searcher.parts):
            p.index._load_ids()  # ids_of loads them anyway
            ids = p.index._id_arrow
            ids = ids.cast(pa.large_string()) if ids.type != pa.large_string() else ids
            off = np.frombuffer(ids.buffers()[1], dtype=np.int64)[ids.offset: ids.offset + len(ids) + 1]
            data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[off[0]: off[-1]] if len(ids) else \
                np.zeros(0, dtype=np.uint8)
            offsets.append(off[1:] - off[0] + total)
            chunks.append(data)
            total += data.shape[0]
            rank = np.asarray(searcher.ranks[i])
            order = np.empty(rank.shape[0], dtype=np.int64)
            order[rank] = np.arange(rank.shape[0], dtype=np.int64)
            orders.append(order)
        id_offsets = np.concatenate(offsets)
        id_bytes = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
        searcher._ids = (id_offsets, id_bytes, orders,
                     collection_rank(orders, searcher.bases[:-1], id_offsets, id_bytes, searcher.integer))
    return searcher._ids
