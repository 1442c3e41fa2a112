"""Seeded, streaming generator of MS MARCO-shaped collections (any size, default 8,841,823).

Model (all randomness from one seed; the text of a block depends only on the seed and the
block number, so output is byte-identical whatever the number of worker processes):

- A passage has a topic (Pareto-popular among `topics`) and a length in words drawn from a
  log-normal (median ~49, mean ~56, clipped to 3..360, MS MARCO's shape).
- Each word slot is a function word (stopwords plus a few frequent non-stopwords, at natural
  English rates) or the next content token.
- Content tokens walk the topic's phrase graph: a topic has `phrases` recurring phrases of 1-4
  words drawn from the topic's own vocabulary; after a phrase the walk follows one of the
  phrase's successors (so phrase junctions recur too), jumps to a fresh popular phrase, or
  emits a free token: a word of the global Zipfian vocabulary (long tail, keeps growing with
  size), a number, or a name. Bigrams therefore repeat across passages as in topical text,
  and the tail supplies millions of rare words.
- Vocabulary ranks: rank r < len(real words) is a real English word (lower-case words of 3+
  letters from a word list, 4-7 letter words at the frequent ranks; capitalised entries become
  names); above that, a synthetic pronounceable word spelled from r in base-len(SYLLABLES)
  syllables. With no word list every word is synthetic; the output is then still deterministic,
  and different (the word list's sha256 is recorded in stats.json).
- Queries (MS MARCO shape, ~5 words): a window of 1-5 content words of the target passage,
  sometimes one dropped, sometimes an extra word from another passage, inside a question
  template ("what is {}", "how much does {} cost", "{} definition", ...).
- Planting: the passage at a real qrel's pid is a generated passage with the real query's words
  (leading question words dropped) inserted in order, sometimes split once by generated words.

The text kernel is Numba with its own splitmix64 stream per block (platform independent);
queries and planted passages are built in Python from the generated text with NumPy
Generators seeded from (seed, qid) or (seed, pid). Same seed, word list and NumPy version
=> byte-identical files.

Why one module of ~800 lines: the vocabulary, the Numba text stream, the query and planting
rules and the block writer are one versioned generator (GENERATOR_ID); a change to any part
changes every collection generated, and keeping them together keeps that contract in one
place. `generate_block` is one long Numba function for the reason `kernels/text.py` gives:
a call passing arrays costs ~100 ns, which dominated the per-word work when it was split.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numba as nb
import numpy as np

from ..atomic import atomic_write, write_text
from ..datasets import qrels_fields
from ..errors import InputError, SsrError
from ..hashing import xorshift_multiply
from ..stopwords import STOPWORDS_V1

GENERATOR_ID = "ssr-synthetic-v1"
MSMARCO_PASSAGES = 8_841_823
MSMARCO_DEV_QUERIES = 6_980
BLOCK = 16_384  # passages per block: fixed, so a collection is a prefix of any larger one
DEFAULT_WORDLIST = "/usr/share/dict/words"

# Function words with rough per-million rates in English web text. All stopwords of
# STOPWORDS_V1 appear (rare ones at a small rate); "a" and a few frequent non-stopwords too.
_FUNCTION_RATES = """
the 60000 of 30000 and 28000 to 26000 a 22000 in 19000 is 11000 for 9000 that 8000 it 7000
with 7000 as 6500 on 6000 are 5500 be 5000 by 5000 this 5000 or 4500 from 4000 at 4000 an 3500
was 3500 you 3500 can 3500 your 2500 which 2500 not 2500 have 2500 has 2200 its 2000 they 2000
their 2000 will 1800 also 1800 may 1600 more 1600 one 1500 been 1400 used 1300 if 1300 other 1200
all 1200 when 1200 than 1100 there 1100 most 1000 some 1000 these 1000 such 900 into 900 each 800
about 800 were 800 can 700 how 700 what 700 who 600 only 600 so 600 no 600 use 600 do 600 up 550
out 550 between 500 because 450 after 450 would 450 could 400 many 400 over 400 should 400 does 400
during 350 while 350 through 350 both 350 them 350 then 330 where 330 two 330 we 300 our 300 he 300
his 300 him 120 she 150 her 200 any 250 same 200 very 200 now 200 before 200 under 200 being 180
own 150 those 180 just 180 had 200 did 120 doing 50 having 80 until 100 against 90 again 90 further
80 once 80 here 100 why 120 few 80 whom 30 nor 20 too 100 off 80 above 80 below 80 down 90 having 50
me 60 my 120 myself 10 ours 5 ourselves 10 yours 10 yourself 20 yourselves 5 hers 3 herself 15 itself
40 theirs 3 themselves 40 himself 30 am 30 don 40 ll 20 re 10 ve 10 ain 2 aren 5 couldn 5 didn 10
doesn 15 hadn 2 hasn 3 haven 4 isn 10 ma 3 mightn 1 mustn 1 needn 1 shan 1 shouldn 2 wasn 5 weren 3
won 10 wouldn 5 i 200 however 250 including 200 usually 120 often 150 well 200 like 250
"""

# Consonant-vowel(-consonant) syllables for synthetic words.
_ONSETS = "b c d f g h k l m n p r s t v w z br cl dr fr gr pl pr st tr ch sh th".split()
_VOWELS = "a e i o u ai ea io ou".split()
_CODAS = ["", "", "", "n", "r", "s", "l", "t"]


def _syllables() -> list[str]:
    out = []
    for i, onset in enumerate(_ONSETS):
        for j, vowel in enumerate(_VOWELS):
            coda = _CODAS[(i * 7 + j * 3) % len(_CODAS)]
            out.append(onset + vowel + coda)
    return out


SYLLABLES: list[str] = _syllables()

_QUESTION_TEMPLATES = [
    ("what is {}", 14), ("what is the {}", 6), ("what are {}", 4), ("how to {}", 5), ("how much does {} cost", 3),
    ("how long does {} take", 2), ("how many {}", 2), ("who is {}", 3), ("where is {}", 3), ("when was {}", 2),
    ("why is {}", 2), ("what does {} mean", 3), ("define {}", 3), ("{} definition", 3), ("{} meaning", 2),
    ("is {} a", 1), ("which {}", 1), ("what causes {}", 2), ("{}", 24), ("{} in the", 2), ("the {}", 2),
    ("what is a {}", 3), ("how do you {}", 2), ("what type of {}", 1),
]


@dataclass(frozen=True)
class Shape:
    """Shape parameters of the model (defaults calibrated to MS MARCO; see RESULTS-data.md)."""

    length_median: float = 49.0  # words per passage (log-normal)
    length_sigma: float = 0.52
    length_min: int = 3
    length_max: int = 360
    function_rate: float = 0.45  # share of word slots that are function words
    topics: int = 24_000
    topic_a: float = 1.6  # Pareto exponent of topic popularity
    topic_q: float = 40.0
    topic_vocab: int = 400  # words per topic
    topic_word_a: float = 1.5  # global ranks of topic words (mid-frequency words)
    topic_word_q: float = 400.0
    topic_word_max: int = 400_000
    phrases: int = 160  # recurring phrases per topic
    phrase_a: float = 1.8
    phrase_q: float = 6.0
    chain: float = 0.58  # after a phrase: follow a successor
    fresh: float = 0.26  # ... or a fresh phrase; else a free token
    successors: int = 3
    free_word: float = 0.74  # free token kinds: global word / number / name
    free_number: float = 0.13
    global_a: float = 1.2  # Zipf tail of the global vocabulary
    global_q: float = 100.0
    global_max: int = 60_000_000
    names_a: float = 1.4
    names_q: float = 20.0
    names_max: int = 3_000_000
    sentence_end: float = 0.065
    comma: float = 0.05

    def as_array(self) -> np.ndarray:
        return np.array([float(v) for v in asdict(self).values()], dtype=np.float64)


_SHAPE_FIELDS = list(Shape.__dataclass_fields__)
P = {name: i for i, name in enumerate(_SHAPE_FIELDS)}  # parameter name -> index in the kernel array

KIND_FUNC, KIND_WORD, KIND_NUMBER, KIND_NAME = 0, 1, 2, 3


# ----------------------------------------------------------------------------- vocabulary


def _pack(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    data = "".join(words).encode("ascii")
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    if words:
        offsets[1:] = np.cumsum([len(w) for w in words])
    return np.frombuffer(data, dtype=np.uint8).copy(), offsets


@dataclass
class Vocabulary:
    """The tables the kernel renders from, built once from an optional word list."""

    source: str  # word list path, or "synthetic"
    digest: str  # sha256 of the word-list bytes, or "" when synthetic
    words: list[str]
    names: list[str]
    function: list[str] = field(default_factory=list)
    function_cum: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def load(cls, wordlist: str | Path | None = DEFAULT_WORDLIST) -> Vocabulary:
        """Real words from `wordlist` if it exists (None or a missing default: synthetic only)."""
        pairs = [(w, float(r)) for w, r in zip(*[iter(_FUNCTION_RATES.split())] * 2, strict=True)]
        rates: dict[str, float] = {}
        for w, r in pairs:
            rates[w] = rates.get(w, 0.0) + r
        for w in STOPWORDS_V1:
            rates.setdefault(w, 1.0)
        function = sorted(rates)
        weights = np.array([rates[w] for w in function])
        cum = np.cumsum(weights) / weights.sum()
        words: list[str] = []
        names: list[str] = []
        source, digest = "synthetic", ""
        if wordlist is not None and os.path.exists(wordlist):
            raw = Path(wordlist).read_bytes()
            source, digest = str(wordlist), hashlib.sha256(raw).hexdigest()
            seen_w: set[str] = set()
            seen_n: set[str] = set()
            fset = set(function)
            for line in raw.decode("utf-8", "replace").splitlines():
                w = line.strip()
                if re.fullmatch(r"[a-z]{3,}", w) and w not in fset and w not in seen_w:
                    seen_w.add(w)
                    words.append(w)
                elif re.fullmatch(r"[A-Z][a-z]{2,}", w) and w.lower() not in seen_n:
                    seen_n.add(w.lower())
                    names.append(w.lower())
            # Frequent ranks get words of 4-7 letters, rare ranks long or very short ones (as in
            # real text); a fixed hash breaks ties, so the order is the same on every machine.
            words.sort(key=lambda w: abs(len(w) - 5.5) + 3.0 * zlib.crc32(w.encode()) / 2**32)
            names.sort(key=lambda w: zlib.crc32(w.encode()))
        elif wordlist is not None and str(wordlist) != DEFAULT_WORDLIST:
            raise InputError(wordlist, None, "word list not found")
        return cls(source, digest, words, names, function, cum)

    def tables(self) -> tuple[np.ndarray, ...]:
        fdata, foff = _pack(self.function)
        wdata, woff = _pack(self.words)
        ndata, noff = _pack(self.names)
        sdata, soff = _pack(SYLLABLES)
        return fdata, foff, self.function_cum, wdata, woff, ndata, noff, sdata, soff


# ----------------------------------------------------------------------------- kernel

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


# ----------------------------------------------------------------------------- queries


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'%.,]*")


def _content_words(text: str) -> list[str]:
    """Words of a passage that survive the signal filter (lower-cased, punctuation stripped)."""
    out = []
    for raw in text.split():
        w = raw.strip(".,").lower()
        if len(w) >= 2 and w not in STOPWORDS_V1 and re.fullmatch(r"[a-z0-9]+", w):
            out.append(w)
    return out


_TEMPLATES = [t for t, _ in _QUESTION_TEMPLATES]
_TEMPLATE_P = np.array([w for _, w in _QUESTION_TEMPLATES], dtype=np.float64)
_TEMPLATE_P /= _TEMPLATE_P.sum()


def make_query(passage: str, rng: np.random.Generator, noise_words: list[str]) -> str:
    """An MS MARCO-shaped query (about 6 words) written from one passage, with noise."""
    words = _content_words(passage)
    if not words:
        words = [w.strip(".,").lower() for w in passage.split()][:2] or ["nothing"]
    m = int(rng.choice([1, 2, 3, 4, 5], p=[0.04, 0.18, 0.32, 0.29, 0.17]))
    m = min(m, len(words))
    start = int(rng.integers(0, len(words) - m + 1))
    picked = list(dict.fromkeys(words[start : start + m]))  # passages repeat phrases; queries rarely do
    if len(picked) >= 3 and rng.random() < 0.25:  # a missing word
        del picked[int(rng.integers(0, len(picked)))]
    if rng.random() < 0.3 and noise_words:  # an extra word the passage may not contain
        picked.insert(int(rng.integers(0, len(picked) + 1)), noise_words[int(rng.integers(0, len(noise_words)))])
    template = _TEMPLATES[int(rng.choice(len(_TEMPLATES), p=_TEMPLATE_P))]
    return template.format(" ".join(picked))


_LEADING = STOPWORDS_V1 | {"define", "definition", "a"}


def plant_run(query: str) -> list[str]:
    """The words of a real query that a planted passage repeats: leading question words dropped."""
    words = [w.strip("?!.,\"") for w in query.split()]
    words = [w for w in words if w]
    i = 0
    while i < len(words) - 1 and words[i].lower() in _LEADING:
        i += 1
    return words[i:]


def plant_passage(passage: str, queries: list[str], rng: np.random.Generator) -> str:
    """A generated passage rewritten to answer `queries`: each query's words inserted in order."""
    words = passage.split()
    for q in queries:
        run = plant_run(q)
        if not run:
            continue
        if len(run) >= 3 and rng.random() < 0.3:  # split once, generated words in between
            cut = int(rng.integers(1, len(run)))
            filler = words[int(rng.integers(0, len(words))) :][:2]
            run = run[:cut] + [w.strip(".,") for w in filler] + run[cut:]
        at = int(rng.integers(0, len(words) + 1))
        words[at:at] = run
    return " ".join(words).rstrip(".") + "."


