"""A packed column against the plain uint32 one: forward rows (format 5 vs 4) or postings (6 vs 5).

    flock /tmp/ssr-bench.lock python benchmarks/bench_forward.py --index DIR --queries Q.tsv \
        [--column forward|postings] [--methods ssr levels] [--k 10 100 1000] [--max-queries N] \
        [--repeat 5] [--scan]

One process: the index's column as it is (width 0: a format-4 index's forward rows, a format-5 one's
postings) and the same values packed in memory as a newer build writes them (`packed.pack32` at
`width_for(V)` bits for rows, `width_for(N)` for postings), then each method's batch kernel
(`--methods`: ssr = probe, levels) on one prepared batch with each, called in turn, best of
`--repeat` CPU times (`time.process_time`). `--scan` adds the exhaustive scan (every forward row
read once per batch). Prints one JSON line per method and K: q/s of each, packed/plain, whether the
results are identical, the column's bytes each way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np

from ssr_engine import Searcher
from ssr_engine.kernels import levels, probe
from ssr_engine.kernels.forward import PLAIN, width_for
from ssr_engine.kernels.packed import byte_width_for, pack32
from ssr_engine.kernels.ssr import exhaustive_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_probe import interleaved  # noqa: E402  (each function's best CPU time, called in turn)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="an index whose --column is plain (uint32)")
    ap.add_argument("--column", choices=("forward", "postings"), default="forward")
    ap.add_argument("--methods", nargs="+", choices=("ssr", "levels"), default=["ssr"])
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bytes", action="store_true", help="postings at whole-byte widths (`packed.byte_width_for`)")
    ap.add_argument("--scan", action="store_true", help="also time the exhaustive scan")
    args = ap.parse_args(argv)
    with open(args.queries, encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()][: args.max_queries]
    numba.set_num_threads(1)
    s = Searcher(args.index)
    ix = s.index
    plain = ix.forward if args.column == "forward" else ix.postings  # the postings: the bare array when plain
    words = plain[0] if isinstance(plain, tuple) else plain
    if isinstance(plain, tuple) and plain[1] != PLAIN or args.column == "postings" and isinstance(plain, tuple):
        raise SystemExit(f"{args.index}: {args.column} already packed (format {ix.manifest.format_version})")
    width = width_for(ix.n_terms if args.column == "forward" else ix.n_docs)
    width = byte_width_for(ix.n_docs) if args.bytes else width
    t = time.perf_counter()
    packed = (pack32(words, width), width)
    if args.bytes:  # the whole-byte reader (`packed.at` on uint8 data)
        packed = (packed[0].view(np.uint8), width)
    pack_s = time.perf_counter() - t
    qb = s.query_batch(texts)
    nq = len(texts)
    batch = (qb.offsets, qb.terms, qb.weights)
    mono = probe.ascending(ix.doc_rank)
    sizes = {"column": args.column, "plain_MiB": round(words.nbytes / 2**20, 1),
             "packed_MiB": round(packed[0].nbytes / 2**20, 1), "width": width, "pack_seconds": round(pack_s, 2)}

    def run(method: str, col: np.ndarray | tuple[np.ndarray, int], k: int):
        docs = col if args.column == "postings" else ix.postings
        fwd = col if args.column == "forward" else ix.forward
        if method == "levels":
            return levels.search_batch(ix.postings_indptr, docs, ix.doc_rank, ix.n_docs, *batch, k, monotone=mono)
        return probe.search_batch(ix.postings_indptr, docs, ix.doc_rank, ix.n_docs, ix.forward_indptr, fwd, *batch, k,
                                  monotone=mono)

    for method, k in ((m, k) for m in args.methods for k in args.k):
        fns = [lambda k=k, col=col, m=method: run(m, col, k) for col in (plain, packed)]
        for fn in fns:  # warm: compile, and page in what each reads
            fn()
        (a, b), (t_a, t_b) = interleaved(fns, args.repeat)
        row = {"index": args.index, "method": method, "k": k, "queries": nq, "plain_qps": round(nq / t_a),
               "packed_qps": round(nq / t_b), "packed/plain": round(t_a / t_b, 3),
               "identical": all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True)), **sizes}
        if args.scan and args.column == "forward":
            fns = [lambda k=k, fwd=fwd: exhaustive_batch(ix.forward_indptr, fwd, ix.doc_rank, ix.n_terms, *batch, k)
                   for fwd in (plain, packed)]
            for fn in fns:
                fn()
            (c, d), (t_c, t_d) = interleaved(fns, max(1, args.repeat // 2))
            row.update({"scan_plain_s": round(t_c, 2), "scan_packed_s": round(t_d, 2),
                        "scan_identical": all(x.tobytes() == y.tobytes() for x, y in zip(c, d, strict=True))
                        and all(x.tobytes() == y.tobytes() for x, y in zip(a, c, strict=True))})
        print(json.dumps({**row, "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
