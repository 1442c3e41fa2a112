"""Queries written from generated passages (MS MARCO's shape, ~6 words in a question template), and
real queries planted into generated passages (`plant_passage`); `read_plants` reads the real queries
and qrels. Part of GENERATOR_ID's contract: see `collection`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..datasets import qrels_fields
from ..errors import InputError
from ..stopwords import STOPWORDS_V1

_QUESTION_TEMPLATES = [
    ("what is {}", 14), ("what is the {}", 6), ("what are {}", 4), ("how to {}", 5), ("how much does {} cost", 3),
    ("how long does {} take", 2), ("how many {}", 2), ("who is {}", 3), ("where is {}", 3), ("when was {}", 2),
    ("why is {}", 2), ("what does {} mean", 3), ("define {}", 3), ("{} definition", 3), ("{} meaning", 2),
    ("is {} a", 1), ("which {}", 1), ("what causes {}", 2), ("{}", 24), ("{} in the", 2), ("the {}", 2),
    ("what is a {}", 3), ("how do you {}", 2), ("what type of {}", 1),
]


def content_words(text: str) -> list[str]:
    """Words of a passage that survive the signal filter (lower-cased, punctuation stripped)."""
    out = []
    for raw in text.split():
        w = raw.strip(".,").lower()
        if len(w) >= 2 and w not in STOPWORDS_V1 and re.fullmatch(r"[a-z0-9]+", w):
            out.append(w)
    return out


_TEMPLATES = [t for t, _ in _QUESTION_TEMPLATES]
_TEMPLATE_P = np.array([w for _, w in _QUESTION_TEMPLATES], dtype=np.float64)
_TEMPLATE_P /= _TEMPLATE_P.sum()


def make_query(passage: str, rng: np.random.Generator, noise_words: list[str]) -> str:
    """An MS MARCO-shaped query (about 6 words) written from one passage, with noise."""
    words = content_words(passage)
    if not words:
        words = [w.strip(".,").lower() for w in passage.split()][:2] or ["nothing"]
    m = int(rng.choice([1, 2, 3, 4, 5], p=[0.04, 0.18, 0.32, 0.29, 0.17]))
    m = min(m, len(words))
    start = int(rng.integers(0, len(words) - m + 1))
    picked = list(dict.fromkeys(words[start : start + m]))  # passages repeat phrases; queries rarely do
    if len(picked) >= 3 and rng.random() < 0.25:  # a missing word
        del picked[int(rng.integers(0, len(picked)))]
    if rng.random() < 0.3 and noise_words:  # an extra word the passage may not contain
        picked.insert(int(rng.integers(0, len(picked) + 1)), noise_words[int(rng.integers(0, len(noise_words)))])
    template = _TEMPLATES[int(rng.choice(len(_TEMPLATES), p=_TEMPLATE_P))]
    return template.format(" ".join(picked))


_LEADING = STOPWORDS_V1 | {"define", "definition", "a"}


def plant_run(query: str) -> list[str]:
    """The words of a real query that a planted passage repeats: leading question words dropped."""
    words = [w.strip("?!.,\"") for w in query.split()]
    words = [w for w in words if w]
    i = 0
    while i < len(words) - 1 and words[i].lower() in _LEADING:
        i += 1
    return words[i:]


def plant_passage(passage: str, queries: list[str], rng: np.random.Generator) -> str:
    """A generated passage rewritten to answer `queries`: each query's words inserted in order."""
    words = passage.split()
    for q in queries:
        run = plant_run(q)
        if not run:
            continue
        if len(run) >= 3 and rng.random() < 0.3:  # split once, generated words in between
            cut = int(rng.integers(1, len(run)))
            filler = words[int(rng.integers(0, len(words))) :][:2]
            run = run[:cut] + [w.strip(".,") for w in filler] + run[cut:]
        at = int(rng.integers(0, len(words) + 1))
        words[at:at] = run
    return " ".join(words).rstrip(".") + "."



def read_plants(queries_path: str | Path, qrels_path: str | Path) -> tuple[dict[str, str], list[tuple[str, str, int]]]:
    """Real queries (qid -> text) and qrels (qid, pid, grade) in TSV / TREC or tab form."""
    queries: dict[str, str] = {}
    for lineno, line in _lines(queries_path):
        parts = line.split("\t", 1)
        if len(parts) != 2 or not parts[0].strip():
            raise InputError(queries_path, lineno, "expected qid<TAB>query")
        qid = parts[0].strip()
        if qid in queries:
            raise InputError(queries_path, lineno, f"duplicate query id {qid!r}")
        queries[qid] = " ".join(parts[1].split())
    qrels: list[tuple[str, str, int]] = []
    for lineno, line in _lines(qrels_path):
        qid, pid, g = qrels_fields(qrels_path, lineno, line)
        if not pid.isdigit():
            raise InputError(qrels_path, lineno, f"passage id {pid!r} is not a non-negative integer")
        if qid not in queries:
            raise InputError(qrels_path, lineno, f"query id {qid!r} is not in {queries_path}")
        qrels.append((qid, pid, g))
    if not queries:
        raise InputError(queries_path, None, "no queries")
    return queries, qrels


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror}") from exc
    for lineno, bline in enumerate(raw.split(b"\n"), start=1):
        try:
            line = bline.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise InputError(path, lineno, f"not valid UTF-8 ({exc.reason})") from exc
        if line.strip():
            yield lineno, line

