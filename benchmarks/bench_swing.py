"""Why a batch's speed swings between rounds: SSR's batch against three fixed workloads, window after window.

    python benchmarks/bench_swing.py --index IDX --queries queries.tsv [--k 10] [--threads 1]
                                     [--windows 40] [--seconds 0.4] [--json OUT]

In every window, one after another on the same thread(s): the batch of all queries (`search_batch`,
called back to back for --seconds), then three controls that never change, each for --seconds:

- `l3`: random 4-byte reads in a 24 MiB array (fits the shared last-level cache when nobody else uses it);
- `ram`: random 4-byte reads in a 512 MiB array (always main memory);
- `alu`: a multiply-add chain in registers (no memory at all).

Per workload the calls per second of each window, the spread (max / min over the windows) and the
correlation of each control's rate with the batch's. A control that swings as the batch does, window by
window, names the machine's resource that the batch's swing follows; CPU time equal to wall time (printed)
rules out waiting, page faults and preemption inside this process.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np


def controls():
    """The three fixed workloads: name -> a call (compiled on first use)."""
    import numba as nb

    @nb.njit(nogil=True)
    def gather(a, idx):
        s = 0
        for i in idx:
            s += a[i]
        return s

    @nb.njit(nogil=True)
    def chain(n):
        x = 1
        for _ in range(n):
            x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFF
        return x

    rng = np.random.default_rng(0)
    l3 = np.ones(24 << 18, np.uint32)  # 24 MiB
    ram = np.ones(1 << 27, np.uint32)  # 512 MiB
    i3, ir = rng.integers(0, l3.shape[0], 2_000_000), rng.integers(0, ram.shape[0], 2_000_000)
    calls = {"l3": lambda: gather(l3, i3), "ram": lambda: gather(ram, ir), "alu": lambda: chain(2_000_000)}
    for call in calls.values():
        call()
    return calls


def rate(call, seconds: float) -> tuple[float, float]:
    """(calls per second, CPU seconds / wall seconds) of `call` called back to back for `seconds`."""
    c0, t0, n = time.process_time(), time.perf_counter(), 0
    while True:
        call()
        n += 1
        wall = time.perf_counter() - t0
        if wall >= seconds:
            return n / wall, (time.process_time() - c0) / wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--windows", type=int, default=40)
    p.add_argument("--seconds", type=float, default=0.4, help="each workload's time in a window")
    p.add_argument("--json", dest="json_out")
    args = p.parse_args(argv)
    from ssr_engine.eval.trec import read_queries
    from ssr_engine.retrieval import open_retriever

    texts = list(read_queries(args.queries).values())
    searcher = open_retriever(args.index)
    workloads = {"batch": lambda: searcher.search_batch(texts, args.k, threads=args.threads), **controls()}
    workloads["batch"]()
    rates: dict[str, list[float]] = {name: [] for name in workloads}
    busy: list[float] = []
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(args.windows):
        for name, call in workloads.items():
            r, cpu = rate(call, args.seconds)
            rates[name].append(r)
            if name == "batch":
                busy.append(cpu)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
    table = np.array([rates[name] for name in workloads])
    corr = np.corrcoef(table)
    report = {"index": args.index, "k": args.k, "threads": args.threads, "windows": args.windows,
              "seconds": args.seconds, "queries": len(texts),
              "batch_cpu_over_wall": [round(min(busy), 3), round(max(busy), 3)], "minor_faults": int(faults),
              "workloads": {name: {"median_per_s": float(np.median(rates[name])),
                                   "spread": float(max(rates[name]) / min(rates[name])),
                                   "corr_with_batch": float(corr[0, i])}
                            for i, name in enumerate(workloads)}}
    for name, w in report["workloads"].items():
        print(f"{name:6s} median {w['median_per_s']:10.1f}/s  spread {w['spread']:.2f}  corr with batch "
              f"{w['corr_with_batch']:+.2f}")
    print(f"batch CPU/wall {report['batch_cpu_over_wall']}, minor faults {faults}", file=sys.stderr)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
