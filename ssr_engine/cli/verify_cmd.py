"""`ssr verify DIR`: recompute every checksum of an index (of a sharded one: and its weight table)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", metavar="DIR")


def run(args: argparse.Namespace) -> int:
    import sys

    from ..distributed.layout import is_sharded, verify_sharded
    from ..format import verify_index

    problems = verify_sharded(args.index) if is_sharded(args.index) else verify_index(args.index)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"{args.index}: {len(problems)} problem(s)", file=sys.stderr)
        return 2
    print(f"{args.index}: ok")
    return 0
