"""`build_index`: the whole build, written into a temporary sibling directory and renamed
into place at the end, so that an interrupted build never leaves something that opens.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..corpus import ITERABLE_LABEL, is_dataset
from ..docstore import DocStoreWriter
from ..errors import InputError, SsrError
from ..extract import Extractor
from ..format import MANIFEST, read_manifest, write_manifest
from ..hashing import HASH_NAME
from ..signals import DEFAULT_CAP
from ..stopwords import StopwordList, load_stopwords, resolve_stopwords
from ..version import __version__
from .doc_ids import DocIdTable
from .invert import Inverted, invert
from .merge import merge_runs, write_forward
from .runs import HashCollision

MAX_SEED_ATTEMPTS = 8
MAX_LISTED_BAD_LINES = 1000
_TMP_PATTERN = re.compile(r"^\.(?P<name>.+)\.building-(?P<pid>\d+)-\d+$")


def build_index(
    collection: str | os.PathLike[str] | Iterable[Any],
    out: str | os.PathLike[str],
    *,
    fmt: str = "auto",
    header: bool = False,
    stopwords: str | os.PathLike[str] | StopwordList | frozenset[str] | None = None,
    cap: int = DEFAULT_CAP,
    chunk_docs: int = 100_000,
    workers: int | None = None,
    skip_bad_lines: bool = False,
    force: bool = False,
    scoring: str = "ssr",
    stem: bool = False,
    quiet: bool = False,
    hash_seed: int = 0,
    hash_bits: int = 64,
    store_text: bool = False,
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
    """
    started = time.time()
    if isinstance(collection, (str, os.PathLike)) and not is_dataset(collection):
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
    _check_target(out, force)
    _remove_stale_builds(out)
    tmp = out.parent / f".{out.name}.building-{os.getpid()}-{time.time_ns()}"
    seeds_tried: list[dict[str, Any]] = []
    seed = hash_seed
    try:
        while True:
            tmp.mkdir(parents=True)
            try:
                stats = _build_into(tmp, collection, config, seed)
                break
            except HashCollision as exc:
                seeds_tried.append({"seed": seed, "collision": [exc.first, exc.second]})
                shutil.rmtree(tmp)
                if isinstance(collection, _OneShot):
                    raise SsrError(f"signal hash collision ({exc}); a rebuild with another seed must read the "
                                   "documents again: pass a list or a file, not a one-shot iterator") from exc
                if len(seeds_tried) >= MAX_SEED_ATTEMPTS:
                    raise SsrError(
                        f"{_source_label(collection)}: signal hash collisions under {MAX_SEED_ATTEMPTS} seeds "
                        f"(hash of {hash_bits} bits); last: {exc}"
                    ) from exc
                seed += 1
                if not quiet:
                    print(f"ssr: {exc}; rebuilding with hash seed {seed}", file=sys.stderr)
        manifest = _manifest(config, stats, seed, seeds_tried, started)
        write_manifest(tmp, manifest)
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _manifest(config: BuildConfig, stats: dict[str, Any], seed: int, seeds_tried: list[dict[str, Any]],
              started: float) -> dict[str, Any]:
    """The manifest of a finished build (the index files' checksums are added by `write_manifest`)."""
    return {
        "scoring": config.scoring,
        "counts": stats.pop("counts"),
        "signals": {
            "stopwords_id": config.stop.id,
            "stopwords_sha256": config.stop.sha256,
            "stopwords": sorted(config.stop.words),
            "cap": config.cap if config.scoring == "ssr" else None,
            "bigrams": config.scoring == "ssr",
            "stem": config.stem,
            "hash": {
                "name": HASH_NAME,
                "seed": seed,
                "bits": config.hash_bits,
                "collision_policy": f"detected at build by comparing strings; re-seed (seed + 1) and rebuild, "
                f"at most {MAX_SEED_ATTEMPTS} seeds",
                "collisions": seeds_tried,
            },
        },
        "ids": stats.pop("ids"),
        "input": stats.pop("input"),
        **({"doc_store": stats.pop("doc_store")} if config.store_text else {}),
        "build": {
            "ssr_engine_version": __version__,
            "chunk_docs": config.chunk_docs,
            "workers": config.workers,
            "runs": stats.pop("runs"),
            "seconds": round(time.time() - started, 3),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    }


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


class _OneShot:
    """A one-shot iterator of documents (iterable once; a hash collision cannot restart it)."""

    def __init__(self, it: Iterator[Any]):
        self.it = it

    def __iter__(self) -> Iterator[Any]:
        return self.it


def _source_label(collection: Any) -> str:
    if isinstance(collection, Path):
        return str(collection)
    if is_dataset(collection):
        return str(collection)
    return ITERABLE_LABEL


def _check_target(out: Path, force: bool) -> None:
    if not out.exists():
        return
    if not force:
        raise SsrError(f"{out}: already exists (use --force to replace it)")
    if out.is_dir() and (not any(out.iterdir()) or (out / MANIFEST).is_file()):
        if (out / MANIFEST).is_file():
            try:
                read_manifest(out)
            except SsrError:
                pass  # an index of another version, or corrupt: still ours to replace
        return
    raise SsrError(f"{out}: exists and is not an ssr index; refusing to replace it even with --force")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_builds(out: Path) -> None:
    """Delete what interrupted builds of the same target left (their process is gone)."""
    if not out.parent.is_dir():
        return
    for entry in out.parent.iterdir():
        m = _TMP_PATTERN.match(entry.name)
        if m and m.group("name") == out.name and not _pid_alive(int(m.group("pid"))):
            shutil.rmtree(entry, ignore_errors=True)


def _move_into_place(tmp: Path, out: Path) -> None:
    if out.exists():
        trash = out.parent / f".{out.name}.replaced-{os.getpid()}-{time.time_ns()}"
        os.rename(out, trash)
        os.rename(tmp, out)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp, out)


