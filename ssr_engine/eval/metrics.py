"""Retrieval metrics over a run and qrels, with trec_eval's definitions.

Definitions (a document is relevant when its judgement is > 0; unjudged documents are
non-relevant; rankings are taken in the given order, never re-sorted by score):

    MRR@10   1 / rank of the first relevant document in the top 10, else 0
    R@K      relevant documents in the top K / relevant documents of the query (0 if none)
    nDCG@10  DCG@10 / ideal DCG@10, DCG = sum of max(rel, 0) / log2(rank + 1);
             the ideal ranking sorts the query's judgements (0 when it has no gain)

Denominator. Every mean is over the *evaluated* queries: the queries that were run and
appear in the qrels (with at least one judgement of any grade). That is MS MARCO's
definition when the query file and the qrels cover the same queries (dev-small), and
trec_eval's with `-c` (judged queries missing from the run count as 0). In particular a run
query with no results, or with results none of which is relevant, scores 0 on every metric.
Run queries without judgements cannot be scored; they are left out of the means and
reported by id (`unjudged`), as are qrels queries that were not run (`not_run`).

Measures. The six of METRICS are the default. `parse_measures` also accepts any cutoff of
ours (`MRR@k` or `RR@k`, `R@k`, `nDCG@k`) and, when ir_measures is installed, any measure it
names (AP, P@k, Judged@k, ...): those are computed by ir_measures (pytrec_eval) on the run as
written (`ExternalMeasures`), with a judged query missing from its output counted as 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

METRICS = ("MRR@10", "R@10", "R@20", "R@100", "R@1000", "nDCG@10")


def reciprocal_rank(ranked: Sequence[str], judged: Mapping[str, int], cutoff: int = 10) -> float:
    for rank, docid in enumerate(ranked[:cutoff], start=1):
        if judged.get(docid, 0) > 0:
            return 1.0 / rank
    return 0.0


def recall(ranked: Sequence[str], judged: Mapping[str, int], cutoff: int) -> float:
    n_relevant = sum(1 for rel in judged.values() if rel > 0)
    if n_relevant == 0:
        return 0.0
    return sum(1 for docid in ranked[:cutoff] if judged.get(docid, 0) > 0) / n_relevant


def ndcg(ranked: Sequence[str], judged: Mapping[str, int], cutoff: int = 10) -> float:
    ideal_gains = sorted((rel for rel in judged.values() if rel > 0), reverse=True)[:cutoff]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    if ideal == 0.0:
        return 0.0
    dcg = 0.0
    for i, docid in enumerate(ranked[:cutoff]):
        gain = judged.get(docid, 0)
        if gain > 0:
            dcg += gain / math.log2(i + 2)
    return dcg / ideal


_BUILTIN = re.compile(r"^(MRR|RR|R|nDCG)@([1-9][0-9]*)$")
_FUNCTIONS = {"MRR": reciprocal_rank, "RR": reciprocal_rank, "R": recall, "nDCG": ndcg}


def builtin_cutoff(name: str) -> int | None:
    """The cutoff of a measure we compute ourselves (MRR@k, RR@k, R@k, nDCG@k); None otherwise."""
    m = _BUILTIN.match(name)
    return int(m.group(2)) if m else None


def query_metrics(ranked: Sequence[str], judged: Mapping[str, int],
                  names: Sequence[str] = METRICS) -> dict[str, float]:
    """Our built-in measures (default: all of METRICS) for one query."""
    out = {}
    for name in names:
        m = _BUILTIN.match(name)
        if m is None:
            raise ValueError(f"{name!r} is not a built-in measure")
        out[name] = _FUNCTIONS[m.group(1)](ranked, judged, int(m.group(2)))
    return out


def parse_measures(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split measure names into (ours, ir_measures'), keeping their order; errors name the culprit."""
    ours: list[str] = []
    theirs: list[str] = []
    for name in dict.fromkeys(names):
        if builtin_cutoff(name) is not None:
            ours.append(name)
            continue
        try:
            import ir_measures
        except ImportError:
            raise ValueError(f"measure {name!r} needs ir_measures (pip install ir_measures); built in: "
                             "MRR@k, RR@k, R@k, nDCG@k") from None
        try:
            ir_measures.parse_measure(name)
        except (ValueError, NameError, SyntaxError, TypeError, AttributeError) as exc:
            raise ValueError(f"unknown measure {name!r} ({exc})") from None
        theirs.append(name)
    return ours, theirs


