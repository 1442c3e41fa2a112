"""Single-query latency of method `ssr`: where a query's time goes, and which queries make the tail.

    python benchmarks/bench_latency.py --index IDX --queries queries.tsv [--limit N] [--k 10 1000] [--json OUT]

Three phases, each over the same queries, one query per call, on one thread (as `run.py` and
`bench_search.py` time single queries: `search_batch([q], k, threads=1)`):

1. end to end: wall-clock and CPU (`time.thread_time`) percentiles of the call;
2. the call's steps, CPU time each (p50 and mean, µs): query bytes and signal extraction, hashing,
   the term look-up, then `query_batch` as a whole (those three again, plus weights and order),
   the kernel, external ids, result objects. The steps are timed in a second pass that calls
   them one by one, so query_batch + kernel + ids + results is close to, not equal to, phase 1;
3. the tail: the kernel's CPU time per query; the slowest 1% against all queries (terms, postings,
   the lightest list's share, queries over 12 terms, queries that read every posting).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def percentiles(values_s) -> dict:
    """p50/p90/p99 (the library's one definition, `eval.stats`), max and mean, in ms."""
    from ssr_engine.eval.stats import percentiles as pct

    v = np.asarray(values_s, dtype=np.float64) * 1e3
    return {f"{name}_ms": x for name, x in pct(v.tolist(), (50, 90, 99)).items()} | {"max_ms": float(v.max()),
                                                                                   "mean_ms": float(v.mean())}


def end_to_end(searcher, texts, k) -> dict:
    wall, cpu = [], []
    for q in texts:
        c0, t0 = time.thread_time(), time.perf_counter()
        searcher.search_batch([q], k, threads=1)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return {"wall": percentiles(wall), "cpu": percentiles(cpu)}


def steps(searcher, texts, k) -> dict:
    """CPU µs of each step of the single-query path (see the module docstring)."""
    from ssr_engine.hashing import hash_spans
    from ssr_engine.retrieval import split_results
    from ssr_engine.search import lookup_terms

    clock = time.thread_time_ns
    names = ("extraction", "hashing", "term look-up", "query_batch (all three, weights, order)", "kernel",
             "external ids", "results")
    got: dict[str, list[int]] = {n: [] for n in names}
    for q in texts:
        t0 = clock()
        raw = q.encode("utf-8", "surrogatepass")
        batch = searcher._extractor.extract(np.frombuffer(raw, dtype=np.uint8), np.zeros(1, dtype=np.int64),
                                            np.array([len(raw)], dtype=np.int64), np.array([0, 1], dtype=np.int64))
        t1 = clock()
        hashes = hash_spans(batch.data, batch.offsets, searcher.seed, searcher.mask)
        t2 = clock()
        lookup_terms(searcher.index, batch.data, batch.offsets, hashes, with_df=True)
        t3 = clock()
        qb = searcher.query_batch([q])  # the three steps above again, then weights and order
        t4 = clock()
        offsets, docs, scores, matches = searcher.run_kernel(qb, k, "ssr", threads=1)
        t5 = clock()
        ids = searcher.external_ids(docs)
        t6 = clock()
        split_results(offsets, ids, docs, scores, matches)
        t7 = clock()
        for name, ns in zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6),
                            strict=True):
            got[name].append(ns)
    return {n: {"p50_us": float(np.percentile(v, 50)) / 1e3, "mean_us": float(np.mean(v)) / 1e3}
            for n, v in got.items()}


