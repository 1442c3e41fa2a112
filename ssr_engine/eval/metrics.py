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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

METRICS = ("MRR@10", "R@10", "R@20", "R@100", "R@1000", "nDCG@10")
RECALL_CUTOFFS = (10, 20, 100, 1000)


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


def query_metrics(ranked: Sequence[str], judged: Mapping[str, int]) -> dict[str, float]:
    """All of METRICS for one query."""
    out = {"MRR@10": reciprocal_rank(ranked, judged, 10)}
    for c in RECALL_CUTOFFS:
        out[f"R@{c}"] = recall(ranked, judged, c)
    out["nDCG@10"] = ndcg(ranked, judged, 10)
    return out


@dataclass
class Evaluation:
    """Means over the evaluated queries, per-query values, and what was left out and why."""

    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    n_queries: int  # queries run
    evaluated: list[str]  # run and judged: the denominator of every mean
    unjudged: list[str] = field(default_factory=list)  # run, no qrels: not in the means
    not_run: list[str] = field(default_factory=list)  # in the qrels, not run: not in the means
    empty: list[str] = field(default_factory=list)  # run, no results (evaluated ones score 0)


class RunScorer:
    """Scores queries one at a time (no run held in memory), then summarises as `Evaluation`."""

    def __init__(self, qrels: Mapping[str, Mapping[str, int]]):
        self.qrels = qrels
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
        values = query_metrics(list(ranked[:1000]), judged)
        self.per_query[qid] = values
        return values

    def finish(self) -> Evaluation:
        n = len(self.evaluated)
        means = {m: (math.fsum(self.per_query[q][m] for q in self.evaluated) / n if n else 0.0) for m in METRICS}
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
