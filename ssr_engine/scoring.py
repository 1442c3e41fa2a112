"""Scoring rules shared by every path (DESIGN.md section 2): signal weights and the canonical sum."""

from __future__ import annotations

import math
from collections.abc import Sequence


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
