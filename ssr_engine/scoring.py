"""Scoring rules shared by every path (DESIGN.md section 2): weights and the result order."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_INT_ID = re.compile(r"-?[0-9]+")


def signal_weight(n_docs: int, df: int) -> float:
    """weight(s) = ln((N + 1) / (df(s) + 1)) + 1, always > 0.

    Every path (reference, kernels, exhaustive scan) takes its weights from this one
    function, so `math.log` rounding is the same everywhere.
    """
    return math.log((n_docs + 1) / (df + 1)) + 1.0


def canonical_sum(weights: Sequence[float]) -> float:
    """Sum in the canonical order: ascending weight, in float64.

    The sum of a multiset of floats taken in sorted order depends only on the multiset, so
    equal signal sets give bit-identical scores whichever path computes them. Kernels get the
    same order by visiting query terms in ascending weight (term-at-a-time accumulation).
    """
    total = 0.0
    for w in sorted(weights):
        total += w
    return total


def ids_are_integers(ids: Sequence[str]) -> bool:
    """True when every id is a base-10 integer (optional minus sign, ASCII digits)."""
    return all(_INT_ID.fullmatch(i) is not None for i in ids)


def id_order(ids: Sequence[str]) -> list[int]:
    """Positions of `ids` in ascending id order: as integers when all are, else as strings.

    Integers that are equal as numbers ("7", "007") are ordered by their strings.
    """
    if ids_are_integers(ids):
        return sorted(range(len(ids)), key=lambda i: (int(ids[i]), ids[i]))
    return sorted(range(len(ids)), key=lambda i: ids[i])


def check_k(k: int | None) -> None:
    """K >= 1, or None for every candidate."""
    if k is None:
        return
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
