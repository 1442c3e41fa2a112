"""`ssr add --index DIR --collection FILE`: add documents to an index without a rebuild (a new segment)."""

from __future__ import annotations

import argparse

from . import chunk_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="the index to add to")
    p.add_argument("--collection", required=True, metavar="FILE", help="MS MARCO TSV (id<TAB>text) or JSONL")
    p.add_argument("--format", dest="fmt", choices=("auto", "tsv", "jsonl"), default="auto",
                   help="collection format (default: by file extension, .jsonl/.json = JSONL)")
    p.add_argument("--upsert", action="store_true",
                   help="replace documents whose id is already in the index (without it, that is an error)")
    chunk_arguments(p)
    p.add_argument("--skip-bad-lines", action="store_true", help="skip malformed lines instead of failing")
    p.add_argument("--no-merge", dest="merge", action="store_false",
                   help="leave the segments as they are (by default, once the new segment is visible, the newest "
                        "segments are merged once together they hold as many documents as the one before them, so "
                        "that searches stay fast)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    import sys

    from ..live import LiveIndex
    from . import print_report

    report = LiveIndex(args.index, quiet=args.quiet, workers=args.workers, chunk_docs=args.chunk_docs,
                       merge=args.merge).add(
        collection=args.collection, fmt=args.fmt, upsert=args.upsert, skip_bad_lines=args.skip_bad_lines)
    print_report(report, args.json, f"added {report['added']} documents to {args.index} as {report['segment']} "
                 f"({report['replaced']} replaced), generation {report['generation']}")
    if not args.json:
        for m in report["merges"]:
            print(f"merged {', '.join(m['merged'])} ({m['documents']} documents) into {m['segment']}, generation "
                  f"{m['generation']}, {m['seconds']} s" if "merged" in m else f"merge postponed: {m['postponed']}",
                  file=sys.stderr)
    return 0
