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

# the kernels live in kernels/fnv.py (the search kernels hash query signals too); re-exported here
from .kernels.fnv import fmix64 as fmix64
from .kernels.fnv import fnv1a64 as fnv1a64
from .kernels.fnv import xorshift_multiply as xorshift_multiply

HASH_NAME = "fnv1a64-fmix64"


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


def vocab_key_shift(bits: int) -> int:
    """How far format 4's vocabulary keys shift a hash of `bits` bits right (`vocab_keys`; the search
    kernels take it as it is)."""
    return max(bits - 32, 0)


def vocab_keys(hashes: np.ndarray, bits: int) -> np.ndarray:
    """The vocabulary keys of format 4 (uint32): the top 32 of a hash's `bits` bits (all of them when
    bits <= 32). Sorted hashes give sorted keys; equal keys are told apart by their strings."""
    return (np.asarray(hashes, dtype=np.uint64) >> np.uint64(vocab_key_shift(bits))).astype(np.uint32)


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
