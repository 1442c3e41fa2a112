"""`build_index`: the whole build, written into a staging segment inside the index directory
and published by a commit point at the end (`generations.IndexWriter`), so that readers see the
old generation or the new one, never a partial one, and a crash leaves the old one openable.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import os_errors
from ..corpus import ITERABLE_LABEL, ByteRange, is_dataset
from ..docstore import DocStoreWriter
from ..errors import InputError, SsrError
from ..extract import Extractor
from ..format import Counts, HashSettings, Manifest, SignalSettings, write_manifest
from ..generations import IndexWriter
from ..hashing import HASH_NAME, hash_mask
from ..inputs import CHUNK_DOCS, starts_with_bom
from ..signals import DEFAULT_CAP
from ..stopwords import StopwordList, load_stopwords, resolve_stopwords
from ..version import __version__
from .doc_ids import DocIdTable
from .invert import Inverted, invert
from .merge import merge_runs, write_forward
from .pools import pool as make_pool
from .pools import serial_call
from .runs import HashCollision, MemoryRuns, Work
from .strings import encode_strings

MAX_SEED_ATTEMPTS = 8
# input bytes up to which a file's build keeps its runs in memory (`runs.MemoryRuns`): a live index's small
# write (an agent registry's one-card PUT) then makes no temporary files, and its work arrays stay ~10x this
RUNS_IN_MEMORY = 1 << 20
MAX_LISTED_BAD_LINES = 1000


def build_index(
    collection: str | os.PathLike[str] | ByteRange | Iterable[Any],
    out: str | os.PathLike[str],
    *,
    fmt: str = "auto",
    header: bool = False,
    stopwords: str | os.PathLike[str] | StopwordList | frozenset[str] | None = None,
    cap: int = DEFAULT_CAP,
    chunk_docs: int = CHUNK_DOCS,
    workers: int | None = None,
    skip_bad_lines: bool = False,
    force: bool = False,
    scoring: str = "ssr",
    stem: bool = False,
    quiet: bool = False,
    hash_seed: int = 0,
    hash_bits: int = 64,
    store_text: bool = False,
    extra_files: dict[str, tuple[str | os.PathLike[str], str]] | None = None,
    term_hashes: str | os.PathLike[str] | None = None,
) -> Path:
    """Build an index of `collection` into the directory `out`.

    `collection`: a file (MS MARCO TSV, `header=True` to skip a header line, or JSONL: ours, BEIR,
    Pyserini; gzip/bzip2/xz/zstd recognised by content), an `"irds:NAME"` ir_datasets id, or any
    iterable of documents: (id, text) pairs, dicts ({"id", "text"}, {"_id", "title", "text"},
    {"id", "contents"}, {"id", "fields"}) or objects with `doc_id` and `text`. A title is a field
    of its own: bigrams never span title and body. `store_text` keeps every document's text in a
    compressed store (`docstore`), for `Searcher.doc` and `ssr search --show-text`.

    scoring="ssr": binary signals (capped unigrams + bigrams); scoring="bm25": unigram term
    frequencies and document lengths (no cap, no bigrams; optional Porter stemming).
    On a hash collision the build starts again with the next seed (recorded in the manifest).
    `out` is created, or replaced (a new generation) only when it is an ssr index and `force` is
    given; anything else there is refused and left alone (`generations.IndexWriter`).
    `extra_files` maps a file name to (source path, format id): each source is moved into the new
    segment and registered in its manifest (an agent registry's card store).
    `term_hashes`: also write every term's full signal hash (uint64[V], term id order; the vocabulary
    keeps 32 bits of it) to this .npy file, outside the index (a sharded build's weight table reads it).
    """
    started = time.time()
    if isinstance(collection, ByteRange):
        pass  # one shard's lines of a file (distributed.build)
    elif isinstance(collection, (str, os.PathLike)) and not is_dataset(collection):
        collection = Path(collection)
    elif not is_dataset(collection):
        try:
            one_shot = iter(collection) is collection  # type: ignore[arg-type]
        except TypeError:
            raise SsrError(f"collection: expected a path, 'irds:NAME' or an iterable of documents, "
                           f"got {type(collection).__name__}") from None
        if one_shot:
            collection = _OneShot(collection)  # type: ignore[arg-type]
    out = Path(out).absolute()
    config = BuildConfig.checked(fmt=fmt, header=header, stopwords=stopwords, cap=cap, chunk_docs=chunk_docs,
                                 workers=workers, skip_bad_lines=skip_bad_lines, scoring=scoring, stem=stem,
                                 quiet=quiet, hash_bits=hash_bits, store_text=store_text)
    bom = isinstance(collection, Path) and collection.is_file() and starts_with_bom(collection)
    if bom and not quiet:
        print(f"ssr: {collection}: a UTF-8 byte order mark starts the file; stripped (not part of the first id)",
              file=sys.stderr)

    def refuse(exc: HashCollision, tried: list[dict[str, Any]]) -> None:
        if isinstance(collection, _OneShot):
            raise SsrError(f"signal hash collision ({exc}); a rebuild with another seed must read the "
                           "documents again: pass a list or a file, not a one-shot iterator") from exc
        if len(tried) >= MAX_SEED_ATTEMPTS:
            raise SsrError(f"{_source_label(collection)}: signal hash collisions under {MAX_SEED_ATTEMPTS} seeds "
                           f"(hash of {hash_bits} bits); last: {exc}") from exc
        if not quiet:
            print(f"ssr: {exc}; rebuilding with hash seed {tried[-1]['seed'] + 1}", file=sys.stderr)

    with os_errors(out), IndexWriter(out, force) as writer:
        tmp, stats, seed, seeds_tried = build_seeded(writer, collection, config, hash_seed, refuse,
                                                     None if term_hashes is None else Path(term_hashes))
        for name, (source, _) in (extra_files or {}).items():
            shutil.move(os.fspath(source), os.fspath(tmp / name))
        if bom:
            stats["input"]["utf8_bom_stripped"] = True
        documents = stats["counts"]["documents"]
        manifest = _manifest(config, stats, seed, seeds_tried, started, extra_files or {})
        write_manifest(tmp, manifest)
        writer.commit([(tmp, documents)])
    return out


def build_seeded(writer: Any, source: Any, config: BuildConfig, seed: int,
                 refuse: Callable[[HashCollision, list[dict[str, Any]]], None],
                 term_hashes: Path | None = None) -> tuple[Path, dict[str, Any], int, list[dict[str, Any]]]:
    """Build `source` into a staging folder of `writer` (`IndexWriter` or a scratch stager), a signal hash
    collision retried with the next seed; `refuse(collision, seeds tried)` raises when no retry may follow.
    `term_hashes`: where the terms' full hashes go too (`build_index`).
    Returns (the folder, the build's stats, the seed used, the seeds tried: {"seed", "collision"} each)."""
    seeds_tried: list[dict[str, Any]] = []
    while True:
        tmp = writer.staging()
        try:
            return tmp, _build_into(tmp, source, config, seed, term_hashes), seed, seeds_tried
        except HashCollision as exc:
            seeds_tried.append({"seed": seed, "collision": [exc.first, exc.second]})
            writer.discard(tmp)
            refuse(exc, seeds_tried)
            seed += 1


def _manifest(config: BuildConfig, stats: dict[str, Any], seed: int, seeds_tried: list[dict[str, Any]],
              started: float, extra_files: dict[str, tuple[str | os.PathLike[str], str]]) -> Manifest:
    """The manifest of a finished build (the index files' checksums are added by `write_manifest`)."""
    return Manifest(
        scoring=config.scoring,
        counts=Counts(**stats.pop("counts")),
        signals=SignalSettings(
            stopwords_id=config.stop.id,
            stopwords_sha256=config.stop.sha256,
            stopwords=tuple(sorted(config.stop.words)),
            cap=config.cap if config.scoring == "ssr" else None,
            bigrams=config.scoring == "ssr",
            stem=config.stem,
            hash=HashSettings(
                name=HASH_NAME,
                seed=seed,
                bits=config.hash_bits,
                collision_policy=f"detected at build by comparing strings; re-seed (seed + 1) and rebuild, "
                f"at most {MAX_SEED_ATTEMPTS} seeds",
                collisions=tuple(seeds_tried),
            ),
        ),
        ids=stats.pop("ids"),
        input=stats.pop("input"),
        doc_store=stats.pop("doc_store") if config.store_text else None,
        build={
            "ssr_engine_version": __version__,
            "chunk_docs": config.chunk_docs,
            "workers": config.workers,
            "runs": stats.pop("runs"),
            "phase_seconds": stats.pop("phases"),
            "seconds": round(time.time() - started, 3),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        extra_files={name: kind for name, (_, kind) in extra_files.items()},
    )


@dataclass(frozen=True)
class BuildConfig:
    """Every setting of one build but the hash seed (which changes on a collision), checked."""

    fmt: str
    header: bool
    stop: StopwordList
    cap: int
    chunk_docs: int
    workers: int
    skip_bad_lines: bool
    scoring: str
    stem: bool
    quiet: bool
    hash_bits: int
    store_text: bool

    @classmethod
    def checked(cls, *, stopwords: str | os.PathLike[str] | StopwordList | frozenset[str] | None,
                workers: int | None, **options: Any) -> BuildConfig:
        """The options of `build_index`, validated (`SsrError` naming the bad one); workers None: all cores."""
        scoring, stem = options["scoring"], options["stem"]
        if scoring not in ("ssr", "bm25"):
            raise SsrError(f"unknown scoring {scoring!r} (expected ssr or bm25)")
        if stem and scoring != "bm25":
            raise SsrError("stemming applies to BM25 indexes only (--scoring bm25)")
        if options["cap"] < 1:
            raise SsrError(f"cap must be >= 1, got {options['cap']}")
        if options["chunk_docs"] < 1:
            raise SsrError(f"chunk_docs must be >= 1, got {options['chunk_docs']}")
        workers = workers or os.cpu_count() or 1
        if workers < 1:
            raise SsrError(f"workers must be >= 1, got {workers}")
        stop = load_stopwords(stopwords) if isinstance(stopwords, (str, os.PathLike)) else resolve_stopwords(stopwords)
        return cls(stop=stop, workers=workers, **options)

    @property
    def keep_tf(self) -> bool:
        """BM25 indexes keep term frequencies and document lengths; SSR signals are binary."""
        return self.scoring == "bm25"

    def extractor(self) -> Extractor:
        ssr = self.scoring == "ssr"
        return Extractor(self.stop, self.cap if ssr else None, bigrams=ssr)


class _PhaseClock:
    """Wall seconds of the build's phases, for the manifest (where a build's time goes)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = round(now - self._last, 3)
        self._last = now


def _timed(fn: Callable[..., Any], *args: Any) -> float:
    """fn(*args)'s wall seconds (a phase run beside others)."""
    start = time.perf_counter()
    fn(*args)
    return round(time.perf_counter() - start, 3)


class _OneShot:
    """A one-shot iterator of documents (iterable once; a hash collision cannot restart it)."""

    def __init__(self, it: Iterator[Any]):
        self.it = it

    def __iter__(self) -> Iterator[Any]:
        return self.it


def _source_label(collection: Any) -> str:
    if isinstance(collection, (Path, ByteRange)):
        return str(collection)
    if is_dataset(collection):
        return str(collection)
    return ITERABLE_LABEL


def _build_into(tmp: Path, collection: Any, config: BuildConfig, seed: int,
                term_hashes: Path | None = None) -> dict[str, Any]:
    """Invert the collection into runs, merge them into the index files in `tmp`; the manifest's parts."""
    from tqdm import tqdm

    run_dir: Work = MemoryRuns() if _small_file(collection) else tmp / "runs"
    if isinstance(run_dir, Path):
        run_dir.mkdir()
    label = _source_label(collection)
    ids = DocIdTable(label)
    store = DocStoreWriter(tmp) if config.store_text else None
    clock = _PhaseClock()
    inverted = invert(collection, config, seed, run_dir, ids, store)
    clock.lap("invert")
    runs = inverted.runs
    if inverted.n_docs == 0:
        raise InputError(label, None, "empty collection: no documents")
    if inverted.n_docs >= 2**32:
        raise InputError(label, None, f"{inverted.n_docs} documents: more than uint32 doc ids can address")

    total_entries = sum(r.n_terms for r in runs)
    with tqdm(total=total_entries, desc="ssr build: merge", unit=" terms", unit_scale=True, disable=config.quiet,
              file=sys.stderr) as merge_bar:
        n_terms, n_postings = merge_runs(run_dir, tmp, runs, config.keep_tf, merge_bar.update, config.workers,
                                         strings=False, n_docs=inverted.n_docs, hashes_to=term_hashes)
    clock.lap("merge")
    # the strings step (one core for most of it) reads the merge's string table, the forward step the
    # runs: independent, so the strings run beside the forward rows. Not beside the ids (their table
    # and sort): together they passed 2 GiB at 8.8M (benchmarks/RESULTS.md). One worker (a live index's
    # small write): both on this thread, the kernels serial when small (`pools`)
    with make_pool(config.workers, "ssr-strings") as pool:
        strings = pool.submit(_timed, serial_call, n_terms, encode_strings, run_dir, tmp, seed,
                              int(hash_mask(config.hash_bits)))
        write_forward(run_dir, tmp, runs, keep_lengths=config.keep_tf, n_terms=n_terms, workers=config.workers)
        clock.lap("forward")
        clock.phases["strings"] = strings.result()  # its own seconds, overlapped with the forward rows
        clock.lap("strings_wait")
        # the runs are read no more: removed beside the id files (at 8.8M removing 13 GB of runs took 3.9 s
        # of wall and 0.5 of CPU, waiting on the file system)
        removed = pool.submit(_timed, shutil.rmtree, run_dir) if isinstance(run_dir, Path) else None
        id_info, id_array = ids.finish(tmp)
        clock.lap("ids")
        if removed is not None:
            clock.phases["remove_runs"] = removed.result()
        clock.lap("remove_runs_wait")
    return {
        "counts": {
            "documents": inverted.n_docs,
            "terms": n_terms,
            "postings": n_postings,
            "empty_documents": sum(r.empty_docs for r in runs),
        },
        "ids": id_info,
        "id_array": id_array,  # row = document (a live segment's id table is made from it, not read back)
        "input": _input_info(collection, config, label, inverted),
        "runs": len(runs),
        "phases": clock.phases,
        **({"doc_store": store.close()} if store is not None else {}),
    }


def _small_file(collection: Any) -> bool:
    """Whether `collection` is an uncompressed file of at most `RUNS_IN_MEMORY` bytes (its runs are then
    kept in memory; a compressed file's text may be any size)."""
    from ..inputs import sniff_compression

    try:
        return (isinstance(collection, Path) and collection.is_file()
                and collection.stat().st_size <= RUNS_IN_MEMORY and sniff_compression(collection) is None)
    except (OSError, InputError):  # unreadable: the reading step says so, naming it
        return False


def _input_info(collection: Path | str | ByteRange | Iterable[Any], config: BuildConfig, label: str,
                inverted: Inverted) -> dict[str, Any]:
    """The manifest's `input` section: where the documents came from and what was skipped."""
    is_file = isinstance(collection, (Path, ByteRange))
    info: dict[str, Any] = {}
    if isinstance(collection, ByteRange):  # a shard: its lines' numbers count from the range's start
        info["byte_range"] = [collection.start, collection.end]
        collection = collection.path
    return {
        "path": str(collection.absolute()) if isinstance(collection, Path) else label,
        "format": config.fmt if is_file else ("irds" if is_dataset(collection) else "python"),
        "header": config.header,
        "bytes": collection.stat().st_size if isinstance(collection, Path) else inverted.input_bytes,
        **info,
        "lines_skipped": len(inverted.bad),
        "skipped": [{"line": b.line, "reason": b.reason} for b in inverted.bad[:MAX_LISTED_BAD_LINES]],
    }
