"""`ssr index-info DIR`: counts, bytes per file and settings of an index."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", metavar="DIR")
    p.add_argument("--json", action="store_true", help="print the manifest summary as JSON")


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def run(args: argparse.Namespace) -> int:
    import json

    from ..format import open_index
    from ..live import LiveIndex

    live = LiveIndex(args.index).info()
    if len(live["segments"]) > 1 or live["deleted"]:
        return _print_live(args, live)
    index = open_index(args.index)
    m = index.manifest.to_dict()
    files = {name: rec["bytes"] for name, rec in m["files"].items()}
    inverted = sum(files.get(n, 0) for n in ("vocab.npy", "postings_indptr.npy", "postings_long.npy",
                                                "postings_rank.npy", "postings_docs.npy"))
    summary = {
        "path": str(index.root),
        "segment": index.path.name,
        "generation": index.commit.generation if index.commit else None,
        "format_version": index.manifest.format_version,  # the index's own, not this code's
        "scoring": m["scoring"],
        "counts": m["counts"],
        "signals": {k: v for k, v in m["signals"].items() if k != "stopwords"},
        "ids": m["ids"],
        "input": {k: v for k, v in m["input"].items() if k != "skipped"},
        "build": m["build"],
        "files": files,
        "inverted_index_bytes": inverted,
        "total_bytes": sum(files.values()),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    c = m["counts"]
    s = summary["signals"]
    print(f"index        {index.root}  (format {summary['format_version']}, scoring {summary['scoring']}, "
          f"generation {summary['generation']}, segment {summary['segment']})")
    print(f"documents    {c['documents']:,}  ({c['empty_documents']:,} without signals)")
    print(f"terms        {c['terms']:,}")
    print(f"postings     {c['postings']:,}")
    print(f"signals      stopwords {s['stopwords_id']} (sha256 {s['stopwords_sha256'][:12]}), cap {s['cap']}, "
          f"bigrams {s['bigrams']}, stem {s['stem']}")
    print(f"hash         {s['hash']['name']} seed {s['hash']['seed']} bits {s['hash']['bits']}")
    print(f"ids          {m['ids']['order']} order")
    print(f"input        {m['input']['path']} ({m['input']['format']}, {m['input']['lines_skipped']} lines skipped)")
    print(f"build        {m['build']['seconds']} s, {m['build']['workers']} workers, "
          f"{m['build']['chunk_docs']} docs/chunk, {m['build']['runs']} runs")
    print("files")
    for name, size in sorted(files.items()):
        print(f"  {name:<22} {_human(size):>11}")
    print(f"  {'inverted index':<22} {_human(inverted):>11}  (vocab + postings_indptr/long/rank + postings_docs)")
    print(f"  {'total':<22} {_human(summary['total_bytes']):>11}")
    return 0


def _print_live(args: argparse.Namespace, info: dict) -> int:
    """A live index: its segments with live and deleted documents (`ssr compact` merges them)."""
    import json

    if args.json:
        print(json.dumps({"path": str(args.index), **info}, indent=2))
        return 0
    print(f"index        {args.index}  (live: {len(info['segments'])} segments, generation {info['generation']})")
    print(f"documents    {info['live']:,} live, {info['deleted']:,} deleted")
    print(f"  {'segment':<10} {'documents':>12} {'live':>12} {'deleted':>10} {'terms':>12} {'postings':>14}")
    for s in info["segments"]:
        print(f"  {s['name']:<10} {s['documents']:>12,} {s['live']:>12,} {s['deleted']:>10,} {s['terms']:>12,} "
              f"{s['postings']:>14,}")
    return 0
