"""Building a live index's new segments: from documents (`LiveIndex.add`: the build's own steps with
the base segment's settings) and from the live documents of every segment (`LiveIndex.compact`: the
build's runs and merge fed from the forward indexes, no re-tokenising).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import IndexFormatError, SsrError
from .format import Counts, Index, Manifest
from .generations import (
    IndexWriter,
)
from .indexing.pools import pool as make_pool
from .live_files import write_id_table
from .live_search import Snapshot

# ----------------------------------------------------------------------- building segments


class ScratchStaging:
    """Segment folders in a private scratch folder (`LiveIndex.prepare`): what `build_segment` needs of an
    `IndexWriter` (`staging`, `discard`), without the index's writer lock."""

    def __init__(self, root: Path):
        self.root, self._n = root, 0

    def staging(self) -> Path:
        from .generations import READERS

        self._n += 1
        path = self.root / f"segment-{self._n}"
        path.mkdir()
        (path / READERS).touch()
        return path

    def discard(self, staged: Path) -> None:
        shutil.rmtree(staged, ignore_errors=True)



def _derived_manifest(base: Manifest, counts: dict[str, int], ids: dict[str, Any], source: dict[str, Any],
                      seed: int, seeds_tried: list[dict[str, Any]], build: dict[str, Any],
                      extra_files: dict[str, str] | None = None) -> Manifest:
    """A new segment's manifest: the base segment's signal settings, its own counts and history."""
    h = base.signals.hash
    signals = replace(base.signals, hash=replace(h, seed=seed, collisions=tuple(seeds_tried)))
    return Manifest(scoring=base.scoring, counts=Counts(**counts), signals=signals, ids=ids, input=source,
                    build=build, extra_files=dict(extra_files or {}))


def build_segment(writer: IndexWriter | ScratchStaging, base: Manifest, source: Any, fmt: str, skip_bad_lines: bool,
                   chunk_docs: int, workers: int, quiet: bool,
                   extra_files: dict[str, tuple[str | os.PathLike[str], str]] | None = None,
                   header: bool = False) -> tuple[Path, Manifest]:
    """Build a staged segment of `source` (a file or an iterable of documents) with the base segment's
    settings, as `build_index` does (its `_build_into` and `_manifest`)."""
    from .format import write_manifest
    from .indexing.builder import MAX_SEED_ATTEMPTS, BuildConfig, _manifest, build_seeded
    from .indexing.runs import HashCollision
    from .signals import DEFAULT_CAP
    from .stopwords import StopwordList

    s = base.signals
    stop = StopwordList(s.stopwords_id, frozenset(s.stopwords))
    if stop.sha256 != s.stopwords_sha256:
        raise IndexFormatError(f"stopword list of the index does not match its checksum {s.stopwords_sha256}")
    config = BuildConfig(fmt=fmt, header=header, stop=stop, cap=s.cap if s.cap is not None else DEFAULT_CAP,
                         chunk_docs=chunk_docs, workers=workers, skip_bad_lines=skip_bad_lines, scoring=base.scoring,
                         stem=s.stem, quiet=quiet, hash_bits=s.hash.bits, store_text=base.doc_store is not None)
    started = time.time()

    def refuse(exc: HashCollision, tried: list[dict[str, Any]]) -> None:
        # the new segment takes the next seed; queries are hashed per segment, so it mixes with the others
        if len(tried) >= MAX_SEED_ATTEMPTS or not isinstance(source, (str, os.PathLike)):
            # an iterable cannot be read twice
            raise SsrError(f"signal hash collision in the added documents ({exc}); add them from a file") from exc

    tmp, stats, seed, seeds_tried = build_seeded(writer, source, config, s.hash.seed, refuse)
    write_id_table(tmp, stats.pop("id_array"))
    for name, (path, _) in (extra_files or {}).items():
        shutil.move(os.fspath(path), os.fspath(tmp / name))
    manifest = _manifest(config, stats, seed, seeds_tried, started, extra_files or {})
    write_manifest(tmp, manifest, sync=False)  # a staged folder: published whole by one rename at commit
    return tmp, manifest


