"""The forward rows (each document's term ids, ascending): a column of `kernels.packed`.

fwd = (words uint32[...], width int64), positions p from forward_indptr (document d's row is
p in indptr[d]..indptr[d + 1]). Format 5 packs the term ids at width = `width_for(V)` bits
(`packed.get32`; 25 bits for 20M terms instead of 32), with one spare word at the end; width
`PLAIN` (0): formats 2-4's plain uint32 array, one term id a word. The readers are the column's
own (`packed.at`, `contains`, `gather`), under the names the row readers have always had.
A term id read here is only as sound as the file: a caller that relies on it being < V checks.
"""

from __future__ import annotations

from .packed import PLAIN, at, contains, gather, width_for

term_at = at  # the term id (int64) at position p of the rows
row_contains = contains  # whether the row at positions lo..hi-1 holds term t

__all__ = ["PLAIN", "gather", "row_contains", "term_at", "width_for"]
