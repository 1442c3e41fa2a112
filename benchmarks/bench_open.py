"""Cost of the structural validation at open against open + first query (issue 12; goal <= 5%).

    python benchmarks/bench_open.py --index IDX --queries queries.tsv [--runs 3] [--k 10]

Each run is a fresh process (as a user's first search is): it times `open_index` (which runs
`validate.check_index`; its share is timed by wrapping it), then building the Searcher and
the first query. The full O(postings) check (`--verify`'s structural part) is timed too, once.
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
from ssr_engine.format import open_index
from ssr_engine.search import Searcher
t_import = time.perf_counter() - t0
timed = {}
orig = v.check_index
def check_index(index, full=False):
    t = time.perf_counter()
    orig(index, full=full)
    timed["validate"] = time.perf_counter() - t
v.check_index = check_index
path, query, k, full = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
t = time.perf_counter()
ix = open_index(path)
t_open = time.perf_counter() - t
t = time.perf_counter()
s = Searcher(ix)
res = s.search(query, k)
t_query = time.perf_counter() - t
out = {"import_s": t_import, "open_s": t_open, "validate_s": timed["validate"], "first_query_s": t_query,
       "results": len(res)}
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
    args = ap.parse_args()
    with open(args.queries, encoding="utf-8") as f:
        query = f.readline().rstrip("\n").split("\t", 1)[1]
    rows = []
    for r in range(args.runs):
        p = subprocess.run([sys.executable, "-c", CHILD, args.index, query, str(args.k), "1" if r == 0 else "0"],
                           capture_output=True, text=True, check=True)
        rows.append(json.loads(p.stdout))
    print("| run | open s (validation included) | validation s | first query s | validation / (open + first query) |")
    print("|---:|---:|---:|---:|---:|")
    for i, row in enumerate(rows, 1):
        share = row["validate_s"] / (row["open_s"] + row["first_query_s"])
        print(f"| {i} | {row['open_s']:.3f} | {row['validate_s']:.3f} | {row['first_query_s']:.3f} | {share:.1%} |")
    if "full_check_s" in rows[0]:
        print(f"\nfull O(postings) structural check (--verify, without checksums): {rows[0]['full_check_s']:.2f} s")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
