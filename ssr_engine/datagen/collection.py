"""Seeded, streaming generator of MS MARCO-shaped collections (any size, default 8,841,823).

Model (all randomness from one seed; the text of a block depends only on the seed and the
block number, so output is byte-identical whatever the number of worker processes):

- A passage has a topic (Pareto-popular among `topics`) and a length in words drawn from a
  log-normal (median ~49, mean ~56, clipped to 3..360, MS MARCO's shape).
- Each word slot is a function word (stopwords plus a few frequent non-stopwords, at natural
  English rates) or the next content token.
- Content tokens walk the topic's phrase graph: a topic has `phrases` recurring phrases of 1-4
  words drawn from the topic's own vocabulary; after a phrase the walk follows one of the
  phrase's successors (so phrase junctions recur too), jumps to a fresh popular phrase, or
  emits a free token: a word of the global Zipfian vocabulary (long tail, keeps growing with
  size), a number, or a name. Bigrams therefore repeat across passages as in topical text,
  and the tail supplies millions of rare words.
- Vocabulary ranks: rank r < len(real words) is a real English word (lower-case words of 3+
  letters from a word list, 4-7 letter words at the frequent ranks; capitalised entries become
  names); above that, a synthetic pronounceable word spelled from r in base-len(SYLLABLES)
  syllables. With no word list every word is synthetic; the output is then still deterministic,
  and different (the word list's sha256 is recorded in stats.json).
- Queries (MS MARCO shape, ~5 words): a window of 1-5 content words of the target passage,
  sometimes one dropped, sometimes an extra word from another passage, inside a question
  template ("what is {}", "how much does {} cost", "{} definition", ...).
- Planting: the passage at a real qrel's pid is a generated passage with the real query's words
  (leading question words dropped) inserted in order, sometimes split once by generated words.

The text kernel is Numba with its own splitmix64 stream per block (platform independent);
queries and planted passages are built in Python from the generated text with NumPy
Generators seeded from (seed, qid) or (seed, pid). Same seed, word list and NumPy version
=> byte-identical files.

Modules: `model` (the shape parameters and the vocabulary tables), `stream` (the Numba text stream of
one block), `queries` (queries written from passages, real queries planted), and this one, the driver
(blocks in order on a pool of processes, the files, stats.json). Together they are one versioned
generator (GENERATOR_ID): a change to any of them changes every collection generated.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..atomic import atomic_write, write_text
from ..errors import SsrError
from .model import DEFAULT_WORDLIST, Shape, Vocabulary
from .queries import content_words, make_query, plant_passage, read_plants
from .stream import generate_block

GENERATOR_ID = "ssr-synthetic-v1"
MSMARCO_PASSAGES = 8_841_823
MSMARCO_DEV_QUERIES = 6_980
BLOCK = 16_384  # passages per block: fixed, so a collection is a prefix of any larger one


def block_seed(seed: int, block: int) -> int:
    """The kernel's 63-bit stream seed for one block (a SeedSequence of the seed and the block)."""
    return int(np.random.SeedSequence([seed, block, 0x55]).generate_state(1, np.uint64)[0]) >> 1


@dataclass
class _Job:
    block: int
    pid0: int
    n: int
    targets: list[tuple[int, int]]  # (qid, pid) for generated queries
    plants: dict[int, list[str]]  # pid -> real query texts to plant


_STATE: dict[str, object] = {}


def _init_worker(seed: int, wordlist: str | None, shape: Shape) -> None:
    vocab = Vocabulary.load(wordlist)
    _STATE.update(seed=seed, vocab=vocab, tables=vocab.tables(), prm=shape.as_array())


