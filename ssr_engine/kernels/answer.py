"""Query texts to ranked documents and their ids in one GIL-free call (`answer`).

A query answered step by step made a kernel call per step (`query.prepare`, `probe.search_batch`'s
serial entry, `id_table`'s gather), each with Numba's dispatch (typing and unboxing every argument:
~0.15 µs an array, 22 of them for the workspace alone) and a Python wrapper between: ~60 µs of fixed
cost for one query (benchmarks/RESULTS.md). `answer` runs the same kernels in a row on the calling
thread: the preparation, each query through `probe._query` (method ssr) or `levels._query` (levels),
the flat results (`topk.compact_failed`) and the id rows from the fixed-width table, so a piece of a
threaded batch also holds the GIL only for its result objects.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import levels, probe
from .id_table import gather_rows
from .query import prepare
from .topk import compact_failed

# `answer`'s status: done; the vocabulary or offsets check failed (the caller names the defect the long
# way); corrupt postings (the workspace's zeroed rows are dirty); a query has more terms than the
# workspace's cursor rows (the caller widens it and calls again)
OK, BAD_TERMS, BAD_POSTINGS, WIDER = 0, 1, 2, 3


@nb.njit(cache=True, nogil=True)
def answer(data, q_offsets, prep, ix, k, width, work, rule, monotone, probing, table):
    """Top-k of each query (text in UTF-8), on workspace row 0 of the calling thread.

    data uint8, q_offsets int64[Q + 1]: the queries' bytes (`query_terms.utf8`); prep: `query.prepare`'s
    arguments after them; ix = (indptr, docs, doc_rank, n_docs, fwd_indptr, fwd) as `probe.search_batch`
    takes them; k >= 1 (at most n_docs); width: the block; work: a `probe.workspace` (one row at least);
    rule: `probe.RULE` as float64[8]; probing: method ssr (`probe`), else levels; table uint8[N, w]: the
    fixed-width id table (`format.Index`), or 0 columns (no id rows).
    Returns (offsets int64[Q + 1], docs int64, scores float64, matches int32, ids uint32[n, w]: each id's
    characters as UCS-4, status: OK or one of the failures above, the most terms of a query).
    """
    indptr, docs, doc_rank, n_docs, fwd_indptr, fwd = ix
    offsets, terms, weights, _, ok = prepare(data, q_offsets, *prep)
    nq = offsets.shape[0] - 1
    longest = 0
    for q in range(nq):
        longest = max(longest, offsets[q + 1] - offsets[q])
    status = OK if ok else BAD_TERMS
    if ok and longest > work[2].shape[1]:
        status = WIDER
    if status != OK:
        empty = np.zeros(1, dtype=np.int64)
        return (empty, empty[:0], np.zeros(0, np.float64), np.zeros(0, np.int32),
                np.zeros((0, table.shape[1]), np.uint32), status, longest)
    _, caps_off, res_s, res_m, res_d, sizes, _ = levels.batch_start(offsets, terms, indptr, k, 1)
    bar_s, bar_m, bar_k = levels._NO_BAR
    live = levels._EVERY_DOC
    stats = np.zeros((nq, probe.STATS), dtype=np.int64)
    lwork = work[:16]  # levels' own workspace: a probe workspace's first 16 arrays
    for q in range(nq):
        if probing:
            sizes[q] = probe._query(q, k, indptr, docs, doc_rank, n_docs, fwd_indptr, fwd, offsets, terms, weights,
                                    width, live, caps_off, res_d, res_s, res_m, work, 0, bar_s, bar_m, bar_k, rule,
                                    stats, monotone)
        else:
            sizes[q] = levels._query(q, k, indptr, docs, doc_rank, n_docs, offsets, terms, weights, width, live,
                                     caps_off, res_d, res_s, res_m, lwork, 0, bar_s, bar_m, bar_k, monotone)
        if sizes[q] < 0:  # corrupt postings: stop (the caller clears the workspace)
            break
    out_o, out_d, out_s, out_m, bad = compact_failed(caps_off, sizes, res_s, res_m, res_d)
    ids = np.empty((out_d.shape[0] if table.shape[1] else 0, table.shape[1]), dtype=np.uint32)
    gather_rows(table, out_d[: ids.shape[0]], ids)
    return out_o, out_d, out_s, out_m, ids, BAD_POSTINGS if bad else OK, longest
