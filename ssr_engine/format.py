"""The on-disk index format, with `arrays` and `manifest`: the only modules that know file names,
dtypes and the manifest. Here: the layout, `open_index` and the `Index` it returns.
(Just over 400 lines on purpose: the layout table below, the `Index` it opens and `open_index`'s checks are
one contract, read and changed together.)

An index is a directory of generations (`generations`: owner marker `ssr-index.json`, writer
lock, commit points `commit-N.json`, segments `seg-M/`). A segment is a directory:

    manifest.json          format version, counts, settings, build parameters, a record (bytes,
                           sha256) of every other file, and its own checksum (`Manifest`)
    vocab.npy              uint32[V]   keys of the signals sorted by hash (`hashing.vocab_keys`: 32
                                       bits; formats 2, 3: uint64 hashes); term id = position
    postings_indptr.npy    off[V+1]    CSR over terms; format 7: off[R+1] over the R terms of df != 1 only,
    postings_long.npy      uint64[...] ... which are these (a bit per term), and
    postings_rank.npy      uint32[...] ... how many come before each 64 terms (`kernels.lists`; `Index.lists`)
    postings_docs.npy      uint32[...] internal doc ids, ascending within each term, packed at whole
                                       bytes (format 6: 8, 16, 24 bits, plain past 2**24 docs; formats
                                       2-5: uint32[P]); read through `Index.postings` (`kernels.packed`)
    forward_indptr.npy     off[N+1]    CSR over documents (the exhaustive mode's input)
    forward_terms.npy      uint32[...] term ids, ascending within each document, packed at
                                       ceil(log2 V) bits (format 5; formats 2-4: uint32[P], one a
                                       word); read through `Index.forward` and `kernels.forward`
    doc_rank.npy           uint32[N]   position of each document's external id in id order (format
                                       4: absent when that is the identity, manifest ids.rank)
    signal_offsets.npy     off[U+1]    the literal signal strings (unigrams), as byte spans ...
    signal_bytes.npy       uint8[...]  ...
    signal_codes.npy       uint64[...] per term, bit-packed: its literal, or a bigram's two (format 4,
                                       `kernels.strings`; formats 2, 3: none, U = V). Mapped: exact
                                       look-up, --explain, `Index.signal_table()` (every string)
    doc_ids.parquet        id: external document ids, row = internal doc id

BM25 indexes (scoring "bm25") add term frequencies and document lengths:

    postings_tf.npy        uint32[P]   term frequency aligned with postings_docs
    doc_lengths.npy        uint32[N]   tokens per document

`off` is the narrowest of int32 and int64 that holds the array's last value (`offsets_dtype`;
version 2 indexes have int64 throughout, and still open). Signed on purpose: in Numba, int32 -
int32 is int64, where uint32 - uint32 is uint64, which turns an int64 sum into a float64.

Extra files registered in the manifest (`Manifest.extra_files`, name -> format id) travel with
the segment and are checked by `verify` like the others (an agent registry's card store).
"""


from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# The format is three modules: this one (the layout, opening and verifying), `arrays` (array
# files: names, dtypes, .npy I/O) and `manifest`; their names are re-exported here for callers.
from .arrays import (  # noqa: F401
    ARRAYS,
    BM25_ARRAYS,
    HEADER_BYTES,
    OFFSET_ARRAYS,
    SINCE,
    ArrayWriter,
    ListsWriter,
    accepted_dtypes,
    array_file,
    load_mapped,
    npy_data_offset,
    offsets_dtype,
    read_slice,
    save_array,
    save_lists,
)
from .atomic import sha256_file  # noqa: F401  (re-exported)
from .errors import IndexFormatError
from .generations import (
    Commit,
    SegmentHold,
    flat_v1_manifest,
    open_commit,
    read_owner,
    v1_error,
)
from .ids import fixed_width_ids, ucs4_ids
from .manifest import (  # noqa: F401
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    READABLE_VERSIONS,
    Counts,
    FileRecord,
    HashSettings,
    Manifest,
    SignalSettings,
    file_record,
    read_manifest,
    write_manifest,
)
from .term_table import TermTable
from .validate import verify_index, verify_opened  # noqa: F401  (`verify` is validation's last tier)

