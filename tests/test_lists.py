"""Format 7's postings directory (`kernels.lists`): no offset for a term of df 1, read back exactly."""

from __future__ import annotations

import numba as nb
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine.arrays import ListsWriter
from ssr_engine.kernels.lists import as_tuple, decode, encode, length, popcount, span, spans


@nb.njit(cache=True)
def _spans_in_kernel(lists, n):
    """span and length as a kernel reads them (the overload), for terms 0..n-1."""
    out = np.empty((n, 3), dtype=np.int64)
    for t in range(n):
        a, b = span(lists, t)
        out[t, 0], out[t, 1], out[t, 2] = a, b, length(lists, t)
    return out


def _directory(df: np.ndarray, dtype=np.int64):
    long, rank, ends = encode(df, 0, 0)
    return long, np.append(rank, ends.shape[0]).astype(np.uint32), np.concatenate([[0], ends]).astype(dtype)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400), ones=st.floats(0, 1))
def test_every_term_reads_back_its_postings_range(seed, n, ones):
    rng = np.random.default_rng(seed)
    df = np.where(rng.random(n) < ones, 1, rng.integers(0, 9, n)).astype(np.int64)  # df 0 too (a long term)
    indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    lists = _directory(df, np.int32)
    assert lists[2].shape[0] == int((df != 1).sum()) + 1 and lists[0].shape[0] == (n + 63) // 64
    assert decode(lists, n).tolist() == indptr.tolist() == decode(as_tuple(indptr), n).tolist()
    want = [(int(indptr[t]), int(indptr[t + 1])) for t in range(n)]
    assert [span(lists, t) for t in range(n)] == want  # the Python reader
    for d in (lists, as_tuple(indptr), indptr):  # the kernels' reader, each type
        got = _spans_in_kernel(d, n)
        assert [tuple(r) for r in got[:, :2].tolist()] == want and got[:, 2].tolist() == df.tolist()
    a, b = spans(lists, np.arange(n, dtype=np.int64))
    assert (b - a).tolist() == df.tolist()


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300), cuts=st.lists(st.integers(0, 300), max_size=6))
def test_the_writer_joins_pieces_of_any_length(tmp_path_factory, seed, n, cuts):
    rng = np.random.default_rng(seed)
    df = np.where(rng.random(n) < 0.7, 1, rng.integers(2, 50, n)).astype(np.int64)
    folder = tmp_path_factory.mktemp("lists")
    w = ListsWriter(folder, int(df.sum()))
    for piece in np.split(df, sorted(c for c in cuts if c <= n)):
        w.append(piece)
    w.close()
    got = tuple(np.load(folder / f"{name}.npy") for name in ("postings_long", "postings_rank", "postings_indptr"))
    for x, y in zip(got, _directory(df), strict=True):
        assert x.tolist() == y.tolist()


def test_popcount_counts_bits():
    for x in (0, 1, 2**63, 2**64 - 1, 0x5555555555555555, 12345678901234567):
        assert popcount(np.uint64(x)) == bin(x).count("1")
