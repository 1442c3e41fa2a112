"""The SSR signal contract (DESIGN.md section 1): text -> binary unigram and bigram signals.

This module is the definition, written for clarity; `extract` (over `kernels.text`) is the bulk fast path
that must return exactly the same signals on any input (tested by hypothesis).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from .stopwords import StopwordList, resolve_stopwords

DEFAULT_CAP = 64
_TOKEN = re.compile(r"[a-z0-9]+")


def value_tokens(text: str, stopwords: frozenset[str]) -> list[str]:
    """Rules 1 and 2: lower-case, split on [a-z0-9]+, drop short tokens and stopwords."""
    return [t for t in _TOKEN.findall(text.lower()) if len(t) >= 2 and t not in stopwords]


def apply_cap(unigram_counts: Counter[str], bigrams: set[str], cap: int) -> frozenset[str]:
    """Rule 5: over `cap` distinct signals, keep the most frequent unigrams, then bigrams."""
    if len(unigram_counts) + len(bigrams) <= cap:
        return frozenset(unigram_counts).union(bigrams)
    ranked = sorted(unigram_counts, key=lambda t: (-unigram_counts[t], t))[:cap]
    kept = ranked + sorted(bigrams)[: cap - len(ranked)]
    return frozenset(kept)


def card_signals(
    values: Iterable[str],
    stopwords: StopwordList | frozenset[str] | None = None,
    cap: int = DEFAULT_CAP,
) -> frozenset[str]:
    """Signals of several field values: bigrams stay inside a value, the cap covers them all."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    words = resolve_stopwords(stopwords).words
    counts: Counter[str] = Counter()
    bigrams: set[str] = set()
    for value in values:
        tokens = value_tokens(value, words)
        counts.update(tokens)
        bigrams.update(f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False))
    return apply_cap(counts, bigrams, cap)


def signals(
    text: str,
    stopwords: StopwordList | frozenset[str] | None = None,
    cap: int = DEFAULT_CAP,
) -> frozenset[str]:
    """Signals of one text (a passage, a query): `card_signals` of a single value."""
    return card_signals((text,), stopwords, cap)


def signals_many(
    texts: Sequence[str],
    stopwords: StopwordList | frozenset[str] | None = None,
    cap: int = DEFAULT_CAP,
) -> list[frozenset[str]]:
    """Signals of many texts through the Numba fast path (same result as `signals`)."""
    from .extract import extract_batch

    batch = extract_batch(
        [t.encode("utf-8", "surrogatepass") for t in texts], resolve_stopwords(stopwords), cap
    )
    return batch.as_sets()
