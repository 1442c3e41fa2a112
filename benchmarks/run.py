"""Benchmark ssr_engine against its peers on one collection, side by side.

    python benchmarks/run.py --scale 100000 --peers all
    flock /tmp/ssr-bench.lock python benchmarks/run.py --scale 1000000 --peers all --data /tmp/ssr-data/synth-1m
    python benchmarks/run.py --scale 100000 --queries dev-small --peers bm25s,pisa

Generates (or reuses, --data) an MS MARCO-shaped collection with data_scripts/make_collection.py,
builds every engine's index from that one TSV (each build a subprocess whose process-tree RSS is
sampled), serves the same queries to each engine (a subprocess per engine; see harness/worker.py
for the protocol), and writes into --out: results.json, results.md (tables) and PNG figures.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from harness import engines, measure, plots, tables  # noqa: E402

DEV_SMALL = Path("/work/shared/data/msmarco-dev-small")
DATA_ROOT = Path("/tmp/ssr-data/harness")
GIB = 1 << 30


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=100_000, help="passages in the collection (default 100000)")
    p.add_argument("--queries", choices=("generated", "dev-small", "real"), default="generated",
                   help="generated queries (one target passage each), the 6,980 MS MARCO dev-small queries "
                        "planted in the collection, or `real`: a real collection from "
                        "data_scripts/gather_short_texts.py with its queries.tsv, used as they are (needs --data; "
                        "default generated)")
    p.add_argument("--peers", default="all", help="all, none, or a comma list of bm25s,pisa,tantivy (default all)")
    p.add_argument("--ours", default="all", help="all, none, or a comma list of ssr,exhaustive,bm25 (default all)")
    p.add_argument("--data", type=Path, help="collection directory to reuse, or to generate into "
                                             "(default /tmp/ssr-data/harness/synth-SCALE-QUERIES)")
    p.add_argument("--out", type=Path, help="results directory (default /tmp/ssr-data/harness/run-SCALE-QUERIES)")
    p.add_argument("--skip-build", action="store_true",
                   help="reuse indexes already in OUT/indexes (their build figures come from OUT/results.json)")
    p.add_argument("--k", type=int, nargs="+", default=[10, 1000], help="K values (default 10 1000)")
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="thread counts (default: 1 and all cores)")
    p.add_argument("--latency-queries", type=int, default=1000, help="single-query calls per K (default 1000)")
    p.add_argument("--repeat", type=int, default=1, help="time each engine's batch per configuration this many "
                   "times, alternating configurations, and report the median (default 1; all kept in the JSON)")
    p.add_argument("--min-seconds", type=float, default=2.0,
                   help="in each round, call each engine's batch back to back for at least this long and time "
                        "seconds per call (default 2; 0: one call): a batch of a few hundred ms is one sample "
                        "of the machine's noise")
    p.add_argument("--max-queries", type=int, help="use only the first N queries")
    p.add_argument("--min-batch", type=int, default=5000,
                   help="cycle the queries to at least this many per throughput batch, so that a batch "
                        "lasts long enough to time (default 5000)")
    p.add_argument("--exhaustive-queries", type=int,
                   help="queries for the exhaustive full scan (default max(100, 1e9 / passages); its single-query "
                        "latency uses max(20, 2e7 / passages) of them: each call scans the whole index)")
    p.add_argument("--memory-limit-gib", type=float, default=24.0,
                   help="kill a build or serve whose process tree passes this RSS (default 24)")
    p.add_argument("--busy", type=int, default=0,
                   help="processes spinning on a core each while the engines are served, not built (default 0): "
                        "how much each engine loses to a busy neighbour")
    p.add_argument("--timeout", type=float, help="kill a build or serve step after this many seconds")
    p.add_argument("--seed", type=int, default=1, help="collection seed (default 1)")
    p.add_argument("--dev-small", type=Path, default=DEV_SMALL, help=f"dev-small directory (default {DEV_SMALL})")
    p.add_argument("--report-only", action="store_true", help="only redo results.md and the figures from OUT")
    p.add_argument("--compare", type=Path, nargs="*", default=[],
                   help="results.json of other runs to add to the index-size figure")
    return p


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def prepare_collection(args: argparse.Namespace, data: Path, logs: Path) -> dict:
    """Reuse `data` when its stats.json exists (a finished collection), else generate it."""
    stats_path = data / "stats.json"
    info: dict = {"path": str(data / "collection.tsv")}
    if args.queries == "real":
        return _real_collection(args, data, info)
    if stats_path.exists():
        info["generated"] = None
    else:
        cmd = [sys.executable, str(REPO / "data_scripts" / "make_collection.py"), "--passages", str(args.scale),
               "--seed", str(args.seed), "--out", str(data), "--quiet"]
        if args.queries == "dev-small":
            cmd += ["--plant-queries", str(args.dev_small / "queries.dev.small.tsv"),
                    "--plant-qrels", str(args.dev_small / "qrels.dev.small.trec")]
        print(f"generating {args.scale:,} passages into {data}", file=sys.stderr)
        run = measure.run_tracked(cmd, logs / "make_collection.log", env=subprocess_env())
        if run["returncode"] != 0:
            raise SystemExit(f"run.py: make_collection.py failed:\n{run['log_tail']}")
        info["generated"] = {"wall_seconds": run["wall_seconds"], "peak_rss_mib": run["peak_rss_mib"]}
    stats = json.loads(stats_path.read_text())
    if stats["passages"] != args.scale:
        raise SystemExit(f"run.py: {data} holds {stats['passages']:,} passages, but --scale is {args.scale:,}")
    planted = "planted" in stats
    if planted != (args.queries == "dev-small"):
        raise SystemExit(f"run.py: {data} has {'dev-small' if planted else 'generated'} queries, "
                         f"but --queries is {args.queries}")
    info.update(passages=stats["passages"], queries=stats["queries"], bytes=(data / "collection.tsv").stat().st_size,
                queries_path=str(data / "queries.tsv"), qrels_path=str(data / "qrels.tsv"))
    return info


def _real_collection(args: argparse.Namespace, data: Path, info: dict) -> dict:
    """A gathered real collection (stats.json with `documents`): nothing to generate, no qrels."""
    stats_path = data / "stats.json"
    if args.data is None or not stats_path.exists():
        raise SystemExit("run.py: --queries real needs --data DIR holding a gathered collection "
                         "(data_scripts/gather_short_texts.py: collection.tsv, queries.tsv, stats.json)")
    stats = json.loads(stats_path.read_text())
    if "documents" not in stats or not (data / "queries.tsv").exists():
        raise SystemExit(f"run.py: {data} is not a gathered real collection (stats.json without `documents`, "
                         "or no queries.tsv)")
    if stats["documents"] != args.scale:
        raise SystemExit(f"run.py: {data} holds {stats['documents']:,} documents, but --scale is {args.scale:,}")
    with open(data / "queries.tsv", "rb") as f:
        n_queries = sum(1 for line in f if line.strip())
    info.update(generated=None, passages=stats["documents"], queries=n_queries,
                bytes=(data / "collection.tsv").stat().st_size, queries_path=str(data / "queries.tsv"),
                qrels_path=None, sources=stats.get("per_source"))
    return info


def build_engine(name: str, collection: Path, idx_root: Path, logs: Path, args, previous: dict) -> dict:
    out = engines.index_dir(name, idx_root)
    if name == "exhaustive":
        return {"shared_with": "ssr"}
    if args.skip_build and out.exists():
        old = previous.get(name, {}).get("build") or {}
        return old | {"reused": True}
    if out.exists():
        shutil.rmtree(out)
    cmd = engines.build_command(name, collection, out, logs / f"build-{name}.json")
    assert cmd is not None
    print(f"building {name}", file=sys.stderr)
    run = measure.run_tracked(cmd, logs / f"build-{name}.log", env=subprocess_env(), cwd=str(HERE),
                              limit_bytes=int(args.memory_limit_gib * GIB), timeout=args.timeout)
    info = {k: run[k] for k in ("wall_seconds", "peak_rss_mib", "returncode", "cpu_seconds", "other_cpu_cores", "log")}
    if run["returncode"] != 0 or run["killed"]:
        tail = run["log_tail"]
        info["error"] = run["killed"] or (tail.splitlines()[-1] if tail else f"exit {run['returncode']}")
        info["error_tail"] = tail
    return info


def serving_queries(collection: dict, logs: Path, max_queries: int | None, min_batch: int) -> tuple[Path, int]:
    """The queries every engine is served: the first `max_queries`, cycled to at least `min_batch`.

    Cycled copies get the ids `QID~2`, `QID~3`, ...; the originals come first, so the latency
    calls and the answer samples (the first queries) are the collection's own.
    """
    from ssr_engine.eval.trec import read_queries

    queries = list(read_queries(collection["queries_path"]).items())[:max_queries]
    rounds = max(1, -(-min_batch // max(len(queries), 1)))
    path = logs / "queries-served.tsv"
    with open(path, "w", encoding="utf-8") as f:
        for r in range(rounds):
            for qid, text in queries:
                f.write(f"{qid}~{r + 1}\t{text}\n" if r else f"{qid}\t{text}\n")
    return path, rounds * len(queries)


def serve_engine(name: str, idx_root: Path, collection: dict, logs: Path, args, threads: list[int]) -> dict:
    limit = None  # --max-queries is applied when the served queries are written
    latency = args.latency_queries
    if name == "exhaustive":
        cap = args.exhaustive_queries or max(100, int(1e9 / collection["passages"]))
        limit = cap
        # a single exhaustive query scans the whole forward index (a batch shares one scan)
        latency = min(latency, limit, max(20, int(2e7 / collection["passages"])))
    json_out = logs / f"serve-{name}.json"
    json_out.unlink(missing_ok=True)
    cmd = engines.serve_command(name, engines.index_dir(name, idx_root), Path(collection["served_path"]), json_out,
                                args.k, threads, latency, limit, args.repeat,
                                args.min_seconds)
    print(f"serving {name}", file=sys.stderr)
    run = measure.run_tracked(cmd, logs / f"serve-{name}.log", env=subprocess_env(), cwd=str(HERE),
                              limit_bytes=int(args.memory_limit_gib * GIB), timeout=args.timeout)
    if run["returncode"] != 0 or run["killed"] or not json_out.exists():
        tail = run["log_tail"]
        return {"error": run["killed"] or (tail.splitlines()[-1] if tail else f"exit {run['returncode']}"),
                "error_tail": tail, "wall_seconds": run["wall_seconds"]}
    report = json.loads(json_out.read_text())
    report["process_peak_rss_mib"] = run["peak_rss_mib"]
    report["wall_seconds"] = run["wall_seconds"]
    report["other_cpu_cores"] = run["other_cpu_cores"]
    return report


def write_report(results: dict, out: Path, compare: list[Path]) -> None:
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text(tables.markdown(results) + "\n")
    runs = [json.loads(p.read_text()) for p in compare]
    try:
        plots.make_all(results, out, runs)
    except ImportError as exc:  # matplotlib is in the bench extra; tables do not need it
        print(f"run.py: no figures ({exc})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        names = engines.parse_list(args.ours, engines.OURS, "engine") + engines.parse_list(
            args.peers, engines.PEERS, "peer")
    except ValueError as exc:
        print(f"run.py: error: {exc}", file=sys.stderr)
        return 2
    tag = f"{args.scale}-{args.queries}"
    data = args.data or DATA_ROOT / f"synth-{tag}"
    out = args.out or DATA_ROOT / f"run-{tag}"
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        write_report(json.loads((out / "results.json").read_text()), out, args.compare)
        print(out / "results.md")
        return 0
    threads = args.threads or sorted({1, os.cpu_count() or 1})
    logs, idx_root = out / "logs", out / "indexes"
    logs.mkdir(parents=True, exist_ok=True)
    previous: dict = {}
    before: dict = {}
    if (out / "results.json").exists():
        before = json.loads((out / "results.json").read_text())
        previous = {e["name"]: e for e in before.get("engines", [])}

    collection = prepare_collection(args, data, logs)
    collection["served_path"], collection["served_queries"] = serving_queries(collection, logs, args.max_queries,
                                                                              args.min_batch)
    collection["served_path"] = str(collection["served_path"])
    results = {
        "harness": 1, "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv),
        "machine": measure.machine(), "scale": args.scale, "queries_kind": args.queries, "collection": collection,
        "settings": {"k": args.k, "threads": threads, "latency_queries": args.latency_queries, "repeat": args.repeat,
                     "min_seconds": args.min_seconds,
                     "max_queries": args.max_queries, "min_batch": args.min_batch,
                     "memory_limit_gib": args.memory_limit_gib, "busy_neighbours": args.busy,
                     "rss_sampling": "psutil, summed VmRSS of the process tree every 0.1 s"},
        "engines": [],
    }
    order = [*engines.OURS, *engines.PEERS]
    if before.get("collection", {}).get("path") == collection["path"]:
        # engines measured by an earlier run on this collection and not re-run now keep their rows
        for name, old in previous.items():
            if name not in names:
                results["engines"].append(old | {"carried_over": old.get("carried_over") or before.get("date")})
    for name in names:
        entry: dict = {"name": name, "family": "ours" if name in engines.OURS else "peer",
                       "description": engines.DESCRIPTIONS[name], "index_dir": str(engines.index_dir(name, idx_root))}
        results["engines"].append(entry)
        results["engines"].sort(key=lambda e: order.index(e["name"]))
        missing = engines.missing_module(name)
        if missing:
            entry["error"] = missing
            write_report(results, out, args.compare)
            continue
        entry["build"] = build_engine(name, Path(collection["path"]), idx_root, logs, args, previous)
        index = engines.index_dir(name, idx_root)
        if entry["build"].get("error") or not index.exists():
            entry["build"].setdefault("error", "no index was built")
            write_report(results, out, args.compare)
            continue
        entry["index_bytes"] = measure.dir_bytes(index)
        with measure.busy_neighbours(args.busy):
            entry["serve"] = serve_engine(name, idx_root, collection, logs, args, threads)
        write_report(results, out, args.compare)  # after every engine: a long run reports what finished
    write_report(results, out, args.compare)
    print(tables.markdown(results))
    print(f"results: {out}/results.json, results.md, *.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
