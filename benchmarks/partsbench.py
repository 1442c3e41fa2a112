"""What bench_live.py and bench_distributed.py share: the command line, JSON lines, result equality, batch
timings, latency."""

from __future__ import annotations

import argparse
import json
import time

from ssr_engine.eval.stats import percentiles


def emit(**record) -> None:
    print(json.dumps(record), flush=True)


def identical(a, b, docs: bool = True) -> bool:
    """Two SearchResults equal: ids, score bits, matches (and document numbers when `docs`)."""
    return (a.ids.tolist() == b.ids.tolist() and a.scores.tobytes() == b.scores.tobytes()
            and a.matches.tolist() == b.matches.tolist() and (not docs or a.docs.tolist() == b.docs.tolist()))


def timed(fn, rounds: int):
    """(best wall seconds of `rounds` calls, that call's CPU seconds of this process (all threads), its result)."""
    best, cpu, out = float("inf"), 0.0, None
    for _ in range(rounds):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall = time.perf_counter() - t
        if wall < best:
            best, cpu = wall, time.process_time() - c
    return best, cpu, out


def alternating(fns, rounds: int):
    """([each fn's wall seconds, round by round], [each fn's last result]): the fns called in turn,
    `rounds` times, so that a change of load hits them alike (a round's ratios are side by side)."""
    walls: list[list[float]] = [[] for _ in fns]
    outs: list = [None] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            outs[i] = None  # the previous round's result is freed before the next call
            t = time.perf_counter()
            outs[i] = fn()
            walls[i].append(time.perf_counter() - t)
    return walls, outs


def latency(searcher, queries: list[str], k: int) -> dict[str, float]:
    """p50 and p99 milliseconds of single queries, one after another (`searcher.search`)."""
    ms = []
    for q in queries:
        t = time.perf_counter()
        searcher.search(q, k)
        ms.append((time.perf_counter() - t) * 1000)
    return {key: round(v, 3) for key, v in percentiles(ms, (50, 99)).items()}


def commands(doc: str | None) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """A benchmark's parser (its docstring as the help) and its subcommands, one a step (`args.cmd`)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    return p, p.add_subparsers(dest="cmd", required=True)


def command(sub: argparse._SubParsersAction, name: str, *required: str) -> argparse.ArgumentParser:
    """Subcommand `name` of `commands`, with the options `required` (strings) that it cannot run without."""
    c = sub.add_parser(name)
    for option in required:
        c.add_argument(option, required=True)
    return c
