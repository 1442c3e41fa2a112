"""Search throughput, latency, memory and exactness over one index.

    python benchmarks/bench_search.py --index DIR --queries QUERIES.tsv [--json OUT.json]

Measures, after a warm-up that is timed and reported on its own:
  - queries/s at each K (default 10 and 1000) on 1 and 2 threads: one `search_batch` call over
    every query, end to end (signal extraction, hashing, vocabulary look-up, kernel, external ids);
  - kernel-only time of the same batch, and postings processed per second per core
    (postings = sum of the df of every query's known terms);
  - latency p50/p95/p99 from single-query calls on 1 thread, end to end;
  - the accumulator block width (--blocks): kernel-only throughput at the largest K, 1 thread;
  - RssAnon (anonymous resident memory, /proc/self/status) after opening and while serving;
  - exactness: inverted top-K == exhaustive top-K for every query (ids, matched counts and
    scores bit for bit), with the count of queries that agree.
Prints a markdown table and writes everything as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

# after a parallel kernel call, Numba's OpenMP pool threads (libgomp) spin before they sleep (GOMP_SPINCOUNT:
# 2-8 ms of CPU each time on the 2-core EPYC, longer where PAUSE is slower): a batch timed right after would share
# the cores with them, so the timed batches start after this pause
SETTLE_S = 0.1


def rss_anon_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def latency_percentiles(seconds) -> dict[str, float]:
    """p50/p95/p99 in milliseconds, by the library's one percentile definition (`eval.stats`)."""
    from ssr_engine.eval.stats import percentiles

    return {f"{name}_ms": v for name, v in percentiles([t * 1000 for t in seconds], (50, 95, 99)).items()}


def single_query_latency(search, queries, ks) -> dict[str, dict[str, float]]:
    """Percentiles (ms) of `search(query, k)` called once per query, for each k."""
    import numpy as np

    latency = {}
    for k in ks:
        times = []
        for q in queries:
            t0 = time.perf_counter()
            search(q, k)
            times.append(time.perf_counter() - t0)
        mean_ms = 1000 * float(np.mean(times))
        latency[str(k)] = latency_percentiles(times) | {"queries": len(queries), "mean_ms": mean_ms}
    return latency


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    p.add_argument("--limit", type=int, help="use only the first N queries")
    p.add_argument("--k", type=int, nargs="+", default=[10, 1000])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--blocks", type=int, nargs="*", default=[1 << 14, 1 << 16, 1 << 18, 0],
                   help="accumulator widths to compare (0 = one N-wide block, the plain scatter)")
    p.add_argument("--latency-queries", type=int, default=2000, help="single-query calls timed (default 2000)")
    p.add_argument("--no-exactness", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="time each batch this many times (rounds); the median")
    p.add_argument("--min-seconds", type=float, default=2.0,
                   help="in each round, call a batch back to back for at least this long; seconds per call "
                        "(default 2; 0: one call)")
    p.add_argument("--json", dest="json_out", help="write the results here")
    return p.parse_args(argv)


