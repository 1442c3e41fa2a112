"""Cranfield-1400 from its original files (cran.all.1400, cran.qry, cranqrel).

- Documents keep their .I ids; text = title (.T) + " " + abstract (.W, which itself starts with
  the title, as in the file). Three records (240, 576, 578) repeat a field marker inside the
  abstract; the marker lines are dropped and their text kept in the abstract. Records 471 and
  995 have no text and are kept (empty documents, listed in the stats).
- Queries are numbered by position 1..225, which is what cranqrel uses (the .I numbers of
  cran.qry run 001..365 with gaps); the stats map position -> .I number.
- Relevance codes (Cleverdon: 1 = complete answer ... 4 = minimum interest; -1 appears once per
  query) become TREC grades, higher = more relevant: 1->4, 2->3, 3->2, 4->1, -1->0 (judged, not
  relevant). Every line is kept. CRLF or LF endings and a missing final newline are accepted.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import read_text, split_lines, squash, write_collection

GRADES = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}
_MARKER = re.compile(r"\.([TABW])\s*")


@dataclass(frozen=True)
class Cranfield:
    """The collection as lists: (doc id, text), (query id, text), (query id, doc id, grade)."""

    docs: list[tuple[str, str]]
    queries: list[tuple[str, str]]
    qrels: list[tuple[str, str, int]]
    stats: dict[str, Any] = field(default_factory=dict)


def parse_docs(text: str, path: Path) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """.I/.T/.A/.B/.W records -> (id, title + abstract); notes repeated markers and empty texts."""
    docs: list[tuple[str, str]] = []
    repeated: list[str] = []
    cur: str | None = None
    fields: dict[str, list[str]] = {}
    current_field: str | None = None
    seen: set[str] = set()

    def close() -> None:
        if cur is not None:
            title = squash(" ".join(fields.get("T", [])))
            abstract = squash(" ".join(fields.get("W", [])))
            docs.append((cur, squash(f"{title} {abstract}")))

    for lineno, line in enumerate(split_lines(text), start=1):
        if line.startswith(".I"):
            close()
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise InputError(path, lineno, f"expected '.I <number>', got {line!r}")
            cur, fields, current_field, seen = str(int(parts[1])), {}, None, set()
            continue
        marker = _MARKER.fullmatch(line)
        if marker:
            if cur is None:
                raise InputError(path, lineno, "field marker before the first .I record")
            m = marker.group(1)
            if m in seen or "W" in seen:
                # a marker inside the abstract (records 240, 576, 578): its text stays in the abstract
                if cur not in repeated:
                    repeated.append(cur)
                current_field = "W"
            else:
                current_field = m
            seen.add(m)
            continue
        if cur is None:
            if line.strip():
                raise InputError(path, lineno, "text before the first .I record")
            continue
        if current_field is not None:
            fields.setdefault(current_field, []).append(line)
    close()
    if not docs:
        raise InputError(path, None, "no .I records")
    return docs, {"records_with_repeated_markers": repeated, "empty_documents": [d for d, t in docs if not t]}


def parse_queries(text: str, path: Path) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Queries numbered by position (1..n), and the map position -> .I number."""
    queries: list[tuple[str, str]] = []
    original: dict[str, str] = {}
    lines: list[str] = []
    cur: str | None = None
    for lineno, line in enumerate(split_lines(text), start=1):
        if line.startswith(".I"):
            if cur is not None:
                queries.append((str(len(queries) + 1), squash(" ".join(lines))))
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise InputError(path, lineno, f"expected '.I <number>', got {line!r}")
            cur, lines = parts[1], []
            original[str(len(queries) + 1)] = cur
        elif re.fullmatch(r"\.W\s*", line):
            continue
        elif cur is None:
            if line.strip():
                raise InputError(path, lineno, "text before the first .I record")
        else:
            lines.append(line)
    if cur is not None:
        queries.append((str(len(queries) + 1), squash(" ".join(lines))))
    if not queries:
        raise InputError(path, None, "no .I records")
    return queries, original


def parse_qrels(text: str, path: Path, n_queries: int,
                doc_ids: set[str]) -> tuple[list[tuple[str, str, int]], dict[str, Any]]:
    """`query doc code` lines -> (query, doc, grade) and counts of codes and grades."""
    qrels: list[tuple[str, str, int]] = []
    codes: Counter[int] = Counter()
    blank = 0
    for lineno, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            blank += 1
            continue
        parts = line.split()
        if len(parts) != 3:
            raise InputError(path, lineno, f"expected 'query doc code', got {line!r}")
        try:
            q, d, code = (int(p) for p in parts)
        except ValueError:
            raise InputError(path, lineno, f"non-integer field in {line!r}") from None
        if code not in GRADES:
            raise InputError(path, lineno, f"unknown relevance code {code} (expected 1-4 or -1)")
        if not 1 <= q <= n_queries:
            raise InputError(path, lineno, f"query number {q} is outside 1..{n_queries}")
        if str(d) not in doc_ids:
            raise InputError(path, lineno, f"document {d} is not in the collection")
        codes[code] += 1
        qrels.append((str(q), str(d), GRADES[code]))
    stats = {"lines": len(qrels), "blank_lines": blank, "codes": {str(k): codes[k] for k in sorted(codes)},
             "grade_map": {str(k): v for k, v in GRADES.items()},
             "grades": {str(g): n for g, n in sorted(Counter(g for _, _, g in qrels).items())}}
    return qrels, stats


def load_cranfield(directory: str | os.PathLike[str] | None = None) -> Cranfield:
    """Cranfield from the bundled copy (default) or from the original files in `directory`."""
    text, docs_path = read_text("cranfield", "cran.all.1400", directory)
    docs, notes = parse_docs(text, docs_path)
    text, qry_path = read_text("cranfield", "cran.qry", directory)
    queries, original = parse_queries(text, qry_path)
    text, qrels_path = read_text("cranfield", "cranqrel", directory)
    qrels, qstats = parse_qrels(text, qrels_path, len(queries), {d for d, _ in docs})
    stats = {"dataset": "cranfield", "source": str(docs_path.parent), "documents": len(docs),
             "queries": len(queries), "qrels": len(qrels), "judged_queries": len({q for q, _, _ in qrels}),
             **notes, "qrel_lines": qstats, "query_position_to_qry_id": original}
    return Cranfield(docs, queries, qrels, stats)


def write_cranfield(out: str | os.PathLike[str], directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """collection.tsv, queries.tsv, qrels.tsv and stats.json in `out`; returns the stats."""
    c = load_cranfield(directory)
    write_collection(out, c.docs, c.queries, c.qrels, c.stats)
    return c.stats
