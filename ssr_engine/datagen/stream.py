"""The text stream: one block of passages from one 63-bit seed, in Numba (platform independent).

Every random draw comes from the block's own splitmix64 stream, so a block's text depends only on the
seed, the block number and the vocabulary tables (`model.Vocabulary.tables`), whatever the number of
worker processes. `generate_block` is one long function for the reason `kernels/text.py` gives: a call
passing arrays costs ~100 ns, which dominated the per-word work when it was split. Parameters are read
by position from `model.Shape.as_array()` (checked at the end of this module).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..hashing import xorshift_multiply
from .model import P

# splitmix64's increment and output-mix constants (its published ones): kernels/fnv.py's block of the same
# shape holds MurmurHash3 fmix64's; each set is frozen by its own contract (a collection, an index's hashes)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_U30 = np.uint64(30)
_U27 = np.uint64(27)
_U31 = np.uint64(31)
_U11 = np.uint64(11)


@nb.njit(cache=True, nogil=True, inline="always")
def _mix(z):
    """splitmix64's output mix (Stafford's Mix13): the shape of `hashing.fmix64` with other shifts and
    multipliers; these are part of GENERATOR_ID's output, as fmix64's are of an index's hashes."""
    return xorshift_multiply(z, _U30, _MIX1, _U27, _MIX2, _U31)


@nb.njit(cache=True, nogil=True, inline="always")
def _rand(state):
    """splitmix64: next 64-bit value of the stream held in state[0]."""
    state[0] += _GOLDEN
    return _mix(state[0])


@nb.njit(cache=True, nogil=True, inline="always")
def _to_unit(z):
    return np.float64(z >> _U11) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True, nogil=True, inline="always")
def _unif(state):
    return _to_unit(_rand(state))


@nb.njit(cache=True, nogil=True, inline="always")
def _hash3(a, b, c):
    """A uniform in [0, 1) that is a fixed function of three integers (the topic structure)."""
    z = _mix(np.uint64(a) * _GOLDEN + np.uint64(0x1234567))
    z = _mix(z ^ (np.uint64(b) + _MIX1))
    z = _mix(z ^ (np.uint64(c) + _MIX2))
    return _to_unit(z)


@nb.njit(cache=True, nogil=True, inline="always")
def _pareto(u, a, q, vmax):
    """Rank in [0, vmax) with P(r) ~ (r + q)^-a (a continuous Pareto, floored; tail folded)."""
    x = q * ((1.0 - u) ** (-1.0 / (a - 1.0)) - 1.0)
    if x >= vmax:
        x = x % vmax
    return np.int64(x)


@nb.njit(cache=True, nogil=True)
def _phrase_len(t, p):
    u = _hash3(t, p, 999_983)
    if u < 0.22:
        return 1
    if u < 0.60:
        return 2
    if u < 0.85:
        return 3
    return 4


@nb.njit(cache=True, nogil=True)
def _phrase_word(t, p, j, prm):
    k = _pareto(_hash3(t, p, j + 1), 1.35, 8.0, prm[8])  # topic_vocab
    return _pareto(_hash3(t, k, 7_777_777), prm[9], prm[10], prm[11])  # topic word -> global rank


@nb.njit(cache=True, nogil=True)
def _write(buf, pos, data, start, end):
    for i in range(start, end):
        buf[pos] = data[i]
        pos += 1
    return pos


@nb.njit(cache=True, nogil=True)
def _write_int(buf, pos, v, commas):
    digits = np.empty(24, dtype=np.uint8)
    n = 0
    while True:
        digits[n] = 48 + v % 10
        n += 1
        v //= 10
        if v == 0:
            break
    for i in range(n - 1, -1, -1):
        buf[pos] = digits[i]
        pos += 1
        if commas and i > 0 and i % 3 == 0:
            buf[pos] = 44
            pos += 1
    return pos


