"""Fault-injection campaign (issue 12): count outcomes over many corruptions, kills and races.

    python benchmarks/fault_campaign.py --work /tmp/faults [--docs 20000] [--flips 3] [--kills 6]
        [--races 3] [--seed 0] [--json out.json]

Cases, each run in a child process so that a crash (a signal, a traceback) is seen and counted:
  - targeted edits: for every array of an SSR and a BM25 index, values that break an invariant
    (offsets past the end or decreasing, ids >= N, unsorted vocabulary, a repeated rank, ...);
    the child opens the index and runs every method (inverted, scan, explain, pool sizes, BM25);
    expected: exit 2 from the child and from `ssr verify`;
  - byte flips: `--flips` random bit flips in every file (owner marker, commit point, manifest,
    arrays, tables); expected: `ssr verify` fails every time, the child never crashes (a flip
    that keeps every invariant may answer; verify is the content check);
  - kill -9 at random times during `--force` rebuilds (`--kills`): the index must open, verify
    clean and answer like the old or the new generation; a foreign file in the folder survives;
  - races: two builds into one new folder (`--races`): one exit 0, the other exit 2.
Prints a markdown table of the counts (crashes must be 0) and optionally writes JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

QUERIES = ["w1 w2 w3", "w5 w7 w11", "w0 w3", "w17"]

CHILD = """
import sys
from ssr_engine.errors import SsrError
from ssr_engine.format import open_index
from ssr_engine.retrieval import open_retriever
path = sys.argv[1]
queries = sys.argv[2:]
try:
    ix = open_index(path)
    methods = ("bm25",) if ix.scoring == "bm25" else ("ssr", "exhaustive")
    for m in methods:
        r = open_retriever(ix, m)
        res = r.search_batch(queries, 10)
        r.search_batch(queries, None)
        r.pool_sizes(queries)
        for q, hits in zip(queries, res):
            for d in hits.docs[:3].tolist():
                r.explain(q, int(d))
except SsrError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


def run(cmd: list[str], timeout: float = 600) -> tuple[int, str]:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr


def outcome(code: int, stderr: str) -> str:
    if code < 0:
        return f"crash (signal {-code})"
    if "Traceback" in stderr or code not in (0, 2):
        return "crash (traceback)"
    return "exit 2" if code == 2 else "exit 0"


def child(index: Path) -> str:
    return outcome(*run([sys.executable, "-c", CHILD, str(index), *QUERIES]))


def verify(index: Path) -> str:
    return outcome(*run([sys.executable, "-m", "ssr_engine", "verify", str(index)]))


def make_collection(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(2000)])
    zipf = np.minimum(rng.zipf(1.3, size=(n, 14)), 2000) - 1
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(f"{i}\t{' '.join(words[zipf[i]])}\n")
    return path


def segment(index: Path) -> Path:
    from ssr_engine.generations import read_commit

    commit = read_commit(index)
    assert commit is not None
    return index / commit.segments[0].name


def query_postings(index: Path) -> tuple[int, int]:
    """[a, b): the postings of the most frequent known term of the first query (read by every search)."""
    from ssr_engine.format import open_index
    from ssr_engine.retrieval import open_retriever

    ix = open_index(index)
    if ix.scoring == "bm25":
        terms = [t for t in (open_retriever(ix, "bm25").term_id(w) for w in QUERIES[0].split()) if t >= 0]
    else:
        terms = open_retriever(ix, "ssr").query_batch(QUERIES[:1]).terms.tolist()
    t = max(terms, key=lambda t: int(ix.postings_indptr[t + 1] - ix.postings_indptr[t]))
    return int(ix.postings_indptr[t]), int(ix.postings_indptr[t + 1])


def edits(index: Path, seg: Path, rnd: random.Random) -> list[tuple[str, str, int, int]]:
    """(case, array, position, value) of invariant-breaking edits for every array of the segment.

    Posting edits fall inside the postings the first query reads; the other arrays are read
    whole by open (offsets, vocabulary, doc_rank) or by the scan (forward terms).
    """
    out = []
    arrays = {p.stem: np.load(p, mmap_mode="r") for p in seg.glob("*.npy")}
    n = arrays["doc_rank"].shape[0]
    v = arrays["vocab"].shape[0]
    a_q, b_q = query_postings(index)
    for name, a in sorted(arrays.items()):
        size = a.shape[0]
        i = rnd.randrange(a_q, b_q - 1) if name in ("postings_docs", "postings_tf") else rnd.randrange(max(size - 1, 1))
        if name.endswith("indptr") or name == "signal_offsets":
            out += [(f"{name}[{i}] += 1e6", name, i, int(a[i]) + 1_000_000), (f"{name}[-1] -= 1", name, size - 1,
                                                                               int(a[-1]) - 1)]
        elif name == "postings_docs":
            out += [(f"{name}[{i}] = N", name, i, n), (f"{name}[{i}] = 2**32-1", name, i, 2**32 - 1),
                    (f"{name}[{i}] = {name}[{i}+1]", name, i, int(a[i + 1]))]
        elif name == "forward_terms":
            out += [(f"{name}[{i}] = V", name, i, v), (f"{name}[{i}] = {name}[{i}+1]", name, i, int(a[i + 1]))]
        elif name == "doc_rank":
            out += [(f"{name}[{i}] = {name}[{i}+1]", name, i, int(a[i + 1])), (f"{name}[{i}] = N", name, i, n)]
        elif name == "vocab":
            out += [(f"{name}[{i}] = {name}[{i}+1]", name, i, int(a[i + 1]))]
        elif name == "postings_tf":
            out += [(f"{name}[{i}] = 0", name, i, 0)]
    return out


