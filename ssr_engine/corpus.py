"""Streaming readers of collections in chunks, with line numbers.

Sources: MS MARCO TSV (`id<TAB>text`, optionally after a header line), JSONL (ours, BEIR's
`corpus.jsonl` and Pyserini's JsonCollection), any Python iterable of documents, and
ir_datasets (`irds:NAME`). Files compressed with gzip, bzip2, xz or zstd are recognised by
their magic bytes, whatever their name (`inputs` opens them).

A document is one or more *values* (fields): a JSONL `title` is a value of its own before
the body, so bigrams never span title and body (DESIGN.md 6). A chunk carries its text as
UTF-8 bytes plus value spans, ready for `extract`; nothing per document is turned into Python
strings except the external ids.

Every source yields the same `Chunk` through the same bad-line policy (`_fail_or_record`); JSONL lines
and an iterable's items are assembled alike (`_Documents`).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError
from .inputs import BOM, DECOMPRESS_ERRORS, detect_format, irds_dataset, open_input, sniff_compression

READ_BLOCK = 1 << 24  # bytes read at a time while looking for chunk_docs complete lines

ID_KEYS = ("id", "_id", "docid", "doc_id")  # ours, BEIR, Pyserini/ir_datasets spellings
ITERABLE_LABEL = "<python iterable>"


@dataclass(frozen=True)
class ByteRange:
    """Whole lines of an uncompressed file, from byte `start` (a line start) to byte `end` (just after
    a newline, or the file's end): one shard's input (`distributed.build`). Line numbers in chunks
    and errors count from the range's first line; the sharded build adds the lines before it."""

    path: Path
    start: int
    end: int

    def __str__(self) -> str:
        return str(self.path)


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
    source_pos: int = 0  # bytes of the source consumed up to the end of this chunk (compressed, for files)

    @property
    def n_docs(self) -> int:
        return len(self.ids)


def _complete_line_blocks(path: Path, chunk_docs: int, skip_lines: int = 0,
                          span: tuple[int, int] | None = None) -> Iterator[tuple[bytes, int, int]]:
    """Yield (bytes of up to chunk_docs whole lines, 1-based number of their first line, input position).

    The first `skip_lines` lines (a header) are dropped; line numbers still count them. `span`:
    (start, end) bytes of an uncompressed file to read instead of all of it (`ByteRange`).
    """
    first_line = 1
    pending = b""
    lines = 0  # newlines in pending (each block counted once as it comes, not all of pending per read)
    eof = False
    at_start = span is None or span[0] == 0
    stream, raw = open_input(path)
    left = -1 if span is None else span[1] - span[0]  # bytes still to read (-1: to the end)
    if span is not None:
        raw.seek(span[0])
    with raw, stream as f:
        while True:
            while not eof and lines < chunk_docs + skip_lines:
                try:
                    block = f.read(READ_BLOCK if left < 0 else min(READ_BLOCK, left))
                    left -= len(block) if left > 0 else 0
                except DECOMPRESS_ERRORS as exc:
                    raise InputError(path, first_line + lines, f"cannot decompress ({exc})") from None
                if block:
                    pending += block
                    lines += block.count(b"\n")
                else:
                    eof = True
                if at_start and (len(pending) >= len(BOM) or eof):
                    at_start = False
                    if pending.startswith(BOM):  # a UTF-8 byte order mark is not part of the first id
                        pending = pending[len(BOM) :]
            while skip_lines and pending:
                cut = pending.find(b"\n")
                pending = pending[cut + 1 :] if cut >= 0 else b""
                lines = lines - 1 if cut >= 0 else 0
                first_line += 1
                skip_lines -= 1
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
            lines -= n  # the body's newlines
            yield body, first_line, raw.tell()
            first_line += n + (0 if body.endswith(b"\n") else 1)


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


def _fail_or_record(path: object, line: int, reason: str, skip: bool, bad: list[BadLine]) -> None:
    if not skip:
        raise InputError(path, line, reason)
    bad.append(BadLine(line, reason))


def read_tsv(path: str | Path, chunk_docs: int, skip_bad_lines: bool = False, header: bool = False,
             span: tuple[int, int] | None = None) -> Iterator[Chunk]:
    """MS MARCO form: `id<TAB>text` per line (a further tab belongs to the text); `header`: skip line 1."""
    from .kernels.lines import CHECK_ID, EMPTY_ID, NO_TAB, joined, tsv_lines  # Numba: imported when read

    path = Path(path)
    for raw, first_line, pos in _complete_line_blocks(path, chunk_docs, 1 if header else 0, span):
        arr = np.frombuffer(raw, dtype=np.uint8)
        starts, ends, first_tab, flags, ascii_only = tsv_lines(arr)
        problems: dict[int, str] = {}
        for i in np.flatnonzero((flags == NO_TAB) | (flags == EMPTY_ID)).tolist():
            problems[i] = "no tab between id and text" if flags[i] == NO_TAB else "empty id"
        if not ascii_only:
            problems.update({k: v for k, v in _utf8_bad_lines(raw, starts).items() if k not in problems})
        for i in np.flatnonzero(flags == CHECK_ID).tolist():  # the other ids hold no whitespace
            if i not in problems:
                doc_id = raw[int(starts[i]) : int(first_tab[i])].decode("utf-8")
                if any(c.isspace() for c in doc_id):
                    problems[i] = f"document id {doc_id!r} contains whitespace"
        bad: list[BadLine] = []
        keep = np.ones(starts.shape[0], dtype=bool)
        for i in sorted(problems):  # the first bad line is the one reported
            _fail_or_record(path, first_line + i, problems[i], skip_bad_lines, bad)
            keep[i] = False
        # every id in one decode: the ids' bytes joined by newlines (which no id holds), split
        ids = joined(arr, starts, first_tab, np.flatnonzero(keep)).tobytes().decode("utf-8").split("\n")[:-1]
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
            source_pos=pos,
        )


