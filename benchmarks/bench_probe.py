"""The probing kernel (`kernels.probe`) against `levels` alone: CPU q/s over one prepared batch.

    flock /tmp/ssr-bench.lock python benchmarks/bench_probe.py --index DIR --queries QUERIES.tsv \
        [--k 10 100 1000] [--max-queries N] [--repeat 5] [--threads 1]

One process, one `Searcher`; `query_batch` once, then each kernel on the same batch, the methods
called in turn, best of `--repeat` (`time.process_time`, so another process's load counts less than
in wall time). Prints one JSON line per K: q/s of each, the ratio, postings read and forward rows
probed per query (probe's counters; levels reads every posting), how many queries were pruned (and
how many tried, then read everything), and whether both gave identical (docs, score bits, matches).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numba
import numpy as np

from ssr_engine import Searcher
from ssr_engine.kernels import levels, probe


def interleaved(fns, repeat: int):
    """Each function's last output and best CPU time, the functions called in turn `repeat` times (so a
    change of load hits all of them alike)."""
    outs = [None] * len(fns)
    times = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = time.process_time()
            outs[i] = fn()
            times[i] = min(times[i], time.process_time() - t)
    return outs, times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    with open(args.queries, encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()]
    texts = texts[: args.max_queries]
    numba.set_num_threads(args.threads)
    s = Searcher(args.index)
    ix = s.index
    qb = s.query_batch(texts)
    nq = len(texts)
    common = (ix.postings_indptr, ix.postings_docs, ix.doc_rank, ix.n_docs)
    batch = (qb.offsets, qb.terms, qb.weights)
    monotone = probe.ascending(ix.doc_rank)  # ids in row order
    for k in args.k:
        # warm: compile, and page in what each kernel reads
        levels.search_batch(*common, *batch, k)
        probe.search_batch(*common, ix.forward_indptr, ix.forward, *batch, k, monotone=monotone)
        stats = np.zeros((nq, probe.STATS), dtype=np.int64)
        (lv, pr), (t_lv, t_pr) = interleaved(
            [lambda k=k: levels.search_batch(*common, *batch, k),
             lambda k=k, stats=stats: probe.search_batch(*common, ix.forward_indptr, ix.forward, *batch, k,
                                                      stats=stats, monotone=monotone)],
            args.repeat)
        stats //= args.repeat
        same = all(a.tobytes() == b.tobytes() for a, b in zip(lv, pr, strict=True))
        print(json.dumps({
            "index": args.index, "k": k, "queries": nq, "threads": args.threads,
            "levels_qps": round(nq / t_lv), "probe_qps": round(nq / t_pr), "probe/levels": round(t_lv / t_pr, 3),
            "postings_per_query": round(qb.postings / nq), "probe_postings_per_query": round(stats[:, 0].mean()),
            "probes_per_query": round(stats[:, 1].mean(), 1),
            "pruned_queries": int(((stats[:, 2] > 0) & (stats[:, 3] == 0)).sum()),
            "queries_tried_then_levels": int(((stats[:, 2] > 0) & (stats[:, 3] > 0)).sum()),
            "attempts_per_query": round(float(stats[:, 2].mean()), 2),
            "scanned_per_query": round(float(stats[:, 4].mean())), "monotone": monotone,
            "identical": same, "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
