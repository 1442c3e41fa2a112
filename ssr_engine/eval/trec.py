"""Evaluation files: query TSVs, qrels (TREC and MS MARCO forms) and TREC run files.

Readers decode each line as UTF-8 on its own so that an error names the file and line.
A leading UTF-8 byte-order mark and a trailing carriage return are tolerated; blank lines
are ignored. Skipping malformed lines is opt-in: pass `skipped=[]` and the reader appends
one message per skipped line instead of raising.

Formats (files may be gzip/bzip2/xz-compressed, recognised by content; `irds:NAME` reads the
queries or qrels of an ir_datasets dataset)
    queries   qid<TAB>query                 (the text after the first tab; may be empty)
              JSONL {"_id"|"id"|"query_id"|"qid": ..., "text"|"query": ...}   (BEIR, ours)
    qrels     qid iter docid rel            (TREC; any whitespace; also MS MARCO's tab form)
              qid docid rel                 (BEIR's 3 columns; its header line is skipped)
              qid docid                     (two columns: relevance 1)
    runs      qid Q0 docid rank score tag

Run scores that evaluate the same everywhere. trec_eval (and pytrec_eval, and ir_measures
through it) ignores the rank column: it re-sorts each query by score descending, then docno
descending, and it holds scores as 32-bit floats, so two float64 scores one ulp apart tie.
Our order (score desc, matches desc, id asc) then differs from theirs wherever scores tie,
which binary signals make frequent. `trec_scores` therefore writes, by default, scores that
are strictly decreasing *as float32* along our ranking:

    written[0] = largest float32 <= score[0]
    written[i] = min(largest float32 <= score[i], the float32 just below written[i-1])

Each written score is <= the true one and within (ties before it + 1) float32 ulps of it
(1,000 tied scores of 10.0 end about 1e-3 below it); the text is the repr of that float32's
exact float64 value, so any reader (float32 or float64) gets back the same strict order.
The true float64 scores stay in `ssr search --json` and in the API; `scores="exact"` writes
them with repr() instead (an exact round trip, but ties then evaluate in trec_eval's order).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..corpus import is_dataset
from ..errors import InputError

RUN_SCORES = ("trec", "exact")
RUN_SCORES_DOC = ("trec: float32 scores strictly decreasing along our order (each <= the true score), "
                  "so trec_eval, pytrec_eval and ir_measures keep the ranking; the true scores are not in the file")

Qrels = dict[str, dict[str, int]]


@dataclass
class Ranking:
    """One query's ranked list: document ids best first, with their scores."""

    docids: list[str]
    scores: list[float]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without the line ending) of every non-blank line."""
    raw = _read_bytes(path)
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(path, lineno, f"not valid UTF-8 (byte {exc.start + 1}: {exc.reason})") from exc
        if text.strip():
            yield lineno, text


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed when its magic bytes say gzip, bzip2, xz or zstd."""
    from ..inputs import open_input, sniff_compression

    try:
        if sniff_compression(path) is None:
            return path.read_bytes()
        stream, raw = open_input(path)
        with raw, stream:
            return stream.read()
    except InputError:
        raise
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from exc
    except Exception as exc:  # a corrupt compressed stream (zlib, lzma, EOF errors)
        raise InputError(path, None, f"cannot decompress ({exc})") from exc


def _irds_queries(name: str) -> dict[str, str]:
    from ..errors import SsrError
    from ..inputs import irds_dataset

    dataset = irds_dataset(name)
    if not dataset.has_queries():
        raise SsrError(f"{name}: this ir_datasets dataset has no queries")
    out: dict[str, str] = {}
    for q in dataset.queries_iter():
        text = getattr(q, "text", None)
        out[str(q.query_id)] = text if isinstance(text, str) else q.default_text()
    return out


def _irds_qrels(name: str) -> Qrels:
    from ..errors import SsrError
    from ..inputs import irds_dataset

    dataset = irds_dataset(name)
    if not dataset.has_qrels():
        raise SsrError(f"{name}: this ir_datasets dataset has no qrels")
    qrels: Qrels = {}
    for row in dataset.qrels_iter():
        qrels.setdefault(str(row.query_id), {})[str(row.doc_id)] = int(row.relevance)
    return qrels


QUERY_ID_KEYS = ("_id", "id", "query_id", "qid")
QRELS_HEADER_WORDS = ("score", "relevance", "rel", "label")
QUERY_TEXT_KEYS = ("text", "query")


def _json_query(path: Path, lineno: int, text: str) -> tuple[str, str]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, lineno, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise InputError(path, lineno, "expected a JSON object")
    qid = next((obj[k] for k in QUERY_ID_KEYS if k in obj), None)
    query = next((obj[k] for k in QUERY_TEXT_KEYS if k in obj), None)
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not isinstance(query, str):
        raise InputError(path, lineno, f"needs an id ({', '.join(QUERY_ID_KEYS)}) and a string "
                                       f"{' or '.join(QUERY_TEXT_KEYS)}")
    return str(qid), query


