"""`ssr evaluate`: run a query file through a method, write a TREC run and a JSON report."""

from __future__ import annotations

import argparse

from ..retrieval import BM25_B, BM25_K1, METHODS


def _k(text: str) -> int | None:
    if text == "all":
        return None
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {text!r}") from None
    if k < 1:
        raise argparse.ArgumentTypeError(f"k must be >= 1, got {k}")
    return k


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="an index built by `ssr build-index`")
    p.add_argument("--queries", required=True, metavar="FILE",
                   help="queries: TSV qid<TAB>query, JSONL (BEIR queries.jsonl) or irds:NAME")
    p.add_argument("--qrels", required=True, metavar="FILE",
                   help="judgements: 'qid 0 docid rel' (TREC or MS MARCO tab form), BEIR's 'qid docid rel' "
                        "(header skipped), 'qid<TAB>docid', or irds:NAME")
    p.add_argument("--method", default="ssr", choices=METHODS,
                   help="ssr (inverted index, pruned where that pays), levels (inverted index, every posting), union "
                        "(inverted index, the heap kernel), maxscore (inverted index, "
                        "exact MaxScore pruning), exhaustive (full scan; all identical) or bm25 (a --scoring "
                        "bm25 index)")
    p.add_argument("-k", type=_k, default=1000, help="results per query, or 'all' (default 1000)")
    p.add_argument("--run", metavar="FILE", help="write the TREC run here (qid Q0 docid rank score tag)")
    p.add_argument("--report", metavar="FILE", help="write the JSON report here")
    p.add_argument("--threads", type=int, metavar="N", help="Numba threads for the batch (default: all cores)")
    p.add_argument("--tag", help="run tag, the run's last column (default: the method)")
    p.add_argument("--k1", type=float, default=BM25_K1, help=f"BM25 k1 (default {BM25_K1})")
    p.add_argument("--b", type=float, default=BM25_B, help=f"BM25 b (default {BM25_B})")
    p.add_argument("--latency-queries", type=int, default=1000, metavar="N",
                   help="queries timed one at a time for the latency percentiles (default 1000; sampling "
                        "stops after 60 s once 10 are timed)")
    p.add_argument("--measures", nargs="+", metavar="M",
                   help="measures (default: MRR@10 R@10 R@20 R@100 R@1000 nDCG@10); built in: MRR@k, RR@k, R@k, "
                        "nDCG@k; with ir_measures installed any of its names (AP, P@k, Judged@k, ...), computed by "
                        "it on the run as written")
    p.add_argument("--run-scores", choices=("trec", "exact"), default="trec",
                   help="trec (default): float32 scores strictly decreasing along our order, so trec_eval, "
                        "pytrec_eval and ir_measures evaluate the same ranking; exact: the true float64 scores")
    p.add_argument("--quiet", action="store_true", help="no progress bar, notices or summary")
    p.add_argument("--ray", action="store_true",
                   help="a sharded index: search through one Ray actor per shard (default: in this process)")
    p.add_argument("--ray-address", metavar="ADDR", help="with --ray: the Ray cluster (default: a local instance)")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip malformed query/qrels lines (counted in the report) instead of failing")


def run(args: argparse.Namespace) -> int:
    from ..errors import SsrError
    from ..eval.evaluate import format_summary, run_evaluation

    if args.method != "bm25" and (args.k1 != BM25_K1 or args.b != BM25_B):
        raise SsrError("--k1 and --b apply to --method bm25 only")
    if not (args.k1 >= 0 and 0 <= args.b <= 1):
        raise SsrError(f"need --k1 >= 0 and 0 <= --b <= 1, got {args.k1} and {args.b}")
    if args.latency_queries < 0:
        raise SsrError(f"--latency-queries must be >= 0, got {args.latency_queries}")
    if args.tag is not None and (not args.tag or any(c.isspace() for c in args.tag)):
        raise SsrError(f"--tag {args.tag!r}: must be non-empty without whitespace")
    report = run_evaluation(
        args.index, args.queries, args.qrels, args.method, args.k, run_path=args.run, report_path=args.report,
        threads=args.threads, tag=args.tag, k1=args.k1, b=args.b, skip_bad_lines=args.skip_bad_lines,
        latency_queries=args.latency_queries, run_scores=args.run_scores, quiet=args.quiet, ray=args.ray,
        ray_address=args.ray_address,
        **({"measures": args.measures} if args.measures else {}),
    )
    if not args.quiet:
        print(format_summary(report))
    return 0
