"""`ssr search --index DIR QUERY...` or `--queries FILE`: a TREC run (or JSON lines) of the top-k."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("queries", nargs="*", metavar="QUERY", help="query texts (ids 1, 2, ... in the run)")
    p.add_argument("--index", required=True, metavar="DIR", help="an index built by `ssr build-index`")
    p.add_argument("--queries", dest="queries_file", metavar="FILE", help="TSV of qid<TAB>query, instead of QUERY")
    p.add_argument("-k", type=int, default=10, help="results per query (default 10)")
    p.add_argument("--all", action="store_true", help="every candidate instead of the top k")
    p.add_argument("--method", default=None,
                   help="ssr (inverted index, pruned where that pays), levels (inverted index, every posting), union "
                        "(inverted index, the heap kernel), maxscore (inverted index, "
                        "exact MaxScore pruning), exhaustive (full scan; all give identical results) or "
                        "bm25; default: the index's "
                        "own scoring (ssr, or bm25 for an index built with --scoring bm25)")
    p.add_argument("--threads", type=int, metavar="N", help="Numba threads (default: all cores)")
    p.add_argument("--json", action="store_true", help="one JSON object per query instead of a TREC run")
    p.add_argument("--explain", action="store_true", help="add each result's matched signals and weights")
    p.add_argument("--show-text", action="store_true",
                   help="add each result's stored text (an index built with --store-text)")
    p.add_argument("--tag", help="run tag, the TREC run's last column (default: the method)")
    p.add_argument("--run-scores", choices=("trec", "exact"), default="trec",
                   help="TREC output scores: trec (default; float32, strictly decreasing along our order, so "
                        "trec_eval keeps it) or exact (the true float64 scores, as --json prints them)")
    p.add_argument("--verify", action="store_true",
                   help="check every file's checksum and the full structure before searching (reads the whole index)")
    p.add_argument("--output", "-o", metavar="FILE", help="write here (atomically) instead of stdout")
    p.add_argument("--quiet", action="store_true", help="no notices on stderr (e.g. the first run's compilation)")
    p.add_argument("--ray", action="store_true",
                   help="a sharded index: search through one Ray actor per shard (default: in this process)")
    p.add_argument("--ray-address", metavar="ADDR", help="with --ray: the Ray cluster (default: a local instance)")


def _lines(args: argparse.Namespace, retriever, qids: list[str], texts: list[str], results):
    """Output lines: TREC run lines, or one JSON object per query."""
    import json

    from ..eval.trec import trec_scores

    tag = args.tag or args.method
    for qid, text, res in zip(qids, texts, results, strict=True):
        ids, scores, matches = res.ids.tolist(), res.scores.tolist(), res.matches.tolist()
        explained = [retriever.explain(text, d) for d in res.docs.tolist()] if args.explain else None
        shown = [retriever.doc(d) for d in res.docs.tolist()] if args.show_text else None
        if args.json:
            hits = []
            for r, (doc, score, m) in enumerate(zip(ids, scores, matches, strict=True)):
                hit = {"rank": r + 1, "id": doc, "score": score, "matches": m}
                if explained is not None:
                    hit["explain"] = [[s, w] for s, w in explained[r]]
                if shown is not None:
                    hit["text"] = shown[r]
                hits.append(hit)
            yield json.dumps({"qid": qid, "query": text, "results": hits}, ensure_ascii=False) + "\n"
            continue
        written = trec_scores(scores).tolist() if args.run_scores == "trec" else scores
        for r, (doc, score) in enumerate(zip(ids, written, strict=True)):
            # repr: the shortest string that reads back as the same float64
            yield f"{qid} Q0 {doc} {r + 1} {score!r} {tag}\n"
            if explained is not None:
                for s, w in explained[r]:
                    yield f"#\t{w!r}\t{s}\n"
            if shown is not None:
                # one comment line: newlines and tabs of the text shown as spaces
                yield "#\ttext\t" + " ".join(shown[r].split()) + "\n"


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from ..errors import SsrError
    from ..retrieval import check_k, check_method, check_threads

    if bool(args.queries) == bool(args.queries_file):
        raise SsrError("give either QUERY arguments or --queries FILE")
    if args.method is not None:
        check_method(args.method)
    k = None if args.all else args.k
    check_k(k)
    check_threads(args.threads)
    if args.tag is not None and (not args.tag or any(c.isspace() for c in args.tag)):
        raise SsrError(f"--tag {args.tag!r} must be one non-empty word")
    if args.queries_file:
        from ..eval.trec import read_queries

        queries = read_queries(args.queries_file)
        qids, texts = list(queries), list(queries.values())
    else:
        texts = list(args.queries)
        qids = [str(i) for i in range(1, len(texts) + 1)]

    from ..live import open_search

    if args.ray or args.ray_address:
        from ..distributed import ShardedSearcher, is_sharded, verify_sharded

        if not is_sharded(args.index):
            raise SsrError(f"{args.index}: --ray searches a sharded index (ssr build-index --shards S)")
        problems = verify_sharded(args.index) if args.verify else []
        if problems:
            raise SsrError("; ".join(problems[:5]))
        retriever = ShardedSearcher(args.index, args.ray_address, method=args.method)
    else:
        retriever = open_search(args.index, args.method, verify=args.verify)  # plain, live or sharded index
    args.method = retriever.method  # the index's own when none was given (the run tag)
    if args.show_text and retriever.n_docs:
        retriever.doc(0)  # fails (no text stored) before any output is written
    results = retriever.search_batch(texts, k, threads=args.threads)
    lines = _lines(args, retriever, qids, texts, results)
    if args.output is None:
        sys.stdout.writelines(lines)
        return 0
    from ..atomic import atomic_write

    with atomic_write(Path(args.output)) as f:
        f.writelines(lines)
    return 0
