"""Document ids: the "ids are integers" rule and the id order of DESIGN.md section 2.

Ties are broken by ascending id, compared as integers when every id of the collection is a
base-10 integer (optional minus sign, ASCII digits) and as strings otherwise. The build
(`indexing.doc_ids`, over Arrow arrays) and the reference (over Python lists) both take the
rule from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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
