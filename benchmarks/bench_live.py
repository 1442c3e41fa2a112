"""Live indexes at scale: exactness and speed of add / delete / compact (issue 14).

    exact  --collection C --queries Q --work DIR [--parts 10] [--delete 0.05] [-k 10 1000] [--no-merge] [--keep K]
           [--live L ...]
        Build C as `parts` segments (one build, then parts - 1 `LiveIndex.add`s; `--no-merge`: without the
        merge policy, so `parts` segments stay), deleting a fraction
        of the live ids after each add; build the live documents fresh; compare every query's top k
        (ids, score bits, matches). Then q/s of the live index, of it compacted, and of the fresh build.
        `--keep K`: copy the live index to K before compacting it (for `qps`).
        `--live L [L2 ...]`: existing live indexes of C's documents instead: one fresh build, the comparisons.
    big    --collection C --work DIR [--docs 1000] [--rounds 3] [--compact] [--live-tsv F]
        On the whole collection (8.8M): time a fresh build (unless DIR/idx exists), then `rounds` times:
        add `docs` new documents until a reopened Searcher sees them (round 0: the index's first change;
        `kernels_compiled`: kernels Numba compiled meanwhile, not loaded from its cache: a first run's
        cost, not the change's), and delete `docs` ids (`kernels_compiled` too); then
        compaction; `--live-tsv`: then (untimed) write the live documents, for `fresh`.
    fresh  --collection F --out DIR [--compacted C] [--queries Q]
        Time a fresh build of F (the live documents `big --live-tsv` wrote); with C and Q, the first
        500 queries' top 1000 compared with the compacted index (ids, score bits, matches).

    qps    --live L --compacted C --queries Q [-k 10 1000] [--limit N] [--repeat 2] [--seconds 1]
        Existing indexes: a live one and the same documents compacted (or built fresh). For each k:
        every query's top k compared (ids, score bits, matches), then q/s of each, alternating, `repeat`
        times (wall and per CPU second of this process), each timing the batch repeated back to back for
        `seconds` (the mean call; 0: one call).

Run under `flock /tmp/ssr-bench.lock`. Prints JSON lines.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from numba.core.event import install_recorder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ssr_engine import build_index  # noqa: E402
from ssr_engine.eval.trec import read_queries  # noqa: E402
from ssr_engine.live import LiveIndex, open_snapshot  # noqa: E402
from ssr_engine.search import Searcher  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness.measure import seconds_per_call  # noqa: E402
from partsbench import emit, identical, timed  # noqa: E402


def split(collection: Path, work: Path, parts: int) -> list[Path]:
    with open(collection, "rb") as f:
        n = sum(1 for _ in f)
    size = -(-n // parts)
    paths = [work / f"part{i:02d}.tsv" for i in range(parts)]
    with open(collection, "rb") as f:
        for p in paths:
            with open(p, "wb") as out:
                for _ in range(size):
                    line = f.readline()
                    if not line:
                        break
                    out.write(line)
    return paths


def ids_of(path: Path) -> list[str]:
    with open(path, "rb") as f:
        return [line.split(b"\t", 1)[0].decode() for line in f]


def qps(searcher: Searcher, queries: list[str], k: int, threads: int, seconds: float = 0.0) -> dict:
    """Queries per second of wall time and per CPU second of this process (all its threads): on a
    shared machine the second is the steadier ratio. `seconds` > 0: the batch is searched back to back
    until that long has passed (a short batch alone is too noisy to compare) and the mean call is reported
    (`calls`, `seconds_per_call`); else one call."""
    searcher.search_batch(queries[:256], k, threads=threads)  # warm
    if seconds <= 0:
        wall, cpu, _ = timed(lambda: searcher.search_batch(queries, k, threads=threads), 1)
        return {"qps": round(len(queries) / wall, 1), "qps_per_cpu_second": round(len(queries) / cpu, 1)}
    c = time.process_time()
    wall, calls = seconds_per_call(lambda: searcher.search_batch(queries, k, threads=threads), seconds)
    cpu = (time.process_time() - c) / calls
    return {"qps": round(len(queries) / wall, 1), "qps_per_cpu_second": round(len(queries) / cpu, 1),
            "calls": calls, "seconds_per_call": round(wall, 5)}


def same_results(a: Searcher, b: Searcher, queries: list[str], k: int) -> int:
    """How many queries' top k are identical (ids, score bits, matches) in a and b."""
    same = 0
    for start in range(0, len(queries), 1024):
        chunk = queries[start : start + 1024]
        same += sum(identical(x, y, docs=False) for x, y in zip(a.search_batch(chunk, k), b.search_batch(chunk, k),
                                                                strict=True))
    return same


