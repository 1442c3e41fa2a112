"""Metrics agree with trec_eval (through ir_measures) and follow the documented denominators."""

from __future__ import annotations

import math
import random

import ir_measures
import numpy as np
import pytest
from conftest import IR_NAMES

from ssr_engine.eval.metrics import METRICS, evaluate_run, ndcg, query_metrics, recall, reciprocal_rank


def random_case(seed: int, n_queries: int = 40, n_docs: int = 1500, graded: bool = True):
    """Random qrels and run. The run is ordered as trec_eval orders it: score desc, docid desc,
    with many tied scores, so passing the real scores to ir_measures keeps our order."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(n_docs)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    scores: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(1, 30))
        levels = [-1, 0, 1, 2, 3] if graded else [0, 1]
        qrels[qid] = {d: rng.choice(levels) for d in judged}
        kind = rng.random()
        if kind < 0.1:
            continue  # no results at all
        size = rng.choice([0, 1, 5, 15, 120, 1200])
        # bias the run towards judged documents so the metrics are not all zero
        pool = list(dict.fromkeys(rng.sample(judged, min(len(judged), 10)) + rng.sample(docs, size)))[:size]
        if not pool:
            run[qid] = []
            continue
        sc = {d: float(rng.randint(0, 20)) / 4 for d in pool}  # coarse scores: many ties
        ranked = sorted(pool, key=lambda d: d, reverse=True)
        ranked.sort(key=lambda d: -sc[d])
        run[qid] = ranked
        scores[qid] = sc
    return qrels, run, scores


def trec_eval_values(qrels, runs):
    return {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(list(IR_NAMES.values()), qrels, runs)}


@pytest.mark.parametrize("seed,graded", [(1, True), (2, True), (3, False), (4, True), (5, False)])
def test_agrees_with_trec_eval(seed, graded):
    qrels, run, scores = random_case(seed, graded=graded)
    ours = evaluate_run(run, qrels, queries=list(qrels))
    # trec_eval scores only queries present in the run; ours also counts the empty ones, as 0
    nonempty = {q: s for q, s in scores.items() if s}
    # scores that encode our rank: every provider then reads our order
    by_rank = {q: {d: float(len(run[q]) - i) for i, d in enumerate(run[q])} for q in nonempty}
    # the real, tied scores: trec_eval breaks ties by docid descending, as random_case ordered them
    # (ir_measures' RR@10 comes from its msmarco provider, which breaks ties otherwise: not compared)
    tied = trec_eval_values(qrels, nonempty)
    theirs = trec_eval_values(qrels, by_rank)
    for name, measure in IR_NAMES.items():
        total = 0.0
        for qid in qrels:
            value = ours.per_query[qid][name]
            if qid in nonempty:
                assert value == pytest.approx(theirs[(qid, str(measure))], abs=1e-9), (qid, name)
                if name != "MRR@10":
                    assert value == pytest.approx(tied[(qid, str(measure))], abs=1e-9), (qid, name)
            else:
                assert value == 0.0
            total += value
        assert ours.metrics[name] == pytest.approx(total / len(qrels), abs=1e-12)
        # the mean equals trec_eval's sum over the non-empty queries divided by all judged queries
        their_sum = sum(theirs[(q, str(measure))] for q in nonempty)
        assert ours.metrics[name] == pytest.approx(their_sum / len(qrels), abs=1e-6)
    assert sorted(ours.empty) == sorted(q for q in qrels if not run.get(q))


def test_ties_follow_the_given_order_not_the_scores():
    # metrics read rank positions; two orders of the same tied documents can score differently
    judged = {"a": 1}
    assert reciprocal_rank(["a", "b"], judged) == 1.0
    assert reciprocal_rank(["b", "a"], judged) == 0.5


def test_hand_computed_values():
    judged = {"a": 3, "b": 0, "c": 1, "x": -2, "y": 2}
    ranked = ["b", "c", "x", "a"]
    assert reciprocal_rank(ranked, judged) == 0.5
    assert recall(ranked, judged, 10) == pytest.approx(2 / 3)
    assert recall(ranked, judged, 1) == 0.0
    dcg = 1 / math.log2(3) + 3 / math.log2(5)  # negative and zero grades give no gain
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg(ranked, judged) == pytest.approx(dcg / idcg)
    assert reciprocal_rank(["z"] * 10 + ["a"], judged) == 0.0  # beyond the cut-off


def test_judged_only_non_relevant_scores_zero_and_counts():
    m = query_metrics(["a", "b"], {"a": 0, "b": -1})
    assert all(v == 0.0 for v in m.values())
    ev = evaluate_run({"q1": ["a"], "q2": ["a"]}, {"q1": {"a": 0}, "q2": {"a": 1}})
    assert ev.evaluated == ["q1", "q2"]
    assert ev.metrics["MRR@10"] == 0.5


def test_denominators_and_reported_queries():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q9": {"z": 1}}
    run = {"q1": ["a"], "q2": ["x", "b"], "q4": ["a"]}
    ev = evaluate_run(run, qrels, queries=["q1", "q2", "q3", "q4", "q5"])
    assert ev.n_queries == 5
    assert ev.evaluated == ["q1", "q2", "q3"]  # q3 has no results: a miss in the denominator
    assert ev.unjudged == ["q4", "q5"]  # run without qrels: reported, not averaged
    assert ev.not_run == ["q9"]  # qrels not asked: reported, not averaged
    assert ev.empty == ["q3", "q5"]
    assert ev.metrics["MRR@10"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert ev.metrics["R@1000"] == pytest.approx(2 / 3)
    assert set(ev.metrics) == set(METRICS)


def test_default_query_set_is_the_run_and_arrays_work():
    ev = evaluate_run({"q1": np.array(["b", "a"]), "q2": np.array([], dtype=str)}, {"q1": {"a": 2}, "q2": {"a": 1}})
    assert ev.metrics["MRR@10"] == 0.25
    assert ev.empty == ["q2"]


def test_no_evaluated_queries_gives_zeros():
    ev = evaluate_run({"q1": ["a"]}, {"q2": {"a": 1}})
    assert ev.evaluated == [] and ev.unjudged == ["q1"] and ev.not_run == ["q2"]
    assert all(v == 0.0 for v in ev.metrics.values())