# ----------------------------------------------------------------------------- driver


def block_seed(seed: int, block: int) -> int:
    """The kernel's 63-bit stream seed for one block (a SeedSequence of the seed and the block)."""
    return int(np.random.SeedSequence([seed, block, 0x55]).generate_state(1, np.uint64)[0]) >> 1


@dataclass
class _Job:
    block: int
    pid0: int
    n: int
    targets: list[tuple[int, int]]  # (qid, pid) for generated queries
    plants: dict[int, list[str]]  # pid -> real query texts to plant


_STATE: dict[str, object] = {}


def _init_worker(seed: int, wordlist: str | None, shape: Shape) -> None:
    vocab = Vocabulary.load(wordlist)
    _STATE.update(seed=seed, vocab=vocab, tables=vocab.tables(), prm=shape.as_array())


def _run_job(job: _Job) -> tuple[int, bytes, list[tuple[int, int, str]], np.ndarray, np.ndarray]:
    seed = int(_STATE["seed"])  # type: ignore[call-overload]
    buf, line_off, ranks, lengths = generate_block(job.pid0, job.n, block_seed(seed, job.block), _STATE["prm"],
                                                   *_STATE["tables"])  # type: ignore[misc]
    queries: list[tuple[int, int, str]] = []
    data = buf.tobytes()
    off = line_off.tolist()

    def line_text(pid: int) -> str:
        i = pid - job.pid0
        line = data[off[i] : off[i + 1]].decode("ascii")
        return line.split("\t", 1)[1].rstrip("\n")

    for qid, pid in job.targets:
        rng = np.random.default_rng([seed, 0x51, qid])
        # the extra (noise) word comes from another passage of the same block
        noise = _content_words(line_text(job.pid0 + int(rng.integers(0, job.n))))
        queries.append((qid, pid, make_query(line_text(pid), rng, noise)))
    if job.plants:
        pieces = []
        prev = 0
        for pid in sorted(job.plants):
            i = pid - job.pid0
            rng = np.random.default_rng([seed, 0x50, pid])
            text = plant_passage(line_text(pid), job.plants[pid], rng)
            lengths[i] = len(text.split())
            pieces.append(data[prev : off[i]])
            pieces.append(f"{pid}\t{text}\n".encode())
            prev = off[i + 1]
        pieces.append(data[prev:])
        data = b"".join(pieces)
    return job.block, data, queries, lengths, np.unique(ranks).astype(np.int64)