class ExternalMeasures:
    """ir_measures' measures over a run given query by query as (docids, written scores).

    The scores must be the ones written to the run file (`trec_scores`), so that ir_measures'
    re-sort keeps our order. Holds the run in memory (qid -> {docid: score}).
    """

    def __init__(self, names: Sequence[str], qrels: Mapping[str, Mapping[str, int]]):
        import ir_measures

        self.names = list(names)
        self.measures = {name: ir_measures.parse_measure(name) for name in self.names}
        self.qrels = {q: dict(j) for q, j in qrels.items()}
        self.run: dict[str, dict[str, float]] = {}

    def add(self, qid: str, docids: Sequence[str], written_scores: Sequence[float]) -> None:
        if qid in self.qrels and len(docids):
            self.run[qid] = dict(zip(docids, map(float, written_scores), strict=True))

    def per_query(self, evaluated: Sequence[str]) -> dict[str, dict[str, float]]:
        """name -> {qid: value} over `evaluated` (0 for a query absent from ir_measures' output)."""
        import ir_measures

        by_str = {str(m): name for name, m in self.measures.items()}
        out: dict[str, dict[str, float]] = {name: dict.fromkeys(evaluated, 0.0) for name in self.names}
        if self.run:
            for row in ir_measures.iter_calc(list(self.measures.values()), self.qrels, self.run):
                name = by_str[str(row.measure)]
                if row.query_id in out[name]:
                    out[name][row.query_id] = float(row.value)
        return out


@dataclass
class Evaluation:
    """Means over the evaluated queries, per-query values, and what was left out and why."""

    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]  # qid -> {measure: value}
    n_queries: int  # queries run
    evaluated: list[str]  # run and judged: the denominator of every mean
    unjudged: list[str] = field(default_factory=list)  # run, no qrels: not in the means
    not_run: list[str] = field(default_factory=list)  # in the qrels, not run: not in the means
    empty: list[str] = field(default_factory=list)  # run, no results (evaluated ones score 0)


class RunScorer:
    """Scores queries one at a time (no run held in memory), then summarises as `Evaluation`.

    `names` are built-in measures (default METRICS); see `parse_measures` for the others.
    """

    def __init__(self, qrels: Mapping[str, Mapping[str, int]], names: Sequence[str] = METRICS):
        self.qrels = qrels
        self.names = list(names)
        cutoffs = [builtin_cutoff(n) for n in self.names]
        if any(c is None for c in cutoffs):
            raise ValueError(f"not built-in measures: {[n for n in self.names if builtin_cutoff(n) is None]}")
        self.depth = max([c for c in cutoffs if c is not None], default=0)
        self.qids: list[str] = []
        self.per_query: dict[str, dict[str, float]] = {}
        self.evaluated: list[str] = []
        self.unjudged: list[str] = []
        self.empty: list[str] = []

    def add(self, qid: str, ranked: Sequence[str]) -> dict[str, float] | None:
        """Record one run query (best first; empty = no results); its metrics, or None if unjudged."""
        if qid in self.per_query or qid in self.unjudged:
            raise ValueError(f"query {qid!r} scored twice")
        self.qids.append(qid)
        if len(ranked) == 0:
            self.empty.append(qid)
        judged = self.qrels.get(qid)
        if not judged:
            self.unjudged.append(qid)
            return None
        self.evaluated.append(qid)
        values = query_metrics(list(ranked[: self.depth]), judged, self.names)
        self.per_query[qid] = values
        return values

    def finish(self) -> Evaluation:
        n = len(self.evaluated)
        means = {m: (math.fsum(self.per_query[q][m] for q in self.evaluated) / n if n else 0.0) for m in self.names}
        asked = set(self.qids)
        not_run = [q for q in self.qrels if q not in asked and self.qrels[q]]
        return Evaluation(means, self.per_query, len(self.qids), self.evaluated, self.unjudged, not_run, self.empty)


def evaluate_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    queries: Iterable[str] | None = None,
) -> Evaluation:
    """Score `run` (qid -> ranked docids, best first) against `qrels`.

    `queries` is the set of queries that were run (default: the run's keys); a query in it
    that is missing from `run` or has an empty list had no results and counts as a miss.
    """
    scorer = RunScorer(qrels)
    for qid in dict.fromkeys(queries if queries is not None else run.keys()):
        scorer.add(qid, run.get(qid, ()))
    return scorer.finish()


def mean_over(values: Mapping[str, float], evaluated: Sequence[str]) -> float:
    """The mean of `values` over `evaluated` (exactly rounded sum), 0.0 for no queries."""
    return math.fsum(values[q] for q in evaluated) / len(evaluated) if evaluated else 0.0


def by_measure(per_query: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> dict[str, dict[str, float]]:
    """{qid: {measure: v}} -> {measure: {qid: v}} (the report's `per_query` shape)."""
    return {name: {q: values[name] for q, values in per_query.items()} for name in names}