def live_ids(index: Path) -> set[str]:
    """The ids of an index's live documents (every segment's ids minus its deleted ones)."""
    from ssr_engine.live import open_snapshot

    snap = open_snapshot(index)
    try:
        out: set[str] = set()
        for part in snap.parts():
            keep = np.arange(part.n_docs) if part.deleted is None else np.flatnonzero(~part.deleted)
            out.update(part.index.ids_of(keep).tolist())
        return out
    finally:
        snap.close()


def exact(args: argparse.Namespace) -> None:
    if args.live:  # existing live indexes (made as below): only the fresh build and the comparison
        return exact_of([Path(p) for p in args.live], args)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rng = random.Random(args.seed)
    paths = split(Path(args.collection), work, args.parts)
    index = work / "live"
    t = time.perf_counter()
    build_index(paths[0], index, quiet=True)
    emit(step="build part 0", seconds=round(time.perf_counter() - t, 2))
    live: list[str] = ids_of(paths[0])
    deleted: set[str] = set()
    writer = LiveIndex(index, merge=not args.no_merge)
    for i, p in enumerate(paths[1:], 1):
        r = writer.add(collection=p)
        live += ids_of(p)
        emit(step=f"add part {i}", docs=r["added"], seconds=r["seconds"],
             merges=[{k: m.get(k) for k in ("merged", "documents", "seconds", "postponed") if k in m}
                     for m in r["merges"]])
        if args.delete:
            alive = [x for x in live if x not in deleted]
            gone = rng.sample(alive, int(args.delete * len(ids_of(p))))
            r = writer.delete(gone)
            deleted.update(gone)
            emit(step=f"delete after part {i}", deleted=r["deleted"], unknown=r["unknown"], seconds=r["seconds"])
    emit(step="live", **{k: v for k, v in writer.info().items() if k != "segments"},
         segments=len(writer.info()["segments"]))
    fresh_tsv = work / "fresh.tsv"
    with open(args.collection, "rb") as f, open(fresh_tsv, "wb") as out:
        for line in f:
            if line.split(b"\t", 1)[0].decode() not in deleted:
                out.write(line)
    t = time.perf_counter()
    fresh = build_index(fresh_tsv, work / "fresh", quiet=True)
    emit(step="fresh build of the live documents", seconds=round(time.perf_counter() - t, 2))
    queries = list(read_queries(args.queries).values())
    a, b = Searcher(index), Searcher(fresh)
    for k in args.k:
        same = same_results(a, b, queries, k)
        emit(step="compare", queries=len(queries), k=k, identical=same, different=len(queries) - same)
    k = args.k[-1]
    emit(step="qps live", segments=args.parts, **qps(a, queries, k, args.threads))
    if args.keep:  # compaction below changes the live index in place: keep a copy for `qps`
        shutil.copytree(index, args.keep)
    t = time.perf_counter()
    r = writer.compact()
    emit(step="compact", seconds=round(time.perf_counter() - t, 2), documents=r["documents"], dropped=r["dropped"])
    a.reopen()
    emit(step="qps compacted", **qps(a, queries, k, args.threads))
    emit(step="qps fresh", **qps(b, queries, k, args.threads))
    emit(step="compacted vs fresh", identical=same_results(a, b, queries[:500], k), of=500)


