"""A packed column against the plain uint32 one: forward rows (format 5 vs 4) or postings (6 vs 5), or
format 7's postings directory against plain offsets (`--column lists`).

    flock /tmp/ssr-bench.lock python benchmarks/bench_forward.py --index DIR --queries Q.tsv \
        [--column forward|postings|lists] [--bytes] [--against DIR2] [--methods ssr levels] [--k 10 100 1000] \
        [--threads 1] [--max-queries N] [--repeat 5] [--scan]

One process: the index's column as it is (width 0: a format-4 index's forward rows, a format-5 one's
postings) and the same values packed in memory as a newer build writes them (`packed.pack32` at
`width_for(V)` bits for rows, `width_for(N)` for postings, `--bytes`: `byte_width_for(N)`, format 6's
whole bytes), then each method's batch kernel (`--methods`: ssr = probe, levels) on one prepared batch
with each, called in turn (the order reversed every other round), best of `--repeat` CPU times
(`time.process_time`; wall time with `--threads` > 1). `--against DIR2`: instead of packing in memory,
the second arm is another index of the same collection (say format 6 against format 5), both mapped
from disk as users get them. `--scan` adds the exhaustive scan (every forward row read once per batch).
Prints one JSON line per method and K: q/s of each, packed/plain, whether the results are identical,
the column's bytes each way. `--column lists`: the second arm reads the index's postings through format 7's
directory (`kernels.lists.encode` of its df, in memory) instead of its plain offsets: the accessor's cost alone.
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
from ssr_engine.kernels.lists import encode
from ssr_engine.kernels.packed import byte_width_for, pack32
from ssr_engine.kernels.ssr import exhaustive_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_probe import interleaved  # noqa: E402  (each function's best CPU time, called in turn)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="an index whose --column is plain (uint32)")
    ap.add_argument("--column", choices=("forward", "postings", "lists"), default="forward")
    ap.add_argument("--methods", nargs="+", choices=("ssr", "levels"), default=["ssr"])
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>query")
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bytes", action="store_true", help="postings at whole-byte widths (`packed.byte_width_for`)")
    ap.add_argument("--against", help="a second index of the same collection (its own columns, mapped)")
    ap.add_argument("--scan", action="store_true", help="also time the exhaustive scan")
    args = ap.parse_args(argv)
    with open(args.queries, encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()][: args.max_queries]
    numba.set_num_threads(args.threads)
    arms = [Arm(Searcher(args.index), texts)]
    ix = arms[0].ix
    plain = ix.forward if args.column == "forward" else ix.postings  # the postings: the bare array when plain
    words = plain[0] if isinstance(plain, tuple) else plain
    if args.column == "lists":
        if isinstance(ix.lists, tuple):
            raise SystemExit(f"{args.index}: already format 7")
        t = time.perf_counter()
        long, rank, ends = encode(ix.df().astype(np.int64), 0, 0)
        lists = (long, np.append(rank, len(ends)).astype(np.uint32),
                 np.concatenate([[0], ends]).astype(ix.postings_indptr.dtype))
        pack_s = time.perf_counter() - t
        arms.append(arms[0].with_column("lists", lists))
        sizes = {"column": "lists", "plain_MiB": round(ix.postings_indptr.nbytes / 2**20, 1),
                 "packed_MiB": round(sum(a.nbytes for a in lists) / 2**20, 1), "pack_seconds": round(pack_s, 2)}
    elif args.against:
        arms.append(Arm(Searcher(args.against), texts))
        other = arms[1].ix.forward if args.column == "forward" else arms[1].ix.postings
        sizes = {"column": args.column, "MiB": [round(a.nbytes / 2**20, 1) for a in (
            words, other[0] if isinstance(other, tuple) else other)]}
    else:
        if isinstance(plain, tuple) and plain[1] != PLAIN or args.column == "postings" and isinstance(plain, tuple):
            raise SystemExit(f"{args.index}: {args.column} already packed (format {ix.manifest.format_version})")
        width = width_for(ix.n_terms if args.column == "forward" else ix.n_docs)
        width = byte_width_for(ix.n_docs) if args.bytes else width
        t = time.perf_counter()
        packed = (pack32(words, width), width)
        if args.bytes:  # the whole-byte reader (`packed.at` on uint8 data)
            packed = (packed[0].view(np.uint8), width)
        pack_s = time.perf_counter() - t
        arms.append(arms[0].with_column(args.column, packed))
        sizes = {"column": args.column, "plain_MiB": round(words.nbytes / 2**20, 1),
                 "packed_MiB": round(packed[0].nbytes / 2**20, 1), "width": width, "pack_seconds": round(pack_s, 2)}
    timer = time.process_time if args.threads == 1 else time.perf_counter
    nq = len(texts)
    for method, k in ((m, k) for m in args.methods for k in args.k):
        fns = [lambda k=k, arm=arm, m=method: arm.run(m, k) for arm in arms]
        for fn in fns:  # warm: compile, and page in what each reads
            fn()
        (a, b), (t_a, t_b) = interleaved(fns, args.repeat, timer)
        row = {"index": args.index, "against": args.against, "method": method, "k": k, "queries": nq,
               "threads": args.threads, "plain_qps": round(nq / t_a), "packed_qps": round(nq / t_b),
               "packed/plain": round(t_a / t_b, 3),
               "identical": all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True)), **sizes}
        if args.scan and args.column == "forward":
            fns = [lambda k=k, arm=arm: exhaustive_batch(arm.ix.forward_indptr, arm.fwd, arm.ix.doc_rank,
                                                         arm.ix.n_terms, *arm.batch, k) for arm in arms]
            for fn in fns:
                fn()
            (c, d), (t_c, t_d) = interleaved(fns, max(1, args.repeat // 2), timer)
            row.update({"scan_plain_s": round(t_c, 2), "scan_packed_s": round(t_d, 2),
                        "scan_identical": all(x.tobytes() == y.tobytes() for x, y in zip(c, d, strict=True))
                        and all(x.tobytes() == y.tobytes() for x, y in zip(a, c, strict=True))})
        print(json.dumps({**row, "load": os.getloadavg()[0]}), flush=True)


class Arm:
    """One side of the A/B: an index's arrays and prepared batch, its postings and forward columns."""

    def __init__(self, s: Searcher | None, texts: list[str]) -> None:
        if s is not None:
            self.ix = s.index
            qb = s.query_batch(texts)
            self.batch = (qb.offsets, qb.terms, qb.weights)
            self.mono = probe.ascending(self.ix.doc_rank)
            self.docs, self.fwd, self.lists = self.ix.postings, self.ix.forward, self.ix.lists

    def with_column(self, column: str, col: tuple) -> Arm:
        """The same arm with its forward rows, postings or postings directory replaced by col."""
        arm = Arm(None, [])
        arm.__dict__.update(self.__dict__)
        setattr(arm, {"postings": "docs", "lists": "lists"}.get(column, "fwd"), col)
        return arm

    def run(self, method: str, k: int):
        ix = self.ix
        if method == "levels":
            return levels.search_batch(self.lists, self.docs, ix.doc_rank, ix.n_docs, *self.batch, k,
                                       monotone=self.mono)
        return probe.search_batch(self.lists, self.docs, ix.doc_rank, ix.n_docs, ix.forward_indptr, self.fwd,
                                  *self.batch, k, monotone=self.mono)


if __name__ == "__main__":
    main()
