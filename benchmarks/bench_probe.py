"""The probing kernel (`kernels.probe`) against `levels` alone: CPU q/s over one prepared batch.

    flock /tmp/ssr-bench.lock python benchmarks/bench_probe.py --index DIR --queries QUERIES.tsv \
        [--k 10 100 1000] [--max-queries N] [--repeat 5] [--threads 1] [--against /work/main]

One process, one `Searcher`; `query_batch` once, then each kernel on the same batch, the methods
called in turn, best of `--repeat` (`time.process_time`, so another process's load counts less than
in wall time). Prints one JSON line per K: q/s of each, the ratio, postings read and forward rows
probed per query (probe's counters; levels reads every posting), how many queries were pruned (and
how many tried, then read everything), and whether both gave identical (docs, score bits, matches).
`--against CHECKOUT`: that checkout's `probe` kernel too (its `ssr_engine/kernels` loaded under another
name: the kernels import only each other), called in the same turns: the A/B of a kernel change.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time

import numba
import numpy as np

from ssr_engine import Searcher
from ssr_engine.kernels import levels, probe


def interleaved(fns, repeat: int, timer=time.process_time):
    """Each function's last output and best CPU time, the functions called in turn `repeat` times (so a
    change of load hits all of them alike), in reverse order every other round (the first called measured
    up to 7% slower than the second, the same code, at load 8-12). `timer`: CPU time, or a wall clock."""
    outs = [None] * len(fns)
    times = [float("inf")] * len(fns)
    for r in range(repeat):
        for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
            fn = fns[i]
            t = timer()
            outs[i] = fn()
            times[i] = min(times[i], timer() - t)
    return outs, times


def other_probe(checkout: str):
    """The `kernels.probe` module of another checkout, loaded as package `base_kernels`."""
    path = os.path.join(checkout, "ssr_engine", "kernels")
    spec = importlib.util.spec_from_file_location("base_kernels", os.path.join(path, "__init__.py"),
                                                  submodule_search_locations=[path])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["base_kernels"] = module
    spec.loader.exec_module(module)
    return importlib.import_module("base_kernels.probe")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rule", type=float, nargs="+", default=None, help="probe's cost rule (default probe.RULE)")
    ap.add_argument("--against", default=None, help="another checkout whose probe kernel runs beside this one")
    args = ap.parse_args(argv)
    with open(args.queries, encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()]
    texts = texts[: args.max_queries]
    numba.set_num_threads(args.threads)
    s = Searcher(args.index)
    ix = s.index
    qb = s.query_batch(texts)
    nq = len(texts)
    common = (ix.lists, ix.postings, ix.doc_rank, ix.n_docs)
    batch = (qb.offsets, qb.terms, qb.weights)
    monotone = probe.ascending(ix.doc_rank)  # ids in row order
    base = other_probe(args.against) if args.against else None
    rule = probe.RULE if args.rule is None else tuple(args.rule)
    for k in args.k:
        work: list = [None]
        stats = np.zeros((nq, probe.STATS), dtype=np.int64)
        fns = [lambda k=k: levels.search_batch(*common, *batch, k),
               lambda k=k, stats=stats, work=work: probe.search_batch(*common, ix.forward_indptr, ix.forward, *batch,
                                                                      k, stats=stats, monotone=monotone, work=work,
                                                                      rule=rule)]
        if base is not None:
            base_work: list = [None]
            fns.append(lambda k=k, w=base_work: base.search_batch(*common, ix.forward_indptr, ix.forward, *batch, k,
                                                                  monotone=monotone, work=w))
        for fn in fns:  # warm: compile, and page in what each kernel reads
            fn()
        stats[...] = 0
        outs, times = interleaved(fns, args.repeat)
        stats //= args.repeat
        lv, pr = outs[:2]
        t_lv, t_pr = times[:2]
        same = all(all(a.tobytes() == b.tobytes() for a, b in zip(lv, out, strict=True)) for out in outs[1:])
        extra = {} if base is None else {"against": args.against, "against_qps": round(nq / times[2]),
                                         "probe/against": round(times[2] / t_pr, 3)}
        print(json.dumps({
            "index": args.index, "k": k, "queries": nq, "threads": args.threads,
            "levels_qps": round(nq / t_lv), "probe_qps": round(nq / t_pr), "probe/levels": round(t_lv / t_pr, 3),
            "postings_per_query": round(qb.postings / nq), "probe_postings_per_query": round(stats[:, 0].mean()),
            "probes_per_query": round(stats[:, 1].mean(), 1),
            "pruned_queries": int(((stats[:, 2] > 0) & (stats[:, 3] == 0)).sum()),
            "queries_tried_then_levels": int(((stats[:, 2] > 0) & (stats[:, 3] > 0)).sum()),
            "attempts_per_query": round(float(stats[:, 2].mean()), 2),
            "scanned_per_query": round(float(stats[:, 4].mean())),
            "small_queries": int(stats[:, 5].sum()), "monotone": monotone, **extra,
            "identical": same, "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
