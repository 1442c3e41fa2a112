"""Part 3: scale on a generated MS MARCO-shaped collection: build time and peak memory, q/s and
p50 latency against K, and the inverted == exhaustive check on every query."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .steps import Say, ensure_index
from .workdir import WorkDir

KS = (10, 100, 1000)
CHECK_K = 1000
BATCH_REPEATS = 3  # throughput: the best of this many passes over the queries (a shared machine is noisy)
LATENCY_QUERIES = 200  # single-query latency sample per K (evenly spaced over the queries)


def run_scale(work: WorkDir, say: Say, *, passages: int = 200_000, queries: int = 1000, seed: int = 1,
              quiet: bool = True) -> dict[str, Any]:
    """The report section `scale`."""
    from ..datagen.collection import GENERATOR_ID, generate
    from ..errors import SsrError
    from ..eval.stats import percentiles
    from ..eval.trec import read_queries
    from ..format import open_index
    from ..retrieval import open_retriever

    if passages < 1 or not 1 <= queries <= passages:
        raise SsrError(f"--passages must be >= 1 and --queries in 1..passages, got {passages} and {queries}")
    data = work.file("scale")
    key = {"generator": GENERATOR_ID, "passages": passages, "queries": queries, "seed": seed}
    files = [data / n for n in ("collection.tsv", "queries.tsv", "qrels.tsv", "stats.json")]
    if work.fresh("scale", key):
        gen = (work.record("scale") or {}).get("info", {})
        say(f"reusing the generated collection in {data}")
    else:
        work.claim("scale", [data])
        say(f"generating {passages:,} passages and {queries:,} queries (seed {seed}) into {data}")
        t0 = time.perf_counter()
        generate(data, passages=passages, seed=seed, queries=queries)
        gen = {"seconds": time.perf_counter() - t0}
        work.done("scale", key, [data, *files], gen)
    collection = data / "collection.tsv"
    index, build = ensure_index(work, "scale-index-ssr", collection, key, "ssr", say, quiet=quiet, measure=True)

    texts = list(read_queries(data / "queries.tsv").values())
    ix = open_index(index)
    searcher, scan = open_retriever(ix, "ssr"), open_retriever(ix, "exhaustive")
    searcher.search_batch(texts[:8], 10)  # compile or load the kernels outside the timed spans
    scan.search_batch(texts[:8], 10)
    sample = np.unique(np.linspace(0, len(texts) - 1, min(LATENCY_QUERIES, len(texts))).round().astype(int))
    rows = []
    for k in KS:
        say(f"scale: searching {len(texts):,} queries at K = {k}")
        batch_s = min(_timed(searcher.search_batch, texts, k) for _ in range(BATCH_REPEATS))
        lat = []
        for i in sample.tolist():
            t = time.perf_counter()
            searcher.search_batch([texts[i]], k, threads=1)
            lat.append((time.perf_counter() - t) * 1000.0)
        pct = percentiles(lat, (50, 99))
        rows.append({"k": k, "queries_per_second": len(texts) / batch_s, "batch_seconds_best": batch_s,
                     "p50_ms": pct["p50"], "p99_ms": pct["p99"], "latency_queries": len(lat)})
    say(f"scale: the exhaustive scan of every query at K = {CHECK_K} (the check)")
    inverted = searcher.search_batch(texts, CHECK_K)
    t0 = time.perf_counter()
    exhaustive = scan.search_batch(texts, CHECK_K)
    exhaustive_s = time.perf_counter() - t0
    same = sum(1 for a, b in zip(inverted, exhaustive, strict=True)
               if np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores)
               and np.array_equal(a.matches, b.matches))
    return {
        "collection": {"passages": passages, "queries": len(texts), "seed": seed, "generator": GENERATOR_ID,
                       "bytes": collection.stat().st_size, "generate_seconds": gen.get("seconds")},
        "index": {"documents": ix.n_docs, "terms": ix.n_terms, "postings": ix.postings_length,
                  "bytes": sum(f.stat().st_size for f in index.rglob("*") if f.is_file())},
        "build": build,
        "threads": _threads(),
        "search": rows,
        "inverted_equals_exhaustive": {"k": CHECK_K, "queries": len(texts), "identical": same,
                                       "all": same == len(texts),
                                       "exhaustive_queries_per_second": len(texts) / exhaustive_s},
    }


def _timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _threads() -> int:
    import numba

    return int(numba.get_num_threads())
