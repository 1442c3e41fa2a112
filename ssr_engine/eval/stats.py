"""The one percentile definition of every report and benchmark (latency, pool sizes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentiles(values: Sequence[float], qs: Sequence[float]) -> dict[str, float]:
    """{"p50": ..., ...}: linear interpolation between closest ranks (NumPy's default); zeros for no values."""
    if len(values) == 0:
        return {f"p{q:g}": 0.0 for q in qs}
    arr = np.asarray(values, dtype=np.float64)
    return {f"p{q:g}": float(np.percentile(arr, q)) for q in qs}
