"""Bulk signal extraction: the stopword tables and batches around the `kernels.text` fast path.

`Extractor` holds a stopword list as the kernel's tables and turns batches of UTF-8 documents
(each a list of values) into `SignalBatch`es; `signals.signals_many`, the index build and the
searchers use it. The kernel itself lives in `kernels/text.py`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .kernels.text import PACKED, extract_signals, table_slot
from .stopwords import StopwordList


def _pack(word: bytes) -> tuple[int, int]:
    """Big-endian, left-aligned, zero-padded keys of a word's bytes 0..7 and 8..15."""
    padded = word[:PACKED].ljust(PACKED, b"\0")
    return int.from_bytes(padded[:8], "big"), int.from_bytes(padded[8:], "big")


def stopword_table(stopwords: StopwordList) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tables over the stopwords that can equal a token (lower-case [a-z0-9], length >= 2).

    Returns (key1, key2) of an open-addressing table of packed words up to 16 bytes (key1 == 0
    marks an empty slot: a token's first byte is never 0), and (bytes, offsets) of the longer words.
    Made once per word set and shared (never written): every build and searcher makes an
    `Extractor`, and the table cost a one-card live write 2 ms of its 10.
    """
    return _stopword_table(stopwords.words)


@functools.lru_cache(maxsize=8)
def _stopword_table(stopwords: frozenset[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    words = sorted(w for w in stopwords if len(w) >= 2 and w.isascii() and w.isalnum() and w == w.lower())
    short = [w.encode("ascii") for w in words if len(w) <= PACKED]
    long = [w.encode("ascii") for w in words if len(w) > PACKED]
    size = 16
    while size < 4 * len(short):
        size *= 2
    key1 = np.zeros(size, dtype=np.uint64)
    key2 = np.zeros(size, dtype=np.uint64)
    for word in short:
        k1, k2 = (np.uint64(k) for k in _pack(word))
        slot = int(table_slot(k1, k2, size - 1))
        while key1[slot] != 0:
            slot = (slot + 1) & (size - 1)
        key1[slot], key2[slot] = k1, k2
    offsets = np.zeros(len(long) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(e) for e in long])
    data = np.frombuffer(b"".join(long) or b"\0", dtype=np.uint8).copy()
    return key1, key2, data, offsets


@dataclass
class SignalBatch:
    """Signals of a batch of documents as flat byte spans (CSR over documents)."""

    doc_offsets: np.ndarray  # int64[n_docs + 1], into signals
    data: np.ndarray  # uint8, signal bytes (lower-case ASCII)
    offsets: np.ndarray  # int64[n_signals + 1], into data
    is_bigram: np.ndarray  # bool[n_signals]
    counts: np.ndarray  # uint32[n_signals], occurrences of the signal in its document
    doc_tokens: np.ndarray  # int64[n_docs], kept tokens per document

    @property
    def n_docs(self) -> int:
        return int(self.doc_offsets.shape[0] - 1)

    def signal(self, i: int) -> str:
        return self.data[self.offsets[i] : self.offsets[i + 1]].tobytes().decode("ascii")

    def as_sets(self) -> list[frozenset[str]]:
        raw = self.data.tobytes().decode("ascii")
        offs = self.offsets.tolist()
        strings = [raw[offs[i] : offs[i + 1]] for i in range(len(offs) - 1)]
        d = self.doc_offsets.tolist()
        return [frozenset(strings[d[i] : d[i + 1]]) for i in range(len(d) - 1)]


def pack_values(docs: list[list[bytes]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flatten documents (lists of UTF-8 values) into (data, value_starts, value_ends, doc_values)."""
    values = [v for doc in docs for v in doc]
    ends = np.zeros(len(values), dtype=np.int64)
    if values:
        ends[:] = np.cumsum([len(v) for v in values])
    starts = ends - np.array([len(v) for v in values], dtype=np.int64)
    doc_values = np.zeros(len(docs) + 1, dtype=np.int64)
    if docs:
        doc_values[1:] = np.cumsum([len(doc) for doc in docs])
    data = np.frombuffer(b"".join(values), dtype=np.uint8)
    return data, starts, ends, doc_values


class Extractor:
    """Holds the stopword table for repeated batch extraction.

    cap=None: no cap; bigrams=False: unigrams only (with counts: the BM25 vocabulary).
    """

    def __init__(self, stopwords: StopwordList, cap: int | None, bigrams: bool = True):
        if cap is not None and cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.cap = -1 if cap is None else cap
        self.bigrams = bigrams
        self.key1, self.key2, self.long_data, self.long_offsets = stopword_table(stopwords)

    def extract(
        self, data: np.ndarray, value_starts: np.ndarray, value_ends: np.ndarray, doc_values: np.ndarray
    ) -> SignalBatch:
        return SignalBatch(
            *extract_signals(
                data, value_starts, value_ends, doc_values,
                self.key1, self.key2, self.long_data, self.long_offsets, self.cap, self.bigrams,
            )
        )


def extract_batch(texts: list[bytes], stopwords: StopwordList, cap: int) -> SignalBatch:
    """Signals of plain texts (one value each), given as UTF-8 bytes."""
    return Extractor(stopwords, cap).extract(*pack_values([[t] for t in texts]))


def extract_cards(cards: list[list[bytes]], stopwords: StopwordList, cap: int) -> SignalBatch:
    """Signals of documents made of several values each (card_signals semantics)."""
    return Extractor(stopwords, cap).extract(*pack_values(cards))
