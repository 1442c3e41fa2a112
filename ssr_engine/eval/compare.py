"""Paired significance tests between systems' per-query values, as PyTerrier's `Experiment` does.

Every system is tested against the first (the baseline), per measure, on the same queries:

    paired-t       scipy.stats.ttest_rel(system, baseline)            two-sided
    wilcoxon       scipy.stats.wilcoxon(system, baseline)             two-sided, zero differences dropped
                                                                      ("wilcox", scipy's default)
    randomization  scipy.stats.permutation_test on the mean difference, pairs swapped at random
                   (permutation_type="samples"), `n_resamples` resamples from `seed`; two-sided

p-values are scipy's, unchanged; a test scipy cannot compute (every difference zero, fewer than
two queries) gives None. Holm-Bonferroni adjusts, for each measure and test, the p-values of the
systems against the baseline (the family is the systems; None values are left out of it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

TESTS = ("paired-t", "wilcoxon", "randomization")
RESAMPLES = 10_000
SEED = 42


def _p_value(test: str, system: np.ndarray, baseline: np.ndarray, n_resamples: int, seed: int) -> float | None:
    import warnings

    from scipy import stats

    if len(system) < 2:
        return None
    diff = system - baseline
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on constant input; we report None instead
        try:
            if test == "paired-t":
                p = stats.ttest_rel(system, baseline).pvalue
            elif test == "wilcoxon":
                if not np.any(diff != 0):
                    return None
                p = stats.wilcoxon(system, baseline).pvalue
            elif test == "randomization":
                if not np.any(diff != 0):
                    return None
                p = stats.permutation_test(
                    (system, baseline), _mean_difference, permutation_type="samples", vectorized=True,
                    n_resamples=n_resamples, alternative="two-sided", random_state=seed, batch=1000,
                ).pvalue
            else:
                raise ValueError(f"unknown test {test!r}; expected one of {', '.join(TESTS)}")
        except ValueError as exc:
            if "unknown test" in str(exc):
                raise
            return None
    p = float(p)
    return None if np.isnan(p) else p


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(x - y, axis=axis)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in the input order (None stays None, outside the family).

    Sorted ascending p_(1) <= ... <= p_(m): adjusted p_(i) = max over j <= i of min(1, (m - j + 1) p_(j)).
    """
    present = [(p, i) for i, p in enumerate(p_values) if p is not None]
    m = len(present)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for j, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - j) * p))
        out[i] = running
    return out


def paired_tests(
    per_query: Sequence[Mapping[str, Mapping[str, float]]],
    names: Sequence[str],
    measures: Sequence[str],
    tests: Sequence[str] = TESTS,
    n_resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[dict[str, Any]]:
    """Test every system against the first, per measure and test.

    Parameters
    ----------
    per_query : one mapping per system, measure -> {qid: value}
        The reports' `per_query`; every system must hold the same queries for a measure.
    names : one label per system (the first is the baseline).
    measures : the measures to test.
    tests : any of TESTS.

    Returns
    -------
    list of dict
        {"metric", "system", "baseline", "test", "queries", "mean_difference", "better", "worse",
        "p_value", "p_holm"}, grouped by measure, then test, then system.
    """
    if len(per_query) != len(names):
        raise ValueError(f"{len(per_query)} systems but {len(names)} names")
    for t in tests:
        if t not in TESTS:
            raise ValueError(f"unknown test {t!r}; expected one of {', '.join(TESTS)}")
    out: list[dict[str, Any]] = []
    if len(per_query) < 2:
        return out
    for measure in measures:
        base_values = per_query[0].get(measure)
        if base_values is None:
            raise ValueError(f"{names[0]}: no per-query values for {measure!r}")
        qids = sorted(base_values)
        base = np.array([base_values[q] for q in qids], dtype=np.float64)
        systems = []
        for label, pq in zip(names[1:], per_query[1:], strict=True):
            values = pq.get(measure)
            if values is None:
                raise ValueError(f"{label}: no per-query values for {measure!r}")
            if set(values) != set(base_values):
                only_here = sorted(set(values) - set(base_values))[:3]
                only_base = sorted(set(base_values) - set(values))[:3]
                raise ValueError(f"{label} and {names[0]} hold different queries for {measure!r} "
                                 f"(only in {label}: {only_here}, only in {names[0]}: {only_base})")
            systems.append((label, np.array([values[q] for q in qids], dtype=np.float64)))
        for test in tests:
            rows = []
            for label, sys_values in systems:
                diff = sys_values - base
                rows.append({
                    "metric": measure, "system": label, "baseline": names[0], "test": test,
                    "queries": len(qids), "mean_difference": float(diff.mean()) if len(diff) else 0.0,
                    "better": int(np.sum(diff > 0)), "worse": int(np.sum(diff < 0)),
                    "p_value": _p_value(test, sys_values, base, n_resamples, seed),
                })
            p_values: list[float | None] = [r["p_value"] for r in rows]  # type: ignore[misc]
            for row, adjusted in zip(rows, holm(p_values), strict=True):
                row["p_holm"] = adjusted
            out.extend(rows)
    return out


def tests_table(rows: Sequence[Mapping[str, Any]], alpha: float = 0.05) -> str:
    """Markdown: one line per (measure, system, test); p-values below `alpha` after Holm marked *."""
    def fmt(p: float | None) -> str:
        return "n/a" if p is None else f"{p:.4g}"

    lines = ["| metric | system | vs | test | queries | mean diff | better | worse | p | p (Holm) |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mark = " *" if r["p_holm"] is not None and r["p_holm"] < alpha else ""
        lines.append(f"| {r['metric']} | {r['system']} | {r['baseline']} | {r['test']} | {r['queries']} | "
                     f"{r['mean_difference']:+.4f} | {r['better']} | {r['worse']} | {fmt(r['p_value'])} | "
                     f"{fmt(r['p_holm'])}{mark} |")
    return "\n".join(lines) + "\n"
