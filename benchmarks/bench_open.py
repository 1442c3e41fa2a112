"""Cost of the structural validation against open + first query (issue 12; goal <= 5%).

    python benchmarks/bench_open.py --index IDX --queries queries.tsv [--runs 3] [--k 10]

Each run is a fresh process (as a user's first search is): it times `open_index` (which runs
`validate.check_index`; its share is timed by wrapping it), then building the Searcher and the
first query (after a tiny kernel call that takes Numba's own start out of the figures), inside
which the per-lookup checks (`validate.find_terms`, `check_terms`, where the
version has them) are timed by wrapping them too. Validation = open-time checks + lookup checks.
Then, in the same process (pages now cached), each of the five whole-array checks is timed on
its own: the split of what open used to read (the O(V) offsets and vocabulary, the O(N) arrays).
The full O(postings) check (`--verify`'s structural part) is timed once. Runs with whatever
`ssr_engine` is on PYTHONPATH, so two versions can be compared in one sitting.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import ssr_engine.validate as v
import ssr_engine.search as search_mod
from ssr_engine.format import open_index
from ssr_engine.search import Searcher
from ssr_engine.kernels import validate as kv
t_import = time.perf_counter() - t0
timed = {"validate": 0.0, "lookup": 0.0}

def timer(fn, key):
    def wrapped(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            timed[key] += time.perf_counter() - t
    return wrapped

orig = v.check_index
v.check_index = timer(orig, "validate")
for name in ("find_terms", "check_terms"):
    if hasattr(search_mod, name):
        setattr(search_mod, name, timer(getattr(search_mod, name), "lookup"))
path, query, k, full = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
import numpy as np
t = time.perf_counter()
kv.permutation(np.arange(3, dtype=np.uint32))  # Numba's own start, paid by whichever kernel runs first
t_numba = time.perf_counter() - t
t = time.perf_counter()
ix = open_index(path)
t_open = time.perf_counter() - t
t = time.perf_counter()
s = Searcher(ix)
res = s.search(query, k)
t_query = time.perf_counter() - t
out = {"import_s": t_import, "numba_start_s": t_numba, "open_s": t_open, "validate_s": timed["validate"],
       "lookup_s": timed["lookup"], "first_query_s": t_query, "results": len(res)}
descent = getattr(kv, "descent", None)  # this version's kernel; older ones had two
mono = (lambda a: descent(a, False)) if descent else kv.monotone
strict = (lambda a: descent(a, True)) if descent else kv.strictly_increasing
checks = {
    "postings_indptr monotone": lambda: mono(ix.postings_indptr),
    "signal_offsets monotone": lambda: mono(ix.signal_offsets),
    "vocab sorted": lambda: strict(ix.vocab),
    "forward_indptr monotone": lambda: mono(ix.forward_indptr),
    "doc_rank permutation": lambda: kv.permutation(ix.doc_rank),
}
split = {}
for name, fn in checks.items():
    t = time.perf_counter()
    fn()
    split[name] = time.perf_counter() - t
out["split_s"] = split
if full:
    t = time.perf_counter()
    orig(ix, full=True)
    out["full_check_s"] = time.perf_counter() - t
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>query; the first query is used")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--no-full", action="store_true", help="skip the O(postings) check")
    ap.add_argument("--json", help="append the rows as one JSON line to this file")
    args = ap.parse_args()
    with open(args.queries, encoding="utf-8") as f:
        query = f.readline().rstrip("\n").split("\t", 1)[1]
    rows = []
    for r in range(args.runs):
        full = r == 0 and not args.no_full
        p = subprocess.run([sys.executable, "-c", CHILD, args.index, query, str(args.k), "1" if full else "0"],
                           capture_output=True, text=True, check=True, cwd="/")  # PYTHONPATH's package, not cwd's
        rows.append(json.loads(p.stdout))
    print("| run | open s (checks included) | open checks s | lookup checks s | first query s | "
          "(open + lookup checks) / (open + first query) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for i, row in enumerate(rows, 1):
        share = (row["validate_s"] + row["lookup_s"]) / (row["open_s"] + row["first_query_s"])
        print(f"| {i} | {row['open_s']:.3f} | {row['validate_s']:.3f} | {row['lookup_s']:.4f} | "
              f"{row['first_query_s']:.3f} | {share:.1%} |")
    print("\nwhole-array checks timed one by one after the first query (pages cached), seconds per run:")
    for name in rows[0]["split_s"]:
        print(f"  {name}: " + ", ".join(f"{row['split_s'][name]:.3f}" for row in rows))
    if "full_check_s" in rows[0]:
        print(f"\nfull O(postings) structural check (--verify, without checksums): {rows[0]['full_check_s']:.2f} s")
    print(json.dumps(rows))
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            f.write(json.dumps(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
