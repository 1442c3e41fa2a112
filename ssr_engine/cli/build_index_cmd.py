"""`ssr build-index --collection FILE --out DIR [--shards S]`: build an index (or a sharded one)."""

from __future__ import annotations

import argparse

from ..signals import DEFAULT_CAP  # the package face imports signals already: --help stays fast
from . import chunk_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--collection", metavar="FILE",
                        help="MS MARCO TSV (id<TAB>text) or JSONL (ours, BEIR corpus.jsonl, Pyserini JsonCollection); "
                             "gzip, bzip2, xz or zstd compression is recognised by content")
    source.add_argument("--dataset", metavar="irds:NAME", help="the documents of an ir_datasets dataset")
    p.add_argument("--out", required=True, metavar="DIR", help="index directory to create")
    p.add_argument("--format", dest="fmt", choices=("auto", "tsv", "jsonl"), default="auto",
                   help="collection format (default: by file extension, .jsonl/.json = JSONL, else by content)")
    p.add_argument("--header", action="store_true", help="the TSV's first line is a header: skip it")
    p.add_argument("--scoring", choices=("ssr", "bm25"), default="ssr",
                   help="ssr: binary capped signals (default); bm25: unigram term frequencies")
    p.add_argument("--stem", action="store_true", help="Porter-stem BM25 terms (needs the 'stem' extra)")
    p.add_argument("--stopwords", metavar="FILE", help="replacement stopword list, one word per line")
    p.add_argument("--cap", type=int, default=DEFAULT_CAP,
                   help=f"at most this many signals per document (default {DEFAULT_CAP})")
    chunk_arguments(p)
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip malformed lines (counted and listed in the manifest) instead of failing")
    p.add_argument("--force", action="store_true", help="replace an existing index at --out")
    p.add_argument("--store-text", action="store_true",
                   help="keep every document's text in a zstd-compressed store (ssr search --show-text)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--shards", type=int, metavar="S",
                   help="build a sharded index: the file cut into S byte ranges on line boundaries, one shard each, "
                        "built as Ray tasks (a local Ray instance unless --ray-address), then one global weight table")
    p.add_argument("--ray-address", metavar="ADDR", help="with --shards: the Ray cluster to build on (shared --out)")
    p.add_argument("--no-ray", action="store_true", help="with --shards: build the shards in local processes")


def run(args: argparse.Namespace) -> int:
    import sys

    from ..errors import SsrError
    from ..format import open_index
    from ..indexing import build_index

    if args.dataset is not None and not args.dataset.startswith("irds:"):
        raise SsrError(f"--dataset {args.dataset!r}: expected irds:NAME (an ir_datasets id)")
    if args.shards is None and (args.ray_address or args.no_ray):
        raise SsrError("--ray-address and --no-ray apply to a sharded build (--shards S)")
    if args.shards is not None:
        return _sharded(args)
    out = build_index(
        args.collection if args.collection is not None else args.dataset, args.out, fmt=args.fmt, header=args.header,
        stopwords=args.stopwords, cap=args.cap, chunk_docs=args.chunk_docs,
        workers=args.workers, skip_bad_lines=args.skip_bad_lines, force=args.force, scoring=args.scoring,
        stem=args.stem, quiet=args.quiet, store_text=args.store_text,
    )
    m = open_index(out).manifest
    c = m.counts
    print(
        f"built {out}: {c.documents} documents, {c.terms} terms, {c.postings} postings, "
        f"{m.input['lines_skipped']} lines skipped, {m.build['seconds']:.1f} s",
        file=sys.stderr,
    )
    return 0


def _sharded(args: argparse.Namespace) -> int:
    import sys

    from ..distributed import build_sharded
    from ..distributed.layout import read_manifest
    from ..errors import SsrError

    if args.dataset is not None:
        raise SsrError("--shards splits a file by byte ranges: give --collection FILE")
    if args.no_ray and args.ray_address:
        raise SsrError("--no-ray and --ray-address exclude each other")
    out = build_sharded(
        args.collection, args.out, args.shards, runner="processes" if args.no_ray else "ray",
        ray_address=args.ray_address, force=args.force, quiet=args.quiet, fmt=args.fmt, header=args.header,
        stopwords=args.stopwords, cap=args.cap, chunk_docs=args.chunk_docs, workers=args.workers,
        skip_bad_lines=args.skip_bad_lines, scoring=args.scoring, stem=args.stem, store_text=args.store_text,
    )
    m = read_manifest(out)
    print(f"built {out}: {len(m.shards)} shards, {m.documents} documents, {m.build['seconds']:.1f} s "
          f"({m.build['runner']})", file=sys.stderr)
    return 0
