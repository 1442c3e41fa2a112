"""`ssr demo`: the main job on real data bundled with the package (see `ssr_engine.demo`)."""

from __future__ import annotations

import argparse

PARTS = ("cranfield", "agents", "scale")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("parts", nargs="*", metavar="PART",
                   help="cranfield, agents and/or scale (default: all three)")
    p.add_argument("--passages", type=int, default=200_000, help="scale: generated passages (default 200000)")
    p.add_argument("--queries", type=int, default=1000, help="scale: generated queries (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="scale: generator seed (default 1)")
    p.add_argument("--agent-queries", type=int, default=None, metavar="N",
                   help="agents: N evenly spaced MetaTool queries (default: all 20,614)")
    p.add_argument("--workdir", default="ssr-demo", metavar="DIR",
                   help="where data, indexes, runs and the report go (default ./ssr-demo; created by the demo)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    from ..demo import run_demo
    from ..errors import SsrError

    if args.agent_queries is not None and args.agent_queries < 1:
        raise SsrError("--agent-queries must be >= 1")
    run_demo(args.workdir, args.parts or PARTS, passages=args.passages, queries=args.queries, seed=args.seed,
             agent_queries=args.agent_queries, quiet=args.quiet)
    return 0
