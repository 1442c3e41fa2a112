"""Part 1: Cranfield-1400 (bundled): SSR, the exhaustive check and BM25, checked against trec_eval."""

from __future__ import annotations

from typing import Any

from ..datasets import CHECKSUMS
from .steps import Say, ensure_index, trec_eval_metrics
from .workdir import WorkDir

METHODS = (("ssr", "ssr"), ("exhaustive", "ssr"), ("bm25", "bm25"))  # (method, index scoring)
K = 1000
SIGNIFICANCE_MEASURES = ("nDCG@10", "MRR@10", "R@1000")
SIGNIFICANCE_TESTS = ("paired-t", "randomization")


def run_cranfield(work: WorkDir, say: Say, *, quiet: bool = True) -> dict[str, Any]:
    """Convert, index, evaluate; the report section `cranfield` (metrics, checks, timings)."""
    from ..datasets.cranfield import write_cranfield
    from ..eval.evaluate import run_evaluation
    from ..eval.trec import read_run

    data = work.file("cranfield")
    key = {"dataset": "cranfield", "sha256": CHECKSUMS["cranfield"]}
    files = [data / n for n in ("collection.tsv", "queries.tsv", "qrels.tsv", "stats.json")]
    if not work.fresh("cranfield", key):
        work.claim("cranfield", [data])
        say(f"writing Cranfield (bundled) into {data}")
        write_cranfield(data)
        work.done("cranfield", key, [data, *files])
    collection = data / "collection.tsv"
    indexes = {}
    builds = {}
    for scoring in ("ssr", "bm25"):
        indexes[scoring], builds[scoring] = ensure_index(work, f"cranfield-index-{scoring}", collection, key,
                                                         scoring, say, quiet=quiet)

    rows: dict[str, dict[str, Any]] = {}
    per_query: dict[str, Any] = {}
    for method, scoring in METHODS:
        say(f"Cranfield: evaluating {method}")
        run_path, report_path = work.file(f"cranfield-{method}.trec"), work.file(f"cranfield-{method}.json")
        work.claim(f"cranfield-{method}", [run_path, report_path])
        report = run_evaluation(indexes[scoring], data / "queries.tsv", data / "qrels.tsv", method, K,
                                run_path=run_path, report_path=report_path, latency_queries=225)
        work.done(f"cranfield-{method}", {"method": method}, [run_path, report_path])
        per_query[method] = report["per_query"]
        judged = [q for q in _judged_ids(data / "qrels.tsv", data / "queries.tsv")]
        trec = trec_eval_metrics(run_path, data / "qrels.tsv", judged)
        rows[method] = {
            "metrics": report["metrics"],
            "trec_eval": trec,
            "trec_eval_max_abs_diff": (max(abs(trec[m] - report["metrics"][m]) for m in trec)
                                       if trec is not None else None),
            "queries": report["queries"]["total"],
            "judged": report["queries"]["judged"],
            "empty_results": report["queries"]["empty_results"],
            "throughput_qps": report["throughput_qps"],
            "threads": report["threads"],
            "latency_ms": report["latency_ms"],
            "pool_mean": report["pool"]["mean"],
            "run": str(run_path),
            "report": str(report_path),
        }
    ssr_run, exh_run = read_run(work.file("cranfield-ssr.trec")), read_run(work.file("cranfield-exhaustive.trec"))
    same = sum(1 for q in ssr_run if q in exh_run and ssr_run[q].docids == exh_run[q].docids
               and ssr_run[q].scores == exh_run[q].scores)
    from ..eval.compare import paired_tests

    # SSR against BM25, per query, on the same 225 judged queries (eval.compare); the exhaustive
    # scan's run is SSR's (checked below), so testing it too would only double Holm's family
    tests = paired_tests([per_query["bm25"], per_query["ssr"]], ["bm25", "ssr"], SIGNIFICANCE_MEASURES,
                         SIGNIFICANCE_TESTS)
    return {
        "significance": tests,
        "collection": {"documents": 1400, "queries": 225, "qrels_lines": 1837, "source": "bundled Cranfield-1400"},
        "k": K,
        "methods": rows,
        "inverted_equals_exhaustive": {"queries": len(ssr_run), "identical": same,
                                       "all": same == len(ssr_run) == len(exh_run)},
        "builds": builds,
    }


def _judged_ids(qrels_path: Any, queries_path: Any) -> list[str]:
    """Queries that were run and have judgements: the denominator of every mean."""
    from ..eval.trec import read_qrels, read_queries

    qrels = read_qrels(qrels_path)
    return [q for q in read_queries(queries_path) if qrels.get(q)]