DOC_IDS = "doc_ids.parquet"
# Indexes built before 2026-12-01 also hold `signals.parquet` (hash, signal): the strings of
# signal_offsets/signal_bytes written a second time (14% of an 8.8M index, 21% of a short-text
# one). It is no longer written; where a manifest records it, `verify` still checks it.
TABLES = (DOC_IDS,)
CARD_STORE = "agent_cards.parquet"  # an agent registry's cards (agents.discovery), an extra file
CARD_STORE_FORMAT = "ssr-agent-cards-v1"


def peek_index(path: str | os.PathLike[str]) -> tuple[Manifest, Commit] | None:
    """The current manifest and commit point of the index at `path`, or None when there is no sound one."""
    try:
        commit, holds = open_commit(resolve_index(path))
    except IndexFormatError:
        return None
    try:
        if len(commit.segments) != 1:
            return None
        return read_manifest(Path(path) / commit.segments[0].name, commit.segments[0].manifest_sha256), commit
    except IndexFormatError:
        return None
    finally:
        for h in holds:
            h.close()


def resolve_index(path: str | os.PathLike[str]) -> Path:
    """The index root at `path`; a clear error for a missing folder, a format-1 index or a segment folder."""
    root = Path(path)
    if not root.is_dir():
        raise IndexFormatError(f"{root}: no index here (not a directory)")
    if read_owner(root) is None:
        v1 = flat_v1_manifest(root)
        if v1 is not None:
            raise v1_error(root, v1)
        if (root / MANIFEST).is_file() and (root.parent / "ssr-index.json").is_file():
            raise IndexFormatError(f"{root}: a segment of the index {root.parent}; open the index itself")
        raise IndexFormatError(f"{root}: not an ssr index (no ssr-index.json; or its build did not finish)")
    return root


