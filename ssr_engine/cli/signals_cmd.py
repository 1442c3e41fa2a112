"""`ssr signals TEXT...`: show the signals SSR extracts from each text."""

from __future__ import annotations

import argparse

from ..signals import DEFAULT_CAP  # the package face imports signals already: --help stays fast


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("texts", nargs="+", metavar="TEXT")
    p.add_argument("--cap", type=int, default=DEFAULT_CAP,
                   help=f"at most this many signals per text (default {DEFAULT_CAP})")
    p.add_argument("--stopwords", metavar="FILE", help="replacement stopword list, one word per line")
    p.add_argument("--json", action="store_true", help="one JSON array per text")


def run(args: argparse.Namespace) -> int:
    import json

    from ..signals import signals
    from ..stopwords import load_stopwords

    stop = load_stopwords(args.stopwords) if args.stopwords else None
    for text in args.texts:
        sigs = sorted(signals(text, stop, args.cap))
        print(json.dumps(sigs) if args.json else "\t".join(sigs))
    return 0
