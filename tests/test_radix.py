"""The build's radix sorts (kernels.indexing): stable, payloads carried, on small and large arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**63, 2**64 - 1]), max_size=300))
def test_radix_argsort_is_a_stable_argsort(keys):
    from ssr_engine.kernels.indexing import radix_argsort_u64

    arr = np.array(keys, dtype=np.uint64)
    assert radix_argsort_u64(arr).tolist() == np.argsort(arr, kind="stable").tolist()


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**63, 2**64 - 1]), max_size=300))
def test_radix_sort_carries_payloads_stably(keys):
    from ssr_engine.kernels.indexing import radix_sort_u64

    arr = np.array(keys, dtype=np.uint64)
    payloads = np.arange(arr.shape[0], dtype=np.uint64)[::-1].copy()
    sorted_keys, sorted_payloads = radix_sort_u64(arr, payloads)
    order = np.argsort(arr, kind="stable")
    assert sorted_keys.tolist() == arr[order].tolist()
    assert sorted_payloads.tolist() == payloads[order].tolist()


def test_radix_sort_on_large_arrays_of_random_repeated_and_narrow_keys():
    from ssr_engine.kernels.indexing import radix_sort_u64

    rng = np.random.default_rng(7)
    n = 200_000
    wide = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
    wide[: n // 4] = wide[n // 2 : n // 2 + n // 4]  # repeated keys, as a chunk's frequent signals
    for keys in (wide, rng.integers(0, 256, n, dtype=np.uint64), wide >> np.uint64(40)):  # narrow: weak hashes
        payloads = rng.integers(0, 2**63, n, dtype=np.uint64)
        order = np.argsort(keys, kind="stable")
        sorted_keys, sorted_payloads = radix_sort_u64(keys, payloads)
        assert np.array_equal(sorted_keys, keys[order]) and np.array_equal(sorted_payloads, payloads[order])