@nb.njit(cache=True, nogil=True)
def _write_synthetic(buf, pos, r, sdata, soff):
    """A pronounceable word spelled from r in base-len(syllables) digits (at least two)."""
    ns = soff.shape[0] - 1
    # least significant syllable first, so that neighbouring ranks differ in their first letters
    first = True
    while r > 0 or first:
        d = r % ns
        pos = _write(buf, pos, sdata, soff[d], soff[d + 1])
        if r < ns and first:  # at least two syllables
            d = (d * 7 + 3) % ns
            pos = _write(buf, pos, sdata, soff[d], soff[d + 1])
        r //= ns
        first = False
    return pos


@nb.njit(cache=True, nogil=True)
def _render(buf, pos, kind, val, cap, fdata, foff, wdata, woff, ndata, noff, sdata, soff):
    start = pos
    if kind == 0:
        pos = _write(buf, pos, fdata, foff[val], foff[val + 1])
    elif kind == 1:
        nw = woff.shape[0] - 1
        if val < nw:
            pos = _write(buf, pos, wdata, woff[val], woff[val + 1])
        else:
            pos = _write_synthetic(buf, pos, val - nw, sdata, soff)
    elif kind == 3:
        nn = noff.shape[0] - 1
        if val < nn:
            pos = _write(buf, pos, ndata, noff[val], noff[val + 1])
        else:
            pos = _write_synthetic(buf, pos, val - nn + 7_000_000, sdata, soff)
    else:
        fmt = val >> 40
        v = val & ((1 << 40) - 1)
        if fmt == 2:
            pos = _write_int(buf, pos, v // 10, False)
            buf[pos] = 46
            pos = _write_int(buf, pos + 1, v % 10, False)
        else:
            pos = _write_int(buf, pos, v, fmt == 1)
            if fmt == 3:
                buf[pos] = 37
                pos += 1
    if cap and 97 <= buf[start] <= 122:
        buf[start] -= 32
    return pos


@nb.njit(cache=True, nogil=True)
def _number(state):
    u = _unif(state)
    if u < 0.35:  # a year, mostly recent
        return np.int64(2024 - _pareto(_unif(state), 1.8, 25.0, 300))
    if u < 0.65:
        return np.int64(2 + _pareto(_unif(state), 1.6, 8.0, 1000))
    if u < 0.82:
        return (np.int64(1) << 40) | np.int64(100 + _pareto(_unif(state), 1.3, 400.0, 50_000_000))
    if u < 0.93:
        return (np.int64(2) << 40) | np.int64(10 + _pareto(_unif(state), 1.5, 30.0, 10_000))
    return (np.int64(3) << 40) | np.int64(1 + np.int64(_unif(state) * 99))


@nb.njit(cache=True, nogil=True)
def generate_block(pid0, n, seed, prm, fdata, foff, fcum, wdata, woff, ndata, noff, sdata, soff):
    """Lines `pid<TAB>passage<LF>` for pids pid0..pid0+n-1.

    Returns (bytes, line offsets, global word ranks used, words per passage).
    """
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(seed)
    cap_bytes = n * 512 + 65536
    buf = np.empty(cap_bytes, dtype=np.uint8)
    line_off = np.zeros(n + 1, dtype=np.int64)
    words = np.zeros(n, dtype=np.int64)
    ranks = np.empty(n * 48 + 1024, dtype=np.int64)
    nranks = 0
    lmax = np.int64(prm[3])
    kinds = np.empty(lmax + 8, dtype=np.int64)
    vals = np.empty(lmax + 8, dtype=np.int64)
    caps = np.empty(lmax + 8, dtype=np.bool_)
    seps = np.empty(lmax + 8, dtype=np.uint8)  # 0 space, 1 ", ", 2 ". "
    mu = np.log(prm[0])
    ntopics = prm[5]
    nphr = prm[12]
    pos = 0
    for i in range(n):
        # room for the longest possible line (360 words, long synthetic words)
        if pos + lmax * 48 + 64 > buf.shape[0]:
            bigger = np.empty(buf.shape[0] * 2, dtype=np.uint8)
            bigger[:pos] = buf[:pos]
            buf = bigger
        if nranks + lmax + 8 > ranks.shape[0]:
            rbig = np.empty(ranks.shape[0] * 2, dtype=np.int64)
            rbig[:nranks] = ranks[:nranks]
            ranks = rbig
        u1 = _unif(state)
        u2 = _unif(state)
        z = np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(2.0 * np.pi * u2)
        length = np.int64(np.exp(mu + prm[1] * z) + 0.5)
        length = max(np.int64(prm[2]), min(lmax, length))
        topic = _pareto(_unif(state), prm[6], prm[7], ntopics)
        phrase = _pareto(_unif(state), prm[13], prm[14], nphr)
        plen = _phrase_len(topic, phrase)
        ppos = 0
        k = 0
        while k < length:
            if _unif(state) < prm[4]:
                f = np.searchsorted(fcum, _unif(state), side="right")
                kinds[k] = 0
                vals[k] = min(f, fcum.shape[0] - 1)
                k += 1
                continue
            if ppos >= plen:
                r = _unif(state)
                if r < prm[15]:
                    c = np.int64(_unif(state) * _unif(state) * prm[17])
                    phrase = _pareto(_hash3(topic, phrase, 31 + c), prm[13], prm[14], nphr)
                    plen = _phrase_len(topic, phrase)
                    ppos = 0
                elif r < prm[15] + prm[16]:
                    phrase = _pareto(_unif(state), prm[13], prm[14], nphr)
                    plen = _phrase_len(topic, phrase)
                    ppos = 0
                else:
                    r2 = _unif(state)
                    if r2 < prm[18]:
                        kinds[k] = 1
                        vals[k] = _pareto(_unif(state), prm[20], prm[21], prm[22])
                        ranks[nranks] = vals[k]
                        nranks += 1
                    elif r2 < prm[18] + prm[19]:
                        kinds[k] = 2
                        vals[k] = _number(state)
                    else:
                        kinds[k] = 3
                        vals[k] = _pareto(_unif(state), prm[23], prm[24], prm[25])
                        if k + 1 < length and _unif(state) < 0.5:
                            k += 1
                            kinds[k] = 3
                            vals[k] = _pareto(_unif(state), prm[23], prm[24], prm[25])
                    k += 1
                    continue
            kinds[k] = 1
            vals[k] = _phrase_word(topic, phrase, ppos, prm)
            ranks[nranks] = vals[k]
            nranks += 1
            ppos += 1
            k += 1
        # sentences and punctuation
        since = 0
        caps[0] = True
        for j in range(length):
            seps[j] = 0
            if j + 1 < length:
                caps[j + 1] = False
            since += 1
            if j + 1 < length and since >= 4 and _unif(state) < prm[26]:
                seps[j] = 2
                caps[j + 1] = True
                since = 0
            elif j + 1 < length and since >= 2 and kinds[j] != 0 and _unif(state) < prm[27]:
                seps[j] = 1
        line_off[i] = pos
        words[i] = length
        pos = _write_int(buf, pos, pid0 + i, False)
        buf[pos] = 9
        pos += 1
        for j in range(length):
            pos = _render(buf, pos, kinds[j], vals[j], caps[j] or kinds[j] == 3,
                          fdata, foff, wdata, woff, ndata, noff, sdata, soff)
            if j + 1 == length:
                buf[pos] = 46
                buf[pos + 1] = 10
                pos += 2
            elif seps[j] == 0:
                buf[pos] = 32
                pos += 1
            else:
                buf[pos] = 44 if seps[j] == 1 else 46
                buf[pos + 1] = 32
                pos += 2
    line_off[n] = pos
    return buf[:pos], line_off, ranks[:nranks], words



# The kernel reads parameters by position; keep it in step with Shape's field order.
assert [P[k] for k in ("length_max", "topic_vocab", "phrases", "chain", "global_a", "names_max", "comma")] == [
    3, 8, 12, 15, 20, 25, 27,
]
