"""Generate an MS MARCO-shaped collection: collection.tsv, queries.tsv, qrels.tsv, stats.json.

    python data_scripts/make_collection.py --passages 8841823 --seed 1 --out DIR
    python data_scripts/make_collection.py --passages 1000000 --seed 1 --out DIR \\
        --plant-queries ../shared/data/msmarco-dev-small/queries.dev.small.tsv \\
        --plant-qrels ../shared/data/msmarco-dev-small/qrels.dev.small.trec

A thin command line over `ssr_engine.datagen.collection` (the model is described there). The same
seed (and word list) gives byte-identical files, whatever --workers is.
"""

from __future__ import annotations

import argparse
import sys
import time


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="make_collection.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=8_841_823, help="number of passages (default 8,841,823)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--queries", type=int, default=None,
                   help="generated queries, one target passage each "
                        "(default: 6,980 from 1M passages up, else min(1000, passages))")
    p.add_argument("--plant-queries", metavar="FILE", help="real queries (qid<TAB>query) to plant answers for")
    p.add_argument("--plant-qrels", metavar="FILE", help="their qrels (TREC 'qid 0 pid rel' or tab form)")
    p.add_argument("--wordlist", default="/usr/share/dict/words",
                   help="real English words for the frequent vocabulary (default /usr/share/dict/words; "
                        "'none' or a missing default: synthetic words only)")
    p.add_argument("--workers", type=int, default=2, help="generator processes (default 2; output is the same)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ssr_engine.datagen.collection import generate
    from ssr_engine.errors import SsrError

    if args.plant_queries and args.queries is not None:
        print("make_collection.py: error: --queries cannot be combined with --plant-queries", file=sys.stderr)
        return 2
    wordlist = None if args.wordlist == "none" else args.wordlist
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=args.passages, unit="psg", unit_scale=True, file=sys.stderr, desc="passages")
    t0 = time.time()
    try:
        stats = generate(args.out, passages=args.passages, seed=args.seed, queries=args.queries,
                         plant_queries=args.plant_queries, plant_qrels=args.plant_qrels, wordlist=wordlist,
                         workers=args.workers, progress=bar.update if bar else None)
    except SsrError as exc:
        print(f"make_collection.py: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if bar is not None:
            bar.close()
    took = time.time() - t0
    print(f"{stats['passages']} passages ({stats['collection_bytes'] / 1e9:.3f} GB, "
          f"{stats['words_per_passage_mean']} words/passage), {stats['queries']} queries, "
          f"{stats['qrels']} qrels -> {args.out} in {took:.1f} s", file=sys.stderr)
    if "planted" in stats:
        pl = stats["planted"]
        print(f"planted {pl['passages_planted']} passages; {pl['qrels_skipped_pid_out_of_range']} qrels skipped "
              f"(pid >= {stats['passages']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