def _run_job(job: _Job) -> tuple[int, bytes, list[tuple[int, int, str]], np.ndarray, np.ndarray]:
    seed = int(_STATE["seed"])  # type: ignore[call-overload]
    buf, line_off, ranks, lengths = generate_block(job.pid0, job.n, block_seed(seed, job.block), _STATE["prm"],
                                                   *_STATE["tables"])  # type: ignore[misc]
    queries: list[tuple[int, int, str]] = []
    data = buf.tobytes()
    off = line_off.tolist()

    def line_text(pid: int) -> str:
        i = pid - job.pid0
        line = data[off[i] : off[i + 1]].decode("ascii")
        return line.split("\t", 1)[1].rstrip("\n")

    for qid, pid in job.targets:
        rng = np.random.default_rng([seed, 0x51, qid])
        # the extra (noise) word comes from another passage of the same block
        noise = content_words(line_text(job.pid0 + int(rng.integers(0, job.n))))
        queries.append((qid, pid, make_query(line_text(pid), rng, noise)))
    if job.plants:
        pieces = []
        prev = 0
        for pid in sorted(job.plants):
            i = pid - job.pid0
            rng = np.random.default_rng([seed, 0x50, pid])
            text = plant_passage(line_text(pid), job.plants[pid], rng)
            lengths[i] = len(text.split())
            pieces.append(data[prev : off[i]])
            pieces.append(f"{pid}\t{text}\n".encode())
            prev = off[i + 1]
        pieces.append(data[prev:])
        data = b"".join(pieces)
    return job.block, data, queries, lengths, np.unique(ranks).astype(np.int64)



def default_queries(passages: int) -> int:
    """6,980 (MS MARCO dev-small) from 1M passages up; else 1,000 (or one per passage)."""
    return MSMARCO_DEV_QUERIES if passages >= 1_000_000 else min(1000, passages)


