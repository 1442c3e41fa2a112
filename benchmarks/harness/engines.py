"""The engines compared: names, how each index is built, what each does with tokens and scores."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

OURS = ("ssr", "exhaustive", "bm25")
PEERS = ("bm25s", "pisa", "tantivy")
# the Python module each peer needs (its PyPI package is in the `bench` extra)
PEER_MODULES = {"bm25s": "bm25s", "pisa": "pyterrier_pisa", "tantivy": "tantivy"}

DESCRIPTIONS = {
    "ssr": "ssr_engine, inverted index, SSR signals (unigrams + bigrams, cap 64), positive-IDF overlap",
    "exhaustive": "ssr_engine, full scan of the forward index (same index and scores as ssr)",
    "bm25": "ssr_engine BM25 index (--scoring bm25), Lucene BM25 k1=0.9 b=0.4, our tokens, no stemming",
    "bm25s": "bm25s (numba backend, index loaded with mmap), method lucene k1=0.9 b=0.4; its Tokenizer with "
             "lower=True, splitter [a-z0-9]{2,}, our stopwords (= our tokens)",
    "pisa": "PISA via pyterrier-pisa, BM25 k1=0.9 b=0.4, block_max_wand (its default), block_simdbp; stemmer and "
            "stopwords off, fed our tokens joined by spaces (PISA's parser re-splits them unchanged)",
    "tantivy": "tantivy (python bindings), BM25 with tantivy's fixed k1=1.2 b=0.75; analyzer regex "
               "[A-Za-z0-9]{2,} + lowercase + our stopwords; OR query of the query's tokens; no positions",
}


def parse_list(spec: str, choices: tuple[str, ...], what: str) -> list[str]:
    """'all', 'none' or a comma list of names from `choices` (order kept, duplicates dropped)."""
    spec = spec.strip().lower()
    if spec == "all":
        return list(choices)
    if spec in ("none", ""):
        return []
    names: list[str] = []
    for name in (s.strip() for s in spec.split(",")):
        if name not in choices:
            raise ValueError(f"unknown {what} {name!r}; expected all, none or some of {', '.join(choices)}")
        if name not in names:
            names.append(name)
    return names


def missing_module(name: str) -> str | None:
    """Why a peer cannot run here (its module is not installed), or None."""
    module = PEER_MODULES.get(name)
    if module and importlib.util.find_spec(module) is None:
        return f"python module {module!r} not installed (pip install -e '.[bench]')"
    return None


def index_dir(name: str, root: Path) -> Path:
    """Where an engine's index lives; `exhaustive` reads the `ssr` index."""
    return root / ("ssr" if name == "exhaustive" else name)


def build_command(name: str, collection: Path, out: Path, json_out: Path) -> list[str] | None:
    """The command that builds `name`'s index from `collection` into `out`, or None (it shares ssr's)."""
    if name == "exhaustive":
        return None
    if name in ("ssr", "bm25"):
        cmd = [sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(collection), "--out", str(out),
               "--force", "--quiet"]
        return cmd + (["--scoring", "bm25"] if name == "bm25" else [])
    return [sys.executable, "-m", "harness.worker", "build", name, "--collection", str(collection), "--out", str(out),
            "--json", str(json_out)]


def serve_command(name: str, index: Path, queries: Path, json_out: Path, ks: list[int], threads: list[int],
                  latency_queries: int, limit: int | None, repeat: int = 1, min_seconds: float = 0.0) -> list[str]:
    cmd = [sys.executable, "-m", "harness.worker", "serve", name, "--index", str(index), "--queries", str(queries),
           "--json", str(json_out), "--k", *map(str, ks), "--threads", *map(str, threads),
           "--latency-queries", str(latency_queries), "--repeat", str(repeat),
           "--min-seconds", str(min_seconds)]
    return cmd + (["--limit", str(limit)] if limit else [])