def edit(seg: Path, name: str, pos: int, value: int) -> None:
    arr = np.load(seg / f"{name}.npy", mmap_mode="r+")
    arr[pos] = value
    arr.flush()
    del arr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (created; its content is replaced)")
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--flips", type=int, default=3, help="bit flips per file")
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--races", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from ssr_engine import build_index

    rnd = random.Random(args.seed)
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    coll = make_collection(work / "c.tsv", args.docs, args.seed)
    bases = {s: build_index(coll, work / f"base-{s}", scoring=s, quiet=True) for s in ("ssr", "bm25")}
    counts: dict[str, Counter[str]] = {k: Counter() for k in ("edit: search", "edit: verify", "flip: search",
                                                             "flip: verify", "kill -9", "race")}
    failures: list[str] = []
    started = time.time()
    for scoring, base in bases.items():
        for case, name, pos, value in edits(base, segment(base), rnd):
            if scoring == "bm25" and name == "forward_terms":
                continue  # BM25 never reads the forward index; verify alone covers it (flips below)
            w = work / "case"
            shutil.rmtree(w, ignore_errors=True)
            shutil.copytree(base, w)
            edit(segment(w), name, pos, value)
            s, v = child(w), verify(w)
            counts["edit: search"][s] += 1
            counts["edit: verify"][v] += 1
            if s != "exit 2" or v != "exit 2":
                failures.append(f"{scoring} {case}: search {s}, verify {v}")
        files = sorted(p.relative_to(base) for p in base.rglob("*") if p.is_file() and p.stat().st_size)
        for rel in files:
            for _ in range(args.flips):
                w = work / "case"
                shutil.rmtree(w, ignore_errors=True)
                shutil.copytree(base, w)
                raw = bytearray((w / rel).read_bytes())
                pos = rnd.randrange(len(raw))
                raw[pos] ^= 1 << rnd.randrange(8)
                (w / rel).write_bytes(bytes(raw))
                s, v = child(w), verify(w)
                counts["flip: search"][s] += 1
                counts["flip: verify"][v] += 1
                if s.startswith("crash") or v != "exit 2":
                    failures.append(f"{scoring} flip {rel}@{pos}: search {s}, verify {v}")
    other = make_collection(work / "other.tsv", args.docs, args.seed + 1)
    w = work / "kill"
    shutil.copytree(bases["ssr"], w)
    (w / "notes.txt").write_text("not the engine's")
    for _ in range(args.kills):
        src = other if rnd.random() < 0.5 else coll
        proc = subprocess.Popen([sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(src), "--out",
                                 str(w), "--force", "--quiet", "--chunk-docs", str(max(args.docs // 20, 1))],
                                stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0.3, 8.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        s, v = child(w), verify(w)
        ok = s == "exit 0" and v == "exit 0" and (w / "notes.txt").is_file()
        counts["kill -9"]["index opens and verifies" if ok else f"search {s}, verify {v}"] += 1
        if not ok:
            failures.append(f"kill: search {s}, verify {v}, notes kept {(w / 'notes.txt').is_file()}")
    for r in range(args.races):
        target = work / f"race-{r}"
        cmd = [sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(coll), "--out", str(target),
               "--quiet"]
        procs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        res = sorted(outcome(p.wait(), p.stderr.read() if p.stderr else "") for p in procs)
        counts["race"]["one exit 0, one exit 2" if res == ["exit 0", "exit 2"] else " / ".join(res)] += 1
    report = {"docs": args.docs, "seed": args.seed, "seconds": round(time.time() - started, 1),
              "counts": {k: dict(c) for k, c in counts.items()}, "failures": failures}
    print("| case | outcomes |\n|---|---|")
    for k, c in counts.items():
        print(f"| {k} | " + ", ".join(f"{o}: {n}" for o, n in sorted(c.items())) + " |")
    crashes = sum(n for c in counts.values() for o, n in c.items() if o.startswith("crash"))
    print(f"\ncrashes: {crashes}; failures: {len(failures)}")
    for f in failures:
        print("  " + f)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
