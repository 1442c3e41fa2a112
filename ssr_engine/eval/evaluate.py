"""One evaluation: a method over an index, a query file and qrels -> TREC run + JSON report.

Measurements (all recorded in the report):
- throughput: queries / wall seconds of the searches themselves (query parsing, kernels and
  id lookup, in batches of `batch` queries with `threads` threads); metric scoring and run
  writing are outside the timed spans. Kernels are compiled (warmed up) before timing.
- latency: each query of an evenly spaced sample (`latency_queries`, default 1,000; sampling
  stops after LATENCY_BUDGET_S seconds once 10 are timed; the report gives the count) searched
  alone with one thread, after the batch run; p50/p95/p99 in milliseconds.
- pool: candidates per query before the top-k cut = documents holding at least one of the
  query's terms (for SSR and exhaustive exactly the documents with score > 0; for BM25 the
  documents with a query term). Counted by the retriever's `pool_sizes`, untimed.

The method is a `retrieval.Retriever` from `open_retriever`; this module never asks which.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SsrError
from ..retrieval import BM25_B, BM25_K1, Retriever, check_k, check_threads, open_retriever
from .metrics import METRICS, Evaluation, ExternalMeasures, RunScorer, by_measure, mean_over, parse_measures
from .stats import percentiles
from .trec import RUN_SCORES, RUN_SCORES_DOC, RunWriter, read_qrels, read_queries, trec_scores

if TYPE_CHECKING:
    from ..format import Index

BATCH = 1024
LATENCY_BUDGET_S = 60.0  # latency sampling stops after this long (at least 10 queries timed)
MAX_LISTED_IDS = 1000


def _machine() -> dict[str, Any]:
    import numba

    return {
        "host": platform.node(),
        "system": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "processor": _cpu_name() or platform.processor(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
    }


def _cpu_name() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _listed(ids: list[str]) -> list[str]:
    return ids[:MAX_LISTED_IDS]


def run_evaluation(
    index: str | os.PathLike[str],
    queries: str | os.PathLike[str],
    qrels: str | os.PathLike[str],
    method: str = "ssr",
    k: int | None = 1000,
    *,
    run_path: str | os.PathLike[str] | None = None,
    report_path: str | os.PathLike[str] | None = None,
    threads: int | None = None,
    tag: str | None = None,
    k1: float = BM25_K1,
    b: float = BM25_B,
    skip_bad_lines: bool = False,
    latency_queries: int = 1000,
    batch: int = BATCH,
    measures: Sequence[str] = METRICS,
    run_scores: str = "trec",
    quiet: bool = True,
    ray: bool = False,
    ray_address: str | None = None,
) -> dict[str, Any]:
    """Run every query, score the run, write the run file and the report; returns the report.

    `measures`: our built-ins (MRR@k, RR@k, R@k, nDCG@k) and ir_measures names (AP, P@k,
    Judged@k, ...), the latter computed by ir_measures on the scores as written to the run.
    A sharded index is searched in this process, or through Ray actors with `ray` / `ray_address`.
    `run_scores`: "trec" (default; `trec_scores`, the ranking survives trec_eval's re-sort) or
    "exact" (true float64 scores). The report's `metrics` hold the means and `per_query` holds
    {measure: {qid: value}} over the judged queries. `quiet=False` shows a progress bar (stderr).
    """
    check_k(k)
    check_threads(threads)
    ours, theirs = _checked_measures(measures, run_scores)
    skipped_queries: list[str] | None = [] if skip_bad_lines else None
    skipped_qrels: list[str] | None = [] if skip_bad_lines else None
    query_map = read_queries(queries, skipped_queries)
    judgements = read_qrels(qrels, skipped_qrels)
    retriever, index_section = _open(index, method, k1, b, ray, ray_address)
    tag = tag or method
    qids, texts = list(query_map), list(query_map.values())

    retriever.search_batch(texts[:1], k, threads)  # compile / load cached kernels outside the timed spans
    external = ExternalMeasures(theirs, judgements) if theirs else None
    evaluation, seconds = _run_queries(retriever, qids, texts, k, threads, batch, RunScorer(judgements, ours),
                                       RunWriter(run_path, tag, run_scores) if run_path is not None else None,
                                       external, quiet)
    per_query = by_measure(evaluation.per_query, ours)
    means = {name: evaluation.metrics[name] for name in ours}
    if external is not None:
        per_query.update(external.per_query(evaluation.evaluated))
        means.update({name: mean_over(per_query[name], evaluation.evaluated) for name in theirs})
    order = list(dict.fromkeys(measures))
    pool = retriever.pool_sizes(texts, threads)
    latencies = _latencies(retriever, texts, k, latency_queries)

    report: dict[str, Any] = {
        "method": method,
        "tag": tag,
        "k": k,
        "metrics": {m: means[m] for m in order},
        "measures": {m: ("ssr_engine" if m in ours else "ir_measures") for m in order},
        "queries": _query_counts(evaluation),
        "skipped_lines": {
            "queries": len(skipped_queries or []),
            "qrels": len(skipped_qrels or []),
            "messages": _listed((skipped_queries or []) + (skipped_qrels or [])),
        },
        "pool": _pool_section(pool),
        "latency_ms": {**percentiles(latencies, (50, 95, 99)), "queries": len(latencies), "threads": 1},
        "throughput_qps": len(texts) / seconds if seconds > 0 else math.inf,
        "search_seconds": seconds,
        "threads": threads if threads is not None else _numba_threads(),
        "batch": batch,
        "method_settings": dict(retriever.settings),
        "index": index_section,
        "files": {
            "queries": _source(queries),
            "qrels": _source(qrels),
            "run": str(Path(run_path).absolute()) if run_path is not None else None,
        },
        "run_scores": RUN_SCORES_DOC if run_scores == "trec" else "exact: the true float64 scores (repr)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": _machine(),
        "per_query": {m: per_query[m] for m in order},
    }
    if report_path is not None:
        write_report(report_path, report)
    return report


def _open(index: str | os.PathLike[str], method: str, k1: float, b: float, ray: bool,
          ray_address: str | None) -> tuple[Retriever, dict[str, Any]]:
    """The method's searcher over a plain, live or sharded index (sharded: on Ray when asked), and the report's
    description of the index."""
    from ..distributed.layout import describe, is_sharded
    from ..format import open_index

    if is_sharded(index):
        from ..distributed.search import open_sharded

        return open_sharded(index, method, ray, ray_address, k1=k1, b=b), describe(index)
    from ..live import open_snapshot

    snapshot = open_snapshot(index)
    try:
        if snapshot.plain:
            ix = open_index(index)
            return open_retriever(ix, method, k1=k1, b=b), _index_section(ix)
        # a live index (several segments or deletions): open_retriever of the directory answers it
        return (open_retriever(index, method, k1=k1, b=b),
                {**_index_section(snapshot.indexes[0]), **_live_section(snapshot)})
    finally:
        snapshot.close()


def _checked_measures(measures: Sequence[str], run_scores: str) -> tuple[list[str], list[str]]:
    """(our measures, ir_measures names) of a request; `SsrError` for an unknown one or a bad mix."""
    if run_scores not in RUN_SCORES:
        raise SsrError(f"run_scores must be one of {', '.join(RUN_SCORES)}, got {run_scores!r}")
    try:
        ours, theirs = parse_measures(list(measures))
    except ValueError as exc:
        raise SsrError(str(exc)) from None
    if not ours and not theirs:
        raise SsrError("no measures given")
    if theirs and run_scores != "trec":
        # ir_measures re-sorts by score: only trec-stable scores keep the ranking that is evaluated
        raise SsrError(f"ir_measures measures ({', '.join(theirs)}) need run_scores='trec'")
    return ours, theirs


def _pool_section(pool: np.ndarray) -> dict[str, Any]:
    return {
        "mean": float(pool.mean()) if len(pool) else 0.0,
        **percentiles(pool.tolist(), (50, 95)),
        "max": int(pool.max()) if len(pool) else 0,
        "definition": "documents with at least one query term (score > 0), before the top-k cut",
    }


def _run_queries(retriever: Retriever, qids: list[str], texts: list[str], k: int | None, threads: int | None,
                 batch: int, scorer: RunScorer, writer: RunWriter | None,
                 external: ExternalMeasures | None = None, quiet: bool = True) -> tuple[Evaluation, float]:
    """Search every query in batches (timed), scoring and writing the run (untimed); (evaluation, seconds)."""
    import sys

    from tqdm import tqdm

    seconds = 0.0
    bar = tqdm(total=len(texts), desc=f"ssr evaluate: {retriever.method}", unit=" queries", disable=quiet,
               file=sys.stderr)
    with bar, writer if writer is not None else nullcontext() as out:
        for start in range(0, len(texts), batch):
            t0 = time.perf_counter()
            results = retriever.search_batch(texts[start : start + batch], k, threads)
            seconds += time.perf_counter() - t0
            for qid, res in zip(qids[start : start + batch], results, strict=True):
                ranked = res.ids.tolist()
                scorer.add(qid, ranked)
                if out is not None:
                    out.add(qid, ranked, res.scores.tolist())
                if external is not None:
                    external.add(qid, ranked, trec_scores(res.scores).tolist())
            bar.update(len(results))
    return scorer.finish(), seconds


def _latencies(retriever: Retriever, texts: list[str], k: int | None, n: int) -> list[float]:
    """Milliseconds of single-query searches on one thread over an evenly spaced sample of `n` queries."""
    n_sample = max(0, min(n, len(texts)))
    sample = np.unique(np.linspace(0, len(texts) - 1, n_sample).round().astype(np.int64)).tolist()
    latencies: list[float] = []
    started = time.perf_counter()
    for i in sample:
        # a budget, so that a slow method (a full scan of 8.8M documents per query) still ends
        if len(latencies) >= 10 and time.perf_counter() - started > LATENCY_BUDGET_S:
            break
        t0 = time.perf_counter()
        retriever.search_batch([texts[i]], k, 1)
        latencies.append((time.perf_counter() - t0) * 1000.0)
    return latencies


def _query_counts(evaluation: Evaluation) -> dict[str, Any]:
    return {
        "total": evaluation.n_queries,
        "judged": len(evaluation.evaluated),
        "without_qrels": len(evaluation.unjudged),
        "without_qrels_ids": _listed(evaluation.unjudged),
        "qrels_not_run": len(evaluation.not_run),
        "qrels_not_run_ids": _listed(evaluation.not_run),
        "empty_results": len(evaluation.empty),
        "empty_results_ids": _listed(evaluation.empty),
        "denominator": "judged: queries run that have qrels (empty results count as 0)",
    }


def _live_section(snapshot: Any) -> dict[str, Any]:
    """A live index's counts over all its segments (the first segment's would mislead), and its segments."""
    return {"path": str(Path(snapshot.root).absolute()),
            "counts": {"documents": sum(ref.documents for ref in snapshot.commit.segments)},
            "live": {"generation": snapshot.generation, "segments": [
                {"name": ref.name, "documents": seg.n_docs, "live": ref.documents}
                for ref, seg in zip(snapshot.commit.segments, snapshot.indexes, strict=True)]}}


def _index_section(ix: Index) -> dict[str, Any]:
    signals = {key: v for key, v in ix.manifest.to_dict()["signals"].items() if key != "stopwords"}
    return {
        "path": str(Path(ix.root or ix.path).absolute()),
        "scoring": ix.scoring,
        "counts": ix.manifest.to_dict()["counts"],
        "signals": signals,
        "build": ix.manifest.build,
    }


def _source(path: str | os.PathLike[str]) -> str:
    """An input file's absolute path, or an irds:NAME id as given."""
    return path if isinstance(path, str) and path.startswith("irds:") else str(Path(path).absolute())


