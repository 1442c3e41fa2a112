"""Streaming readers of collections (MS MARCO TSV, JSONL) in chunks, with line numbers.

A chunk carries its text as UTF-8 bytes plus value spans, ready for `extract`;
nothing per document is turned into Python strings except the external ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import InputError

READ_BLOCK = 1 << 24  # bytes read at a time while looking for chunk_docs complete lines


@dataclass
class BadLine:
    line: int
    reason: str


@dataclass
class Chunk:
    """A run of consecutive documents; value v of the chunk is data[value_starts[v]:value_ends[v]]."""

    ids: list[str]
    lines: np.ndarray  # int64, 1-based line number of each document
    data: np.ndarray  # uint8
    value_starts: np.ndarray  # int64
    value_ends: np.ndarray  # int64
    doc_values: np.ndarray  # int64[n_docs + 1]
    bad: list[BadLine] = field(default_factory=list)

    @property
    def n_docs(self) -> int:
        return len(self.ids)


def _complete_line_blocks(path: Path, chunk_docs: int) -> Iterator[tuple[bytes, int]]:
    """Yield (bytes of up to chunk_docs whole lines, 1-based number of their first line)."""
    first_line = 1
    pending = b""
    eof = False
    with open(path, "rb") as f:
        while True:
            while not eof and pending.count(b"\n") < chunk_docs:
                block = f.read(READ_BLOCK)
                if block:
                    pending += block
                else:
                    eof = True
            if not pending:
                return
            start, n = 0, 0
            while n < chunk_docs:
                cut = pending.find(b"\n", start)
                if cut < 0:
                    break
                start, n = cut + 1, n + 1
            if n < chunk_docs:  # end of file: the rest, with a final line that has no newline
                body, pending = pending, b""
            else:
                body, pending = pending[:start], pending[start:]
            yield body, first_line
            first_line += body.count(b"\n") + (0 if body.endswith(b"\n") else 1)


def _utf8_bad_lines(raw: bytes, line_starts: np.ndarray) -> dict[int, str]:
    """Index of each line holding invalid UTF-8, with the reason."""
    bad: dict[int, str] = {}
    pos = 0
    while True:
        try:
            raw[pos:].decode("utf-8")
            return bad
        except UnicodeDecodeError as exc:
            offset = pos + exc.start
            line = int(np.searchsorted(line_starts, offset, side="right") - 1)
            bad[line] = f"invalid UTF-8 byte 0x{raw[offset]:02x} at column {offset - int(line_starts[line]) + 1}"
            nxt = line + 1
            if nxt >= line_starts.shape[0]:
                return bad
            pos = int(line_starts[nxt])


def _fail_or_record(path: Path, line: int, reason: str, skip: bool, bad: list[BadLine]) -> None:
    if not skip:
        raise InputError(path, line, reason)
    bad.append(BadLine(line, reason))


def read_tsv(path: str | Path, chunk_docs: int, skip_bad_lines: bool = False) -> Iterator[Chunk]:
    """MS MARCO form: `id<TAB>text` per line (a further tab belongs to the text)."""
    path = Path(path)
    for raw, first_line in _complete_line_blocks(path, chunk_docs):
        arr = np.frombuffer(raw, dtype=np.uint8)
        newlines = np.flatnonzero(arr == 10)
        ends = newlines if raw.endswith(b"\n") else np.append(newlines, len(raw))
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        ends = ends - ((ends > starts) & (arr[np.maximum(ends - 1, 0)] == 13))  # CRLF
        tabs = np.flatnonzero(arr == 9)
        pick = np.searchsorted(tabs, starts)
        first_tab = np.where(pick < tabs.shape[0], tabs[np.minimum(pick, tabs.shape[0] - 1)], len(raw))
        no_tab = first_tab >= ends
        ok = ~no_tab & (first_tab > starts)
        problems: dict[int, str] = {}
        if not ok.all():
            for i in np.flatnonzero(~ok).tolist():
                problems[i] = "no tab between id and text" if no_tab[i] else "empty id"
        problems.update({k: v for k, v in _utf8_bad_lines(raw, starts).items() if k not in problems})
        bad: list[BadLine] = []
        keep = np.ones(starts.shape[0], dtype=bool)
        for i in sorted(problems):
            _fail_or_record(path, first_line + i, problems[i], skip_bad_lines, bad)
            keep[i] = False
        ids = []
        s_list, t_list = starts.tolist(), first_tab.tolist()
        for i in np.flatnonzero(keep).tolist():
            doc_id = raw[s_list[i] : t_list[i]].decode("utf-8")
            if doc_id != doc_id.strip() or any(c.isspace() for c in doc_id):
                reason = f"document id {doc_id!r} contains whitespace"
                _fail_or_record(path, first_line + i, reason, skip_bad_lines, bad)
                keep[i] = False
                continue
            ids.append(doc_id)
        kept = np.flatnonzero(keep)
        n = kept.shape[0]
        yield Chunk(
            ids=ids,
            lines=(first_line + kept).astype(np.int64),
            data=arr,
            value_starts=(first_tab[kept] + 1).astype(np.int64),
            value_ends=ends[kept].astype(np.int64),
            doc_values=np.arange(n + 1, dtype=np.int64),
            bad=sorted(bad, key=lambda b: b.line),
        )


def _jsonl_document(path: Path, line: int, raw: bytes) -> tuple[str, list[str]]:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(path, line, f"invalid UTF-8 ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(path, line, f"invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(obj, dict):
        raise InputError(path, line, "expected a JSON object")
    doc_id = obj.get("id")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise InputError(path, line, "missing or non-string/integer \"id\"")
    doc_id = str(doc_id)
    if not doc_id or any(c.isspace() for c in doc_id):
        raise InputError(path, line, f"document id {doc_id!r} is empty or contains whitespace")
    if "fields" in obj:
        fields = obj["fields"]
        if not isinstance(fields, list) or not all(isinstance(v, str) for v in fields):
            raise InputError(path, line, "\"fields\" must be a list of strings")
        return doc_id, fields
    text = obj.get("text")
    if not isinstance(text, str):
        raise InputError(path, line, "needs a string \"text\" or a list \"fields\"")
    return doc_id, [text]


def read_jsonl(path: str | Path, chunk_docs: int, skip_bad_lines: bool = False) -> Iterator[Chunk]:
    """One JSON object per line: {"id": ..., "text": "..."} or {"id": ..., "fields": [...]}."""
    path = Path(path)
    for raw, first_line in _complete_line_blocks(path, chunk_docs):
        ids: list[str] = []
        lines: list[int] = []
        values: list[bytes] = []
        counts: list[int] = []
        bad: list[BadLine] = []
        for i, line in enumerate(raw.split(b"\n")):
            if not line.strip():
                continue  # blank lines (and the final newline) carry no document
            try:
                doc_id, fields = _jsonl_document(path, first_line + i, line)
            except InputError as exc:
                if not skip_bad_lines:
                    raise
                bad.append(BadLine(first_line + i, str(exc).split(": ", 1)[-1]))
                continue
            ids.append(doc_id)
            lines.append(first_line + i)
            values.extend(v.encode("utf-8", "surrogatepass") for v in fields)
            counts.append(len(fields))
        sizes = np.array([len(v) for v in values], dtype=np.int64)
        ends = np.cumsum(sizes)
        doc_values = np.zeros(len(ids) + 1, dtype=np.int64)
        doc_values[1:] = np.cumsum(np.array(counts, dtype=np.int64))
        yield Chunk(
            ids=ids,
            lines=np.array(lines, dtype=np.int64),
            data=np.frombuffer(b"".join(values), dtype=np.uint8),
            value_starts=ends - sizes,
            value_ends=ends,
            doc_values=doc_values,
            bad=bad,
        )


def detect_format(path: str | Path) -> str:
    """'jsonl' for *.jsonl / *.json files, else 'tsv'."""
    suffix = Path(path).suffix.lower()
    return "jsonl" if suffix in (".jsonl", ".json", ".ndjson") else "tsv"


def read_collection(path: str | Path, fmt: str, chunk_docs: int, skip_bad_lines: bool = False) -> Iterator[Chunk]:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "no such file")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "tsv":
        return read_tsv(path, chunk_docs, skip_bad_lines)
    if fmt == "jsonl":
        return read_jsonl(path, chunk_docs, skip_bad_lines)
    raise InputError(path, None, f"unknown collection format {fmt!r} (expected tsv, jsonl or auto)")


def select_docs(chunk: Chunk, keep: np.ndarray) -> Chunk:
    """The chunk restricted to the documents where `keep` is True (values follow)."""
    if keep.all():
        return chunk
    docs = np.flatnonzero(keep)
    counts = chunk.doc_values[docs + 1] - chunk.doc_values[docs]
    values = np.concatenate(
        [np.arange(chunk.doc_values[d], chunk.doc_values[d + 1]) for d in docs.tolist()]
    ) if docs.shape[0] else np.zeros(0, dtype=np.int64)
    doc_values = np.zeros(docs.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_values[1:])
    return Chunk(
        ids=[chunk.ids[d] for d in docs.tolist()],
        lines=chunk.lines[docs],
        data=chunk.data,
        value_starts=chunk.value_starts[values],
        value_ends=chunk.value_ends[values],
        doc_values=doc_values,
        bad=chunk.bad,
    )
