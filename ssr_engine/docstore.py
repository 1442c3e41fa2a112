"""The document store (`--store-text`): every document's text, compressed, beside the index.

`doc_text.parquet` holds one row per internal document id (row = id), column `fields`
(list<string>: a document's values, a title first), in zstd-compressed row groups of
ROWS_PER_GROUP rows. The file is written during the build, in the index's temporary directory,
so the manifest records its size and checksum like every other file and `ssr verify` checks
it. Looking a document up reads (and caches) its row group only.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import IndexFormatError, SsrError

if TYPE_CHECKING:
    from .corpus import Chunk
    from .format import Index

DOC_STORE = "doc_text.parquet"
DOC_STORE_FORMAT = "ssr-doc-text-v1"
ROWS_PER_GROUP = 4096
CACHED_GROUPS = 8


def _gather(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets (n+1,) int64, bytes) of the spans data[starts[i]:ends[i]] laid end to end."""
    lengths = ends - starts
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    # position j of span i reads data[starts[i] + (j - offsets[i])]: one vectorised gather
    index = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - starts, lengths)
    return offsets, data[index]


class DocStoreWriter:
    """Appends chunks' documents (in internal id order) to `doc_text.parquet` in `directory`."""

    def __init__(self, directory: Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = Path(directory) / DOC_STORE
        self.schema = pa.schema([("fields", pa.list_(pa.large_string()))], metadata={"format": DOC_STORE_FORMAT})
        self.writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        self.rows = 0
        self.pending: list[Any] = []
        self.pending_rows = 0

    def add(self, chunk: Chunk) -> None:
        import pyarrow as pa

        offsets, data = _gather(chunk.data, chunk.value_starts, chunk.value_ends)
        values = pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
        values.validate(full=True)  # UTF-8 (a JSONL lone surrogate would not be)
        self.add_rows(pa.ListArray.from_arrays(pa.array(chunk.doc_values.astype(np.int32)), values))

    def add_rows(self, lists: Any) -> None:
        """Append documents given as an Arrow list<large_string> array (one row per document)."""
        self.pending.append(lists)
        self.pending_rows += len(lists)
        self.rows += len(lists)
        # whole row groups of ROWS_PER_GROUP rows, so a row's group is row // ROWS_PER_GROUP
        while self.pending_rows >= ROWS_PER_GROUP:
            self._flush(ROWS_PER_GROUP)

    def _flush(self, n: int) -> None:
        import pyarrow as pa

        merged = pa.concat_arrays(self.pending) if len(self.pending) > 1 else self.pending[0]
        head, tail = merged.slice(0, n), merged.slice(n)
        self.writer.write_table(pa.table({"fields": head}, schema=self.schema), row_group_size=n)
        self.pending = [tail] if len(tail) else []
        self.pending_rows = len(tail)

    def close(self) -> dict[str, Any]:
        """Finish the file; the manifest's `doc_store` entry."""
        if self.pending_rows:
            self._flush(self.pending_rows)
        self.writer.close()
        return {"file": DOC_STORE, "format": DOC_STORE_FORMAT, "rows": self.rows,
                "rows_per_group": ROWS_PER_GROUP, "compression": "zstd"}


class DocStore:
    """Read access to an index's document store: `text(internal_id)`, `fields(internal_id)`."""

    def __init__(self, index: Index):
        import pyarrow.parquet as pq

        info = index.manifest.doc_store
        if not info:
            raise SsrError(f"{index.path}: no document text stored (build the index with --store-text)")
        path = Path(index.path) / DOC_STORE
        if not path.is_file():
            raise IndexFormatError(f"{path}: missing file")
        try:
            self.file = pq.ParquetFile(path)
            meta = self.file.schema_arrow.metadata or {}
        except Exception as exc:  # pyarrow raises its own errors for a corrupt file
            raise IndexFormatError(f"{path}: not a readable document store ({exc})") from exc
        if meta.get(b"format") != DOC_STORE_FORMAT.encode():
            raise IndexFormatError(f"{path}: not a document store of format {DOC_STORE_FORMAT}")
        md = self.file.metadata
        if md.num_rows != index.n_docs:
            raise IndexFormatError(f"{path}: {md.num_rows} documents, the index has {index.n_docs}")
        self.path = path
        self.group_starts = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)]).tolist()
        self.cache: OrderedDict[int, Any] = OrderedDict()

    def fields(self, doc: int) -> list[str]:
        """The values of internal document `doc` (a title first where the source had one)."""
        if not 0 <= doc < self.group_starts[-1]:
            raise IndexError(f"document {doc} out of range")
        group = bisect.bisect_right(self.group_starts, doc) - 1
        rows = self.cache.get(group)
        if rows is None:
            try:
                # kept as Arrow: converting one row, not the group's 4,096, to Python
                rows = self.file.read_row_group(group, columns=["fields"]).column(0)
            except Exception as exc:
                raise IndexFormatError(f"{self.path}: row group {group} unreadable ({exc})") from exc
            self.cache[group] = rows
            if len(self.cache) > CACHED_GROUPS:
                self.cache.popitem(last=False)
        else:
            self.cache.move_to_end(group)
        return list(rows[doc - self.group_starts[group]].as_py())

    def rows(self, docs: np.ndarray) -> Any:
        """The `fields` rows of documents `docs` (ascending) as one Arrow array, reading their row groups once."""
        import pyarrow as pa

        docs = np.asarray(docs, dtype=np.int64)
        if docs.shape[0] == 0:
            return pa.array([], type=self.file.schema_arrow.field("fields").type)
        starts = np.asarray(self.group_starts, dtype=np.int64)
        groups = np.unique(np.searchsorted(starts, docs, side="right") - 1).tolist()
        try:
            column = self.file.read_row_groups(groups, columns=["fields"]).column(0).combine_chunks()
        except Exception as exc:
            raise IndexFormatError(f"{self.path}: row groups unreadable ({exc})") from exc
        # rows of the groups read, laid end to end: a document's position in them
        first = np.concatenate([[0], np.cumsum([starts[g + 1] - starts[g] for g in groups])[:-1]]).astype(np.int64)
        group_of = np.searchsorted(starts, docs, side="right") - 1
        where = first[np.searchsorted(np.asarray(groups), group_of)] + (docs - starts[group_of])
        return column.take(pa.array(where))

    def text(self, doc: int) -> str:
        """The document's text: its values joined by newlines."""
        return "\n".join(self.fields(doc))
