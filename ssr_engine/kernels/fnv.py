"""The signal hash's kernel (`hashing` defines and documents the hash): FNV-1a 64 with fmix64."""

from __future__ import annotations

import numba as nb
import numpy as np

FNV_PRIME = np.uint64(0x100000001B3)
FNV_BASIS = np.uint64(0xCBF29CE484222325)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


@nb.njit(cache=True, nogil=True, inline="always")
def xorshift_multiply(h, s1, m1, s2, m2, s3):
    """h ^= h >> s1; h *= m1; h ^= h >> s2; h *= m2; h ^= h >> s3 (uint64, modulo 2**64): the shape of
    MurmurHash3's fmix64 and of splitmix64's output mix (`datagen.stream`); the constants make
    each, and each set is frozen by its own contract (an index's hashes, a generated collection)."""
    h ^= h >> s1
    h *= m1
    h ^= h >> s2
    h *= m2
    return h ^ (h >> s3)


@nb.njit(cache=True, nogil=True, inline="always")
def fmix64(h):
    """MurmurHash3's 64-bit finaliser."""
    return xorshift_multiply(np.uint64(h), _S33, _M1, _S33, _M2, _S33)


@nb.njit(cache=True, nogil=True, inline="always")
def fnv_bytes(h, buf, start, end):
    """FNV-1a 64's state h after the bytes buf[start:end] (a hash's middle: `fnv1a64`, `strings.term_hashes`)."""
    for i in range(start, end):
        h ^= np.uint64(buf[i])
        h *= FNV_PRIME
    return h


@nb.njit(cache=True, nogil=True)
def fnv1a64(buf, start, end, seed):
    """Hash of buf[start:end] with the given seed (see `hashing`'s docstring)."""
    return fmix64(fnv_bytes(FNV_BASIS ^ fmix64(np.uint64(seed)), buf, start, end))
