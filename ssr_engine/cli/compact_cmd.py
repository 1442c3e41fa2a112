"""`ssr compact --index DIR`: merge an index's segments into one, dropping deleted documents."""

from __future__ import annotations

import argparse

from . import chunk_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="the index to compact")
    chunk_arguments(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    from ..agents.live import LiveRegistry, is_registry
    from ..live import LiveIndex
    from . import print_report

    if is_registry(args.index):  # its card stores must follow the cards: the registry compacts itself
        registry = LiveRegistry.open(args.index)
        try:
            report = registry.compact()
        finally:
            registry.close()
    else:
        report = LiveIndex(args.index, quiet=args.quiet, workers=args.workers, chunk_docs=args.chunk_docs).compact()
    print_report(report, args.json, f"compacted {args.index}: {report['segments_before']} segments -> 1, "
                 f"{report['documents']} documents ({report['dropped']} deleted dropped), "
                 f"generation {report['generation']}")
    return 0
