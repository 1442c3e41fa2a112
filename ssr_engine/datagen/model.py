"""The model's tables: the generator's shape parameters (`Shape`), function-word rates, syllables of
synthetic words, and the vocabulary (`Vocabulary`: real words from a word list, names, function words)
that the text stream (`stream.generate_block`) renders from. Part of GENERATOR_ID's contract: see
`collection` for the model and the files.
"""

from __future__ import annotations

import hashlib
import os
import re
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..stopwords import STOPWORDS_V1

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

