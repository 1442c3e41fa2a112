"""The kernels' query input: the queries' UTF-8 bytes and spans (`utf8`, what `kernels.query.prepare`
reads), its other arguments for one index (`signal_args`, `lookup_args`: `prepare` is `kernels.query.signals`
then `terms_of`, which a group of shards calls once and once per shard) and what it gives back (`QueryBatch`:
per query, known terms in ascending weight order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import hashing  # vocab_key_shift read through the module: one key rule for build and query (tests narrow it)
from .extract import Extractor
from .format import Index
from .hashing import hash_mask
from .validate import VOCAB_BLOCK_SHIFT, checked_blocks


@dataclass
class QueryBatch:
    """Query terms as the kernels take them: per query, known terms in ascending weight order."""

    offsets: np.ndarray  # int64[Q + 1]
    terms: np.ndarray  # int64
    weights: np.ndarray  # float64
    df: np.ndarray  # int64, document frequency of each term

    @property
    def postings(self) -> int:
        """Postings the inverted kernel reads for this batch (the sum of the terms' df)."""
        return int(self.df.sum())


def utf8(queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The queries' UTF-8 bytes, uint8, and each one's span, int64[Q + 1]."""
    if len(queries) == 1:
        raw = queries[0].encode("utf-8", "surrogatepass")
        return np.frombuffer(raw, dtype=np.uint8), np.array([0, len(raw)], dtype=np.int64)
    raw_all = [q.encode("utf-8", "surrogatepass") for q in queries]
    offsets = np.zeros(len(raw_all) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, raw_all), dtype=np.int64, count=len(raw_all)), out=offsets[1:])
    return np.frombuffer(b"".join(raw_all), dtype=np.uint8), offsets


class Utf8Queries:
    """A batch of queries as `utf8` encodes them (data uint8, offsets int64[Q + 1]): what a Ray actor is sent.
    Sliced by query (`batch[a:b]`, views); `texts()` decodes them. At 6,980 queries it is 0.4 MB where an
    array of str is 5.2 MB (4 bytes a character, each padded to the longest): Ray's store took 11 ms to hold
    the latter (RESULTS.md)."""

    __slots__ = ("data", "offsets")

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self.data, self.offsets = data, offsets

    @classmethod
    def of(cls, queries: Sequence[str]) -> Utf8Queries:
        return cls(*utf8(queries))

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def __getitem__(self, span: slice) -> Utf8Queries:
        a, b, _ = span.indices(len(self))
        b = max(a, b)
        lo = int(self.offsets[a])
        return Utf8Queries(self.data[lo : self.offsets[b]], self.offsets[a : b + 1] - lo)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes + self.offsets.nbytes)

    def texts(self) -> list[str]:
        raw = self.data.tobytes()
        o = self.offsets.tolist()
        return [raw[o[i] : o[i + 1]].decode("utf-8", "surrogatepass") for i in range(len(o) - 1)]

    def __reduce__(self) -> tuple[Any, ...]:  # (__slots__ without __dict__: pickled by its arrays)
        return Utf8Queries, (self.data, self.offsets)


def signal_args(extractor: Extractor, index: Index) -> tuple[Any, ...]:
    """`kernels.query.signals`' arguments after the queries: stopword tables, cap, hash seed and mask."""
    ex, h = extractor, index.settings.hash
    return (ex.key1, ex.key2, ex.long_data, ex.long_offsets), np.int64(ex.cap), np.uint64(h.seed), hash_mask(h.bits)


def lookup_args(index: Index) -> tuple[Any, ...]:
    """`kernels.query.terms_of`' arguments after the signals, up to n_docs: the index's vocabulary, strings
    and offsets, as plain ndarrays (a np.memmap costs every kernel call extra: see `Searcher._csr`)."""
    vocab = index.vocab.view(np.ndarray)
    return (np.uint64(hashing.vocab_key_shift(index.settings.hash.bits) if vocab.dtype == np.uint32 else 0), vocab,
            checked_blocks(index), np.int64(VOCAB_BLOCK_SHIFT),
            (index.signal_bytes.view(np.ndarray), index.signal_offsets.view(np.ndarray),
             index.signal_codes.view(np.ndarray), np.int64(index.string_bits)),
            index.lists, np.int64(index.postings_length), np.int64(index.n_docs))