def read_plants(queries_path: str | Path, qrels_path: str | Path) -> tuple[dict[str, str], list[tuple[str, str, int]]]:
    """Real queries (qid -> text) and qrels (qid, pid, grade) in TSV / TREC or tab form."""
    queries: dict[str, str] = {}
    for lineno, line in _lines(queries_path):
        parts = line.split("\t", 1)
        if len(parts) != 2 or not parts[0].strip():
            raise InputError(queries_path, lineno, "expected qid<TAB>query")
        qid = parts[0].strip()
        if qid in queries:
            raise InputError(queries_path, lineno, f"duplicate query id {qid!r}")
        queries[qid] = " ".join(parts[1].split())
    qrels: list[tuple[str, str, int]] = []
    for lineno, line in _lines(qrels_path):
        qid, pid, g = qrels_fields(qrels_path, lineno, line)
        if not pid.isdigit():
            raise InputError(qrels_path, lineno, f"passage id {pid!r} is not a non-negative integer")
        if qid not in queries:
            raise InputError(qrels_path, lineno, f"query id {qid!r} is not in {queries_path}")
        qrels.append((qid, pid, g))
    if not queries:
        raise InputError(queries_path, None, "no queries")
    return queries, qrels


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror}") from exc
    for lineno, bline in enumerate(raw.split(b"\n"), start=1):
        try:
            line = bline.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise InputError(path, lineno, f"not valid UTF-8 ({exc.reason})") from exc
        if line.strip():
            yield lineno, line


