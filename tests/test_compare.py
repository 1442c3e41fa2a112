"""`ssr compare`: per-query values in reports, paired tests equal to scipy's, Holm-Bonferroni."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import load_data_script
from scipy import stats

from ssr_engine import build_index
from ssr_engine.cli import main
from ssr_engine.eval.compare import holm, paired_tests


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Cranfield reports: ssr, bm25 and bm25 with other parameters (three systems, real per-query values)."""
    root = tmp_path_factory.mktemp("compare")
    assert load_data_script("prepare_real").main(["cranfield", "--out", str(root)]) == 0  # the bundled copy
    build_index(root / "collection.tsv", root / "idx-ssr", quiet=True, workers=1)
    build_index(root / "collection.tsv", root / "idx-bm25", scoring="bm25", quiet=True, workers=1)
    out = {}
    for name, method, index, extra in [("ssr", "ssr", "idx-ssr", []), ("bm25", "bm25", "idx-bm25", []),
                                       ("bm25b", "bm25", "idx-bm25", ["--b", "0.75", "--k1", "1.2", "--tag", "b75"])]:
        out[name] = root / f"{name}.json"
        assert main(["evaluate", "--index", str(root / index), "--queries", str(root / "queries.tsv"),
                     "--qrels", str(root / "qrels.tsv"), "--method", method, "--report", str(out[name]),
                     "--latency-queries", "0", *extra]) == 0
    return out


def test_p_values_equal_scipys(reports, capsys):
    capsys.readouterr()
    paths = [reports["ssr"], reports["bm25"], reports["bm25b"]]
    assert main(["compare", *map(str, paths), "--json", "--resamples", "2000", "--seed", "7"]) == 0
    result = json.loads(capsys.readouterr().out)
    data = [json.loads(p.read_text()) for p in paths]
    assert [r["system"] for r in result["rows"]] == ["ssr", "bm25", "bm25 (b75)"]
    assert result["rows"][1]["metrics"] == data[1]["metrics"]
    metrics = list(data[0]["metrics"])
    assert len(result["tests"]) == len(metrics) * 3 * 2  # measures x tests x systems
    for row in result["tests"]:
        assert set(row) >= {"metric", "system", "baseline", "test", "p_value", "p_holm"}
        assert row["baseline"] == "ssr"
        system = 1 if row["system"] == "bm25" else 2
        qids = sorted(data[0]["per_query"][row["metric"]])
        assert len(qids) == 225 == row["queries"]
        a = np.array([data[system]["per_query"][row["metric"]][q] for q in qids])
        b = np.array([data[0]["per_query"][row["metric"]][q] for q in qids])
        if row["test"] == "paired-t":
            expected = stats.ttest_rel(a, b).pvalue
        elif row["test"] == "wilcoxon":
            expected = stats.wilcoxon(a, b).pvalue
        else:
            expected = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                              permutation_type="samples", vectorized=True, n_resamples=2000,
                                              random_state=7).pvalue
        assert row["p_value"] == expected, row
        assert row["mean_difference"] == pytest.approx(float(np.mean(a - b)), abs=1e-15)
    # bm25 is better than ssr on Cranfield nDCG@10 (README), and significantly so by a paired t-test
    t = next(r for r in result["tests"] if (r["metric"], r["system"], r["test"]) == ("nDCG@10", "bm25", "paired-t"))
    assert t["mean_difference"] > 0 and t["p_holm"] < 0.05
    # Holm across the two systems, per measure and test
    for metric, test in itertools.product(metrics, ("paired-t", "wilcoxon", "randomization")):
        rows = [r for r in result["tests"] if r["metric"] == metric and r["test"] == test]
        assert [r["p_holm"] for r in rows] == holm([r["p_value"] for r in rows])


def test_markdown_output_and_identical_systems(reports, capsys):
    capsys.readouterr()
    assert main(["compare", str(reports["ssr"]), str(reports["ssr"]), "--tests", "paired-t,wilcoxon"]) == 0
    out = capsys.readouterr().out
    # the same report twice: labels disambiguated by file name, every difference 0, no p-value
    assert "| ssr [ssr.json] |" in out and "Paired tests against ssr [ssr.json]" in out
    assert out.count("| n/a | n/a |") == 12


def test_measure_selection_and_errors(reports, tmp_path, capsys):
    capsys.readouterr()
    assert main(["compare", str(reports["ssr"]), str(reports["bm25"]), "--measures", "nDCG@10", "--json",
                 "--tests", "paired-t"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [(t["metric"], t["test"]) for t in result["tests"]] == [("nDCG@10", "paired-t")]
    assert main(["compare", str(reports["ssr"]), str(reports["bm25"]), "--measures", "AP"]) == 2
    assert "'AP' is not in" in capsys.readouterr().err
    old = json.loads(reports["bm25"].read_text())
    del old["per_query"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert main(["compare", str(reports["ssr"]), str(tmp_path / "old.json")]) == 2
    assert "no per-query values" in capsys.readouterr().err
    assert main(["compare", str(reports["ssr"]), str(tmp_path / "old.json"), "--tests", "none"]) == 0
    fewer = json.loads(reports["bm25"].read_text())
    for values in fewer["per_query"].values():
        values.pop(next(iter(values)))
    (tmp_path / "fewer.json").write_text(json.dumps(fewer))
    assert main(["compare", str(reports["ssr"]), str(tmp_path / "fewer.json")]) == 2
    assert "different queries" in capsys.readouterr().err


def brute_holm(p: list[float]) -> list[float]:
    """Holm by its definition: reject H_(i) at level a iff p_(j) <= a / (m - j + 1) for all j <= i;
    the adjusted p-value is the smallest such a (capped at 1)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    for rank, i in enumerate(order):
        out[i] = min(1.0, max(p[order[j]] * (m - j) for j in range(rank + 1)))
    return out


@pytest.mark.parametrize("p", [[0.01, 0.04, 0.03, 0.005], [0.5], [0.2, 0.2, 0.01], [0.9, 0.8, 0.7, 0.01, 0.02]])
def test_holm(p):
    assert holm(p) == pytest.approx(brute_holm(p), abs=0)
    assert holm([None, *p]) == [None, *brute_holm(p)]


def test_paired_tests_rejects_unknown_test():
    with pytest.raises(ValueError, match="unknown test"):
        paired_tests([{"m": {"q": 1.0}}, {"m": {"q": 0.0}}], ["a", "b"], ["m"], ["sign"])