@dataclass
class Index(TermTable):
    """An opened index segment: memory-mapped arrays plus the typed manifest.

    Opened through `open_index`, it is a snapshot: the arrays are mapped and the id table's file
    is held open at open time, and the segment is held against removal (`locks.SegmentHold`)
    for the object's life, so a rebuild of the index never changes what it answers.
    """

    path: Path
    manifest: Manifest
    vocab: np.ndarray
    postings_indptr: np.ndarray
    postings_docs: np.ndarray
    forward_indptr: np.ndarray
    forward_terms: np.ndarray
    doc_rank: np.ndarray
    signal_offsets: np.ndarray
    signal_bytes: np.ndarray
    signal_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    postings_tf: np.ndarray | None = None
    doc_lengths: np.ndarray | None = None
    postings_long: np.ndarray | None = None  # format 7 (`kernels.lists`); else postings_indptr is the whole CSR
    postings_rank: np.ndarray | None = None
    _doc_ids: list[str] | None = field(default=None, repr=False)
    _id_arrow: Any = field(default=None, repr=False)
    _id_fixed: np.ndarray | None = field(default=None, repr=False)
    root: Path | None = None  # the index directory (path is its segment)
    commit: Commit | None = field(default=None, repr=False)
    _holds: list[SegmentHold] = field(default_factory=list, repr=False)
    _id_file: Any = field(default=None, repr=False)
    _vocab_checked: np.ndarray | None = field(default=None, repr=False)  # see validate.find_terms
    forward_width: int = 0  # bits of a packed forward term id (format 5), 0 (`forward.PLAIN`): plain uint32
    postings_width: int = 0  # bits of a packed posting, 0 (`packed.PLAIN`): plain uint32

    @property
    def forward(self) -> tuple[np.ndarray, int]:
        """The forward rows as the kernels take them (`kernels.forward`): (words, width)."""
        return self.forward_terms.view(np.ndarray), self.forward_width

    @property
    def postings(self) -> np.ndarray | tuple[np.ndarray, int]:
        """The postings' doc ids as the kernels take them (a `kernels.packed` column): the plain array, or
        (bytes, width) packed at whole bytes (format 6)."""
        docs = self.postings_docs.view(np.ndarray)
        return (docs.view(np.uint8), self.postings_width) if self.postings_width else docs

    @property
    def lists(self) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where each term's postings are, as the kernels take it (`kernels.lists.span`): the plain
        offsets int[V + 1], or format 7's (long, rank, offsets)."""
        indptr = self.postings_indptr.view(np.ndarray)
        if self.postings_long is None or self.postings_rank is None:
            return indptr
        return self.postings_long.view(np.ndarray), self.postings_rank.view(np.ndarray), indptr

    def span(self, t: int) -> tuple[int, int]:
        """Term t's postings: positions start..end-1 of `postings`."""
        from .kernels.lists import span

        return span(self.lists, int(t))

    def df_of(self, terms: np.ndarray) -> np.ndarray:
        """Document frequency of each of terms (int64, ids in 0..V-1)."""
        terms = np.ascontiguousarray(terms, dtype=np.int64)
        lists = self.lists
        if not isinstance(lists, tuple):  # no kernel to load for a plain CSR
            return lists[terms + 1].astype(np.int64) - lists[terms]
        from .kernels.lists import lengths

        return lengths(lists, terms)

    @property
    def postings_length(self) -> int:
        """Postings in the index (P, however they are stored)."""
        return self.manifest.counts.postings if self.postings_width else self.postings_docs.shape[0]

    @property
    def forward_length(self) -> int:
        """Term ids in the forward rows (P, however they are stored)."""
        return self.manifest.counts.postings if self.forward_width else self.forward_terms.shape[0]

    def forward_row(self, d: int) -> np.ndarray:
        """Document d's term ids (int64, ascending unless the index is corrupt)."""
        from .kernels.forward import gather

        a, b = int(self.forward_indptr[d]), int(self.forward_indptr[d + 1])
        return gather(self.forward, np.array([a]), np.array([b - a]))

    @property
    def n_docs(self) -> int:
        return self.manifest.counts.documents

    @property
    def scoring(self) -> str:
        return self.manifest.scoring

    def close(self) -> None:
        """Release the segment (its files may then be removed by the next writer)."""
        for h in self._holds:
            h.close()
        self._holds = []

    def df(self) -> np.ndarray:
        """Document frequency of every term (int64[V])."""
        lists = self.lists
        return np.diff(lists) if not isinstance(lists, tuple) else self.df_of(np.arange(self.n_terms, dtype=np.int64))

    def doc_id_array(self) -> Any:
        """External ids as one Arrow string array (about 10 bytes per id), row = internal doc id."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        source = self._id_file if self._id_file is not None else self.path / DOC_IDS
        if self._id_file is not None:
            self._id_file.seek(0)
        try:  # ParquetFile.read, not pq.read_table: that imports pandas (0.3-0.6 CPU s, a process's first read)
            table = pq.ParquetFile(source).read(columns=["id"])
        except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) on garbage
            raise IndexFormatError(f"{self.path / DOC_IDS}: unreadable id table ({exc})") from exc
        ids = table.column("id").combine_chunks()
        del table
        # the read's chunks, freed once combined, stay in Arrow's pool (mimalloc) otherwise: +110 MiB
        # RssAnon at 8.8M ids for the life of the process
        pa.default_memory_pool().release_unused()
        if len(ids) != self.n_docs:
            raise IndexFormatError(f"{self.path / DOC_IDS}: {len(ids)} ids, the manifest says {self.n_docs} documents")
        return ids

    def ids_of(self, docs: np.ndarray) -> np.ndarray:
        """External ids of internal doc ids, as a NumPy str array (`<U{longest id}`).

        Short ASCII ids (MS MARCO's pids) are gathered from a fixed-width byte table built once
        (~1 byte per id character) by a parallel kernel, where an Arrow -> object conversion makes
        one Python str per result (7M of them for 6,980 queries at K=1000).
        """
        docs = np.asarray(docs, dtype=np.int64)
        self._load_ids()
        if self._id_fixed is not None:
            from .kernels.id_table import gather_ids_ucs4

            return ucs4_ids(gather_ids_ucs4(self._id_fixed, docs))
        if docs.shape[0] == 0:
            return np.empty(0, dtype="U1")
        return np.array(self._id_arrow.take(docs).to_pylist(), dtype=str)

    def id_table(self) -> np.ndarray | None:
        """The fixed-width id table `ids_of` gathers from (uint8[N, w], ASCII bytes), or None (other ids)."""
        self._load_ids()
        return self._id_fixed

    def internal_id(self, doc_id: str) -> int | None:
        """The internal id of an external id, or None."""
        import pyarrow.compute as pc

        self._load_ids()
        found = pc.index(self._id_arrow, str(doc_id)).as_py()
        return None if found is None or found < 0 else int(found)

    def _load_ids(self) -> None:
        if self._id_arrow is None:
            if self._doc_ids is not None:  # an index held in memory (tests, in-memory registries)
                import pyarrow as pa

                self._id_arrow = pa.array(self._doc_ids, type=pa.string())
            else:
                self._id_arrow = self.doc_id_array()
            self._id_fixed = fixed_width_ids(self._id_arrow)

    def doc_ids(self) -> list[str]:
        """External ids as a Python list (convenient for small indexes; cached)."""
        if self._doc_ids is None:
            self._doc_ids = self.doc_id_array().to_pylist()
        return self._doc_ids


def _open_array(directory: Path, name: str, record: FileRecord | None) -> np.ndarray:
    path = directory / array_file(name)
    if not path.is_file():
        raise IndexFormatError(f"{path}: missing file")
    if record is None:
        raise IndexFormatError(f"{path}: not listed in the manifest")
    size = path.stat().st_size
    if size != record.bytes:
        raise IndexFormatError(f"{path}: {size} bytes, the manifest says {record.bytes} (truncated or replaced)")
    arr = load_mapped(path)
    accepted = accepted_dtypes(name)
    if arr.dtype not in accepted or arr.ndim != 1:
        raise IndexFormatError(f"{path}: dtype {arr.dtype} shape {arr.shape}, expected 1-d "
                               f"{' or '.join(str(d) for d in accepted)}")
    return arr


def open_index(path: str | os.PathLike[str], verify: bool = False) -> Index:
    """Open the current generation of the index at `path`, memory-mapped, as a snapshot.

    Checks the owner marker, the commit point and the manifest (their checksums), presence and
    size of every file, array lengths against the counts, and the arrays' structure
    (`validate.check_index`: offsets monotone and in range, vocabulary sorted, doc_rank a
    permutation). `verify=True` adds the full byte check of every file (`verify_index`) and the
    O(postings) structural checks.
    """
    root = resolve_index(path)
    if verify:
        problems = verify_index(root)
        if problems:
            raise IndexFormatError("; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5
                                                              else ""))
    commit, holds = open_commit(root)
    try:
        if len(commit.segments) != 1:
            raise IndexFormatError(f"{commit.path}: {len(commit.segments)} segments; open_index reads one-segment "
                                   "indexes (a live index has its own reader)")
        ref = commit.segments[0]
        if ref.deletes is not None:
            raise IndexFormatError(f"{commit.path}: {ref.name} has deleted documents; open_index reads plain "
                                   "indexes (a live index has its own reader: Searcher, open_retriever)")
        index = open_segment(root / ref.name, ref.manifest_sha256, full=verify)
        index.root, index.commit, index._holds = root, commit, holds
    except BaseException:
        for h in holds:
            h.close()
        raise
    return index


def open_segment(directory: Path, manifest_sha256: str | None = None, full: bool = False) -> Index:
    """Open and validate one segment folder (the caller holds it; `open_index` does all of this for an
    index). `full`: also the O(postings) structural checks."""
    manifest = read_manifest(directory, manifest_sha256)
    records = manifest.files
    for name in (*TABLES, *manifest.extra_files):
        if not (directory / name).is_file():
            raise IndexFormatError(f"{directory / name}: missing file")
        if name not in records or (directory / name).stat().st_size != records[name].bytes:
            raise IndexFormatError(f"{directory / name}: size differs from the manifest (truncated or replaced)")
    names = dict(ARRAYS)
    if manifest.scoring == "bm25":
        names.update(BM25_ARRAYS)
    identity_rank = manifest.format_version >= 4 and manifest.ids.get("rank") == "identity"
    arrays = {n: _open_array(directory, n, records.get(array_file(n))) for n in names
              if SINCE.get(n, 0) <= manifest.format_version and not (n == "doc_rank" and identity_rank)}
    if identity_rank:  # the rows are in id order (`indexing.doc_ids.write_id_files`): no file
        arrays["doc_rank"] = np.arange(manifest.counts.documents, dtype=np.uint32)
    if manifest.format_version >= 4 and arrays["vocab"].dtype != np.uint32:
        raise IndexFormatError(f"{directory / array_file('vocab')}: dtype {arrays['vocab'].dtype}, format 4 has uint32")
    c = manifest.counts
    n, v, p = c.documents, c.terms, c.postings
    from .kernels.forward import PLAIN, width_for
    from .kernels.packed import byte_width_for, n_words, n_words32

    width = width_for(v) if manifest.format_version >= 5 else PLAIN
    p_width = byte_width_for(n) if manifest.format_version >= 6 else PLAIN
    expected = {
        "vocab": v, "postings_long": (v + 63) >> 6, "postings_rank": ((v + 63) >> 6) + 1,
        "postings_indptr": v + 1 if manifest.format_version < 7 else None,  # format 7: checked by validate
        "postings_docs": n_words32(p, p_width) if p_width else p,
        "forward_indptr": n + 1, "forward_terms": n_words32(p, width) if width else p, "doc_rank": n,
        "postings_tf": p, "doc_lengths": n}
    from .kernels.strings import string_bits

    if "signal_codes" not in arrays:  # formats 2 and 3: one literal string per term
        expected["signal_offsets"] = v + 1
    elif arrays["signal_codes"].shape[0]:  # else U = V, every term its own literal, as above
        u = arrays["signal_offsets"].shape[0] - 1
        expected["signal_codes"] = n_words(v, 2 * string_bits(u))
        if not 0 <= u <= v or string_bits(u) > 31:
            raise IndexFormatError(f"{directory / array_file('signal_offsets')}: {u} literal strings for {v} terms")
    else:
        expected["signal_offsets"] = v + 1
    for name, arr in arrays.items():
        if expected.get(name) is not None and arr.shape[0] != expected[name]:
            raise IndexFormatError(f"{directory / array_file(name)}: {arr.shape[0]} entries, expected {expected[name]}")
    try:
        id_file = open(directory / DOC_IDS, "rb")  # held: the ids stay this generation's
    except OSError as exc:
        raise IndexFormatError(f"{directory / DOC_IDS}: unreadable ({exc.strerror})") from exc
    index = Index(
        path=directory, manifest=manifest, vocab=arrays["vocab"], postings_indptr=arrays["postings_indptr"],
        postings_docs=arrays["postings_docs"], forward_indptr=arrays["forward_indptr"],
        forward_terms=arrays["forward_terms"], doc_rank=arrays["doc_rank"], signal_offsets=arrays["signal_offsets"],
        signal_bytes=arrays["signal_bytes"], postings_tf=arrays.get("postings_tf"),
        signal_codes=arrays.get("signal_codes", np.zeros(0, dtype=np.uint64)),
        doc_lengths=arrays.get("doc_lengths"), _id_file=id_file, forward_width=width,
        postings_width=p_width, postings_long=arrays.get("postings_long"), postings_rank=arrays.get("postings_rank"),
    )
    from .validate import check_index

    try:
        check_index(index, full=full)
    except BaseException:
        id_file.close()
        raise
    return index
