"""Every query's top K by the inverted methods against the exhaustive forward scan, bit for bit.

    python benchmarks/check_exactness.py --index DIR --queries QUERIES.tsv [--k 10 100 1000] [--methods ssr union]
        [--reference OTHER_DIR] [--max-queries N]

The result order is total (score desc, matches desc, id asc; ids are unique), so the exhaustive
top-k for a smaller k is a prefix of its top-(largest k): the scan runs once, at the largest K.
Compares ids, score bits and matches; prints a JSON report and exits 1 if any query differs.
`--reference`: the scan of another index of the same collection (an older format's) is the truth,
so `--methods exhaustive` checks this index's own scan too. `--reference-method ssr`: the reference's
own answers are the truth instead of its scan (minutes, not half an hour at 8.8M): a chain, sound when
that index's answers were checked against its scan (say in the last final run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ssr_engine import Searcher


def same(full, res, k: int) -> bool:
    return (list(full.ids[:k]) == list(res.ids) and full.scores[:k].tobytes() == res.scores.tobytes()
            and full.matches[:k].tobytes() == res.matches.tobytes())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--methods", nargs="+", default=["ssr", "union"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reference", help="an index of the same collection whose exhaustive scan is the truth")
    ap.add_argument("--reference-method", default="exhaustive", help="the reference's method taken as the truth")
    ap.add_argument("--max-queries", type=int, default=None)
    args = ap.parse_args(argv)
    with open(args.queries, encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()][: args.max_queries]
    searcher = Searcher(args.index)
    t = time.perf_counter()
    full = Searcher(args.reference or args.index).search_batch(texts, max(args.k), threads=args.threads,
                                                               method=args.reference_method)
    report: dict = {"index": args.index, "reference": args.reference or args.index, "queries": len(texts),
                    "truth": args.reference_method, "truth_seconds": round(time.perf_counter() - t, 1)}
    ok = True
    for method in args.methods:
        for k in sorted(args.k):
            t = time.perf_counter()
            res = searcher.search_batch(texts, k, threads=args.threads, method=method)
            seconds = time.perf_counter() - t
            identical = sum(same(a, b, k) for a, b in zip(full, res, strict=True))
            ok &= identical == len(texts)
            report[f"{method}@{k}"] = {"identical": identical, "seconds": round(seconds, 2),
                                       "results": int(sum(len(r.ids) for r in res))}
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