class Peak:
    """The largest RssAnon sampled between phases."""

    def __init__(self) -> None:
        self.mib = rss_anon_mib()

    def sample(self) -> None:
        self.mib = max(self.mib, rss_anon_mib())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from ssr_engine.eval.trec import read_queries
    from ssr_engine.retrieval import max_threads, open_retriever

    report: dict = {"index": args.index, "queries_file": args.queries, "machine": platform.processor() or "",
                    "numba_threads": max_threads(), "rss_anon_mib_start": rss_anon_mib()}
    t0 = time.perf_counter()
    searcher = open_retriever(args.index, "ssr")  # a Searcher: the kernel-level timings below need its internals
    report["open_seconds"] = time.perf_counter() - t0
    texts = list(read_queries(args.queries).values())[: args.limit]
    report.update(documents=searcher.n_docs, terms=searcher.index.n_terms,
                  postings=searcher.index.manifest.counts.postings, n_queries=len(texts))
    warm_up(searcher, texts, args.k, args.threads, report, exhaustive=not args.no_exactness)
    peak = Peak()
    qb = prepare(searcher, texts, report)
    report["throughput"] = throughput(searcher, texts, qb, args.k, args.threads, peak, args.repeat,
                                      args.min_seconds)
    by = {(r["threads"], r["k"]): r for r in report["throughput"]}
    report["speedup_2_threads"] = {str(k): by[2, k]["qps"] / by[1, k]["qps"] for k in args.k
                                   if (1, k) in by and (2, k) in by}
    report["blocks"] = block_widths(searcher, qb, max(args.k), args.blocks, peak)
    report["latency_single_query_1_thread"] = single_query_latency(
        lambda q, k: searcher.search_batch([q], k, threads=1), texts[: min(args.latency_queries, len(texts))], args.k)
    peak.sample()
    if not args.no_exactness:
        report["exactness"] = exactness(searcher, texts, max(args.k))
        peak.sample()
    report["rss_anon_mib_peak_sampled"] = peak.mib
    print(markdown(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def warm_up(searcher, texts, ks, thread_counts, report: dict, exhaustive: bool = True) -> None:
    """Load the cached kernels (or compile them), read the id column, touch pages; timed apart.

    Every entry the timed phases call runs here first, so no compilation falls into a timed figure:
    per K and thread count the kernel alone (serial or parallel entry) and the batch (serial, or pieces
    on threads), single queries, the union kernel of the block widths, the exhaustive scan (only when
    the exactness phase will run it: 12 s of the warm-up at 8.8M), the parallel id gather.
    """
    import numpy as np

    from ssr_engine.kernels import ssr as kernels
    from ssr_engine.kernels.id_table import PARALLEL_FROM
    from ssr_engine.retrieval import max_threads, numba_threads

    t0 = time.perf_counter()
    warm = texts[: min(64, len(texts))]
    qb = searcher.query_batch(warm)
    ix = searcher.index
    for k in ks:
        for threads in thread_counts:
            if threads > max_threads():
                continue
            with numba_threads(threads):
                searcher.run_kernel(qb, k)
            settle(threads)
            searcher.search_batch(warm, k, threads=threads)
        if exhaustive:
            searcher.search_batch(warm, k, method="exhaustive")
        searcher.search_batch(warm[:1], k, threads=1)
        kernels.search_batch(ix.lists, ix.postings, ix.doc_rank, searcher.n_docs, qb.offsets[:2],
                             qb.terms, qb.weights, k, block=searcher.block)
    searcher.external_ids(np.zeros(PARALLEL_FROM, dtype=np.int64))
    report["warmup_seconds"] = time.perf_counter() - t0
    report["rss_anon_mib_after_warmup"] = rss_anon_mib()


def settle(threads: int) -> None:
    """After a kernel call on `threads` Numba threads: wait until its pool threads sleep (see SETTLE_S)."""
    if threads > 1:
        time.sleep(SETTLE_S)


def prepare(searcher, texts, report: dict):
    """The whole batch's query terms (timed), with the postings it reads and its empty queries."""
    import numpy as np

    t0 = time.perf_counter()
    qb = searcher.query_batch(texts)
    report["query_prep_seconds"] = time.perf_counter() - t0
    report["postings_per_query"] = qb.postings / max(len(texts), 1)
    report["empty_queries"] = int((np.diff(qb.offsets) == 0).sum())
    return qb


def throughput(searcher, texts, qb, ks, thread_counts, peak: Peak, repeat: int = 1,
               min_seconds: float = 0.0) -> list[dict]:
    """Kernel-only and end-to-end queries/s of the whole batch at each thread count and K (the median of
    `repeat` rounds over the configurations, `harness.measure.repeated`; in a round, each is called back to
    back for `min_seconds`, `harness.measure.seconds_per_call`)."""
    from statistics import median

    from harness.measure import repeated, seconds_per_call

    from ssr_engine.retrieval import max_threads, numba_threads

    kernel_s: dict[tuple[int, int], list[float]] = {}
    batch_s: dict[tuple[int, int], list[float]] = {}
    calls: dict[tuple[int, int], list[int]] = {}

    def both(threads: int, k: int) -> None:
        with numba_threads(threads):
            k_s, _ = seconds_per_call(lambda: searcher.run_kernel(qb, k), min_seconds)
        settle(threads)
        b_s, n = seconds_per_call(lambda: searcher.search_batch(texts, k, threads=threads), min_seconds)
        batch_s.setdefault((threads, k), []).append(b_s)
        kernel_s.setdefault((threads, k), []).append(k_s)
        calls.setdefault((threads, k), []).append(n)
        peak.sample()

    configs = [(t, k) for t in thread_counts if t <= max_threads() for k in ks]
    repeated(configs, both, repeat)
    rows = []
    n_q = len(texts)
    for threads, k in configs:
        total_s, k_s = median(batch_s[threads, k]), median(kernel_s[threads, k])
        rows.append({"threads": threads, "k": k, "qps": n_q / total_s, "seconds": total_s,
                     "seconds_each": batch_s[threads, k], "calls_each": calls[threads, k],
                     "kernel_seconds": k_s, "kernel_qps": n_q / k_s,
                     "postings_per_s_per_core": qb.postings / k_s / threads})
        print(f"threads={threads} k={k}: {n_q / total_s:.1f} q/s end to end, {n_q / k_s:.1f} q/s kernel",
              file=sys.stderr)
    return rows


def block_widths(searcher, qb, k, widths, peak: Peak) -> list[dict]:
    """Kernel-only queries/s at each accumulator block width, 1 thread, K = k."""
    from ssr_engine.kernels import ssr as kernels
    from ssr_engine.retrieval import numba_threads

    ix = searcher.index
    n_q = len(qb.offsets) - 1
    blocks = []
    with numba_threads(1):
        for b in widths:
            width = b if b > 0 else searcher.n_docs
            first = int(qb.offsets[1]) if n_q else 0  # compile / warm this width on one query first
            kernels.search_batch(ix.lists, ix.postings, ix.doc_rank, searcher.n_docs,
                                 qb.offsets[:2], qb.terms[:first], qb.weights[:first], k, block=width)
            t0 = time.perf_counter()
            kernels.search_batch(ix.lists, ix.postings, ix.doc_rank, searcher.n_docs, qb.offsets,
                                 qb.terms, qb.weights, k, block=width)
            s = time.perf_counter() - t0
            peak.sample()
            blocks.append({"block": width, "plain_scatter": b <= 0, "kernel_qps": n_q / s,
                           "postings_per_s": qb.postings / s})
            print(f"block={width}: {n_q / s:.1f} q/s, {qb.postings / s / 1e6:.1f} M postings/s", file=sys.stderr)
    return blocks


def exactness(searcher, texts, k) -> dict:
    """Inverted top-k == exhaustive top-k, query by query (ids, matches, scores bit for bit)."""
    t0 = time.perf_counter()
    inv = searcher.search_batch(texts, k)
    t1 = time.perf_counter()
    exh = searcher.search_batch(texts, k, method="exhaustive")
    t2 = time.perf_counter()
    same = sum(
        a.docs.tobytes() == b.docs.tobytes() and a.scores.tobytes() == b.scores.tobytes()
        and a.matches.tobytes() == b.matches.tobytes() and a.ids.tolist() == b.ids.tolist()
        for a, b in zip(inv, exh, strict=True)
    )
    return {"k": k, "queries": len(texts), "identical": int(same), "inverted_seconds": t1 - t0,
            "exhaustive_seconds": t2 - t1, "results": int(sum(len(r) for r in inv))}


def markdown(r: dict) -> str:
    out = [f"Index `{r['index']}`: {r['documents']:,} documents, {r['terms']:,} terms, {r['postings']:,} postings; "
           f"{r['n_queries']:,} queries ({r['empty_queries']} without known signals), "
           f"{r['postings_per_query']:,.0f} postings per query.", "",
           "| threads | K | q/s (end to end) | q/s (kernel) | M postings/s/core |", "|---|---|---|---|---|"]
    for row in r["throughput"]:
        out.append(f"| {row['threads']} | {row['k']} | {row['qps']:.1f} | {row['kernel_qps']:.1f} | "
                   f"{row['postings_per_s_per_core'] / 1e6:.1f} |")
    for k, s in r["speedup_2_threads"].items():
        out.append(f"\n2 threads / 1 thread at K={k}: {s:.2f}x")
    out += ["", "| K | p50 ms | p95 ms | p99 ms | mean ms |  (single-query calls, 1 thread, end to end)",
            "|---|---|---|---|---|"]
    for k, lat in r["latency_single_query_1_thread"].items():
        out.append(f"| {k} | {lat['p50_ms']:.2f} | {lat['p95_ms']:.2f} | {lat['p99_ms']:.2f} | {lat['mean_ms']:.2f} |")
    if r["blocks"]:
        out += ["", "| accumulator block (docs) | q/s (kernel, 1 thread) | M postings/s |", "|---|---|---|"]
        for b in r["blocks"]:
            name = f"{b['block']:,}" + (" (plain scatter)" if b["plain_scatter"] else "")
            out.append(f"| {name} | {b['kernel_qps']:.1f} | {b['postings_per_s'] / 1e6:.1f} |")
    out.append("")
    out.append(f"Warm-up (excluded): {r['warmup_seconds']:.2f} s; query preparation for the whole batch: "
               f"{r['query_prep_seconds']:.3f} s.")
    out.append(f"RssAnon: {r['rss_anon_mib_start']:.0f} MiB at start, {r['rss_anon_mib_after_warmup']:.0f} MiB after "
               f"warm-up, {r['rss_anon_mib_peak_sampled']:.0f} MiB peak (sampled).")
    if "exactness" in r:
        e = r["exactness"]
        out.append(f"Exactness: inverted top-{e['k']} == exhaustive top-{e['k']} for {e['identical']:,} of "
                   f"{e['queries']:,} queries (exhaustive batch scan {e['exhaustive_seconds']:.1f} s).")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