def _forward_batch(ix: Index, docs: np.ndarray, keep_tf: bool):
    """The signals of documents `docs` of a segment as a `SignalBatch`, read from its forward index."""
    from .extract import SignalBatch
    from .kernels.compact import term_frequencies
    from .kernels.forward import gather

    fi = np.asarray(ix.forward_indptr)
    starts = fi[docs]
    lengths = fi[docs + 1] - starts
    doc_offsets = np.zeros(docs.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=doc_offsets[1:])
    terms = gather(ix.forward, starts, lengths)
    if terms.shape[0] and int(terms.max()) >= ix.n_terms:  # open checks offsets, not forward contents
        raise IndexFormatError(f"{ix.path}: forward_terms holds a term id >= {ix.n_terms} (corrupt index)")
    data, offsets = gather_strings_of(ix, terms)
    if keep_tf:
        doc_of = np.repeat(docs.astype(np.int64), lengths)
        counts = term_frequencies(ix.postings_indptr, ix.postings, ix.postings_tf, terms, doc_of)
        if counts.shape[0] and int(counts.min()) == 0:
            raise IndexFormatError(f"{ix.path}: the forward index lists a term the postings lack (corrupt)")
        assert ix.doc_lengths is not None  # a BM25 segment
        tokens = np.asarray(ix.doc_lengths[docs], dtype=np.int64)
    else:
        counts = np.ones(terms.shape[0], dtype=np.uint32)
        tokens = np.zeros(docs.shape[0], dtype=np.int64)
    return SignalBatch(doc_offsets=doc_offsets, data=data, offsets=offsets,
                       is_bigram=np.zeros(terms.shape[0], dtype=bool), counts=counts, doc_tokens=tokens)