def document_fields(obj: Any, any_id: bool = False) -> tuple[str, list[str]]:
    """(id, values) of one document given as a mapping, a (id, text) pair or an object with
    `doc_id` and `text` (ir_datasets); ValueError with the reason otherwise.

    Mapping keys: the id is `id`, `_id`, `docid` or `doc_id`; the body is `fields` (a list of
    strings), `text` or `contents`; a non-empty `title` comes first as a value of its own.
    """
    if isinstance(obj, dict):
        key = next((k for k in ID_KEYS if k in obj), None)
        doc_id = obj.get(key) if key is not None else None
        title = obj.get("title")
        if "fields" in obj:
            body = obj["fields"]
            if not isinstance(body, list) or not all(isinstance(v, str) for v in body):
                raise ValueError('"fields" must be a list of strings')
        elif isinstance(obj.get("text"), str):
            body = [obj["text"]]
        elif isinstance(obj.get("contents"), str):
            body = [obj["contents"]]
        else:
            raise ValueError('needs a string "text" or "contents", or a list "fields"')
    elif isinstance(obj, (tuple, list)) and len(obj) == 2 and not hasattr(obj, "_fields"):
        doc_id, text = obj
        title = None
        if not isinstance(text, str):
            raise ValueError("the text of an (id, text) pair must be a string")
        body = [text]
    elif hasattr(obj, "doc_id"):  # ir_datasets' namedtuples: doc_id, text or default_text(), title
        doc_id = obj.doc_id
        title = getattr(obj, "title", None)
        text = getattr(obj, "text", None)
        if not isinstance(text, str):
            text = obj.default_text() if hasattr(obj, "default_text") else None
            title = None  # default_text() already holds the title where the dataset has one
        if not isinstance(text, str):
            raise ValueError(f"document {doc_id!r} has no text")
        body = [text]
    else:
        raise ValueError("expected a mapping, an (id, text) pair or an object with doc_id and text")
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise ValueError(f"missing or non-string/integer id (keys: {', '.join(ID_KEYS)})")
    doc_id = str(doc_id)
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"document id {doc_id!r} is not valid Unicode (a lone surrogate)") from None
    if not doc_id or (not any_id and any(c.isspace() for c in doc_id)):
        raise ValueError(f"document id {doc_id!r} is empty or contains whitespace")
    if title is not None and not isinstance(title, str):
        raise ValueError('"title" must be a string')
    return doc_id, ([title] if title else []) + list(body)