def _bad(path: Path, lineno: int, message: str, skipped: list[str] | None) -> None:
    if skipped is None:
        raise InputError(path, lineno, message)
    skipped.append(f"{path}:{lineno}: {message}")


def read_queries(path: str | os.PathLike[str], skipped: list[str] | None = None) -> dict[str, str]:
    """qid -> query text, in file order. Duplicate ids and lines without a tab are errors.

    A file whose first line is a JSON object is JSONL (BEIR's queries.jsonl); `irds:NAME` reads
    an ir_datasets dataset's queries.
    """
    if is_dataset(path):
        return _irds_queries(str(path))
    path = Path(path)
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    jsonl: bool | None = None
    for lineno, text in _lines(path):
        if jsonl is None:
            jsonl = text.lstrip().startswith("{")
        if jsonl:
            try:
                qid, query = _json_query(path, lineno, text)
            except InputError as exc:
                _bad(path, lineno, str(exc).split(": ", 1)[-1], skipped)
                continue
            sep = "\t"
        else:
            qid, sep, query = text.partition("\t")
            qid = qid.strip()
        if not sep:
            _bad(path, lineno, "expected 'qid<TAB>query'", skipped)
            continue
        if not qid or any(c.isspace() for c in qid):
            _bad(path, lineno, f"bad query id {qid!r}", skipped)
            continue
        if qid in queries:
            # a duplicate is never skipped: which of the two texts is meant cannot be known
            raise InputError(path, lineno, f"duplicate query id {qid!r} (first on line {first_line[qid]})")
        queries[qid] = query
        first_line[qid] = lineno
    if not queries:
        raise InputError(path, None, "no queries")
    return queries


def read_qrels(path: str | os.PathLike[str], skipped: list[str] | None = None) -> Qrels:
    """qid -> {docid: relevance}. Four columns (TREC, MS MARCO), three (BEIR: qid docid rel, after
    a header line such as `query-id corpus-id score`) or two (relevance 1); `irds:NAME` reads an
    ir_datasets dataset's qrels.

    The first judgement fixes the column count; a later line with another count, a
    non-integer relevance or a repeated (qid, docid) pair is malformed.
    """
    if is_dataset(path):
        return _irds_qrels(str(path))
    path = Path(path)
    qrels: Qrels = {}
    columns = 0
    first = True
    for lineno, text in _lines(path):
        fields = text.split()
        if first:
            first = False
            if len(fields) == 3 and fields[2].lower() in QRELS_HEADER_WORDS:
                continue  # BEIR's header line: query-id corpus-id score
        if columns == 0 and len(fields) in (2, 3, 4):
            columns = len(fields)
        if len(fields) != columns:
            expected = ("'qid 0 docid rel', 'qid docid rel' or 'qid docid'" if columns == 0
                        else f"{columns} columns like the first line")
            _bad(path, lineno, f"{len(fields)} columns, expected {expected}", skipped)
            continue
        if columns in (3, 4):
            qid, docid, rel_text = fields[0], fields[columns - 2], fields[columns - 1]
            try:
                rel = int(rel_text)
            except ValueError:
                _bad(path, lineno, f"relevance {rel_text!r} is not an integer", skipped)
                continue
        else:
            qid, docid, rel = fields[0], fields[1], 1
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            _bad(path, lineno, f"document {docid!r} judged twice for query {qid!r}", skipped)
            continue
        judged[docid] = rel
    if not qrels:
        raise InputError(path, None, "no judgements")
    return qrels


def _check_token(value: str, what: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"{what} {value!r} is empty or contains whitespace: it cannot go in a TREC run")


_F32_MAX_KEY = int(np.array(np.finfo(np.float32).max, dtype=np.float32).view(np.int32))


def trec_scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """Scores for a run file that keep the given order under trec_eval's re-sort (module docstring).

    Parameters
    ----------
    scores : (n,) float
        A ranking's true scores, best first (non-increasing).

    Returns
    -------
    (n,) float64
        Values exactly representable as float32, strictly decreasing, each <= its true score.
    """
    true = np.asarray(scores, dtype=np.float64)
    if true.size == 0:
        return true.copy()
    if not np.all(np.isfinite(true)):
        raise ValueError("scores must be finite")
    if np.any(true[1:] > true[:-1]):
        raise ValueError("scores must be non-increasing (best first)")
    with np.errstate(over="ignore"):  # beyond float32: +inf steps down to the largest float32
        f32 = true.astype(np.float32)  # nearest; step down where that rounded up
    up = f32.astype(np.float64) > true
    f32[up] = np.nextafter(f32[up], np.float32(-np.inf))
    f32[f32 == 0] = np.float32(0.0)  # -0.0 and +0.0 are one value: one key
    # float32 -> integer key with the same order (x >= 0: its bits; x < 0: minus its magnitude
    # bits), so "the float32 just below" is key - 1 and the cascade is a running minimum
    bits = f32.view(np.int32).astype(np.int64)
    key = np.where(bits >= 0, bits, -(bits & 0x7FFFFFFF))
    steps = np.arange(true.size, dtype=np.int64)
    key = np.minimum.accumulate(key + steps) - steps
    if key[-1] < -_F32_MAX_KEY:
        raise ValueError("scores too close to the float32 minimum to be made strictly decreasing")
    out_bits = np.where(key >= 0, key, (-key) | 0x80000000).astype(np.uint32)
    return out_bits.view(np.float32).astype(np.float64)


