"""Document ids: the "ids are integers" rule and the id order of DESIGN.md section 2.

`fixed_width_ids`: short ASCII ids as a fixed-width byte table (`format.Index.ids_of` gathers
from it). Ties are broken by ascending id, compared as integers when every id of the collection is a
base-10 integer (optional minus sign, ASCII digits) and as strings otherwise. The build
(`indexing.doc_ids`, over Arrow arrays) and the reference (over Python lists) both take the
rule from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

INTEGER_ID = r"-?[0-9]+"
"""An id that is an integer matches this pattern as a whole (ASCII digits only)."""

_INTEGER_ID = re.compile(INTEGER_ID)


def ids_are_integers(ids: Sequence[str]) -> bool:
    """True when every id is a base-10 integer (optional minus sign, ASCII digits)."""
    return all(_INTEGER_ID.fullmatch(i) is not None for i in ids)


def id_order(ids: Sequence[str]) -> list[int]:
    """Positions of `ids` in ascending id order: as integers when all are, else as strings.

    Integers that are equal as numbers ("7", "007") are ordered by their strings.
    """
    if ids_are_integers(ids):
        return sorted(range(len(ids)), key=lambda i: (int(ids[i]), ids[i]))
    return sorted(range(len(ids)), key=lambda i: ids[i])


FIXED_ID_MAX = 32  # ids up to this many bytes (ASCII) get the fixed-width table


def ucs4_ids(rows: np.ndarray) -> np.ndarray:
    """Id rows gathered from a fixed-width table as UCS-4 code units (uint32[n, w]) as a `<U{w}` str array."""
    return rows.view(f"<U{rows.shape[1]}").reshape(-1)


def fixed_width_ids(ids: Any) -> np.ndarray | None:
    """An Arrow string array as a zero-padded uint8[N, longest] table, or None (non-ASCII or long ids)."""
    if len(ids) == 0:
        return None
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32)[ids.offset : ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    lengths = np.diff(offsets)
    width = int(lengths.max())
    if width == 0 or width > FIXED_ID_MAX or (data.size and int(data.max()) >= 0x80):
        return None
    from .kernels.id_table import fixed_table

    return fixed_table(offsets - offsets[0], data, width)
