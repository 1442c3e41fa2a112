"""Numba kernel: find ids in a segment by binary search in its id order (`live_files.SortedIds`).

A segment's documents are ranked by id (`doc_rank`, DESIGN.md section 2: integers by value, equal
values and all other ids by their UTF-8 bytes), so its ids need no hash table to be found: about
log2(N) comparisons of byte spans per wanted id (23 at 8.8M), by `kernels.merge.span_compare`.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .merge import span_compare


@nb.njit(cache=True, nogil=True)
def find_sorted(offsets, data, by_rank, identity, w_offsets, w_data, integer):
    """The document of each wanted id, -1 where the segment has none.

    Parameters
    ----------
    offsets : int32 or int64[N + 1]   the segment's ids: document d's is data[offsets[d]:offsets[d + 1]]
    data : uint8[...]                 their UTF-8 bytes
    by_rank : uint32[N] or empty      the document of each rank (ignored when `identity`: rank = document)
    identity : bool                   the documents are in id order
    w_offsets : int64[M + 1]          the wanted ids, as spans of `w_data`
    w_data : uint8[...]
    integer : bool                    the segment's ids are ordered as integers

    Returns
    -------
    int64[M]
    """
    n = offsets.shape[0] - 1
    m = w_offsets.shape[0] - 1
    out = np.full(m, -1, dtype=np.int64)
    for i in range(m):
        wa, wz = w_offsets[i], w_offsets[i + 1]
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            d = mid if identity else np.int64(by_rank[mid])
            c = span_compare(data, np.int64(offsets[d]), np.int64(offsets[d + 1]), w_data, wa, wz, integer)
            if c < 0:
                lo = mid + 1
            elif c > 0:
                hi = mid
            else:  # the order is total and ends on the bytes: equal means the same id
                out[i] = d
                break
    return out
