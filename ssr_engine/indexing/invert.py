"""The invert phase of a build: chunks of documents -> signals -> one sorted run file per chunk.

Chunks are read in the calling thread and inverted by a thread pool: the kernels release the
GIL (`nogil=True`), so threads run them in parallel without copying chunks between processes;
at most `workers + 1` chunks are in memory.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..corpus import BadLine, Chunk, is_dataset, read_collection
from ..docstore import DocStoreWriter
from ..extract import SignalBatch
from ..hashing import hash_mask
from ..stopwords import StopwordList
from .doc_ids import DocIdTable
from .pools import pool as make_pool
from .runs import RunInfo, Work, write_run

if TYPE_CHECKING:
    from .builder import BuildConfig


@dataclass
class Inverted:
    """What the invert phase leaves: the runs in order, skipped lines, documents and input bytes read."""

    runs: list[RunInfo]
    bad: list[BadLine]
    n_docs: int
    input_bytes: int


def invert(collection: Path | str | Iterable[Any], config: BuildConfig, seed: int, run_dir: Work,
            ids: DocIdTable, store: DocStoreWriter | None) -> Inverted:
    """Read chunks in this thread, invert them into runs on a thread pool (the kernels release the
    GIL); at most `workers + 1` chunks are in memory."""
    extractor = config.extractor()
    mask = hash_mask(config.hash_bits)
    result = Inverted([], [], 0, 0)

    def process(index: int, chunk: Chunk, first_doc: int) -> RunInfo:
        if config.stem:
            batch = stemmed_batch(chunk, config.stop)
        else:
            batch = extractor.extract(chunk.data, chunk.value_starts, chunk.value_ends, chunk.doc_values)
        return write_run(run_dir, index, batch, first_doc, seed, mask, config.keep_tf)

    bar = InvertBar(collection, config.quiet)
    pending: deque[tuple[Future[RunInfo], int]] = deque()

    def finish_one() -> None:
        future, pos = pending.popleft()
        run = future.result()
        result.runs.append(run)
        bar.advance(pos, run.n_docs)

    with _interrupts_at_checkpoints() as checkpoint, \
            make_pool(config.workers, "ssr-invert") as pool:
        try:
            for chunk in read_collection(collection, config.fmt, config.chunk_docs, config.skip_bad_lines,
                                         config.header):
                result.bad.extend(chunk.bad)
                result.input_bytes = chunk.source_pos
                chunk = ids.add(chunk, config.skip_bad_lines, result.bad)
                if chunk.n_docs == 0:
                    continue
                if store is not None:
                    store.add(chunk)  # main thread, in id order
                index = len(result.runs) + len(pending)
                pending.append((pool.submit(process, index, chunk, result.n_docs), chunk.source_pos))
                result.n_docs += chunk.n_docs
                checkpoint()
                while len(pending) > config.workers:  # bounded: at most workers + 1 chunks in memory
                    finish_one()
                    checkpoint()
            while pending:
                finish_one()
                checkpoint()
            ids.seal()
        finally:
            for f, _ in pending:
                f.cancel()
            bar.close()
    return result


@contextmanager
def _interrupts_at_checkpoints() -> Iterator[Callable[[], None]]:
    """Turn Ctrl-C into a KeyboardInterrupt raised at the loop's own checkpoints.

    Why: CPython can raise KeyboardInterrupt between a lock's acquire and the `with` block that
    releases it; inside ThreadPoolExecutor's bookkeeping that leaves a lock held, and the build
    then hangs for ever in the pool's shutdown. So SIGINT only sets a flag while the pool runs,
    and the interrupt is raised where no lock is held (and once more after the pool has closed).
    Outside the main thread, or when SIGINT is not Python's default handler, nothing changes.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield lambda: None
        return
    hits: list[int] = []

    def checkpoint() -> None:
        if hits:
            hits.clear()
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, lambda signum, frame: hits.append(signum))
    try:
        yield checkpoint
    finally:
        signal.signal(signal.SIGINT, previous)
    checkpoint()


class InvertBar:
    """The invert progress bar: a file's counts input bytes (its total is known; documents are
    not), any other source's documents."""

    def __init__(self, collection: Path | str | Iterable[Any], quiet: bool):
        from tqdm import tqdm

        total, self.unit = _source_total(collection)
        by_bytes = self.unit == "B"
        self.bar = tqdm(desc="ssr build: invert", total=total, unit="B" if by_bytes else " docs", unit_scale=True,
                        unit_divisor=1024 if by_bytes else 1000, disable=quiet, file=sys.stderr)
        self.docs = 0

    def advance(self, source_pos: int, n_docs: int) -> None:
        self.docs += n_docs
        if self.unit == "B":
            self.bar.update(source_pos - self.bar.n)
            self.bar.set_postfix_str(f"{self.docs:,} docs", refresh=False)
        else:
            self.bar.update(n_docs)

    def close(self) -> None:
        self.bar.close()


def stemmed_batch(chunk: Chunk, stop: StopwordList) -> SignalBatch:
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


def _source_total(collection: Any) -> tuple[int | None, str]:
    """(total, unit) for the invert progress bar: input bytes of a file, documents where known."""
    if isinstance(collection, Path):
        return (collection.stat().st_size, "B") if collection.is_file() else (None, "B")
    if is_dataset(collection):
        from ..inputs import irds_dataset

        try:
            return int(irds_dataset(str(collection)).docs_count()), "docs"
        except (TypeError, ValueError, AttributeError):
            return None, "docs"
    try:
        return len(collection), "docs"
    except TypeError:
        return None, "docs"