def tail(searcher, texts, k) -> dict:
    """Kernel CPU time per query (method ssr's kernel, one thread, with its counters); what the slowest 1%
    have in common against all queries: terms, postings, the lightest list's share, the queries of more
    than 12 terms, those that ended reading every posting (levels), postings read per posting held."""
    from ssr_engine.kernels import probe

    indptr, docs, doc_rank = searcher._csr
    ix = searcher.index
    work: list = [None]
    monotone = bool(probe.ascending(doc_rank))  # as the Searcher passes it
    cpu, terms, postings, light, read, levels_all = [], [], [], [], [], []
    for q in texts:
        qb = searcher.query_batch([q])
        stats = np.zeros((1, probe.STATS), dtype=np.int64)
        c0 = time.thread_time()
        probe.search_batch(indptr, docs, doc_rank, searcher.n_docs, ix.forward_indptr, ix.forward, qb.offsets,
                           qb.terms, qb.weights, k, block=searcher.block, n_chunks=1, stats=stats, work=work,
                           monotone=monotone)
        cpu.append(time.thread_time() - c0)
        terms.append(int(qb.offsets[1]))
        postings.append(qb.postings)
        light.append(int(qb.df[0]) / max(1, qb.postings) if len(qb.df) else 0.0)
        read.append(int(stats[0, 0]) / max(1, qb.postings))
        levels_all.append(int(stats[0, 3]) > 0)
    c, m, p, lt, rd, lv = (np.array(x) for x in (cpu, terms, postings, light, read, levels_all))

    def share(sel) -> dict:
        return {"queries": int(sel.sum()), "terms_mean": float(m[sel].mean()),
                "postings_median": float(np.median(p[sel])), "lightest_list_share_median": float(np.median(lt[sel])),
                "over_12_terms": int((m[sel] > 12).sum()), "read_every_posting": int(lv[sel].sum()),
                "read_per_posting_median": float(np.median(rd[sel]))}

    return {"kernel_cpu": percentiles(c), "slowest_1pct": share(c >= np.percentile(c, 99)),
            "all": share(np.ones(len(c), dtype=bool))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    p.add_argument("--limit", type=int, help="use only the first N queries")
    p.add_argument("--k", type=int, nargs="+", default=[10, 1000])
    p.add_argument("--json", dest="json_out")
    args = p.parse_args(argv)
    from ssr_engine.eval.trec import read_queries
    from ssr_engine.retrieval import open_retriever

    searcher = open_retriever(args.index, "ssr")
    texts = list(read_queries(args.queries).values())[: args.limit]
    for k in args.k:  # load the kernels, page the index in
        searcher.search_batch(texts[:64], k)
        for q in texts[:64]:
            searcher.search_batch([q], k, threads=1)
    report: dict = {"index": args.index, "queries": len(texts), "by_k": {}}
    for k in args.k:
        r = report["by_k"][str(k)] = {"end_to_end": end_to_end(searcher, texts, k), "steps": steps(searcher, texts, k),
                                      "tail": tail(searcher, texts, k)}
        e, c = r["end_to_end"]["wall"], r["end_to_end"]["cpu"]
        print(f"K={k}: wall p50 {e['p50_ms']:.3f} p99 {e['p99_ms']:.2f} max {e['max_ms']:.1f} ms; "
              f"CPU p50 {c['p50_ms']:.3f} p99 {c['p99_ms']:.2f} ms")
        print("  steps (CPU µs p50 / mean): " + ", ".join(
            f"{n} {v['p50_us']:.1f} / {v['mean_us']:.1f}" for n, v in r["steps"].items()))
        t = r["tail"]
        print(f"  kernel CPU p50 {t['kernel_cpu']['p50_ms']:.3f} p99 {t['kernel_cpu']['p99_ms']:.2f} max "
              f"{t['kernel_cpu']['max_ms']:.1f} ms")
        for name in ("slowest_1pct", "all"):
            g = t[name]
            print(f"  {name}: {g['queries']} queries, {g['terms_mean']:.1f} terms, {g['postings_median']:,.0f} "
                  f"postings (median; lightest list {g['lightest_list_share_median']:.2f} of them), "
                  f"{g['over_12_terms']} over 12 terms, {g['read_every_posting']} read every posting, "
                  f"read/held {g['read_per_posting_median']:.2f}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
