"""Packed forward rows (format 5) against plain uint32 rows (format 4): the probing kernel's A/B.

    flock /tmp/ssr-bench.lock python benchmarks/bench_forward.py --index FORMAT4_DIR --queries Q.tsv \
        [--k 10 100 1000] [--max-queries N] [--repeat 5] [--scan]

One process: the format-4 index's forward rows as they are (width 0) and the same rows packed at
`forward.width_for(V)` bits in memory (what a format-5 build writes; same term ids), then
`probe.search_batch` on one prepared batch with each, called in turn, best of `--repeat` CPU times
(`time.process_time`). `--scan` adds the exhaustive scan (every row read once per batch). Prints one
JSON line per K: q/s of each, packed/plain, whether the results are identical, forward bytes of each.
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
from ssr_engine.kernels import probe
from ssr_engine.kernels.forward import PLAIN, width_for
from ssr_engine.kernels.packed import pack32
from ssr_engine.kernels.ssr import exhaustive_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_probe import interleaved  # noqa: E402  (each function's best CPU time, called in turn)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="a format 2-4 index (plain forward rows)")
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scan", action="store_true", help="also time the exhaustive scan")
    args = ap.parse_args(argv)
    with open(args.queries, encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()][: args.max_queries]
    numba.set_num_threads(1)
    s = Searcher(args.index)
    ix = s.index
    if ix.forward_width != PLAIN:
        raise SystemExit(f"{args.index}: forward rows already packed (format {ix.manifest.format_version})")
    plain = (ix.forward_terms.view(np.ndarray), PLAIN)
    width = width_for(ix.n_terms)
    t = time.perf_counter()
    packed = (pack32(plain[0], width), width)
    pack_s = time.perf_counter() - t
    qb = s.query_batch(texts)
    nq = len(texts)
    common = (ix.postings_indptr, ix.postings_docs, ix.doc_rank, ix.n_docs)
    batch = (qb.offsets, qb.terms, qb.weights)
    mono = probe.ascending(ix.doc_rank)
    sizes = {"plain_MiB": round(plain[0].nbytes / 2**20, 1), "packed_MiB": round(packed[0].nbytes / 2**20, 1),
             "width": width, "pack_seconds": round(pack_s, 2)}
    for k in args.k:
        fns = [lambda k=k, fwd=fwd: probe.search_batch(*common, ix.forward_indptr, fwd, *batch, k, monotone=mono)
               for fwd in (plain, packed)]
        for fn in fns:  # warm: compile, and page in what each reads
            fn()
        (a, b), (t_a, t_b) = interleaved(fns, args.repeat)
        row = {"index": args.index, "k": k, "queries": nq, "plain_qps": round(nq / t_a), "packed_qps": round(nq / t_b),
               "packed/plain": round(t_a / t_b, 3),
               "identical": all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True)), **sizes}
        if args.scan:
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
