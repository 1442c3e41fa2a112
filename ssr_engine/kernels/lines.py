"""Line tables of MS MARCO TSV bytes (`id<TAB>text` per line), and the ids' bytes joined for one decode.

Why a kernel: the reader's per-line Python work (an id's decode, its whitespace test one character at a
time) ran on the build's main thread beside the two inverting workers, ~1 s of CPU per 100,000 lines.
"""

from __future__ import annotations

import numba as nb
import numpy as np

NO_TAB = 1  # flags: the line has no tab (so no id and text)
EMPTY_ID = 2  # the tab starts the line
CHECK_ID = 3  # the id holds a byte that may be (part of) whitespace: Python's str.isspace decides


@nb.njit(cache=True, nogil=True)
def tsv_lines(data):
    """The lines of TSV bytes; the last line may lack its newline.

    data uint8[n] (n > 0). Returns (starts int64[m], ends int64[m] (each line's end, a CR before its
    newline excluded), tabs int64[m] (each line's first tab, or its end when it has none), flags
    uint8[m] (0: a plain id; `NO_TAB`, `EMPTY_ID` or `CHECK_ID`: an id byte that is ASCII whitespace
    other than the tab (11-13, 28-32) or not ASCII), ascii (every byte < 0x80: no UTF-8 check needed)).
    """
    n = data.shape[0]
    m = 0
    bits = 0
    for i in range(n):  # a branch-free pass (vectorised): the lines and whether any byte is past ASCII
        m += data[i] == 10
        bits |= data[i]
    if data[n - 1] != 10:
        m += 1
    starts = np.empty(m, dtype=np.int64)
    ends = np.empty(m, dtype=np.int64)
    tabs = np.empty(m, dtype=np.int64)
    flags = np.zeros(m, dtype=np.uint8)
    i = 0
    for line in range(m):
        starts[line] = i
        tab = -1
        check = False
        while i < n and data[i] != 10:
            b = data[i]
            if b == 9:
                tab = i
                break
            if b >= 0x80 or (11 <= b <= 13) or (28 <= b <= 32):
                check = True
            i += 1
        while i < n and data[i] != 10:
            i += 1
        end = i
        if end > starts[line] and data[end - 1] == 13:
            end -= 1
        ends[line] = end
        i += 1
        if tab < 0 or tab >= end:
            tabs[line] = end
            flags[line] = NO_TAB
        else:
            tabs[line] = tab
            flags[line] = EMPTY_ID if tab == starts[line] else (CHECK_ID if check else 0)
    return starts, ends, tabs, flags, bits < 0x80


@nb.njit(cache=True, nogil=True)
def joined(data, starts, ends, rows):
    """uint8: the spans data[starts[r]:ends[r]] of `rows`, each followed by a newline byte (the last too)."""
    size = 0
    for r in rows:
        size += ends[r] - starts[r] + 1
    out = np.empty(size, dtype=np.uint8)
    at = 0
    for r in rows:
        for i in range(starts[r], ends[r]):
            out[at] = data[i]
            at += 1
        out[at] = 10
        at += 1
    return out
