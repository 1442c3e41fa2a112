"""Compaction by merging (`LiveIndex.compact`, `live_merges`): one segment of the live documents of several,
made from their inverted and forward indexes as they are, never inverted again.

The live documents keep their order (segment after segment) and are numbered anew. A term is its string:
every segment's terms still holding a live posting are hashed with the new segment's seed, and one merge of
the segments' ascending hash lists numbers them (`kernels.compact.merge_terms`; a segment of another seed is
sorted first). Each term's postings are then its segments' live postings, concatenated in segment order
(already ascending in the new numbering), and each live row is its segment's row in new term ids. Equal
hashes of two segments are checked string against string; a collision starts again with the next seed, as
the build does. Every array is appended in order (`ArrayWriter`, as the build writes them); memory: about
40 bytes per term of the segments and one piece of postings, rows or strings.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import IndexFormatError, SsrError
from .format import ArrayWriter, Index, Manifest, array_file, save_lists
from .generations import IndexWriter
from .indexing.runs import HashCollision
from .live_search import Snapshot
from .live_segments import ScratchStaging, _derived_manifest

STRING_CHUNK = 1 << 20  # terms per step of the string pass
ROW_CHUNK = 1 << 24  # forward term ids per step of the row pass
POSTINGS_CHUNK = 1 << 24  # postings per piece of the merged lists


@dataclass
class _Source:
    """One segment as compaction reads it: which documents and terms stay, and their new numbers."""

    ix: Index
    deleted: np.ndarray  # uint8[n] (1 = deleted), or empty: nothing deleted
    live: np.ndarray  # int64: its live documents, ascending
    newdoc: np.ndarray  # uint32[n]: a document's number in the new segment (deleted ones: unused)
    df: np.ndarray  # int64[V]: live postings per term
    kept: np.ndarray  # int64: its terms with a live posting, ascending


def compact_segment(writer: IndexWriter | ScratchStaging, snap: Snapshot, chunk_docs: int, workers: int,
                    quiet: bool) -> tuple[Path, Manifest]:
    """One staged segment of every live document of `snap`, merged from its segments (see the module)."""
    from tqdm import tqdm

    from .format import write_manifest
    from .indexing.builder import MAX_SEED_ATTEMPTS
    from .version import __version__

    base = snap.indexes[0].manifest
    started = time.time()
    sources = _sources(snap)
    n_docs = sum(s.live.shape[0] for s in sources)
    if n_docs == 0:
        raise SsrError(f"{snap.root}: every document is deleted; nothing to compact into (add documents first)")
    seed, seeds_tried = base.signals.hash.seed, []
    total = sum(int(s.df.sum()) for s in sources)
    with tqdm(total=2 * total, desc="ssr compact: merge", unit=" postings", unit_scale=True, disable=quiet,
              file=sys.stderr) as bar:
        while True:
            tmp = writer.staging()
            try:
                counts = _write(tmp, sources, seed, base, bar)
                break
            except HashCollision as exc:
                seeds_tried.append({"seed": seed, "collision": [exc.first, exc.second]})
                writer.discard(tmp)
                if len(seeds_tried) >= MAX_SEED_ATTEMPTS:
                    raise SsrError(f"compact: signal hash collisions under {MAX_SEED_ATTEMPTS} seeds; last: {exc}") \
                        from exc
                seed += 1
                bar.reset()
    id_info, doc_store = _ids_and_texts(tmp, sources, base, chunk_docs)
    names = [ref.name for ref in snap.commit.segments]
    source = {"path": f"compaction of {', '.join(names)} (generation {snap.generation})", "format": "segments",
              "bytes": 0, "lines_skipped": 0, "compacted_from": names, "generation": snap.generation}
    manifest = _derived_manifest(base, {"documents": n_docs, **counts}, id_info, source, seed, seeds_tried, {
        "ssr_engine_version": __version__, "operation": "compact", "chunk_docs": chunk_docs, "workers": workers,
        "runs": 0, "seconds": round(time.time() - started, 3), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    manifest = replace(manifest, doc_store=doc_store)
    write_manifest(tmp, manifest)
    return tmp, manifest


def _sources(snap: Snapshot) -> list[_Source]:
    from .kernels.compact import live_df

    out, first = [], 0
    for ix, d in zip(snap.indexes, snap.deletions, strict=True):
        mask = d.mask if d is not None and d.count else None
        deleted = np.zeros(0, np.uint8) if mask is None else np.ascontiguousarray(mask, dtype=np.uint8)
        live = np.arange(ix.n_docs, dtype=np.int64) if mask is None else np.flatnonzero(~mask)
        newdoc = np.cumsum(1 - deleted, dtype=np.int64) - 1 + first if mask is not None else \
            np.arange(first, first + ix.n_docs, dtype=np.int64)
        df, bad = live_df(ix.lists, np.int64(ix.n_terms), ix.postings, deleted)
        _check(bad < 0, ix, f"the postings of term {bad} name a document beyond {ix.n_docs}")
        kept = np.flatnonzero(df) if mask is not None else np.arange(ix.n_terms, dtype=np.int64)
        out.append(_Source(ix, deleted, live, newdoc.astype(np.uint32), df, kept))
        first += live.shape[0]
    return out


def _check(ok: bool, ix: Index, problem: str) -> None:
    if not ok:
        raise IndexFormatError(f"{ix.path}: {problem} (corrupt index)")


def _write(tmp: Path, sources: list[_Source], seed: int, base: Manifest, bar: Any) -> dict[str, int]:
    """Write the merged arrays of `sources` under `seed` into `tmp`; returns the manifest's counts."""
    from .hashing import hash_mask, hash_spans, vocab_keys
    from .indexing.strings import encode_strings
    from .kernels.compact import merge_terms

    bits = base.signals.hash.bits
    mask = hash_mask(bits)
    starts = np.zeros(len(sources) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([s.kept.shape[0] for s in sources])
    hashes = np.empty(int(starts[-1]), dtype=np.uint64)
    monotone, kept = [], []
    for i, s in enumerate(sources):  # each segment's kept terms hashed under `seed` from their strings
        h = hashes[starts[i] : starts[i + 1]]
        for lo in range(0, h.shape[0], STRING_CHUNK):
            offsets, data = s.ix.strings_of(s.kept[lo : lo + STRING_CHUNK])
            h[lo : lo + offsets.shape[0] - 1] = hash_spans(data, offsets, np.uint64(seed), mask)
        monotone.append(bool(h.shape[0] < 2 or np.all(h[1:] > h[:-1])))
        kept.append(s.kept)
        if not monotone[-1]:  # another seed: this segment's terms in hash order first
            order = np.argsort(h, kind="stable")
            h[:] = h[order]
            kept[-1] = s.kept[order]
    new, first, a, b = merge_terms(hashes, starts)
    if a >= 0:
        raise HashCollision(*(_entry_string(sources, kept, starts, e) for e in (a, b)))
    n_terms = int(first.shape[0])
    work = tmp / "work"
    work.mkdir()
    _strings(work, sources, kept, starts, new, first)
    vocab = ArrayWriter(tmp, "vocab")
    vocab.append(vocab_keys(hashes[first], bits))
    vocab.close()
    del hashes, first
    encode_strings(work, tmp, seed, int(mask))
    for name in ("signal_offsets", "signal_bytes"):
        (work / array_file(name)).unlink()
    work.rmdir()
    df = np.zeros(n_terms, dtype=np.int64)
    for i, s in enumerate(sources):
        df[new[starts[i] : starts[i + 1]]] += s.df[kept[i]]
    n_postings = _postings(tmp, sources, kept, starts, new, df, base.scoring == "bm25", bar)
    del df
    maps = []
    for i, s in enumerate(sources):
        term_map = np.full(s.ix.n_terms, -1, dtype=np.int64)
        term_map[kept[i]] = new[starts[i] : starts[i + 1]]
        maps.append(term_map)
    del new
    empty = _forward(tmp, sources, maps, monotone, n_terms, n_postings, base.scoring == "bm25", bar)
    return {"terms": n_terms, "postings": n_postings, "empty_documents": empty}


def _entry_string(sources: list[_Source], kept: list[np.ndarray], starts: np.ndarray, e: int) -> str:
    s = int(np.searchsorted(starts, e, side="right")) - 1
    return sources[s].ix.signal(int(kept[s][e - starts[s]]))


def _strings(work: Path, sources: list[_Source], kept: list[np.ndarray], starts: np.ndarray, new: np.ndarray,
             first: np.ndarray) -> None:
    """The new terms' strings in term order to work/signal_{offsets,bytes} (what `encode_strings` reads),
    each equal hash of two segments checked string against string."""
    from .kernels.spans import gather_spans, spans_equal

    offsets_out = ArrayWriter(work, "signal_offsets", last=2**62)
    bytes_out = ArrayWriter(work, "signal_bytes")
    offsets_out.append(np.zeros(1, dtype=np.int64))
    n_bytes = 0
    n_terms = first.shape[0]
    for lo in range(0, n_terms, STRING_CHUNK):
        hi = min(lo + STRING_CHUNK, n_terms)
        offs: list[np.ndarray] = []
        datas: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        entries: list[np.ndarray] = []
        for i, s in enumerate(sources):  # a segment's entries of new terms lo..hi-1: one run (ascending ids)
            seg_new = new[starts[i] : starts[i + 1]]
            a, b = np.searchsorted(seg_new, [lo, hi])
            off, data = s.ix.strings_of(kept[i][a:b])
            offs.append(off[1:] + sum(d.shape[0] for d in datas))
            datas.append(data)
            ids.append(seg_new[a:b])
            entries.append(np.arange(starts[i] + a, starts[i] + b, dtype=np.int64))
        off = np.concatenate([np.zeros(1, dtype=np.int64), *offs])
        data = np.concatenate(datas)
        ids_all, entries_all = np.concatenate(ids), np.concatenate(entries)
        rep = np.empty(hi - lo, dtype=np.int64)  # each new term's first entry, as a span of this step
        is_rep = entries_all == first[ids_all]
        rep[ids_all[is_rep] - lo] = np.flatnonzero(is_rep)
        dup = np.flatnonzero(~is_rep)
        same = spans_equal(data, off, dup, data, off, rep[ids_all[dup] - lo])
        if not same.all():
            d = int(dup[np.argmin(same)])
            text = [data[off[j] : off[j + 1]].tobytes().decode("utf-8", "replace") for j in (rep[ids_all[d] - lo], d)]
            raise HashCollision(*text)
        out_off, out_data = gather_spans(data, off, rep)
        offsets_out.append(n_bytes + out_off[1:])
        bytes_out.append(out_data)
        n_bytes += int(out_data.shape[0])
    offsets_out.close()
    bytes_out.close()


def _postings(tmp: Path, sources: list[_Source], kept: list[np.ndarray], starts: np.ndarray, new: np.ndarray,
              df: np.ndarray, keep_tf: bool, bar: Any) -> int:
    """postings_indptr, postings_docs (and postings_tf), appended a piece of about POSTINGS_CHUNK postings at
    a time: each term's live postings, segment after segment; the doc ids packed as the build packs them
    (`packed.byte_width_for` the new segment's documents: a compacted segment is always the current format)."""
    from .indexing.merge import PackedAppender
    from .kernels.compact import copy_postings
    from .kernels.packed import byte_width_for

    indptr = np.zeros(df.shape[0] + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    n_postings = int(indptr[-1])
    save_lists(tmp, df)
    docs = ArrayWriter(tmp, "postings_docs")
    packer = PackedAppender(docs.append, byte_width_for(sum(s.live.shape[0] for s in sources)))
    tfs = ArrayWriter(tmp, "postings_tf") if keep_tf else None
    segment_tf = [np.asarray(s.ix.postings_tf) if keep_tf else np.zeros(0, dtype=np.uint32) for s in sources]
    lo = 0
    try:
        while lo < df.shape[0]:  # new terms lo..hi-1: at least one, else about POSTINGS_CHUNK postings
            hi = max(lo + 1, int(np.searchsorted(indptr, indptr[lo] + POSTINGS_CHUNK, side="right")) - 1)
            out = np.empty(int(indptr[hi] - indptr[lo]), dtype=np.uint32)
            out_tf = np.empty(out.shape[0] if keep_tf else 0, dtype=np.uint32)
            cursor = indptr[lo:hi] - indptr[lo]
            for i, s in enumerate(sources):  # its entries of new terms lo..hi-1: one run (ascending new ids)
                seg_new = new[starts[i] : starts[i + 1]]
                a, b = np.searchsorted(seg_new, [lo, hi])
                bad = copy_postings(s.ix.lists, s.ix.postings, segment_tf[i], s.deleted,
                                    s.newdoc, kept[i][a:b], seg_new[a:b] - lo, cursor, out, out_tf)
                _check(bad < 0, s.ix, f"the postings of term {bad} name a document beyond {s.ix.n_docs}")
            packer.append(out)
            if tfs is not None:
                tfs.append(out_tf)
            bar.update(out.shape[0])
            lo = hi
        packer.close()
    finally:
        for out_file in (docs, tfs):
            if out_file is not None:
                out_file.close()
    return n_postings


def _forward(tmp: Path, sources: list[_Source], maps: list[np.ndarray], monotone: list[bool], n_terms: int,
             n_postings: int, keep_tf: bool, bar: Any) -> int:
    """forward_indptr, forward_terms (packed at the new width) and doc_lengths; returns the empty documents."""
    from .indexing.merge import PackedAppender
    from .kernels.compact import rename_rows
    from .kernels.forward import gather, width_for

    fwd_ptr = ArrayWriter(tmp, "forward_indptr", last=n_postings)
    fwd_terms = ArrayWriter(tmp, "forward_terms")
    packer = PackedAppender(fwd_terms.append, width_for(n_terms))
    lengths = ArrayWriter(tmp, "doc_lengths") if keep_tf else None
    fwd_ptr.append(np.zeros(1, dtype=np.int64))
    written = empty = 0
    for s, term_map, in_order in zip(sources, maps, monotone, strict=True):
        fi = np.asarray(s.ix.forward_indptr)
        lo = 0
        while lo < s.live.shape[0]:  # about ROW_CHUNK term ids a step
            n = _rows_in(fi, s.live, lo)
            docs = s.live[lo : lo + n]
            starts = np.asarray(fi[docs], dtype=np.int64)
            row_len = np.asarray(fi[docs + 1], dtype=np.int64) - starts
            _check(bool(np.all(row_len >= 0)), s.ix, "forward_indptr is not ascending")
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(row_len, out=offsets[1:])
            rows, bad = rename_rows(gather(s.ix.forward, starts, row_len), offsets, term_map, not in_order)
            _check(bad < 0, s.ix, f"the forward row of document {int(docs[max(bad, 0)])} names a term its postings "
                   "do not list as live")
            packer.append(rows)
            fwd_ptr.append(written + offsets[1:])
            written += int(offsets[-1])
            empty += int(np.count_nonzero(row_len == 0))
            if lengths is not None:
                assert s.ix.doc_lengths is not None  # a BM25 segment
                lengths.append(np.asarray(s.ix.doc_lengths[docs]))
            bar.update(int(offsets[-1]))
            lo += n
    packer.close()
    for w in (fwd_ptr, fwd_terms, lengths):
        if w is not None:
            w.close()
    return empty


def _rows_in(fi: np.ndarray, live: np.ndarray, lo: int) -> int:
    """How many live documents from live[lo] make about ROW_CHUNK term ids (at least one)."""
    ends = np.asarray(fi[live[lo : lo + ROW_CHUNK] + 1], dtype=np.int64)
    return max(1, int(np.searchsorted(ends - int(fi[live[lo]]), ROW_CHUNK, side="right")))


def _ids_and_texts(tmp: Path, sources: list[_Source], base: Manifest, chunk_docs: int) -> tuple[dict[str, Any],
                                                                                               Any]:
    """The live documents' ids (id files and the live id table) and, with --store-text, their texts."""
    import pyarrow as pa

    from .docstore import DocStore, DocStoreWriter
    from .indexing.doc_ids import write_id_files
    from .live_files import write_id_table

    ids: list[Any] = []
    store = DocStoreWriter(tmp) if base.doc_store is not None else None
    for s in sources:
        s.ix._load_ids()
        texts = DocStore(s.ix) if store is not None else None
        for lo in range(0, s.live.shape[0], chunk_docs):
            docs = s.live[lo : lo + chunk_docs]
            ids.append(s.ix._id_arrow.take(pa.array(docs)))
            if store is not None and texts is not None:
                store.add_rows(texts.rows(docs))
    all_ids = pa.chunked_array(ids, type=pa.string()).combine_chunks()
    id_info = write_id_files(tmp, all_ids)
    write_id_table(tmp, all_ids)
    return id_info, store.close() if store is not None else None