def gather_strings_of(ix: Index, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signal strings of term ids, as (bytes uint8, offsets int64[len + 1])."""
    offsets, data = ix.strings_of(terms)  # checked first: open checks only the offsets' ends
    return data, offsets


def _live_chunks(snap: Snapshot, chunk_docs: int) -> Iterator[tuple[int, np.ndarray]]:
    """(segment, live document numbers) in chunks of at most `chunk_docs`, segment after segment."""
    for s, (ix, d) in enumerate(zip(snap.indexes, snap.deletions, strict=True)):
        for lo in range(0, ix.n_docs, chunk_docs):
            docs = np.arange(lo, min(lo + chunk_docs, ix.n_docs), dtype=np.int64)
            if d is not None:
                docs = docs[~d.mask[docs]]
            if docs.shape[0]:
                yield s, docs


def compact_segment(writer: IndexWriter | ScratchStaging, snap: Snapshot, chunk_docs: int, workers: int,
                     quiet: bool) -> tuple[Path, Manifest]:
    """One staged segment of every live document of `snap`: the build's runs and merge, fed from
    the segments' forward indexes instead of text (no re-tokenising, no re-capping)."""
    import pyarrow as pa
    from tqdm import tqdm

    from . import __version__
    from .format import write_manifest
    from .hashing import hash_mask
    from .indexing.builder import MAX_SEED_ATTEMPTS
    from .indexing.doc_ids import write_id_files
    from .indexing.merge import merge_runs, write_forward
    from .indexing.runs import HashCollision, RunInfo, write_run

    base = snap.indexes[0].manifest
    keep_tf = base.scoring == "bm25"
    seed = base.signals.hash.seed
    mask = hash_mask(base.signals.hash.bits)
    seeds_tried: list[dict[str, Any]] = []
    started = time.time()
    while True:
        tmp = writer.staging()
        run_dir = tmp / "runs"
        run_dir.mkdir()
        runs: list[RunInfo] = []
        ids: list[Any] = []
        n_docs = 0

        def process(index: int, s: int, docs: np.ndarray, first: int, seed: int = seed,
                    run_dir: Path = run_dir) -> RunInfo:
            batch = _forward_batch(snap.indexes[s], docs, keep_tf)
            return write_run(run_dir, index, batch, first, seed, mask, keep_tf)

        store = texts = None
        if base.doc_store is not None:  # --store-text: the live documents' texts, in the new numbering
            from .docstore import DocStore, DocStoreWriter

            store, texts = DocStoreWriter(tmp), [DocStore(ix) for ix in snap.indexes]
        total = sum(ix.n_docs - (0 if d is None else d.count) for ix, d in zip(snap.indexes, snap.deletions,
                                                                                strict=True))
        bar = tqdm(total=total, desc="ssr compact: invert", unit=" docs", unit_scale=True, disable=quiet,
                   file=sys.stderr)
        pending: deque[Future[RunInfo]] = deque()
        try:
            with make_pool(workers, "ssr-compact") as pool:
                try:
                    for s, docs in _live_chunks(snap, chunk_docs):
                        ids.append(_ids_of(snap.indexes[s], docs))
                        if store is not None and texts is not None:
                            store.add_rows(texts[s].rows(docs))
                        pending.append(pool.submit(process, len(runs) + len(pending), s, docs, n_docs))
                        n_docs += docs.shape[0]
                        while len(pending) > workers:
                            runs.append(pending.popleft().result())
                            bar.update(runs[-1].n_docs)
                    while pending:
                        runs.append(pending.popleft().result())
                        bar.update(runs[-1].n_docs)
                finally:
                    for f in pending:
                        f.cancel()
            break
        except HashCollision as exc:
            seeds_tried.append({"seed": seed, "collision": [exc.first, exc.second]})
            writer.discard(tmp)
            if len(seeds_tried) >= MAX_SEED_ATTEMPTS:
                raise SsrError(f"compact: signal hash collisions under {MAX_SEED_ATTEMPTS} seeds; last: {exc}") \
                    from exc
            seed += 1
        finally:
            bar.close()
    doc_store = store.close() if store is not None else None
    if n_docs == 0:
        raise SsrError(f"{snap.root}: every document is deleted; nothing to compact into (add documents first)")
    entries = sum(r.n_terms for r in runs)
    with tqdm(total=entries, desc="ssr compact: merge", unit=" terms", unit_scale=True, disable=quiet,
              file=sys.stderr) as merge_bar:
        n_terms, n_postings = merge_runs(run_dir, tmp, runs, keep_tf, merge_bar.update)
    write_forward(run_dir, tmp, runs, keep_lengths=keep_tf, n_terms=n_terms)
    shutil.rmtree(run_dir)
    all_ids = pa.chunked_array(ids, type=pa.string()).combine_chunks()
    id_info = write_id_files(tmp, all_ids)
    write_id_table(tmp, all_ids)
    counts = {"documents": n_docs, "terms": n_terms, "postings": n_postings,
              "empty_documents": sum(r.empty_docs for r in runs)}
    names = [ref.name for ref in snap.commit.segments]
    source = {"path": f"compaction of {', '.join(names)} (generation {snap.generation})", "format": "segments",
              "bytes": 0, "lines_skipped": 0, "compacted_from": names, "generation": snap.generation}
    manifest = _derived_manifest(base, counts, id_info, source, seed, seeds_tried, {
        "ssr_engine_version": __version__, "operation": "compact", "chunk_docs": chunk_docs, "workers": workers,
        "runs": len(runs), "seconds": round(time.time() - started, 3), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    manifest = replace(manifest, doc_store=doc_store)
    write_manifest(tmp, manifest)
    return tmp, manifest


def _ids_of(ix: Index, docs: np.ndarray) -> Any:
    import pyarrow as pa

    ix._load_ids()
    return ix._id_arrow.take(pa.array(docs))
