"""The structural-check kernels (`kernels.validate`) against NumPy on arbitrary arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine.kernels.validate import descent, permutation, search_checked


def numpy_descent(a: np.ndarray, strict: bool) -> int:
    d = np.diff(a.astype(np.float64))  # no wrap-around for uint64
    bad = np.flatnonzero(d <= 0 if strict else d < 0)
    return int(bad[0]) if bad.shape[0] else -1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40), st.booleans())
def test_descent_is_numpys_first_descent(values, strict):
    for dtype in (np.int64, np.uint64):
        a = np.array(values, dtype=dtype)
        assert descent(a, strict) == numpy_descent(a, strict)


@settings(max_examples=100, deadline=None)
@given(st.permutations(list(range(12))), st.integers(0, 11), st.integers(0, 12))
def test_permutation_finds_the_first_repeat_or_out_of_range(perm, i, value):
    a = np.array(perm, dtype=np.uint32)
    assert permutation(a) == -1
    a[i] = value
    seen, want = set(), -1
    for j, v in enumerate(a.tolist()):
        if v >= len(a) or v in seen:
            want = j
            break
        seen.add(v)
    assert permutation(a) == want


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(0, 2**64 - 1), max_size=300), st.lists(st.integers(0, 2**64 - 1), max_size=30),
       st.sampled_from([2, 3, 12]))
def test_search_checked_is_searchsorted_on_a_sorted_vocabulary(values, extra, shift):
    vocab = np.array(sorted(values), dtype=np.uint64)
    hashes = np.array(extra + [int(v) for v in vocab[::7]], dtype=np.uint64)
    checked = np.zeros((vocab.shape[0] >> shift) + 1, dtype=np.uint8)
    pos, bad = search_checked(vocab, hashes, checked, shift)
    assert bad == -1
    assert pos.tolist() == np.searchsorted(vocab, hashes).tolist()
    again, _ = search_checked(vocab, hashes, checked, shift)  # from the remembered blocks
    assert again.tolist() == pos.tolist()


@settings(max_examples=200, deadline=None)
@given(st.integers(8, 400), st.data())
def test_one_wrong_entry_is_found_or_cannot_steer_a_search(n, data):
    """Any single edit of a sorted vocabulary: every search either reports a defect or finds
    what it finds in the original (the edited entry's own term aside)."""
    vocab = np.arange(1, 2 * n + 1, 2, dtype=np.uint64) * np.uint64(1000)
    i = data.draw(st.integers(0, n - 1))
    edited = vocab.copy()
    edited[i] = np.uint64(data.draw(st.integers(0, 2 * n * 1000 + 5000)))
    hashes = np.array(data.draw(st.lists(st.sampled_from(vocab.tolist()), min_size=1, max_size=20)), dtype=np.uint64)
    shift = data.draw(st.sampled_from([2, 3, 5]))
    checked = np.zeros((n >> shift) + 1, dtype=np.uint8)
    pos, bad = search_checked(edited, hashes, checked, shift)
    if bad >= 0:
        assert edited[bad + 1] <= edited[bad]  # a true defect
        return
    for h, p in zip(hashes.tolist(), pos.tolist(), strict=True):
        want = int(np.searchsorted(vocab, np.uint64(h)))
        if want != i:
            assert p < n and int(edited[p]) == h, (h, p, want)


def test_a_defect_in_a_block_the_search_reads_is_reported():
    vocab = np.arange(0, 64, dtype=np.uint64) * np.uint64(10)
    vocab[44] = vocab[43]  # inside block 5 (entries 40..47, shift 3)
    checked = np.zeros(9, dtype=np.uint8)
    pos, bad = search_checked(vocab, np.array([10], dtype=np.uint64), checked, 3)
    assert bad == -1 and pos[0] == 1  # the search for 10 never reads block 5
    _, bad = search_checked(vocab, np.array([435], dtype=np.uint64), checked, 3)
    assert bad == 43


@settings(max_examples=200, deadline=None)
@given(st.integers(8, 400), st.data())
def test_lockstep_search_reads_what_search_checked_reads(n, data):
    """`terms._search_all` (every key's search advanced in lockstep) against `search_checked` on a sorted
    vocabulary, or one with a single edit: the same positions, and a defect reported by both or neither."""
    from ssr_engine.kernels.terms import _search_all

    vocab = np.arange(1, 2 * n + 1, 2, dtype=np.uint64) * np.uint64(1000)
    if data.draw(st.booleans()):
        vocab[data.draw(st.integers(0, n - 1))] = np.uint64(data.draw(st.integers(0, 2 * n * 1000 + 5000)))
    keys = np.array(data.draw(st.lists(st.integers(0, 2 * n * 1000 + 5000), min_size=0, max_size=20)),
                    dtype=np.uint64)
    shift = data.draw(st.sampled_from([2, 3, 5]))
    pos, bad = search_checked(vocab, keys, np.zeros((n >> shift) + 1, dtype=np.uint8), shift)
    got, got_bad = _search_all(vocab, keys, np.zeros((n >> shift) + 1, dtype=np.uint8), shift, True)
    assert (bad >= 0) == (got_bad >= 0)
    if got_bad >= 0:
        assert vocab[got_bad + 1] <= vocab[got_bad]  # a true defect
    else:
        assert got.tolist() == pos.tolist()
