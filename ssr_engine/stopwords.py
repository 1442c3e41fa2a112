"""Stopword lists: the built-in `ssr-stopwords-v1` and user replacements loaded from a file."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

STOPWORDS_V1_ID = "ssr-stopwords-v1"

# The NLTK English stopwords that match [a-z0-9]{2,} (DESIGN.md section 1): exactly 145 words.
STOPWORDS_V1: frozenset[str] = frozenset(
    """
    me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing an the and but if or because as until while of at by for with about against between
    into through during before after above below to from up down in out on off over under
    again further then once here there when where why how all any both each few more most
    other some such no nor not only own same so than too very can will just don should now
    ll re ve ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn
    wasn weren won wouldn
    """.split()
)


def stopwords_hash(words: frozenset[str] | set[str]) -> str:
    """SHA-256 (hex) of the sorted words joined by newlines: identifies a list by content."""
    return hashlib.sha256("\n".join(sorted(words)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StopwordList:
    """A stopword set with the id and content hash an index records."""

    id: str
    words: frozenset[str]

    @property
    def sha256(self) -> str:
        return stopwords_hash(self.words)


DEFAULT_STOPWORDS = StopwordList(STOPWORDS_V1_ID, STOPWORDS_V1)


def load_stopwords(path: str | os.PathLike[str]) -> StopwordList:
    """Read a replacement list: one word per line, blank lines and `#` comments ignored.

    Words are stripped and lower-cased (tokens are always lower case, so an upper-case
    entry could never match otherwise). The list's id is `file:<name>`.
    """
    path = Path(path)
    words: set[str] = set()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read stopword file: {exc.strerror}") from exc
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(path, lineno, f"not valid UTF-8 ({exc.reason})") from exc
        word = text.split("#", 1)[0].strip().lower()
        if word:
            words.add(word)
    return StopwordList(f"file:{path.name}", frozenset(words))


def resolve_stopwords(stopwords: StopwordList | frozenset[str] | set[str] | None) -> StopwordList:
    """Accept None (the default list), a StopwordList, or a plain set of words."""
    if stopwords is None:
        return DEFAULT_STOPWORDS
    if isinstance(stopwords, StopwordList):
        return stopwords
    words = frozenset(stopwords)
    if words == STOPWORDS_V1:
        return DEFAULT_STOPWORDS
    return StopwordList("custom", words)
