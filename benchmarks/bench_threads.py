"""Two threads against one for batches, in one process: the batch as pieces on Python threads (the
`Searcher`'s path for methods ssr and levels) against the parallel kernel between serial Python steps
(the path before; still what other methods take), A/B alternating, best of `--rounds`.

    python benchmarks/bench_threads.py --index IDX --queries queries.tsv [--method ssr] [--k 10 1000] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    p.add_argument("--method", default="ssr", choices=["ssr", "levels"])
    p.add_argument("--k", type=int, nargs="+", default=[10, 1000])
    p.add_argument("--limit", type=int, help="use only the first N queries")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    from ssr_engine import search
    from ssr_engine.eval.trec import read_queries
    from ssr_engine.retrieval import open_retriever

    searcher = open_retriever(args.index, args.method)
    texts = list(read_queries(args.queries).values())[: args.limit]
    paths = {"pieces": search._THREADED, "kernel": ()}
    kept = search._THREADED
    for k in args.k:
        best: dict[tuple[str, int], float] = {}
        for rnd in range(args.rounds + 1):  # round 0 warms up (compiles, pages in)
            for name, threaded in paths.items():
                search._THREADED = threaded
                for threads in (1, 2):
                    t0 = time.perf_counter()
                    searcher.search_batch(texts if rnd else texts[:500], k, threads=threads)
                    qps = (len(texts) if rnd else 500) / (time.perf_counter() - t0)
                    if rnd:
                        best[(name, threads)] = max(best.get((name, threads), 0.0), qps)
        print(f"K={k}: " + ", ".join(f"{n} {t}t {v:,.0f} q/s" for (n, t), v in best.items()) + "; 2t/1t " +
              ", ".join(f"{n} {best[(n, 2)] / best[(n, 1)]:.2f}" for n in paths), flush=True)
    search._THREADED = kept
    return 0


if __name__ == "__main__":
    sys.exit(main())
