"""Run files evaluate the same everywhere: what `ssr evaluate` reports equals what pytrec_eval and
ir_measures compute from the run file it wrote, on real collections with many tied scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytrec_eval  # pytrec-eval-terrier, a test-only peer in the test extra: never skipped
from conftest import load_data_script

from ssr_engine import build_index
from ssr_engine.cli import main

# our measure -> (pytrec_eval measure, depth the run is cut to before it is evaluated)
PYTREC = {"MRR@10": ("recip_rank", 10), "R@10": ("recall_10", None), "R@20": ("recall_20", None),
          "R@100": ("recall_100", None), "R@1000": ("recall_1000", None), "nDCG@10": ("ndcg_cut_10", None)}


def read_run_as_written(path: Path) -> dict[str, list[tuple[str, float]]]:
    """qid -> [(docid, score)] in file order, scores parsed from the text (no re-sorting here)."""
    run: dict[str, list[tuple[str, float]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, docid, _, score, _ = line.split()
        run.setdefault(qid, []).append((docid, float(score)))
    return run


def pytrec_per_query(qrels_path: Path, run_path: Path) -> dict[str, dict[str, float]]:
    """Our measure -> {qid: pytrec_eval's value on the run file}, trec_eval's own re-sort applied."""
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_path.read_text(encoding="utf-8").splitlines():
        qid, _, docid, rel = line.split()
        qrels.setdefault(qid, {})[docid] = int(rel)
    run = read_run_as_written(run_path)
    out: dict[str, dict[str, float]] = {}
    for name, (measure, depth) in PYTREC.items():
        # recip_rank has no cutoff in trec_eval: keep the first `depth` in trec_eval's own order
        # (score descending, then docno descending), then let it evaluate that
        cut = {q: dict(sorted(sorted(docs, key=lambda e: e[0], reverse=True), key=lambda e: -e[1])[:depth]
                       if depth else docs) for q, docs in run.items()}
        values = pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(cut)
        out[name] = {q: v[measure] for q, v in values.items()}
    return out


def prepared(tmp_path_factory, dataset: str) -> Path:
    out = tmp_path_factory.mktemp(dataset)
    assert load_data_script("prepare_real").main([dataset, "--out", str(out)]) == 0  # the bundled copy
    return out


@pytest.fixture(scope="module", params=["cranfield", "metatool"])
def real(request, tmp_path_factory):
    root = prepared(tmp_path_factory, request.param)
    build_index(root / "collection.tsv", root / "idx-ssr", quiet=True, workers=1)
    build_index(root / "collection.tsv", root / "idx-bm25", scoring="bm25", quiet=True, workers=1)
    return root


def evaluate(root: Path, method: str, *extra: str) -> tuple[dict, Path]:
    index = root / ("idx-bm25" if method == "bm25" else "idx-ssr")
    run, report = root / f"{method}{'-'.join(extra)}.trec", root / f"{method}{'-'.join(extra)}.json"
    assert main(["evaluate", "--index", str(index), "--queries", str(root / "queries.tsv"), "--qrels",
                 str(root / "qrels.tsv"), "--method", method, "-k", "1000", "--run", str(run), "--report",
                 str(report), "--latency-queries", "0", *extra]) == 0
    return json.loads(report.read_text()), run


def ties(run_path: Path) -> int:
    """Lines whose true score equals the previous line's (read from an exact-score run)."""
    run = read_run_as_written(run_path)
    return sum(1 for docs in run.values() for a, b in zip(docs, docs[1:], strict=False) if a[1] == b[1])


@pytest.mark.parametrize("method", ["ssr", "bm25"])
def test_evaluate_equals_pytrec_eval_on_the_written_run(real, method, capsys):
    report, run_path = evaluate(real, method)
    theirs = pytrec_per_query(real / "qrels.tsv", run_path)
    judged = report["queries"]["judged"]
    for name in PYTREC:
        ours = report["per_query"][name]
        assert len(ours) == judged
        for qid, value in ours.items():
            # a judged query with no results is absent from the run: 0, as trec_eval -c counts it
            assert abs(value - theirs[name].get(qid, 0.0)) <= 1e-9, (name, qid)
        mean = sum(theirs[name].get(q, 0.0) for q in ours) / judged
        assert abs(report["metrics"][name] - mean) <= 1e-9, name

    # the check has teeth: the true scores tie, and written as they are, trec_eval's re-sort changes
    # the ranking it evaluates (for SSR's binary signals on these collections)
    exact, exact_run = evaluate(real, method, "--run-scores", "exact")
    assert exact["metrics"] == report["metrics"]  # our ranking is the same either way
    if method == "ssr":
        assert ties(exact_run) > 1000
        resorted = pytrec_per_query(real / "qrels.tsv", exact_run)
        assert any(abs(exact["per_query"][n][q] - resorted[n].get(q, 0.0)) > 1e-9
                   for n in PYTREC for q in exact["per_query"][n])


def test_ir_measures_names_through_ir_measures(real):
    import ir_measures

    report, run_path = evaluate(real, "ssr", "--measures", "AP", "P@5", "Judged@10", "RR@10", "nDCG@20",
                                "R@1000")
    assert report["measures"] == {"AP": "ir_measures", "P@5": "ir_measures", "Judged@10": "ir_measures",
                                  "RR@10": "ssr_engine", "nDCG@20": "ssr_engine", "R@1000": "ssr_engine"}
    measures = [ir_measures.parse_measure(m) for m in report["metrics"]]
    qrels = list(ir_measures.read_trec_qrels(str(real / "qrels.tsv")))
    theirs: dict[str, dict[str, float]] = {}
    for row in ir_measures.iter_calc(measures, qrels, ir_measures.read_trec_run(str(run_path))):
        theirs.setdefault(str(row.measure), {})[row.query_id] = row.value
    for name, per_query in report["per_query"].items():
        for qid, value in per_query.items():
            assert abs(value - theirs[name].get(qid, 0.0)) <= 1e-9, (name, qid)