def default_queries(passages: int) -> int:
    """6,980 (MS MARCO dev-small) from 1M passages up; else 1,000 (or one per passage)."""
    return MSMARCO_DEV_QUERIES if passages >= 1_000_000 else min(1000, passages)


def generate(
    out: str | Path,
    passages: int = MSMARCO_PASSAGES,
    seed: int = 1,
    queries: int | None = None,
    plant_queries: str | Path | None = None,
    plant_qrels: str | Path | None = None,
    wordlist: str | Path | None = DEFAULT_WORDLIST,
    workers: int = 2,
    shape: Shape | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Write collection.tsv, queries.tsv, qrels.tsv and stats.json into `out`; return the stats.

    Memory is bounded by a few blocks whatever `passages` is; files are written as blocks finish,
    in order, into `*.tmp` names renamed at the end.
    """
    if passages < 1:
        raise SsrError(f"--passages must be >= 1, got {passages}")
    if (plant_queries is None) != (plant_qrels is None):
        raise SsrError("--plant-queries and --plant-qrels go together")
    shape = shape or Shape()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    vocab = Vocabulary.load(wordlist)
    wl = None if wordlist is None else str(wordlist)
    nblocks = (passages + BLOCK - 1) // BLOCK
    targets: dict[int, list[tuple[int, int]]] = {}
    plants: dict[int, dict[int, list[str]]] = {}
    query_lines: list[tuple[str, str]] = []
    qrel_lines: list[tuple[str, str, int]] = []
    stats: dict = {"generator": GENERATOR_ID, "seed": seed, "passages": passages, "block": BLOCK,
                   "wordlist": vocab.source, "wordlist_sha256": vocab.digest,
                   "real_words": len(vocab.words), "real_names": len(vocab.names)}
    if plant_queries is not None:
        real_q, real_qrels = read_plants(plant_queries, plant_qrels)  # type: ignore[arg-type]
        kept_q: set[str] = set()
        skipped = 0
        for qid, pid, grade in real_qrels:
            p = int(pid)
            if p >= passages:
                skipped += 1
                continue
            kept_q.add(qid)
            qrel_lines.append((qid, str(p), grade))
            if grade > 0:
                plants.setdefault(p // BLOCK, {}).setdefault(p, []).append(real_q[qid])
        query_lines = [(qid, text) for qid, text in real_q.items() if qid in kept_q]
        stats["planted"] = {"queries_file": str(plant_queries), "qrels_file": str(plant_qrels),
                            "queries_read": len(real_q), "qrels_read": len(real_qrels),
                            "qrels_skipped_pid_out_of_range": skipped,
                            "queries_kept": len(query_lines), "qrels_kept": len(qrel_lines),
                            "passages_planted": sum(len(v) for v in plants.values())}
    else:
        nq = default_queries(passages) if queries is None else queries
        if not 0 <= nq <= passages:
            raise SsrError(f"--queries must be in 0..{passages}, got {nq}")
        rng = np.random.default_rng([seed, 0x51])
        chosen = rng.choice(passages, size=nq, replace=False) if nq else np.zeros(0, np.int64)
        for number, target in enumerate(chosen.tolist(), start=1):
            targets.setdefault(target // BLOCK, []).append((number, target))
    jobs = [_Job(b, b * BLOCK, min(BLOCK, passages - b * BLOCK), sorted(targets.get(b, []), key=lambda t: t[1]),
                 plants.get(b, {})) for b in range(nblocks)]  # small: targets and plants only

    hist = np.zeros(shape.length_max + 200, dtype=np.int64)
    total_words = 0
    seen = np.zeros(shape.global_max, dtype=np.bool_)
    generated: list[tuple[int, int, str]] = []
    size = 0
    with atomic_write(out / "collection.tsv", "wb") as fh:
        for block, data, qs, lengths, ranks in _map_jobs(jobs, seed, wl, shape, workers):
            fh.write(data)
            size += len(data)
            generated.extend(qs)
            np.add.at(hist, np.minimum(lengths, hist.shape[0] - 1), 1)
            total_words += int(lengths.sum())
            seen[ranks[ranks < seen.shape[0]]] = True
            if progress is not None:
                progress(min(BLOCK, passages - block * BLOCK))
    if plant_queries is None:
        generated.sort()
        query_lines = [(str(qid), text) for qid, _, text in generated]
        qrel_lines = [(str(qid), str(pid), 1) for qid, pid, _ in generated]
    _write_text(out / "queries.tsv", "".join(f"{q}\t{t}\n" for q, t in query_lines))
    _write_text(out / "qrels.tsv", "".join(f"{q} 0 {p} {g}\n" for q, p, g in qrel_lines))
    cdf = np.cumsum(hist) / max(1, hist.sum())
    stats.update({
        "queries": len(query_lines), "qrels": len(qrel_lines), "collection_bytes": size,
        "words": total_words, "words_per_passage_mean": round(total_words / passages, 3),
        "words_per_passage_median": int(np.searchsorted(cdf, 0.5)),
        "words_per_passage_p99": int(np.searchsorted(cdf, 0.99)),
        "words_per_passage_max": int(np.flatnonzero(hist).max()),
        "distinct_vocabulary_ranks": int(seen.sum()),
        "shape": asdict(shape),
    })
    _write_text(out / "stats.json", json.dumps(stats, indent=2, sort_keys=True) + "\n")
    return stats


def _write_text(path: Path, text: str) -> None:
    write_text(path, text)


def _map_jobs(jobs: list[_Job], seed: int, wordlist: str | None, shape: Shape, workers: int):
    """Run jobs in order, in-process or on a pool with a bounded window (memory stays flat)."""
    if workers <= 1 or not isinstance(jobs, list) or len(jobs) == 1:
        _init_worker(seed, wordlist, shape)
        for job in jobs:
            yield _run_job(job)
        return
    import multiprocessing as mp
    from collections import deque

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    _init_worker(seed, wordlist, shape)  # compile (or load the cache) once before forking
    generate_block(0, 1, 1, _STATE["prm"], *_STATE["tables"])  # type: ignore[misc]
    with ctx.Pool(workers, initializer=_init_worker, initargs=(seed, wordlist, shape)) as pool:
        window: deque = deque()
        for job in jobs:
            window.append(pool.apply_async(_run_job, (job,)))
            if len(window) >= 2 * workers:
                yield window.popleft().get()
        while window:
            yield window.popleft().get()


# The kernel reads parameters by position; keep it in step with Shape's field order.
assert [P[k] for k in ("length_max", "topic_vocab", "phrases", "chain", "global_a", "names_max", "comma")] == [
    3, 8, 12, 15, 20, 25, 27,
]