def _jsonl_document(path: Path, line: int, raw: bytes, any_id: bool = False) -> tuple[str, list[str]]:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(path, line, f"invalid UTF-8 ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(path, line, f"invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(obj, dict):
        raise InputError(path, line, "expected a JSON object")
    try:
        return document_fields(obj, any_id)
    except ValueError as exc:
        raise InputError(path, line, str(exc)) from None


class _Documents:
    """A chunk being assembled from documents given as values (JSONL lines, an iterable's items)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.lines: list[int] = []
        self.values: list[bytes] = []
        self.counts: list[int] = []
        self.bad: list[BadLine] = []

    def add(self, doc_id: str, line: int, values: list[bytes]) -> None:
        self.ids.append(doc_id)
        self.lines.append(line)
        self.values.extend(values)
        self.counts.append(len(values))

    def chunk(self, pos: int) -> Chunk:
        sizes = np.array([len(v) for v in self.values], dtype=np.int64)
        ends = np.cumsum(sizes)
        doc_values = np.zeros(len(self.ids) + 1, dtype=np.int64)
        doc_values[1:] = np.cumsum(np.array(self.counts, dtype=np.int64))
        return Chunk(ids=self.ids, lines=np.array(self.lines, dtype=np.int64),
                     data=np.frombuffer(b"".join(self.values), dtype=np.uint8), value_starts=ends - sizes,
                     value_ends=ends, doc_values=doc_values, bad=self.bad, source_pos=pos)


def read_jsonl(path: str | Path, chunk_docs: int, skip_bad_lines: bool = False, any_id: bool = False,
               span: tuple[int, int] | None = None) -> Iterator[Chunk]:
    """One JSON object per line: {"id", "text"} or {"id", "fields": [...]}; BEIR {"_id", "title",
    "text"}; Pyserini {"id", "contents"} (see `document_fields`)."""
    path = Path(path)
    for raw, first_line, pos in _complete_line_blocks(path, chunk_docs, span=span):
        docs = _Documents()
        for i, line in enumerate(raw.split(b"\n")):
            if not line.strip():
                continue  # blank lines (and the final newline) carry no document
            try:
                doc_id, fields = _jsonl_document(path, first_line + i, line, any_id)
            except InputError as exc:
                _fail_or_record(path, first_line + i, exc.reason, skip_bad_lines, docs.bad)
                continue
            docs.add(doc_id, first_line + i, [v.encode("utf-8", "surrogatepass") for v in fields])
        yield docs.chunk(pos)


def read_documents(docs: Iterable[Any], chunk_docs: int, skip_bad_lines: bool = False,
                   label: str = ITERABLE_LABEL) -> Iterator[Chunk]:
    """Documents from any iterable (`document_fields` says what an item may be); the "line" of an
    item in errors and in the manifest is its 1-based position."""
    out = _Documents()
    consumed = 0
    for position, item in enumerate(docs, start=1):
        try:
            doc_id, fields = document_fields(item)
            encoded = [v.encode("utf-8") for v in fields]
        except (ValueError, UnicodeEncodeError) as exc:
            reason = f"not valid UTF-8 text ({exc.reason})" if isinstance(exc, UnicodeEncodeError) else str(exc)
            _fail_or_record(label, position, reason, skip_bad_lines, out.bad)
            continue
        out.add(doc_id, position, encoded)
        consumed += sum(len(v) for v in encoded)
        if len(out.ids) >= chunk_docs:
            yield out.chunk(consumed)
            out = _Documents()
    if out.ids or out.bad:
        yield out.chunk(consumed)


def read_irds(name: str, chunk_docs: int, skip_bad_lines: bool = False) -> Iterator[Chunk]:
    """The documents of an ir_datasets dataset (`irds:NAME`)."""
    from .errors import SsrError

    dataset = irds_dataset(name)
    if not dataset.has_docs():
        raise SsrError(f"{name}: this ir_datasets dataset has no documents")
    return read_documents(dataset.docs_iter(), chunk_docs, skip_bad_lines, label=name)


def is_dataset(source: object) -> bool:
    """True for an `irds:NAME` string."""
    return isinstance(source, str) and source.startswith("irds:")


def read_collection(source: str | os.PathLike[str] | ByteRange | Iterable[Any], fmt: str, chunk_docs: int,
                    skip_bad_lines: bool = False, header: bool = False) -> Iterator[Chunk]:
    """Chunks of a file (TSV or JSONL, maybe compressed), an `irds:NAME` dataset or an iterable."""
    if is_dataset(source):
        return read_irds(str(source), chunk_docs, skip_bad_lines)
    span = None
    if isinstance(source, ByteRange):
        if sniff_compression(source.path) is not None:
            raise InputError(source.path, None, "a byte range (a shard's input) needs an uncompressed file")
        span = (source.start, source.end)
        source = source.path
    if not isinstance(source, (str, os.PathLike)):
        if isinstance(source, (bytes, io.IOBase)):
            raise InputError(repr(source)[:40], None, "give a path or an iterable of documents")
        return read_documents(source, chunk_docs, skip_bad_lines)
    path = Path(source)
    if not path.is_file():
        raise InputError(path, None, "no such file")
    if fmt == "auto":
        fmt = detect_format(path)
    if header and fmt != "tsv":
        raise InputError(path, None, "header applies to TSV collections only")
    if fmt == "tsv":
        return read_tsv(path, chunk_docs, skip_bad_lines, header, span)
    if fmt == "jsonl":
        return read_jsonl(path, chunk_docs, skip_bad_lines, span=span)
    if fmt == "jsonl-any-id":  # agent registries: any non-empty id, whitespace included
        return read_jsonl(path, chunk_docs, skip_bad_lines, any_id=True)
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
        source_pos=chunk.source_pos,
    )
