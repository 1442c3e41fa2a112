"""BM25 terms: the unigrams of the signal tokenizer, optionally Porter-stemmed.

The index build and the query path both call `bm25_tokens`, so a document's terms and a
query's terms are made by one function. Stemming is the original Porter algorithm as
PyStemmer ("porter") implements it, applied to each token after the stopword filter
(Anserini's order: stopwords, then stemming). PyStemmer is the optional extra `stem`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from .errors import SsrError
from .signals import value_tokens

STEMMER = "porter"
_local = threading.local()  # PyStemmer objects are not safe to share between threads


def _stemmer() -> Any:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        try:
            import Stemmer
        except ImportError as exc:
            raise SsrError(
                "Porter stemming needs PyStemmer: pip install 'ssr_engine[stem]' (or pip install PyStemmer)"
            ) from exc
        stemmer = Stemmer.Stemmer(STEMMER)
        _local.stemmer = stemmer
    return stemmer


def stem_tokens(tokens: Sequence[str]) -> list[str]:
    """The Porter stem of every token, in order."""
    if not tokens:
        return []
    return list(_stemmer().stemWords(list(tokens)))


def bm25_tokens(text: str, stopwords: frozenset[str], stem: bool = False) -> list[str]:
    """Terms of one text, in order with repeats (term frequencies count them)."""
    tokens = value_tokens(text, stopwords)
    return stem_tokens(tokens) if stem else tokens