def exact_of(indexes: list[Path], args: argparse.Namespace) -> None:
    """`exact`'s check of existing live indexes of the same live documents: one fresh build of them, every
    query compared with each."""
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    keep = live_ids(indexes[0])
    for index in indexes:
        emit(step="live", index=str(index), documents=len(keep), segments=len(LiveIndex(index).info()["segments"]))
        assert live_ids(index) == keep, f"{index}: other live documents than {indexes[0]}"
    fresh_tsv, fresh = work / "fresh.tsv", work / "fresh"
    with open(args.collection, "rb") as f, open(fresh_tsv, "wb") as out:
        for line in f:
            if line.split(b"\t", 1)[0].decode() in keep:
                out.write(line)
    t = time.perf_counter()
    build_index(fresh_tsv, fresh, quiet=True, force=True)
    emit(step="fresh build of the live documents", seconds=round(time.perf_counter() - t, 2))
    queries = list(read_queries(args.queries).values())
    b = Searcher(fresh)
    for index in indexes:
        a = Searcher(index)
        for k in args.k:
            same = same_results(a, b, queries, k)
            emit(step="compare", index=str(index), queries=len(queries), k=k, identical=same,
                 different=len(queries) - same)


def compare_qps(args: argparse.Namespace) -> None:
    queries = list(read_queries(args.queries).values())[: args.limit]
    live, compacted = Searcher(args.live), Searcher(args.compacted)
    emit(step="open", live_docs=live.n_docs, compacted_docs=compacted.n_docs,
         segments=len(LiveIndex(args.live).info()["segments"]))
    for k in args.k:
        emit(step="compare", queries=len(queries), k=k, identical=same_results(live, compacted, queries, k))
        for round_ in range(args.repeat):
            a = qps(live, queries, k, args.threads, args.seconds)
            b = qps(compacted, queries, k, args.threads, args.seconds)
            emit(step="qps", k=k, round=round_, live=a, compacted=b, ratio_wall=round(a["qps"] / b["qps"], 3),
                 ratio_cpu=round(a["qps_per_cpu_second"] / b["qps_per_cpu_second"], 3))


