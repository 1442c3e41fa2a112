"""Check an `ssr evaluate` report against pytrec_eval (trec_eval's code) on the run file it wrote.

    python benchmarks/check_trec_eval.py REPORT.json [--qrels FILE] [--run FILE]

pytrec_eval reads the run exactly as trec_eval would (re-sorted by score, then docno descending;
scores held as float32). recip_rank has no cutoff in trec_eval, so MRR@10 is checked on each
query's first 10 lines in trec_eval's own order. A judged query absent from the run counts 0
(trec_eval -c). Prints, per measure, the report's mean, pytrec_eval's and the largest per-query
|difference|; exits 1 if any |difference| exceeds 1e-9.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PYTREC = {"MRR@10": ("recip_rank", 10), "R@10": ("recall_10", None), "R@20": ("recall_20", None),
          "R@100": ("recall_100", None), "R@1000": ("recall_1000", None), "nDCG@10": ("ndcg_cut_10", None)}
TOLERANCE = 1e-9


def main(argv: list[str] | None = None) -> int:
    import pytrec_eval

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ssr_engine.eval.trec import read_qrels

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report")
    p.add_argument("--qrels", help="default: the report's qrels file")
    p.add_argument("--run", help="default: the report's run file")
    args = p.parse_args(argv)
    report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    qrels = read_qrels(args.qrels or report["files"]["qrels"])
    run: dict[str, list[tuple[str, float]]] = {}
    with open(args.run or report["files"]["run"], encoding="utf-8") as f:
        for line in f:
            qid, _, docid, _, score, _ = line.split()
            run.setdefault(qid, []).append((docid, float(score)))
    worst = 0.0
    print(f"{'measure':>8} {'ssr evaluate':>14} {'pytrec_eval':>14} {'max |d| per query':>18}")
    for name, (measure, depth) in PYTREC.items():
        if name not in report["per_query"]:
            continue
        if depth:  # trec_eval's order: score descending, then docno descending; keep the first `depth`
            cut = {q: dict(sorted(sorted(d, key=lambda e: e[0], reverse=True), key=lambda e: -e[1])[:depth])
                   for q, d in run.items()}
        else:
            cut = {q: dict(d) for q, d in run.items()}
        theirs = pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(cut)
        ours = report["per_query"][name]
        diff = max((abs(v - theirs.get(q, {}).get(measure, 0.0)) for q, v in ours.items()), default=0.0)
        mean = sum(theirs.get(q, {}).get(measure, 0.0) for q in ours) / len(ours)
        diff = max(diff, abs(mean - report["metrics"][name]))
        worst = max(worst, diff)
        print(f"{name:>8} {report['metrics'][name]:>14.10f} {mean:>14.10f} {diff:>18.3g}")
        del cut, theirs
    print(f"queries {len(next(iter(report['per_query'].values())))}, run lines {sum(len(d) for d in run.values())}, "
          f"largest |difference| {worst:.3g} ({'OK' if worst <= TOLERANCE else 'FAIL'} at {TOLERANCE})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