class RunWriter:
    """Writes a TREC run query by query; the file appears atomically (`atomic.atomic_write`)
    when the `with` block ends without an exception, and nothing is left behind otherwise.

    `scores="trec"` (default) writes `trec_scores` (stable under trec_eval's re-sort);
    `scores="exact"` writes the true float64 scores with repr().
    """

    def __init__(self, path: str | os.PathLike[str], tag: str = "ssr", scores: str = "trec"):
        _check_token(tag, "tag")
        if scores not in RUN_SCORES:
            raise ValueError(f"scores must be one of {RUN_SCORES}, got {scores!r}")
        self.path = Path(path)
        self.tag = tag
        self.scores = scores
        self.lines = 0
        self._f: TextIO | None = None
        self._ctx: Any = None

    def __enter__(self) -> RunWriter:
        from ..atomic import atomic_write

        self._ctx = atomic_write(self.path)
        self._f = self._ctx.__enter__()
        return self

    def add(self, qid: str, docids: Sequence[str], scores: Sequence[float]) -> None:
        """One query's ranking, best first; ranks are 1-based positions. No results: no line."""
        assert self._f is not None, "use RunWriter in a with block"
        _check_token(qid, "query id")
        if len(docids) != len(scores):
            raise ValueError(f"query {qid}: {len(docids)} documents but {len(scores)} scores")
        written = trec_scores(scores).tolist() if self.scores == "trec" else [float(x) for x in scores]
        lines = []
        for rank, (docid, score) in enumerate(zip(docids, written, strict=True), start=1):
            _check_token(docid, "document id")
            # repr: the shortest text that reads back as the same float64 (float32 values exactly)
            lines.append(f"{qid} Q0 {docid} {rank} {score!r} {self.tag}\n")
        self._f.writelines(lines)
        self.lines += len(lines)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._ctx is not None
        self._ctx.__exit__(exc_type, exc, tb)


def write_run(
    path: str | os.PathLike[str],
    run: Iterable[tuple[str, Sequence[str], Sequence[float]]],
    tag: str = "ssr",
    scores: str = "trec",
) -> int:
    """Write (qid, docids, scores) triples as `qid Q0 docid rank score tag`; returns lines written.

    A query without results writes no line: run files cannot hold it. `scores` as in `RunWriter`.
    """
    with RunWriter(path, tag, scores) as writer:
        for qid, docids, values in run:
            writer.add(qid, docids, values)
    return writer.lines


def read_run(path: str | os.PathLike[str]) -> dict[str, Ranking]:
    """qid -> Ranking ordered by the rank column (file order of queries kept).

    Every line must have six columns, an integer rank and a finite float score; a document
    twice in one query or a rank used twice is an error.
    """
    path = Path(path)
    rows: dict[str, list[tuple[int, str, float]]] = {}
    seen: dict[str, set[str]] = {}
    ranks: dict[str, set[int]] = {}
    for lineno, text in _lines(path):
        fields = text.split()
        if len(fields) != 6:
            raise InputError(path, lineno, f"{len(fields)} columns, expected 'qid Q0 docid rank score tag'")
        qid, _, docid, rank_text, score_text, _ = fields
        try:
            rank = int(rank_text)
            score = float(score_text)
        except ValueError:
            raise InputError(path, lineno, f"bad rank {rank_text!r} or score {score_text!r}") from None
        if not math.isfinite(score):
            raise InputError(path, lineno, f"score {score_text!r} is not finite")
        if docid in seen.setdefault(qid, set()):
            raise InputError(path, lineno, f"document {docid!r} twice for query {qid!r}")
        if rank in ranks.setdefault(qid, set()):
            raise InputError(path, lineno, f"rank {rank} twice for query {qid!r}")
        seen[qid].add(docid)
        ranks[qid].add(rank)
        rows.setdefault(qid, []).append((rank, docid, score))
    out: dict[str, Ranking] = {}
    for qid, entries in rows.items():
        entries.sort(key=lambda e: e[0])
        out[qid] = Ranking([d for _, d, _ in entries], [s for _, _, s in entries])
    return out
