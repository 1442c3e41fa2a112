"""The signal hash: 64-bit, platform-independent, seeded, defined over UTF-8 bytes.

    basis = 0xcbf29ce484222325 XOR fmix64(seed)
    h = FNV-1a 64 over the bytes (h ^= byte; h *= 0x100000001b3, modulo 2**64)
    hash = fmix64(h)   (MurmurHash3's 64-bit finaliser)

The finaliser spreads FNV's low-entropy high bits so that sorted hashes are well spread.
`bits` < 64 keeps only the low bits: a deliberately weak hash, for testing collisions.
"""

from __future__ import annotations

import numba as nb
import numpy as np

HASH_NAME = "fnv1a64-fmix64"
FNV_PRIME = np.uint64(0x100000001B3)
FNV_BASIS = np.uint64(0xCBF29CE484222325)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


@nb.njit(cache=True, nogil=True, inline="always")
def xorshift_multiply(h, s1, m1, s2, m2, s3):
    """h ^= h >> s1; h *= m1; h ^= h >> s2; h *= m2; h ^= h >> s3 (uint64, modulo 2**64): the shape of
    MurmurHash3's fmix64 and of splitmix64's output mix (`datagen.collection`); the constants make
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


@nb.njit(cache=True, nogil=True)
def fnv1a64(buf, start, end, seed):
    """Hash of buf[start:end] with the given seed (see the module docstring)."""
    h = FNV_BASIS ^ fmix64(np.uint64(seed))
    for i in range(start, end):
        h ^= np.uint64(buf[i])
        h *= FNV_PRIME
    return fmix64(h)


@nb.njit(cache=True, nogil=True)
def hash_spans(data, offsets, seed, mask):
    """Hashes of the byte spans data[offsets[i]:offsets[i+1]], ANDed with mask."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = fnv1a64(data, offsets[i], offsets[i + 1], seed) & mask
    return out


@nb.njit(cache=True, nogil=True)
def hash_ranges(data, starts, ends, seed, mask):
    """Hashes of the byte spans data[starts[i]:ends[i]], ANDed with mask."""
    out = np.empty(starts.shape[0], dtype=np.uint64)
    for i in range(starts.shape[0]):
        out[i] = fnv1a64(data, starts[i], ends[i], seed) & mask
    return out


def vocab_keys(hashes: np.ndarray, bits: int) -> np.ndarray:
    """The vocabulary keys of format 4 (uint32): the top 32 of a hash's `bits` bits (all of them when
    bits <= 32). Sorted hashes give sorted keys; equal keys are told apart by their strings."""
    return (np.asarray(hashes, dtype=np.uint64) >> np.uint64(max(bits - 32, 0))).astype(np.uint32)


def hash_mask(bits: int) -> np.uint64:
    if not 1 <= bits <= 64:
        raise ValueError(f"hash bits must be in 1..64, got {bits}")
    return np.uint64((1 << bits) - 1)


def signal_hash(signal: str, seed: int = 0, bits: int = 64) -> int:
    """The hash of one signal string (a Python int in [0, 2**bits))."""
    raw = np.frombuffer(signal.encode("utf-8"), dtype=np.uint8)
    return int(fnv1a64(raw, 0, raw.shape[0], np.uint64(seed)) & hash_mask(bits))


def signal_hash_reference(signal: str, seed: int = 0, bits: int = 64) -> int:
    """Pure-Python form of the same hash: the executable documentation of the function."""
    m64 = (1 << 64) - 1

    def fmix(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & m64
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & m64
        return h ^ (h >> 33)

    h = 0xCBF29CE484222325 ^ fmix(seed & m64)
    for byte in signal.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & m64
    return fmix(h) & ((1 << bits) - 1)
