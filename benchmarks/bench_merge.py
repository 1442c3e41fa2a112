"""Time the merges of parts' ranked lists (`kernels.merge`: merge_ranked, merge_keyed, select_candidates).

Q queries, each with S parts of K rows in rank order (scores of few values, so ids decide many ties; integer ids
as UCS-4 rows for merge_ranked, their ranks for merge_keyed). Prints one JSON line: the median milliseconds of
`--repeat` calls of each after one warm-up call. Run it with two trees side by side to compare them:

    NUMBA_NUM_THREADS=1 PYTHONPATH=/path/to/tree python benchmarks/bench_merge.py -k 10 --queries 2000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ssr_engine.kernels import merge


def lists(nq: int, parts: int, k: int, seed: int = 1):
    """(offsets int64[Q, S + 1], starts, ends int64[Q, S], scores, matches, ranks uint32, codes uint32[n, 10])."""
    rng = np.random.default_rng(seed)
    n = nq * parts * k
    scores = np.round(rng.random(n) * 8) / 2
    matches = rng.integers(1, 4, n).astype(np.int32)
    ranks = rng.permutation(n).astype(np.uint32)
    for a in range(0, n, k):  # each part's rows in rank order
        o = np.lexsort((ranks[a:a + k], -matches[a:a + k], -scores[a:a + k])) + a
        scores[a:a + k], matches[a:a + k], ranks[a:a + k] = scores[o], matches[o], ranks[o]
    offsets = (np.arange(nq)[:, None] * parts + np.arange(parts + 1)[None, :]).astype(np.int64) * k
    codes = np.char.mod("%d", ranks.astype(np.int64)).astype("<U10").view(np.uint32).reshape(-1, 10)
    return offsets, offsets[:, :-1].copy(), offsets[:, 1:].copy(), scores, matches, ranks, codes


def median_ms(fn, repeat: int) -> float:
    fn()  # compiles (or loads the cache)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(float(np.median(times)) * 1000, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", type=int, default=10, help="rows a part and the merge's k")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=11)
    args = ap.parse_args()
    k = args.k
    offsets, starts, ends, scores, matches, ranks, codes = lists(args.queries, args.parts, k)
    print(json.dumps({"module": merge.__file__, "k": k, "queries": args.queries, "parts": args.parts, "ms": {
        "merge_ranked": median_ms(lambda: merge.merge_ranked(offsets, scores, matches, codes, k, True), args.repeat),
        "merge_keyed": median_ms(lambda: merge.merge_keyed(starts, ends, scores, matches, ranks, k), args.repeat),
        "select_candidates": median_ms(lambda: merge.select_candidates(offsets, scores, matches, k), args.repeat),
    }}), flush=True)


if __name__ == "__main__":
    main()
