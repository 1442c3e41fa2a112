"""The kernels' query input: the queries' UTF-8 bytes and spans (`utf8`, what `kernels.query.prepare`
reads) and what it gives back (`QueryBatch`: per query, known terms in ascending weight order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
