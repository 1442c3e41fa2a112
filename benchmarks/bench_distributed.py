"""Sharded indexes (issue 17): build wall against one build, exactness and batch q/s through Ray.

    build  --collection C --out DIR [--shards 4] [--runner ray|processes] [--only single|sharded]
        Time `build_index` (DIR/single) and `build_sharded` (DIR/sharded) of C, one after the other
        in this process (the single build in a child process, so Ray is not running meanwhile).
    search --single DIR1 --sharded DIR2 --queries Q [-k 10 1000] [--rounds 3] [--latency 1000] [--actors 0]
        Start a local Ray instance (timed), then for each count of `--actors` (0: the default, one
        per CPU; each holds a group of shards) the actors (timed) and for each k: every
        query through the single index (Searcher, all cores), through the actors (ShardedSearcher)
        and in this process (LocalSharded, no Ray; the first count of actors only), the three
        alternating round after round: each round's ratios to the single index (side by side) and
        their median, and the ratio of the best walls; every query's ids, score bits, matches and
        document numbers compared with the single index's. Also the driver's merge alone, on
        the shards' own lists (the price of the merge); the terms' share of the work of one index and
        of one actor's shards (one thread, `fixed_cost`); and the latency of single queries (the first
        `latency` queries one after another, p50/p99 ms) through the single index and the actors.
        And where Ray's time goes: the first actor's whole batch as one call through Ray against the same
        `ShardWorker` call in this process (its shards, its threads), alternating, and a call doing nothing.

Run under `flock /tmp/ssr-bench.lock`, at normal priority. Prints JSON lines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Ray starts its workers at niceness 15 by default; the single index runs at this process's priority,
# so for a side-by-side comparison the actors and build tasks run at the same priority as the driver
os.environ.setdefault("RAY_worker_niceness", "0")

from ssr_engine.eval.trec import read_queries  # noqa: E402
from ssr_engine.query_terms import Utf8Queries  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partsbench import alternating, command, commands, emit, identical, latency, timed  # noqa: E402


def build(args: argparse.Namespace) -> None:
    from ssr_engine.distributed import build_sharded

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "single"):
        t = time.perf_counter()
        # a child process: the single build runs as `ssr build-index` would, with all cores
        subprocess.run([sys.executable, "-c", "import sys; from ssr_engine import build_index; "
                        "build_index(sys.argv[1], sys.argv[2], quiet=True, force=True)",
                        args.collection, str(out / "single")], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        emit(phase="build", kind="single", seconds=round(time.perf_counter() - t, 2))
    if args.only in (None, "sharded"):
        t = time.perf_counter()
        build_sharded(args.collection, out / "sharded", args.shards, runner=args.runner, force=True, quiet=False)
        from ssr_engine.distributed.layout import read_manifest

        m = read_manifest(out / "sharded")
        emit(phase="build", kind="sharded", runner=args.runner, shards=len(m.shards),
             seconds=round(time.perf_counter() - t, 2), docs=[s.documents for s in m.shards],
             terms=[s.terms for s in m.shards])


def fixed_cost(single, worker, queries: list[str], k: int) -> None:
    """One thread, in this process: what one index and one actor (the first group's `ShardWorker`) spend
    on the queries' terms (extraction once, then each shard's vocabulary look-up and the weights) and in all,
    for the whole batch; best of 2 (a fresh worker's first call also maps its pages)."""
    from ssr_engine.retrieval import numba_threads

    with numba_threads(1):
        t_terms, _, qb = timed(lambda: single.query_batch(queries), 2)
        t_kernel, _, _ = timed(lambda: single.run_kernel(qb, k, threads=1), 2)
        s_terms, _, _ = timed(lambda: worker.terms(queries), 2)
        s_all, _, _ = timed(lambda: worker.search(np.array(queries, dtype=str), k), 2)
    emit(phase="fixed_cost", k=k, queries=len(queries), shards=worker.shards, single_terms_s=round(t_terms, 3),
         single_kernel_s=round(t_kernel, 3), actor0_terms_s=round(s_terms, 3), actor0_total_s=round(s_all, 3))


def ray_phases(args: argparse.Namespace, queries: list[str], k: int, ray_s, twin) -> None:
    """The first actor's batch through Ray (one call, one round) against `twin`, the same group searched in
    this process on the actor's threads, alternating; and the median round trip of a call doing nothing."""
    import ray

    actor = ray_s.actors[0]
    arr = Utf8Queries.of(queries)  # as the driver sends them
    obj = ray.put(arr)
    ranked = ray_s._ranked  # as the driver asks
    walls, _ = alternating([lambda: ray.get(actor.search.remote(obj, k, None, ranked)),
                            lambda: twin.search(arr, k, ranks=ranked)], args.rounds)
    noop = []
    for _ in range(50):
        t = time.perf_counter()
        ray.get(actor.ready.remote())
        noop.append(time.perf_counter() - t)
    emit(phase="ray_phases", k=k, actor0_shards=ray_s.groups[0], threads=twin.threads,
         actor_call_s=round(float(np.median(walls[0])), 3), in_process_s=round(float(np.median(walls[1])), 3),
         ray_over_in_process=round(float(np.median([a / b for a, b in zip(walls[0], walls[1], strict=True)])), 3),
         noop_call_ms=round(float(np.median(noop)) * 1000, 3))


def compare(args: argparse.Namespace, queries: list[str], k: int, single, ray_s, local, worker, twin) -> None:
    """One k: the single index and the actors alternating, the in-process shards (when `local`), the
    driver's merge alone, the fixed costs, the latency of single queries."""
    import ray

    # one index, the actors and the in-process shards alternate, round after round (a load change hits them
    # alike): each round's ratios are side by side; their median and the best walls' ratio are reported
    fns = [lambda: single.search_batch(queries, k), lambda: ray_s.search_batch(queries, k)]
    if local is not None:
        fns.append(lambda: local.search_batch(queries, k))
    # one untimed round first: the single index's first whole batch was cold (its pages not yet mapped in this
    # process: round ratios of 0.96-2.56 against 0.5-0.7 after it, RESULTS.md), so every timed round is warm
    alternating(fns, 1)
    walls, outs = alternating(fns, args.rounds)
    want = outs[0]
    bad = [sum(not identical(a, b) for a, b in zip(got, want, strict=True)) for got in outs[1:]]
    del outs
    best = [min(w) for w in walls]
    ratios = [[round(one / other, 3) for one, other in zip(walls[0], w, strict=True)] for w in walls[1:]]
    # the merge alone: every actor's own top k (one round of all queries), merged as the driver does
    obj = ray.put(Utf8Queries.of(queries))
    parts = ray.get([a.search.remote(obj, k, None, ray_s._ranked) for a in ray_s.actors])
    rows = sum(int(p[0][-1]) for answer in parts for p in answer)
    t = time.perf_counter()
    ray_s.merge(parts, len(queries), k)
    t_merge = time.perf_counter() - t
    n = len(queries)
    local_at = 2 if local is not None else None
    emit(phase="search", k=k, queries=n, actors=len(ray_s.actors), rounds=args.rounds,
         single_qps=round(n / best[0], 1), ray_qps=round(n / best[1], 1),
         local_qps=None if local_at is None else round(n / best[local_at], 1),
         ray_ratio=round(best[0] / best[1], 3), ray_ratio_median=float(np.median(ratios[0])), ray_ratios=ratios[0],
         local_ratio=None if local_at is None else round(best[0] / best[local_at], 3),
         local_ratio_median=None if local_at is None else float(np.median(ratios[1])),
         local_ratios=None if local_at is None else ratios[1], merge_seconds=round(t_merge, 3), actor_rows=rows,
         ranked=ray_s.manifest.ranked, mismatches_ray=bad[0], mismatches_local=None if local_at is None else bad[1],
         results=sum(len(r) for r in want))
    del want, parts
    ray_phases(args, queries, k, ray_s, twin)
    fixed_cost(single, worker, queries, k)
    if args.latency:
        one = latency(single, queries[: args.latency], k)
        through = latency(ray_s, queries[: args.latency], k)
        emit(phase="latency", k=k, actors=len(ray_s.actors), queries=min(args.latency, n), single_ms=one,
             ray_ms=through)


def search(args: argparse.Namespace) -> None:
    import ray

    from ssr_engine.distributed import ShardedSearcher, open_local
    from ssr_engine.distributed.worker import ShardWorker
    from ssr_engine.retrieval import BM25_B, BM25_K1
    from ssr_engine.search import Searcher

    queries = list(read_queries(args.queries).values())
    t = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    emit(phase="ray_start", seconds=round(time.perf_counter() - t, 2))
    single = Searcher(args.single)
    local = open_local(args.sharded)
    for s in (single, local):  # warm-up: kernels loaded, pages mapped
        s.search_batch(queries[:200], 10)
    for actors in args.actors:
        t = time.perf_counter()
        ray_s = ShardedSearcher(args.sharded, actors=actors or None)
        emit(phase="actors_ready", shards=len(ray_s.manifest.shards), actors=len(ray_s.actors), groups=ray_s.groups,
             actor_cpus=ray_s.actor_cpus, seconds=round(time.perf_counter() - t, 2))
        ray_s.search_batch(queries[:200], 10)
        worker, twin = (ShardWorker(str(args.sharded), ray_s.groups[0], ray_s.manifest.generation, ray_s.method, t,
                                    BM25_K1, BM25_B) for t in (1, max(1, int(ray_s.actor_cpus))))
        twin.search(np.array(queries[:200], dtype=str), 10)
        for k in args.k:
            compare(args, queries, k, single, ray_s, local if actors == args.actors[0] else None, worker, twin)
        worker.close()
        twin.close()
        ray_s.close()
    ray.shutdown()


def main() -> None:
    p, sub = commands(__doc__)
    b = command(sub, "build", "--collection", "--out")
    b.add_argument("--shards", type=int, default=4)
    b.add_argument("--runner", default="ray", choices=("ray", "processes"))
    b.add_argument("--only", choices=("single", "sharded"))
    s = command(sub, "search", "--single", "--sharded", "--queries")
    s.add_argument("-k", type=int, nargs="+", default=[10, 1000])
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--latency", type=int, default=1000, help="single queries timed one by one (0: none)")
    s.add_argument("--actors", type=int, nargs="+", default=[0],
                   help="actors, one run each (0: one per CPU, the default of ShardedSearcher)")
    args = p.parse_args()
    build(args) if args.cmd == "build" else search(args)


if __name__ == "__main__":
    main()
