"""`ssr demo`: the main job on an embedded default, no download.

Generates an MS MARCO-shaped collection with queries (seeded), builds the SSR and BM25 indexes,
evaluates SSR, the exhaustive scan and BM25 on the same queries, and prints the comparison.
Steps whose outputs already exist (same settings) are reused, so a second run is quick.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--passages", type=int, default=200_000, help="collection size (default 200000)")
    p.add_argument("--queries", type=int, default=1000, help="generated queries (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    p.add_argument("--workdir", default="ssr-demo", metavar="DIR",
                   help="where the collection, indexes, runs and reports go (default ./ssr-demo)")
    p.add_argument("-k", type=int, default=1000, help="results per query (default 1000)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    import time
    from pathlib import Path

    from ..datagen.collection import generate
    from ..errors import SsrError
    from ..eval.evaluate import format_summary, markdown_table, run_evaluation
    from ..indexing import build_index

    if args.passages < 1 or args.queries < 1 or args.k < 1:
        raise SsrError("--passages, --queries and -k must be >= 1")
    work = Path(args.workdir)
    data = work / "collection"
    work.mkdir(parents=True, exist_ok=True)

    def say(message: str) -> None:
        print(f"[ssr demo] {message}", file=sys.stderr, flush=True)

    started = time.time()
    stats_path = data / "stats.json"
    wanted = {"passages": args.passages, "seed": args.seed}
    stats = json.loads(stats_path.read_text()) if stats_path.is_file() else {}
    if {k: stats.get(k) for k in wanted} != wanted or stats.get("queries") != args.queries:
        say(f"generating {args.passages:,} passages and {args.queries:,} queries (seed {args.seed}) into {data}")
        generate(data, passages=args.passages, seed=args.seed, queries=args.queries)
    else:
        say(f"reusing the collection in {data}")

    collection = data / "collection.tsv"
    indexes = {"ssr": work / "index-ssr", "bm25": work / "index-bm25"}
    for scoring, out in indexes.items():
        manifest = out / "manifest.json"
        fresh = manifest.is_file() and json.loads(manifest.read_text())["input"]["bytes"] == collection.stat().st_size
        if fresh and manifest.stat().st_mtime >= collection.stat().st_mtime:
            say(f"reusing the {scoring} index {out}")
            continue
        say(f"building the {scoring} index {out}")
        build_index(collection, out, scoring=scoring, force=True, quiet=args.quiet)

    reports = []
    for method, index in (("ssr", indexes["ssr"]), ("exhaustive", indexes["ssr"]), ("bm25", indexes["bm25"])):
        say(f"evaluating {method}")
        report = run_evaluation(
            index, data / "queries.tsv", data / "qrels.tsv", method, args.k,
            run_path=work / f"run-{method}.trec", report_path=work / f"report-{method}.json",
            latency_queries=min(args.queries, 300),
        )
        print(format_summary(report))
        reports.append(report)
    print()
    print(markdown_table(reports))
    say(f"done in {time.time() - started:.0f} s; runs and reports in {work}")
    return 0