def generate(
    out: str | Path,
    passages: int = MSMARCO_PASSAGES,
    seed: int = 1,
    queries: int | None = None,
    plant_queries: str | Path | None = None,
    plant_qrels: str | Path | None = None,
    wordlist: str | Path | None = DEFAULT_WORDLIST,
    workers: int = 2,
    shape: Shape | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Write collection.tsv, queries.tsv, qrels.tsv and stats.json into `out`; return the stats.

    Memory is bounded by a few blocks whatever `passages` is; files are written as blocks finish,
    in order, into `*.tmp` names renamed at the end.
    """
    if passages < 1:
        raise SsrError(f"--passages must be >= 1, got {passages}")
    if (plant_queries is None) != (plant_qrels is None):
        raise SsrError("--plant-queries and --plant-qrels go together")
    shape = shape or Shape()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    vocab = Vocabulary.load(wordlist)
    wl = None if wordlist is None else str(wordlist)
    nblocks = (passages + BLOCK - 1) // BLOCK
    targets: dict[int, list[tuple[int, int]]] = {}
    plants: dict[int, dict[int, list[str]]] = {}
    query_lines: list[tuple[str, str]] = []
    qrel_lines: list[tuple[str, str, int]] = []
    stats: dict = {"generator": GENERATOR_ID, "seed": seed, "passages": passages, "block": BLOCK,
                   "wordlist": vocab.source, "wordlist_sha256": vocab.digest,
                   "real_words": len(vocab.words), "real_names": len(vocab.names)}
    if plant_queries is not None:
        real_q, real_qrels = read_plants(plant_queries, plant_qrels)  # type: ignore[arg-type]
        kept_q: set[str] = set()
        skipped = 0
        for qid, pid, grade in real_qrels:
            p = int(pid)
            if p >= passages:
                skipped += 1
                continue
            kept_q.add(qid)
            qrel_lines.append((qid, str(p), grade))
            if grade > 0:
                plants.setdefault(p // BLOCK, {}).setdefault(p, []).append(real_q[qid])
        query_lines = [(qid, text) for qid, text in real_q.items() if qid in kept_q]
        stats["planted"] = {"queries_file": str(plant_queries), "qrels_file": str(plant_qrels),
                            "queries_read": len(real_q), "qrels_read": len(real_qrels),
                            "qrels_skipped_pid_out_of_range": skipped,
                            "queries_kept": len(query_lines), "qrels_kept": len(qrel_lines),
                            "passages_planted": sum(len(v) for v in plants.values())}
    else:
        nq = default_queries(passages) if queries is None else queries
        if not 0 <= nq <= passages:
            raise SsrError(f"--queries must be in 0..{passages}, got {nq}")
        rng = np.random.default_rng([seed, 0x51])
        chosen = rng.choice(passages, size=nq, replace=False) if nq else np.zeros(0, np.int64)
        for number, target in enumerate(chosen.tolist(), start=1):
            targets.setdefault(target // BLOCK, []).append((number, target))
    jobs = [_Job(b, b * BLOCK, min(BLOCK, passages - b * BLOCK), sorted(targets.get(b, []), key=lambda t: t[1]),
                 plants.get(b, {})) for b in range(nblocks)]  # small: targets and plants only

    hist = np.zeros(shape.length_max + 200, dtype=np.int64)
    total_words = 0
    seen = np.zeros(shape.global_max, dtype=np.bool_)
    generated: list[tuple[int, int, str]] = []
    size = 0
    with atomic_write(out / "collection.tsv", "wb") as fh:
        for block, data, qs, lengths, ranks in _map_jobs(jobs, seed, wl, shape, workers):
            fh.write(data)
            size += len(data)
            generated.extend(qs)
            np.add.at(hist, np.minimum(lengths, hist.shape[0] - 1), 1)
            total_words += int(lengths.sum())
            seen[ranks[ranks < seen.shape[0]]] = True
            if progress is not None:
                progress(min(BLOCK, passages - block * BLOCK))
    if plant_queries is None:
        generated.sort()
        query_lines = [(str(qid), text) for qid, _, text in generated]
        qrel_lines = [(str(qid), str(pid), 1) for qid, pid, _ in generated]
    write_text(out / "queries.tsv", "".join(f"{q}\t{t}\n" for q, t in query_lines))
    write_text(out / "qrels.tsv", "".join(f"{q} 0 {p} {g}\n" for q, p, g in qrel_lines))
    cdf = np.cumsum(hist) / max(1, hist.sum())
    stats.update({
        "queries": len(query_lines), "qrels": len(qrel_lines), "collection_bytes": size,
        "words": total_words, "words_per_passage_mean": round(total_words / passages, 3),
        "words_per_passage_median": int(np.searchsorted(cdf, 0.5)),
        "words_per_passage_p99": int(np.searchsorted(cdf, 0.99)),
        "words_per_passage_max": int(np.flatnonzero(hist).max()),
        "distinct_vocabulary_ranks": int(seen.sum()),
        "shape": asdict(shape),
    })
    write_text(out / "stats.json", json.dumps(stats, indent=2, sort_keys=True) + "\n")
    return stats




def _map_jobs(jobs: list[_Job], seed: int, wordlist: str | None, shape: Shape, workers: int):
    """Run jobs in order, in-process or on a pool with a bounded window (memory stays flat)."""
    if workers <= 1 or not isinstance(jobs, list) or len(jobs) == 1:
        _init_worker(seed, wordlist, shape)
        for job in jobs:
            yield _run_job(job)
        return
    import multiprocessing as mp
    from collections import deque

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    _init_worker(seed, wordlist, shape)  # compile (or load the cache) once before forking
    generate_block(0, 1, 1, _STATE["prm"], *_STATE["tables"])  # type: ignore[misc]
    with ctx.Pool(workers, initializer=_init_worker, initargs=(seed, wordlist, shape)) as pool:
        window: deque = deque()
        for job in jobs:
            window.append(pool.apply_async(_run_job, (job,)))
            if len(window) >= 2 * workers:
                yield window.popleft().get()
        while window:
            yield window.popleft().get()