def _build_into(tmp: Path, collection: Any, config: BuildConfig, seed: int) -> dict[str, Any]:
    """Invert the collection into runs, merge them into the index files in `tmp`; the manifest's parts."""
    from tqdm import tqdm

    run_dir = tmp / "runs"
    run_dir.mkdir()
    label = _source_label(collection)
    ids = DocIdTable(label)
    store = DocStoreWriter(tmp) if config.store_text else None
    inverted = invert(collection, config, seed, run_dir, ids, store)
    runs = inverted.runs
    if inverted.n_docs == 0:
        raise InputError(label, None, "empty collection: no documents")
    if inverted.n_docs >= 2**32:
        raise InputError(label, None, f"{inverted.n_docs} documents: more than uint32 doc ids can address")

    total_entries = sum(r.n_terms for r in runs)
    with tqdm(total=total_entries, desc="ssr build: merge", unit=" terms", unit_scale=True, disable=config.quiet,
              file=sys.stderr) as merge_bar:
        n_terms, n_postings = merge_runs(run_dir, tmp, runs, config.keep_tf, merge_bar.update)
    write_forward(run_dir, tmp, runs, keep_lengths=config.keep_tf)
    id_info = ids.finish(tmp)
    shutil.rmtree(run_dir)
    return {
        "counts": {
            "documents": inverted.n_docs,
            "terms": n_terms,
            "postings": n_postings,
            "empty_documents": sum(r.empty_docs for r in runs),
        },
        "ids": id_info,
        "input": _input_info(collection, config, label, inverted),
        "runs": len(runs),
        **({"doc_store": store.close()} if store is not None else {}),
    }


def _input_info(collection: Path | str | Iterable[Any], config: BuildConfig, label: str,
                inverted: Inverted) -> dict[str, Any]:
    """The manifest's `input` section: where the documents came from and what was skipped."""
    is_file = isinstance(collection, Path)
    return {
        "path": str(collection.absolute()) if isinstance(collection, Path) else label,
        "format": config.fmt if is_file else ("irds" if is_dataset(collection) else "python"),
        "header": config.header,
        "bytes": collection.stat().st_size if isinstance(collection, Path) else inverted.input_bytes,
        "lines_skipped": len(inverted.bad),
        "skipped": [{"line": b.line, "reason": b.reason} for b in inverted.bad[:MAX_LISTED_BAD_LINES]],
    }