def _numba_threads() -> int:
    import numba

    return int(numba.get_num_threads())


def write_report(path: str | os.PathLike[str], report: dict[str, Any]) -> None:
    from ..atomic import write_text

    write_text(path, json.dumps(report, indent=2, sort_keys=False) + "\n")


def _label(report: dict[str, Any]) -> str:
    """The method, with the run tag when it differs."""
    method, tag = report["method"], report.get("tag")
    return method if tag in (None, method) else f"{method} ({tag})"


def format_summary(report: dict[str, Any]) -> str:
    """A short plain-text table of one report."""
    q = report["queries"]
    lines = [f"method {_label(report)}  k={report['k']}  queries {q['total']}  judged {q['judged']}  "
             f"without qrels {q['without_qrels']}  empty results {q['empty_results']}"]
    names = list(report["metrics"])
    lines.append("  ".join(f"{m:>8}" for m in names))
    lines.append("  ".join(f"{report['metrics'][m]:>8.4f}" for m in names))
    lat, pool = report["latency_ms"], report["pool"]
    lines.append(f"throughput {report['throughput_qps']:.1f} q/s ({report['threads']} threads)  "
                 f"latency p50 {lat['p50']:.2f} p95 {lat['p95']:.2f} p99 {lat['p99']:.2f} ms  "
                 f"pool mean {pool['mean']:.1f} p50 {pool['p50']:.0f} p95 {pool['p95']:.0f}")
    return "\n".join(lines)


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a report written by `run_evaluation`; InputError when it is not one."""
    from ..errors import InputError

    path = Path(path)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, getattr(exc, "lineno", None), f"not a JSON report ({exc})") from exc
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict) or "method" not in report:
        raise InputError(path, None, "not an `ssr evaluate` report (no method or metrics)")
    if not report["metrics"] or not all(isinstance(v, (int, float)) for v in report["metrics"].values()):
        raise InputError(path, None, "report metrics must be a non-empty mapping of numbers")
    per_query = report.get("per_query")
    if per_query is not None and not (
        isinstance(per_query, dict)
        and all(isinstance(v, dict) and all(isinstance(x, (int, float)) for x in v.values())
                for v in per_query.values())
    ):
        raise InputError(path, None, "per_query must map measure -> {qid: number}")
    return report


def common_measures(reports: Sequence[dict[str, Any]]) -> list[str]:
    """Measures every report has, in the first report's order."""
    names = list(reports[0]["metrics"]) if reports else []
    return [m for m in names if all(m in r["metrics"] for r in reports)]


def markdown_table(reports: Sequence[dict[str, Any]], measures: Sequence[str] | None = None) -> str:
    """Methods as rows; metrics (default: those all reports have), throughput, latency, pool size."""
    names = list(measures) if measures is not None else common_measures(reports)
    header = ["method", "index", "judged", *names, "q/s", "p50 ms", "pool mean"]
    rows = []
    for r in reports:
        label = _label(r)
        index = Path(str(r.get("index", {}).get("path", "?"))).name
        lat = r.get("latency_ms", {})
        rows.append([
            label, index, str(r.get("queries", {}).get("judged", "?")),
            *(f"{float(r['metrics'][m]):.4f}" for m in names),
            f"{float(r.get('throughput_qps', float('nan'))):.1f}",
            f"{float(lat.get('p50', float('nan'))):.2f}",
            f"{float(r.get('pool', {}).get('mean', float('nan'))):.1f}",
        ])
    rule = "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
