"""Query texts to ranked documents and their ids in one GIL-free call (`answer`).

A query answered step by step made a kernel call per step (`query.prepare`, `probe.search_batch`'s
serial entry, `id_table`'s gather), each with Numba's dispatch (typing and unboxing every argument:
~0.15 µs an array, 22 of them for the workspace alone) and a Python wrapper between: ~60 µs of fixed
cost for one query (benchmarks/RESULTS.md). `answer` runs the same kernels in a row on the calling
thread: the preparation, each query through `probe._query` (method ssr) or `levels._query` (levels),
the flat results (`topk.compact_failed`) and the id rows from the fixed-width table, so a piece of a
threaded batch also holds the GIL only for its result objects. `answer_pieces` runs a threaded batch's
pieces in one call a thread, each thread taking the next piece from a shared counter (`fetch_add`) and
writing its rows into the batch's flat arrays: a helper thread never holds the GIL between pieces, and
the caller learns which pieces are written (to make their results while the helpers still run).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.experimental import structref

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


@structref.register
class HeldType(types.StructRef):
    """`Held`'s Numba type: its fields' types as given, never literal."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Held(structref.StructRefProxy):
    """`answer`'s arguments that stay the same call after call on one thread (prep, ix, work, rule, table, as
    `answer` takes them), held by Numba: a call passes one object where the ~45 arrays of their tuples cost
    Numba's dispatch ~0.15 µs each to unbox, every call (measured: 3.5-7 µs less a single query)."""

    def __new__(cls, prep, ix, work, rule, table):
        return structref.StructRefProxy.__new__(cls, prep, ix, work, rule, table)


structref.define_proxy(Held, HeldType, ["prep", "ix", "work", "rule", "table"])


@nb.njit(cache=True, nogil=True)
def answer_held(data, q_offsets, held, k, width, monotone, probing):
    """`answer` with its fixed arguments from a `Held`."""
    return answer(data, q_offsets, held.prep, held.ix, k, width, held.work, held.rule, monotone, probing,
                  held.table)


@nb.extending.intrinsic
def fetch_add(typingctx, counter, i, value):
    """counter[i] += value as one atomic step (sequentially consistent: the writes before it are seen by a
    thread that reads the new value with `fetch_add`); returns counter[i] before it (counter: a contiguous
    int64 array shared by threads; 0 <= i < its size)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64 and counter.layout == "C"):
        return None

    def codegen(context, builder, signature, args):
        ptr = context.make_array(signature.args[0])(context, builder, args[0]).data
        at = context.cast(builder, args[1], signature.args[1], types.intp)
        step = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("add", builder.gep(ptr, [at]), step, "seq_cst")

    return types.int64(counter, i, value), codegen


@nb.njit(cache=True, nogil=True)
def stop_taking(shared):
    """End the taking of `answer_pieces`' pieces (shared as its): each thread stops after its current piece."""
    fetch_add(shared, 0, shared.shape[0])


@nb.njit(cache=True, nogil=True)
def answer_pieces(data, q_offsets, spans, shared, first, once, prep, ix, k, width, work, rule, monotone, probing,
                  table, flat, ends, docs, scores, matches, ids):
    """A threaded batch's pieces on the calling thread, as `answer` answers each: into the batch's flat arrays
    (flat), else each piece keeping its own.

    spans int64[P, 2]: piece p is queries spans[p, 0]:spans[p, 1] (of data, q_offsets as `answer`'s);
    shared int64[P + 2], zeros at first, shared by the threads: [0] the next piece to take (each piece is
    taken once), [1 + p] 1 once piece p's rows are written, [P + 1] the first piece whose rows may not be
    (the caller's to set). first: a piece to answer before taking any (-1: none); once: return after one
    piece. Flat, query q of a piece starting at a owns rows ends[q - 1] (a * k for q = a) up to ends[q]
    (int64[Q]) of docs int64, scores float64, matches int32 and ids uint32[rows, w] (UCS-4 id rows; 0 rows
    when table has no columns), k rows a query at most. Other arguments as `answer`'s.
    Returns (status, piece, longest, written, kept): OK with piece -1 when no piece is left, OK with the piece
    answered when once, or `answer`'s failure on that piece (its rows are not written; a failure other than
    WIDER also ends the other threads' taking); flat, pieces shared[P + 1] up to written are written; not
    flat, kept: (piece, and `answer`'s offsets, docs, scores, matches, ids) of each piece this call answered.
    """
    n_pieces = spans.shape[0]
    kept = nb.typed.List()
    written = shared[n_pieces + 1]
    p = first if first >= 0 else fetch_add(shared, 0, 1)
    while p < n_pieces:
        a, b = spans[p, 0], spans[p, 1]
        # the piece's own bytes: `prepare` sizes (and zeroes) its signal buffers by the bytes it is given, and
        # the whole batch's (~1.6 MiB zeroed a piece at 6,980 queries) cost 2 threads ~6% more CPU than 1
        lo = q_offsets[a]
        offsets, d, s, m, got, status, longest = answer(data[lo : q_offsets[b]], q_offsets[a : b + 1] - lo, prep,
                                                        ix, k, width, work, rule, monotone, probing, table)
        if status != OK:
            if status != WIDER:
                stop_taking(shared)
            return status, p, longest, written, kept
        if flat:
            base = a * k
            n = d.shape[0]
            docs[base : base + n] = d
            scores[base : base + n] = s
            matches[base : base + n] = m
            if table.shape[1]:
                ids[base : base + n] = got
            for q in range(b - a):
                ends[a + q] = base + offsets[q + 1]
            fetch_add(shared, 1 + p, 1)  # published after its rows
        else:
            kept.append((p, offsets, d, s, m, got))
        if once:
            while flat and written < n_pieces and fetch_add(shared, 1 + written, 0):
                written += 1
            return OK, p, longest, written, kept
        p = fetch_add(shared, 0, 1)
    return OK, -1, 0, written, kept
