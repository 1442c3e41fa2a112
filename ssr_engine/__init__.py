"""ssr_engine: the Structural Signal Retriever (SSR) as a disk-backed lexical retrieval engine.

Heavy pieces (Numba kernels, the index, the searcher) are imported lazily so that
`import ssr_engine` and the `ssr` command start fast.
"""

from __future__ import annotations

from typing import Any

from . import ast_lock
from .signals import DEFAULT_CAP, card_signals, signals
from .stopwords import STOPWORDS_V1, STOPWORDS_V1_ID, StopwordList, load_stopwords
from .version import __version__ as __version__

__all__ = [
    "DEFAULT_CAP",
    "STOPWORDS_V1",
    "STOPWORDS_V1_ID",
    "StopwordList",
    "card_signals",
    "load_stopwords",
    "signals",
    "ReferenceIndex",
    "Retriever",
    "Searcher",
    "BM25Searcher",
    "SearchResult",
    "open_retriever",
    "signals_many",
    "build_index",
    "open_index",
    "LiveIndex",
    "Index",
    "verify_index",
]

# CPython < 3.11.8's ast.parse races between threads (Numba compiling beside a merge thread): serialise it
ast_lock.install()

_LAZY = {
    "ReferenceIndex": ("reference", "ReferenceIndex"),
    "Searcher": ("search", "Searcher"),
    "BM25Searcher": ("bm25", "BM25Searcher"),
    "SearchResult": ("retrieval", "SearchResult"),
    "Retriever": ("retrieval", "Retriever"),
    "open_retriever": ("retrieval", "open_retriever"),
    "signals_many": ("signals", "signals_many"),
    "build_index": ("indexing", "build_index"),
    "open_index": ("format", "open_index"),
    "LiveIndex": ("live", "LiveIndex"),
    "Index": ("live", "LiveIndex"),
    "verify_index": ("format", "verify_index"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'ssr_engine' has no attribute {name!r}")
