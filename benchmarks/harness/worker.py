"""The subprocess side of the harness: build one peer's index, or serve one engine's queries.

    python -m harness.worker build ENGINE --collection TSV --out DIR
    python -m harness.worker serve ENGINE --index DIR --queries TSV --json OUT [--k 10 1000] ...

(run with `benchmarks/` on PYTHONPATH; `benchmarks/run.py` does). Our engine's index is built
by the `ssr build-index` command itself, and its `ssr` mode is served by `bench_search.main`;
every other engine is served here by one protocol (the same as bench_search's):

  1. baseline RssAnon after importing the engine's library, then open the index (timed);
  2. warm-up, timed and reported on its own: a batch of the first 64 queries at every K on all
     threads, then one single-query call (Numba compilation or cache load, first page-in);
  3. throughput: one batch call over the queries for every (threads, K), end to end (query
     tokenisation included, and, where the engine gives them, external ids out); with --repeat N,
     N rounds over the configurations and the median;
  4. latency: single-query calls on one thread over the first --latency-queries queries;
  5. RssAnon sampled after each phase; the figure reported is the peak minus the baseline.

Tokens: every peer gets what our BM25 uses where its API allows (text.lower(), [a-z0-9]+, at
least 2 characters, minus ssr-stopwords-v1): bm25s through its own Tokenizer configured that
way, tantivy through a registered analyzer (regex [A-Za-z0-9]{2,}, lowercase, our stopwords),
PISA from text we tokenise in Python and join with spaces (stemmer and stopwords off in PISA).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness.builders import BUILDERS, TANTIVY_ANALYZER, our_tokens, stopword_list, tantivy_analyzer
from ssr_engine.retrieval import BM25_B, BM25_K1  # the library's defaults, defined once (a light module)

WARMUP_QUERIES = 64
TOP_SAMPLE = 100  # queries whose top-10 ids are kept to compare engines' answers


# ---------------------------------------------------------------------------- serving adapters


class Engine:
    """One engine behind the serving protocol: a batch call and a single-query call."""

    def batch(self, queries: list[str], k: int, threads: int) -> list[list[str]] | None:
        raise NotImplementedError

    def one(self, query: str, k: int) -> None:
        self.batch([query], k, 1)


class Ours(Engine):
    """Our methods through the one retrieval interface (`open_retriever`)."""

    method = "ssr"

    def __init__(self, index: str):
        from ssr_engine.retrieval import open_retriever

        self.retriever = open_retriever(index, self.method)  # bm25: k1 = BM25_K1, b = BM25_B

    def batch(self, queries, k, threads):
        return [r.ids[:10].tolist() for r in self.retriever.search_batch(queries, k, threads=threads)]

    def one(self, query, k):
        self.retriever.search_batch([query], k, threads=1)


class OursExhaustive(Ours):
    method = "exhaustive"


class OursBM25(Ours):
    method = "bm25"


class BM25S(Engine):
    def __init__(self, index: str):
        import bm25s
        import numpy as np
        from bm25s.tokenization import Tokenizer

        self.retriever = bm25s.BM25.load(index, mmap=True, backend="numba", show_progress=False)
        self.tokenizer = Tokenizer(lower=True, splitter=r"[a-z0-9]{2,}", stopwords=stopword_list())
        self.tokenizer.load_vocab(index)
        self.ids = np.load(Path(index) / "doc_ids.npy", mmap_mode="r")
        self.n_docs = int(self.retriever.scores["num_docs"])

    def batch(self, queries, k, threads):
        tokens = self.tokenizer.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
        docs, _scores = self.retriever.retrieve(tokens, k=min(k, self.n_docs), n_threads=threads,
                                                show_progress=False)
        ids = self.ids[docs]  # external ids out, as the other engines give
        return [row[:10].tolist() for row in ids]


class Pisa(Engine):
    def __init__(self, index: str):
        import pandas as pd
        import pyterrier_pisa

        self.pd = pd
        self.index = pyterrier_pisa.PisaIndex(index, stemmer="none", stops="none")
        self.retrievers: dict = {}

    def _retriever(self, k: int, threads: int):
        key = (k, threads)
        if key not in self.retrievers:
            self.retrievers[key] = self.index.bm25(k1=BM25_K1, b=BM25_B, num_results=k, threads=threads)
        return self.retrievers[key]

    def batch(self, queries, k, threads):
        frame = self.pd.DataFrame({"qid": [str(i) for i in range(len(queries))],
                                   "query": [" ".join(our_tokens(q)) for q in queries]})
        res = self._retriever(k, threads).transform(frame)
        top = res[res["rank"] < 10]
        by_q: dict[str, list[str]] = {}
        for qid, docno in zip(top["qid"].tolist(), top["docno"].tolist(), strict=True):
            by_q.setdefault(qid, []).append(docno)
        return [by_q.get(str(i), []) for i in range(len(queries))]


class Tantivy(Engine):
    """Queries are OR-ed term queries through the index's own analyzer; multi-core = a thread pool
    of single-query searches. Hits are document addresses: ids are read from the store only for
    the top-10 sample, since tantivy has no cheap internal-to-external id map (see README)."""

    def __init__(self, index: str):
        import tantivy

        self.index = tantivy.Index.open(index)
        self.index.register_tokenizer(TANTIVY_ANALYZER, tantivy_analyzer())
        self.searcher = self.index.searcher()
        self.pools: dict = {}

    def _search(self, query: str, k: int):
        tokens = our_tokens(query)
        if not tokens:  # no query terms: an empty result, as for the other engines
            return []
        q = self.index.parse_query(" ".join(tokens), ["body"])
        return self.searcher.search(q, k, count=False).hits

    def batch(self, queries, k, threads):
        if threads == 1:
            hits = [self._search(q, k) for q in queries]
        else:
            from concurrent.futures import ThreadPoolExecutor

            if threads not in self.pools:
                self.pools[threads] = ThreadPoolExecutor(max_workers=threads)
            hits = list(self.pools[threads].map(lambda q: self._search(q, k), queries, chunksize=16))
        return [h[:10] for h in hits]

    def ids(self, hits) -> list[str]:
        return [self.searcher.doc(addr)["pid"][0] for _, addr in hits]

    def one(self, query, k):
        self._search(query, k)


ADAPTERS = {"exhaustive": OursExhaustive, "bm25": OursBM25, "bm25s": BM25S, "pisa": Pisa, "tantivy": Tantivy}
LIBRARIES = {"exhaustive": "ssr_engine.search", "bm25": "ssr_engine.bm25", "bm25s": "bm25s",
             "pisa": "pyterrier_pisa", "tantivy": "tantivy"}


def serve(engine: str, index: str, queries: list[str], ks: list[int], threads: list[int], latency_n: int,
          repeat: int = 1, min_seconds: float = 0.0) -> dict:
    """The serving protocol of the module docstring for one engine; returns the measurements."""
    import importlib
    import statistics

    from bench_search import rss_anon_mib, single_query_latency

    from harness.measure import repeated

    importlib.import_module(LIBRARIES[engine])
    rss = {"baseline": rss_anon_mib()}
    t0 = time.perf_counter()
    eng = ADAPTERS[engine](index)
    report: dict = {"engine": engine, "open_seconds": time.perf_counter() - t0, "n_queries": len(queries)}
    rss["after_open"] = rss_anon_mib()

    t0 = time.perf_counter()
    for t in threads:  # every configuration once: compiles, loads per-configuration state, pages in
        for k in ks:
            eng.batch(queries[:WARMUP_QUERIES], k, t)
    eng.one(queries[0], max(ks))
    report["warmup_seconds"] = time.perf_counter() - t0
    rss["after_warmup"] = rss_anon_mib()
    peak = rss["after_warmup"]

    tops: list = []

    def batch(t: int, k: int) -> None:
        nonlocal peak
        top = eng.batch(queries, k, t)
        peak = max(peak, rss_anon_mib())
        if not tops:
            tops.append(top)

    rows = []
    calls: dict[tuple, list[int]] = {}
    configs = [(t, k) for t in threads for k in ks]
    for (t, k), secs in repeated(configs, batch, repeat, min_seconds, calls).items():
        s = statistics.median(secs)
        rows.append({"threads": t, "k": k, "qps": len(queries) / s, "seconds": s, "seconds_each": secs,
                     "calls_each": calls[t, k]})
        print(f"{engine} threads={t} k={k}: {len(queries) / s:.1f} q/s", file=sys.stderr)
    sample = tops[0][:TOP_SAMPLE] if tops and tops[0] is not None else None
    report["throughput"] = rows

    report["latency"] = single_query_latency(eng.one, queries[: min(latency_n, len(queries))], ks)
    peak = max(peak, rss_anon_mib())
    rss["peak"] = peak
    report["rss_anon_mib"] = rss
    report["serving_rss_anon_mib"] = peak - rss["baseline"]
    if isinstance(eng, Tantivy) and sample is not None:
        sample = [eng.ids(h) for h in sample]
    report["top10_sample"] = sample
    return report


def serve_ssr(index: str, queries_path: str, ks: list[int], threads: list[int], latency_n: int, limit: int | None,
              work: Path, repeat: int = 1, min_seconds: float = 0.0) -> dict:
    """Our `ssr` mode through bench_search.main (same protocol), reshaped to the harness's fields. A first
    process of WARMUP_QUERIES queries (`compile_seconds`) fills Numba's cache, so the measured one loads
    its kernels as the peers load their libraries, without LLVM's memory in its RssAnon (884 MiB after a
    compiling warm-up at 8.8M, 465 from the cache)."""
    import subprocess

    import bench_search

    raw_path = work / "bench_search.json"
    argv = ["--index", index, "--queries", queries_path, "--k", *map(str, ks), "--threads", *map(str, threads),
            "--blocks", "--no-exactness"]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, bench_search.__file__, *argv, "--limit", str(WARMUP_QUERIES),
                    "--latency-queries", "1"], check=True, stdout=subprocess.DEVNULL)  # its stderr: the log
    compile_s = time.perf_counter() - t0
    argv += ["--latency-queries", str(latency_n), "--json", str(raw_path), "--repeat", str(repeat),
             "--min-seconds", str(min_seconds)]
    if limit:
        argv += ["--limit", str(limit)]
    bench_search.main(argv)
    raw = json.loads(raw_path.read_text())
    keep = ("threads", "k", "qps", "seconds", "seconds_each", "calls_each", "kernel_qps", "postings_per_s_per_core")
    rows = [{key: r[key] for key in keep} for r in raw["throughput"]]
    rss = {"baseline": raw["rss_anon_mib_start"], "after_warmup": raw["rss_anon_mib_after_warmup"],
           "peak": raw["rss_anon_mib_peak_sampled"]}
    return {"engine": "ssr", "open_seconds": raw["open_seconds"], "n_queries": raw["n_queries"],
            "warmup_seconds": raw["warmup_seconds"], "throughput": rows,
            "latency": raw["latency_single_query_1_thread"], "rss_anon_mib": rss,
            "serving_rss_anon_mib": rss["peak"] - rss["baseline"], "postings_per_query": raw["postings_per_query"],
            "empty_queries": raw["empty_queries"], "top10_sample": None, "compile_seconds": compile_s,
            "note": "measured by benchmarks/bench_search.py after a compile pass in its own process"}


def read_query_texts(path: str, limit: int | None) -> list[str]:
    from ssr_engine.eval.trec import read_queries

    texts = list(read_queries(path).values())
    return texts[:limit] if limit else texts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="harness.worker", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("engine", choices=sorted(BUILDERS))
    b.add_argument("--collection", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--json", dest="json_out")
    s = sub.add_parser("serve")
    s.add_argument("engine", choices=["ssr", *sorted(ADAPTERS)])
    s.add_argument("--index", required=True)
    s.add_argument("--queries", required=True)
    s.add_argument("--json", dest="json_out", required=True)
    s.add_argument("--k", type=int, nargs="+", default=[10, 1000])
    s.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    s.add_argument("--latency-queries", type=int, default=1000)
    s.add_argument("--limit", type=int, help="use only the first N queries")
    s.add_argument("--repeat", type=int, default=1, help="time each batch this many times (rounds); the median")
    s.add_argument("--min-seconds", type=float, default=0.0,
                   help="in each round, call a batch back to back for at least this long; seconds per call")
    args = p.parse_args(argv)

    if args.cmd == "build":
        t0 = time.perf_counter()
        info = BUILDERS[args.engine](args.collection, Path(args.out))
        info["seconds_inside"] = time.perf_counter() - t0
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(info, indent=2) + "\n")
        print(json.dumps(info), file=sys.stderr)
        return 0

    out = Path(args.json_out)
    if args.engine == "ssr":
        report = serve_ssr(args.index, args.queries, args.k, args.threads, args.latency_queries, args.limit,
                           out.parent, args.repeat, args.min_seconds)
    else:
        texts = read_query_texts(args.queries, args.limit)
        report = serve(args.engine, args.index, texts, args.k, args.threads, args.latency_queries, args.repeat,
                       args.min_seconds)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
