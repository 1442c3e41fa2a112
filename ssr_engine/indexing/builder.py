"""`build_index`: the whole build, written into a temporary sibling directory and renamed
into place at the end, so that an interrupted build never leaves something that opens.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..corpus import ITERABLE_LABEL, BadLine, Chunk, is_dataset, read_collection
from ..docstore import DocStoreWriter
from ..errors import InputError, SsrError
from ..extract import Extractor, SignalBatch
from ..format import MANIFEST, read_manifest, write_manifest
from ..hashing import HASH_NAME, hash_mask
from ..signals import DEFAULT_CAP
from ..stopwords import StopwordList, load_stopwords, resolve_stopwords
from .doc_ids import DocIdTable
from .merge import merge_runs, write_forward
from .runs import HashCollision, RunInfo, write_run

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
            one_shot = iter(collection) is collection
        except TypeError:
            raise SsrError(f"collection: expected a path, 'irds:NAME' or an iterable of documents, "
                           f"got {type(collection).__name__}") from None
        if one_shot:
            collection = _OneShot(collection)  # type: ignore[arg-type]
    out = Path(out).absolute()
    if scoring not in ("ssr", "bm25"):
        raise SsrError(f"unknown scoring {scoring!r} (expected ssr or bm25)")
    if stem and scoring != "bm25":
        raise SsrError("stemming applies to BM25 indexes only (--scoring bm25)")
    if cap < 1:
        raise SsrError(f"cap must be >= 1, got {cap}")
    if chunk_docs < 1:
        raise SsrError(f"chunk_docs must be >= 1, got {chunk_docs}")
    workers = workers or os.cpu_count() or 1
    if workers < 1:
        raise SsrError(f"workers must be >= 1, got {workers}")
    if isinstance(stopwords, (str, os.PathLike)):
        stop = load_stopwords(stopwords)
    else:
        stop = resolve_stopwords(stopwords)
    _check_target(out, force)
    _remove_stale_builds(out)
    tmp = out.parent / f".{out.name}.building-{os.getpid()}-{time.time_ns()}"
    seeds_tried: list[dict[str, Any]] = []
    seed = hash_seed
    try:
        while True:
            tmp.mkdir(parents=True)
            try:
                stats = _build_into(
                    tmp, collection, fmt, stop, cap, chunk_docs, workers, skip_bad_lines, scoring, stem, quiet,
                    seed, hash_bits, header, store_text,
                )
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
        manifest = {
            "scoring": scoring,
            "counts": stats.pop("counts"),
            "signals": {
                "stopwords_id": stop.id,
                "stopwords_sha256": stop.sha256,
                "stopwords": sorted(stop.words),
                "cap": cap if scoring == "ssr" else None,
                "bigrams": scoring == "ssr",
                "stem": stem,
                "hash": {
                    "name": HASH_NAME,
                    "seed": seed,
                    "bits": hash_bits,
                    "collision_policy": f"detected at build by comparing strings; re-seed (seed + 1) and rebuild, "
                    f"at most {MAX_SEED_ATTEMPTS} seeds",
                    "collisions": seeds_tried,
                },
            },
            "ids": stats.pop("ids"),
            "input": stats.pop("input"),
            **({"doc_store": stats.pop("doc_store")} if store_text else {}),
            "build": {
                "ssr_engine_version": __version__,
                "chunk_docs": chunk_docs,
                "workers": workers,
                "runs": stats.pop("runs"),
                "seconds": round(time.time() - started, 3),
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
        }
        write_manifest(tmp, manifest)
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


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


def _source_total(collection: Any) -> tuple[int | None, str]:
    """(total, unit) for the invert progress bar: input bytes of a file, documents where known."""
    if isinstance(collection, Path):
        return (collection.stat().st_size, "B") if collection.is_file() else (None, "B")
    if is_dataset(collection):
        from ..corpus import irds_dataset

        try:
            return int(irds_dataset(str(collection)).docs_count()), "docs"
        except (TypeError, ValueError, AttributeError):
            return None, "docs"
    try:
        return len(collection), "docs"
    except TypeError:
        return None, "docs"


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


def _stemmed_batch(chunk: Chunk, stop: StopwordList) -> SignalBatch:
    """BM25 terms through Python tokenisation and PyStemmer (the slow, optional path)."""
    from collections import Counter

    from ..signals import value_tokens
    from ..stemming import stem_tokens

    doc_offsets = [0]
    chunks: list[bytes] = []
    offsets = [0]
    counts: list[int] = []
    tokens_per_doc: list[int] = []
    for d in range(chunk.n_docs):
        tokens: list[str] = []
        for v in range(int(chunk.doc_values[d]), int(chunk.doc_values[d + 1])):
            raw = chunk.data[chunk.value_starts[v] : chunk.value_ends[v]].tobytes().decode("utf-8")
            tokens.extend(value_tokens(raw, stop.words))
        tf = Counter(stem_tokens(tokens))
        for term in sorted(tf):
            b = term.encode("utf-8")
            chunks.append(b)
            offsets.append(offsets[-1] + len(b))
            counts.append(tf[term])
        doc_offsets.append(len(counts))
        tokens_per_doc.append(len(tokens))
    return SignalBatch(
        doc_offsets=np.array(doc_offsets, dtype=np.int64),
        data=np.frombuffer(b"".join(chunks), dtype=np.uint8),
        offsets=np.array(offsets, dtype=np.int64),
        is_bigram=np.zeros(len(counts), dtype=bool),
        counts=np.array(counts, dtype=np.uint32),
        doc_tokens=np.array(tokens_per_doc, dtype=np.int64),
    )


def _build_into(
    tmp: Path,
    collection: Path | str | Iterable[Any],
    fmt: str,
    stop: StopwordList,
    cap: int,
    chunk_docs: int,
    workers: int,
    skip_bad_lines: bool,
    scoring: str,
    stem: bool,
    quiet: bool,
    seed: int,
    hash_bits: int,
    header: bool = False,
    store_text: bool = False,
) -> dict[str, Any]:
    from tqdm import tqdm

    keep_tf = scoring == "bm25"
    extractor = Extractor(stop, cap if scoring == "ssr" else None, bigrams=scoring == "ssr")
    mask = hash_mask(hash_bits)
    run_dir = tmp / "runs"
    run_dir.mkdir()
    label = _source_label(collection)
    ids = DocIdTable(label)
    store = DocStoreWriter(tmp) if store_text else None
    bad: list[BadLine] = []
    runs: list[RunInfo] = []
    n_docs = 0

    def process(index: int, chunk: Chunk, first_doc: int) -> RunInfo:
        if stem:
            batch = _stemmed_batch(chunk, stop)
        else:
            batch = extractor.extract(chunk.data, chunk.value_starts, chunk.value_ends, chunk.doc_values)
        return write_run(run_dir, index, batch, first_doc, seed, mask, keep_tf)

    total, unit = _source_total(collection)
    # a file's bar counts input bytes (its total is known; documents are not), the others documents
    bar = tqdm(desc="ssr build: invert", total=total, unit=unit if unit == "B" else " docs", unit_scale=True,
               unit_divisor=1024 if unit == "B" else 1000, disable=quiet, file=sys.stderr)
    pending: deque[tuple[Future[RunInfo], int]] = deque()
    done_docs = 0
    input_bytes = 0

    def finish_one() -> None:
        nonlocal done_docs
        future, pos = pending.popleft()
        run = future.result()
        runs.append(run)
        done_docs += run.n_docs
        bar.update((pos - bar.n) if unit == "B" else run.n_docs)
        if unit == "B":
            bar.set_postfix_str(f"{done_docs:,} docs", refresh=False)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ssr-invert") as pool:
        try:
            for chunk in read_collection(collection, fmt, chunk_docs, skip_bad_lines, header):
                bad.extend(chunk.bad)
                input_bytes = chunk.source_pos
                chunk = ids.add(chunk, skip_bad_lines, bad)
                if chunk.n_docs == 0:
                    continue
                if store is not None:
                    store.add(chunk)  # main thread, in id order
                pending.append((pool.submit(process, len(runs) + len(pending), chunk, n_docs), chunk.source_pos))
                n_docs += chunk.n_docs
                while len(pending) > workers:  # bounded: at most workers + 1 chunks in memory
                    finish_one()
            while pending:
                finish_one()
        finally:
            for f, _ in pending:
                f.cancel()
            bar.close()
    if n_docs == 0:
        raise InputError(label, None, "empty collection: no documents")
    if n_docs >= 2**32:
        raise InputError(label, None, f"{n_docs} documents: more than uint32 doc ids can address")

    total_entries = sum(r.n_terms for r in runs)
    with tqdm(total=total_entries, desc="ssr build: merge", unit=" terms", unit_scale=True, disable=quiet,
              file=sys.stderr) as merge_bar:
        n_terms, n_postings = merge_runs(run_dir, tmp, runs, keep_tf, merge_bar.update)
    write_forward(run_dir, tmp, runs, keep_lengths=keep_tf)
    id_info = ids.finish(tmp)
    shutil.rmtree(run_dir)
    return {
        "counts": {
            "documents": n_docs,
            "terms": n_terms,
            "postings": n_postings,
            "empty_documents": sum(r.empty_docs for r in runs),
        },
        "ids": id_info,
        "input": {
            "path": str(collection.absolute()) if isinstance(collection, Path) else label,
            "format": fmt if isinstance(collection, Path) else ("irds" if is_dataset(collection) else "python"),
            "header": header,
            "bytes": collection.stat().st_size if isinstance(collection, Path) else input_bytes,
            "lines_skipped": len(bad),
            "skipped": [{"line": b.line, "reason": b.reason} for b in bad[:MAX_LISTED_BAD_LINES]],
        },
        "runs": len(runs),
        **({"doc_store": store.close()} if store is not None else {}),
    }