class Steps:
    """Wall seconds spent in a few of `ssr_engine.live`'s steps (wrapped in place, for this benchmark only):
    where a delete's time goes (look-up, deletion stats from the forward rows, the file, the commit)."""

    NAMES = ("LiveIndex._find", "add_deletions", "write_deletes", "_commit", "open_snapshot")

    def __init__(self) -> None:
        import ssr_engine.live as live

        self.seconds: dict[str, float] = {}
        for name in self.NAMES:
            owner, attr = (live.LiveIndex, name.split(".")[1]) if "." in name else (live, name)
            setattr(owner, attr, self._timed(name, getattr(owner, attr)))

    def _timed(self, name: str, fn):
        def run(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t
        return run

    def take(self) -> dict[str, float]:
        out = {k: round(v, 3) for k, v in self.seconds.items()}
        self.seconds.clear()
        return out


def big(args: argparse.Namespace) -> None:
    steps = Steps()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    index = work / "idx"
    rng = np.random.default_rng(args.seed)
    if not index.exists():
        t = time.perf_counter()
        build_index(args.collection, index, quiet=True)
        emit(step="fresh build", seconds=round(time.perf_counter() - t, 2))
    searcher = Searcher(index)
    emit(step="open", docs=searcher.n_docs)
    with open(args.collection, "rb") as f:
        sample = [f.readline().split(b"\t", 1)[1].decode().strip() for _ in range(20_000)]
    writer = LiveIndex(index)  # round 0's add is the index's first change: it reads the base segment's ids
    n = searcher.n_docs
    gone: set[str] = set()
    new_docs: dict[str, str] = {}
    next_id = 10**8 + args.seed * 10**7  # a later run (another seed) adds new ids
    for round_ in range(args.rounds):
        docs = [(str(next_id + i), sample[int(j)]) for i, j in enumerate(rng.integers(0, len(sample), args.docs))]
        next_id += args.docs
        t, c = time.perf_counter(), time.process_time()
        with install_recorder("numba:compile") as compiles:  # a kernel compiled, not loaded from Numba's cache
            r = writer.add(docs)
            added = time.perf_counter() - t
            searcher.reopen()
        visible, visible_cpu = time.perf_counter() - t, time.process_time() - c
        hit = searcher.search(docs[0][1], 10_000)  # the check below is not part of the change's time
        assert docs[0][0] in hit.ids.tolist(), "added document not found"
        emit(step="first change: add" if round_ == 0 else "add", round=round_, docs=args.docs,
             add_seconds=round(added, 3),
             visible_seconds=round(visible, 3), visible_cpu_seconds=round(visible_cpu, 3),
             live=searcher.n_docs, steps=steps.take(), kernels_compiled=len(compiles.buffer) // 2)
        victims = [str(x) for x in rng.choice(n, args.docs, replace=False)]
        t, c = time.perf_counter(), time.process_time()
        with install_recorder("numba:compile") as compiles:
            r = writer.delete(victims)
            deleted = time.perf_counter() - t
            searcher.reopen()
        emit(step="delete", round=round_, deleted=r["deleted"], unknown=r["unknown"], seconds=round(deleted, 3),
             visible_seconds=round(time.perf_counter() - t, 3), visible_cpu_seconds=round(time.process_time() - c, 3),
             live=searcher.n_docs, steps=steps.take(), kernels_compiled=len(compiles.buffer) // 2)
        gone.update(victims)
        new_docs.update(docs)
    if args.compact:
        t, c = time.perf_counter(), time.process_time()
        r = writer.compact()
        emit(step="compact", seconds=round(time.perf_counter() - t, 2), cpu_seconds=round(time.process_time() - c, 1),
             documents=r["documents"], dropped=r["dropped"], segments_before=r["segments_before"],
             max_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
    if args.live_tsv:
        # ids deleted before they were added again are none here: added ids are new, victims are base ids
        with open(args.collection, "rb") as f, open(args.live_tsv, "wb") as out:
            for line in f:
                if line.split(b"\t", 1)[0].decode() not in gone:
                    out.write(line)
            for doc_id, text in new_docs.items():
                out.write(f"{doc_id}\t{text}\n".encode())
        emit(step="live documents written", path=args.live_tsv, deleted=len(gone), added=len(new_docs))


def fresh(args: argparse.Namespace) -> None:
    t, c = time.perf_counter(), time.process_time()
    build_index(args.collection, args.out, quiet=True)
    emit(step="fresh build", seconds=round(time.perf_counter() - t, 2), cpu_seconds=round(time.process_time() - c, 1),
         max_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
    if args.compacted:  # compaction keeps the live documents' order: the same arrays as this build's
        a, b = open_snapshot(args.compacted), open_snapshot(args.out)
        files = {n: r.sha256 for n, r in b.indexes[0].manifest.files.items()}
        got = {n: r.sha256 for n, r in a.indexes[0].manifest.files.items() if n in files}
        emit(step="compacted vs fresh: files", compared=sorted(files), differ=sorted(n for n in files
                                                                                     if got.get(n) != files[n]))
        a.close()
        b.close()
    if args.compacted and args.queries:
        queries = list(read_queries(args.queries).values())[:500]
        emit(step="compacted vs fresh", k=1000, of=len(queries),
             identical=same_results(Searcher(args.compacted), Searcher(args.out), queries, 1000))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("exact")
    e.add_argument("--collection", required=True)
    e.add_argument("--queries", required=True)
    e.add_argument("--work", required=True)
    e.add_argument("--parts", type=int, default=10)
    e.add_argument("--delete", type=float, default=0.05)
    e.add_argument("-k", type=int, nargs="+", default=[1000], help="top k compared (q/s: the last)")
    e.add_argument("--live", nargs="+", help="existing live indexes of the same documents (from --collection): "
                   "check them alone")
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--no-merge", action="store_true", help="keep every added segment (no merge policy)")
    e.add_argument("--keep", help="copy the live index here before it is compacted")
    b = sub.add_parser("big")
    b.add_argument("--collection", required=True)
    b.add_argument("--work", required=True)
    b.add_argument("--docs", type=int, default=1000)
    b.add_argument("--rounds", type=int, default=3)
    b.add_argument("--compact", action="store_true")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--live-tsv")
    f = sub.add_parser("fresh")
    f.add_argument("--collection", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--compacted")
    f.add_argument("--queries")
    c = sub.add_parser("qps")
    c.add_argument("--live", required=True)
    c.add_argument("--compacted", required=True)
    c.add_argument("--queries", required=True)
    c.add_argument("-k", type=int, nargs="+", default=[10, 1000])
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--limit", type=int, default=None)
    c.add_argument("--repeat", type=int, default=2)
    c.add_argument("--seconds", type=float, default=1.0, help="each timing repeats the batch back to back this "
                   "long and reports the mean call (0: one call)")
    args = p.parse_args()
    {"exact": exact, "big": big, "qps": compare_qps, "fresh": fresh}[args.cmd](args)


if __name__ == "__main__":
    main()
