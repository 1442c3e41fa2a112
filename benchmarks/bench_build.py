"""Index build: wall time, peak memory of the whole process tree, index size.

    python benchmarks/bench_build.py --collection /tmp/ssr-data/synth-1m/collection.tsv \
        --out /tmp/ssr-data/idx-1m --json benchmarks/out/build-1m.json

Runs `ssr build-index` in a subprocess (so the figures are those of a user's build), sampling
RSS and RssAnon of the process and all its children every 0.1 s. RSS counts the index files'
pages the build maps or writes through the page cache only while they are mapped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proctree import run_measured  # noqa: E402

GiB = 1024**3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collection", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--scoring", default="ssr", choices=("ssr", "bm25"))
    ap.add_argument("--chunk-docs", type=int, default=100_000)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(args.collection),
           "--out", str(args.out), "--force", "--quiet", "--scoring", args.scoring,
           "--chunk-docs", str(args.chunk_docs)]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    load_before = os.getloadavg()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = run_measured(cmd)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_after = os.getloadavg()
    if m.returncode != 0:
        raise SystemExit(f"build failed with status {m.returncode}")
    from ssr_engine.format import open_index

    manifest = open_index(args.out).manifest.to_dict()
    files = {name: rec["bytes"] for name, rec in manifest["files"].items()}
    inverted = sum(files.get(n, 0) for n in ("vocab.npy", "postings_indptr.npy", "postings_long.npy",
                                             "postings_rank.npy", "postings_docs.npy"))
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": platform.machine(),
        "command": " ".join(cmd),
        "collection_bytes": args.collection.stat().st_size,
        "counts": manifest["counts"],
        "seconds": round(m.seconds, 1),
        # CPU seconds of the build (user + system): less sensitive than wall time to other jobs on a shared machine
        "cpu_seconds": round(cpu_after.ru_utime - cpu_before.ru_utime + cpu_after.ru_stime - cpu_before.ru_stime, 1),
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "peak_rss_at_s": round(max(m.samples, key=lambda s: s[1])[0], 1) if m.samples else None,
        "peak_rss_gib": round(m.peak_rss / GiB, 3),
        "peak_rss_anon_gib": round(m.peak_anon / GiB, 3),
        "inverted_index_gb": round(inverted / 1e9, 3),
        "total_index_gb": round(sum(files.values()) / 1e9, 3),
        "files": files,
        "build": manifest["build"],
    }
    c = manifest["counts"]
    print("| documents | terms | postings | wall s | CPU s | peak RSS GiB | peak RssAnon GiB | inverted index GB "
          "| all files GB | load before/after |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    print(f"| {c['documents']:,} | {c['terms']:,} | {c['postings']:,} | {result['seconds']} | "
          f"{result['cpu_seconds']} | {result['peak_rss_gib']} | {result['peak_rss_anon_gib']} | "
          f"{result['inverted_index_gb']} | "
          f"{result['total_index_gb']} | {result['load_average_before_after']} |")
    print("phases (s):", manifest["build"].get("phase_seconds"), "peak RSS at", result["peak_rss_at_s"], "s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
