"""Fault-injection campaign (issue 12): count outcomes over many corruptions, kills and races.

(Over 400 lines on purpose: every kind of case shares the one child-process runner and the one tally that
counts a crash against the case it happened on; split, each part would import the other back.)

    python benchmarks/fault_campaign.py --work /tmp/faults [--docs 20000] [--flips 3] [--kills 6]
        [--live-kills 9] [--races 3] [--snapshots 2] [--provider-rounds 3] [--seed 0] [--json out.json]
        [--only index kill snapshot race provider]

Cases run in child processes, many to a child (`check_many`), so that a crash (a signal, a
traceback) is seen and counted against the case it happened on:
  - targeted edits: for every array of an SSR and a BM25 index, values that break an invariant
    (offsets past the end or decreasing, ids >= N, unsorted vocabulary, a repeated rank, ...) at
    entries the campaign's queries read (open reads the O(N) arrays and the O(V) arrays' ends; a
    lookup reads its terms' offsets and vocabulary blocks; the kernels their postings); the child
    opens the index and runs every method (inverted, scan, explain, pool sizes, BM25); expected:
    exit 2 from the child and from `ssr verify`. The same edits at random entries of the O(V)
    arrays are counted apart: a query that does not read them may answer, verify must fail;
  - byte flips: `--flips` random bit flips in every file (owner marker, commit point, manifest,
    arrays, tables); expected: `ssr verify` fails every time, the child never crashes (a flip
    that keeps every invariant may answer; verify is the content check);
  - every file cut to 0, 1, half and all but one of its bytes, and grown by 4,096 zero bytes (a
    SIGBUS would be a mapped page past a file's end): exit 2, or the intact index's answers;
  - every pair of files of an index swapped, every file replaced by the same file of an index of
    another collection (a file of the same size passes open: verify is the content check);
  - all of the above on a live index too (a second segment, a deletion file, an id table), and
    the SSR index cut or flipped under a live add and a live delete (the writer's paths);
  every search runs ssr, levels, union, maxscore (one-part indexes), exhaustive or bm25 at k=10
  and k=None with pool sizes and explain; an exit 0 is compared with the intact index's answers
  under the same action (`same answers` / `OTHER answers`; the latter listed as "silent" where
  only a checksum can tell); a case still running after `CASE_SECONDS` is a hang;
  - kill -9 at random times during `--force` rebuilds (`--kills`): the index must open, verify
    clean and answer like the old or the new generation; a foreign file in the folder survives;
  - kill -9 at random times during `ssr add`, `delete` and `compact` of a live index
    (`--live-kills`): the index opens at the old or the new commit, verifies clean and answers;
  - a Searcher opened before a `--force` rebuild (`--snapshots`) answers exactly as before while
    the rebuild runs and after it commits;
  - races: two builds into one new folder (`--races`): one exit 0, the other exit 2;
  - providers (`fault_providers.py`): redirects to another origin, dripping and oversized answers.
Prints a markdown table of the counts (crashes must be 0) and optionally writes JSON.

Why one script of ~590 lines: it is run as one command, and every case family shares the child
runner (`check_many`, `run`, `outcome`) and the counters.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from ssr_engine.generations import OWNER

QUERIES = ["w1 w2 w3", "w5 w7 w11", "w0 w3", "w17"]

CHILD = """
import contextlib, hashlib, io, json, signal, sys, traceback
from ssr_engine.cli import main
from ssr_engine.errors import SsrError
from ssr_engine.format import open_index
from ssr_engine.live import LiveIndex
from ssr_engine.retrieval import open_retriever

def search(path, live, queries, digest):
    scoring = "ssr" if live else open_index(path).scoring  # a live index opens by path only
    # maxscore refuses a live index of several parts by design (a clear SsrError, exit 2), so a live
    # index is searched by the methods that serve every index
    methods = ("bm25",) if scoring == "bm25" else ("ssr", "levels", "union", "exhaustive") if live else (
        "ssr", "levels", "union", "maxscore", "exhaustive")
    for m in methods:
        r = open_retriever(path if live else open_index(path), m)
        res = r.search_batch(queries, 10)
        every = r.search_batch(queries, None)
        digest.update(repr(r.pool_sizes(queries)).encode())
        for hits in (*res, *every):  # each method's answers, so one wrong method shows
            digest.update(m.encode() + repr(hits.ids.tolist()).encode() + hits.scores.tobytes())
        for q, hits in zip(queries, res):
            for d in hits.docs[:3].tolist():
                r.explain(q, int(d))

def act(path, live, action, queries, digest):
    if action[0] == "add":  # a live change to the (corrupted) index, then every method on the result
        LiveIndex(path, chunk_docs=200).add(collection=action[1])
    elif action[0] == "delete":
        LiveIndex(path).delete(action[1:])
    search(path, live or action[0] != "search", queries, digest)

def guarded(fn):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = fn()
        except SsrError as exc:
            print(exc, file=sys.stderr)
            code = 2
        except BaseException:
            traceback.print_exc()
            code = 1
    return code or 0, err.getvalue()

seconds, cases, queries = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3:]
for path, live, do_verify, action in cases:
    # re-armed per case at its default action (the process ends with SIGALRM): a kernel looping
    # without end never returns to Python, so no handler could run
    signal.alarm(seconds)
    digest = hashlib.sha256()
    row = {"search": guarded(lambda: act(path, live, action, queries, digest))}
    row["digest"] = digest.hexdigest() if row["search"][0] == 0 else None
    if do_verify:
        row["verify"] = guarded(lambda: main(["verify", path]))
    print(json.dumps(row), flush=True)
"""


def run(cmd: list[str], timeout: float = 1800, stdout: bool = False) -> tuple[int, str]:
    """(exit status, stderr; or stdout + stderr with `stdout`); a timeout is status -1000."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return -1000, f"timed out after {timeout} s: {str(exc.stderr or '')[-300:]}"
    return p.returncode, (p.stdout + p.stderr if stdout else p.stderr)


def outcome(code: int, stderr: str) -> str:
    if code in (-1000, -signal.SIGALRM):  # the child's per-case alarm (`CASE_SECONDS`) or the parent's timeout
        return "hang (timeout)"
    if code < 0:
        return f"crash (signal {-code})"
    if "Traceback" in stderr or code not in (0, 2):
        return "crash (traceback)"
    return "exit 2" if code == 2 else "exit 0"


CASE_SECONDS = 120  # a case still running after this is a hang: the child's alarm kills it (SIGALRM)
Case = tuple[Path, bool, bool, list[str]]  # (index, live, verify?, action: ["search"], ["add", tsv], ["delete", ids])


def check_many(cases: list[Case], seconds: int = CASE_SECONDS) -> list[tuple[str, str, str | None]]:
    """(search outcome, verify outcome or "", digest of every method's answers or None) per case, many
    cases per child process (one interpreter and Numba start for all); a child that dies (a signal, the
    per-case alarm after `seconds`) is counted a crash or a hang for the case it was on, and the rest run in a
    new child."""
    out: list[tuple[str, str, str | None]] = []
    while len(out) < len(cases):
        todo = cases[len(out):]
        code, text = run([sys.executable, "-c", CHILD, str(seconds),
                          json.dumps([[str(p), lv, v, a] for p, lv, v, a in todo]), *QUERIES],
                         timeout=300 + seconds * len(todo), stdout=True)
        rows = [json.loads(line) for line in text.splitlines() if line.startswith('{"search"')]
        for row in rows:
            out.append((outcome(*row["search"]), outcome(*row["verify"]) if "verify" in row else "", row["digest"]))
        if len(out) < len(cases):  # the child died (or hung) on case number len(out)
            if code == 0:
                raise RuntimeError(f"the child stopped early without an error: {text[-2000:]}")
            out.append((outcome(code if code < 0 else 1, text), "", None))
    return out


def child(index: Path, live: bool = False) -> str:
    return check_many([(index, live, False, ["search"])])[0][0]


def verify(index: Path) -> str:
    return outcome(*run([sys.executable, "-m", "ssr_engine", "verify", str(index)]))


def make_collection(path: Path, n: int, seed: int, prefix: str = "") -> Path:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(2000)])
    zipf = np.minimum(rng.zipf(1.3, size=(n, 14)), 2000) - 1
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(f"{prefix}{i}\t{' '.join(words[zipf[i]])}\n")
    return path


def segment(index: Path) -> Path:
    from ssr_engine.generations import read_commit

    commit = read_commit(index)
    assert commit is not None
    return index / commit.segments[0].name


def query_term(index: Path) -> int:
    """The most frequent known term of the first query (its entries are read by every search)."""
    from ssr_engine.format import open_index
    from ssr_engine.retrieval import open_retriever

    ix = open_index(index)
    if ix.scoring == "bm25":
        terms = [t for t in (open_retriever(ix, "bm25").term_id(w) for w in QUERIES[0].split()) if t >= 0]
    else:
        terms = open_retriever(ix, "ssr").query_batch(QUERIES[:1]).terms.tolist()
    return max(terms, key=lambda t: int(ix.df_of(np.array([t]))[0]))


def query_postings(index: Path) -> tuple[int, int]:
    """[a, b): the postings of `query_term`."""
    from ssr_engine.format import open_index

    ix, t = open_index(index), query_term(index)
    return ix.span(t)


def unread_edits(seg: Path, rnd: random.Random, k: int) -> list[tuple[str, str, int, int]]:
    """Invariant-breaking edits at random entries of the O(V) arrays, which a query may not read."""
    out = []
    for name in ("postings_indptr", "signal_offsets", "vocab"):
        a = np.load(seg / f"{name}.npy", mmap_mode="r")
        for _ in range(k):
            i = rnd.randrange(1, a.shape[0] - 2)
            # format 4's vocabulary keys may repeat: a descent (the largest key) breaks its order
            value = int(a[-1]) if name == "vocab" else int(a[i]) + 1_000_000
            out.append((f"{name}[{i}] (random entry)", name, i, value))
    return out


def edits(index: Path, seg: Path, rnd: random.Random) -> list[tuple[str, str, int, int]]:
    """(case, array, position, value) of invariant-breaking edits for every array of the segment.

    Posting edits fall inside the postings the first query reads; the other arrays are read
    whole by open (offsets, vocabulary, doc_rank) or by the scan (forward terms).
    """
    out = []
    from ssr_engine.format import open_index
    from ssr_engine.kernels.strings import parts

    arrays = {p.stem: np.load(p, mmap_mode="r") for p in seg.glob("*.npy")}
    n = arrays["forward_indptr"].shape[0] - 1  # doc_rank.npy is absent when the ids are in row order
    v = arrays["vocab"].shape[0]
    a_q, b_q = query_postings(index)
    t = query_term(index)
    for name, a in sorted(arrays.items()):
        size = a.shape[0]
        i = rnd.randrange(a_q, b_q - 1) if name in ("postings_docs", "postings_tf") else rnd.randrange(max(size - 1, 1))
        width = open_index(index).postings_width if name == "postings_docs" else 0
        if width:  # format 6: entries are words of packed doc ids (the word under posting i); edits garble 1-3 ids
            i = i * width // 32
        if name in ("postings_indptr", "vocab"):
            i = t  # the O(V) arrays are read per looked-up term: edit the query term's entries
        if name == "postings_indptr" and "postings_long" in arrays:  # format 7: offsets of the df != 1 terms only
            bits = np.unpackbits(np.asarray(arrays["postings_long"]).view(np.uint8), bitorder="little")
            i = int(bits[:t].sum())
        if name == "signal_offsets":  # the entry of the query term's (first) literal string (format 4)
            ix = open_index(index)
            i = int(parts(ix.signal_codes, ix.string_bits, t)[0])
        if name.endswith("indptr") or name == "signal_offsets":
            out += [(f"{name}[{i}] += 1e6", name, i, int(a[i]) + 1_000_000), (f"{name}[-1] -= 1", name, size - 1,
                                                                               int(a[-1]) - 1)]
        elif name == "postings_docs":
            out += [(f"{name}[{i}] = N", name, i, n), (f"{name}[{i}] = 2**32-1", name, i, 2**32 - 1),
                    (f"{name}[{i}] = {name}[{i}+1]", name, i, int(a[i + 1]))]
        elif name == "forward_terms":  # format 5: entries are words of packed term ids, the edits garble 1-3 ids
            out += [(f"{name}[{i}] = V", name, i, v), (f"{name}[{i}] = {name}[{i}+1]", name, i, int(a[i + 1]))]
        elif name == "doc_rank":
            out += [(f"{name}[{i}] = {name}[{i}+1]", name, i, int(a[i + 1])), (f"{name}[{i}] = N", name, i, n)]
        elif name == "vocab":  # format 4's keys may repeat: a descent (the largest key, or 0 at the end)
            out += [(f"{name}[{i}] = max", name, i, int(a[-1])) if int(a[i + 1]) < int(a[-1]) else
                    (f"{name}[{i}+1] = 0", name, i + 1, 0)]
        elif name == "postings_tf":
            out += [(f"{name}[{i}] = 0", name, i, 0)]
        elif name == "postings_long":  # format 7: one term's df-1 bit flipped
            out += [(f"{name}[{i}] ^= 1", name, i, int(a[i]) ^ 1)]
        elif name == "postings_rank":
            out += [(f"{name}[{i}] += 1", name, i, int(a[i]) + 1)]
    return out


def edit(seg: Path, name: str, pos: int, value: int) -> None:
    arr = np.load(seg / f"{name}.npy", mmap_mode="r+")
    arr[pos] = value
    arr.flush()
    del arr


LIVE_CHILD = """
import sys
from ssr_engine.live import LiveIndex
w = LiveIndex(sys.argv[1], chunk_docs=200)
print("ready", flush=True)
if sys.argv[2] == "add":
    w.add(collection=sys.argv[3])
elif sys.argv[2] == "delete":
    w.delete([str(i) for i in range(int(sys.argv[3]), int(sys.argv[3]) + 3000, 2)])
else:
    w.compact()
"""

SNAPSHOT_CHILD = """
import json, subprocess, sys
from ssr_engine.search import Searcher
index, other, queries = sys.argv[1], sys.argv[2], sys.argv[3:]
s = Searcher(index)
key = lambda res: [(r.ids.tolist(), r.scores.tobytes().hex()) for r in res]
want = key(s.search_batch(queries, 10))
proc = subprocess.Popen([sys.executable, "-m", "ssr_engine", "build-index", "--collection", other, "--out", index,
                         "--force", "--quiet"], stderr=subprocess.DEVNULL)
during = same = 0
while proc.poll() is None:
    during += 1
    same += key(s.search_batch(queries, 10)) == want
after = key(s.search_batch(queries, 10)) == want
fresh = key(Searcher(index).search_batch(queries, 10)) != want
print(json.dumps({"rebuild": proc.returncode, "during": during, "same": same, "after": after, "fresh": fresh}))
"""


def index_cases(args, rnd, work, bases, foreign, add_tsv, counts, failures) -> None:
    """Corruptions of both indexes: targeted edits, bit flips, truncations and growths of every file,
    every pair of files swapped, every file replaced by the same file of another index (`foreign`, built
    from another collection of as many documents); the SSR index truncated or flipped again under a live
    add and a live delete. Every case is copied first, then checked in batches; an exit 0 is compared
    with the intact index's answers under the same action (`same answers` or `OTHER answers`)."""
    cases: list[tuple[str, str, str, Path, list[str]]] = []  # (kind, label, scoring, folder, action)
    actions = {"search": ["search"], "add": ["add", str(add_tsv)], "delete": ["delete", *map(str, range(1, 40, 3))]}

    def case(kind: str, label: str, scoring: str, change, action: str = "search") -> None:
        w = fresh_copy(bases[scoring], work / f"case-{len(cases)}")
        change(w)
        if same_content(bases[scoring], w):  # another index's identical file, a JSON file's final newline cut
            counts[f"{kind}: no change"]["skipped"] += 1
            shutil.rmtree(w)
        else:
            cases.append((kind, label, scoring, w, actions[action]))

    for scoring, base in bases.items():
        seg = segment(base)
        targeted = [] if scoring == "live" else [(True, edits(base, seg, rnd)), (False, unread_edits(seg, rnd, 3))]
        for read, edit_list in targeted:
            for label, name, pos, value in edit_list:
                if scoring == "bm25" and name == "forward_terms":
                    continue  # BM25 never reads the forward index; verify alone covers it (flips below)
                case("edit" if read else "edit at a random O(V) entry", f"{scoring} {label}", scoring,
                     lambda w, name=name, pos=pos, value=value: edit(segment(w), name, pos, value))
        files = sorted(p.relative_to(base) for p in base.rglob("*") if p.is_file() and p.stat().st_size)
        for rel in files:
            size = (base / rel).stat().st_size
            for _ in range(args.flips):
                pos, bit = rnd.randrange(size), rnd.randrange(8)
                case("flip", f"{scoring} flip {rel}@{pos}", scoring,
                     lambda w, rel=rel, pos=pos, bit=bit: flip(w / rel, pos, bit))
            for cut in sorted({0, 1, size // 2, size - 1}):
                case("truncate", f"{scoring} {rel} cut to {cut} of {size} bytes", scoring,
                     lambda w, rel=rel, cut=cut: os.truncate(w / rel, cut))
            case("grow", f"{scoring} {rel} + 4096 zero bytes", scoring,
                 lambda w, rel=rel: grow(w / rel, 4096))
            # (another index's owner marker is as good as this one's: it says only that the engine made the folder)
            if scoring in foreign and (foreign[scoring] / rel).is_file() and rel.name != OWNER:
                case("foreign file", f"{scoring} {rel} from another index", scoring,
                     lambda w, rel=rel, src=foreign[scoring]: shutil.copyfile(src / rel, w / rel))
        for i, x in enumerate(files):
            for y in files[i + 1:]:
                case("swap", f"{scoring} {x} <-> {y}", scoring, lambda w, x=x, y=y: swap(w / x, w / y))
        if scoring == "ssr":
            for rel in files:
                size = (base / rel).stat().st_size
                pos, bit = rnd.randrange(size), rnd.randrange(8)
                for action in ("add", "delete"):
                    case(f"cut, then live {action}", f"{rel} cut to {size // 2}, {action}", scoring,
                         lambda w, rel=rel, cut=size // 2: os.truncate(w / rel, cut), action)
                    case(f"flip, then live {action}", f"{rel}@{pos} flipped, {action}", scoring,
                         lambda w, rel=rel, pos=pos, bit=bit: flip(w / rel, pos, bit), action)
    want = {}  # the intact index's answers under each action
    for scoring in bases:  # "live": the SSR index after a live add and a delete (three segments, deletions)
        for action in ("search", "add", "delete") if scoring == "ssr" else ("search",):
            w = fresh_copy(bases[scoring], work / "reference")
            # the first calls compile every kernel (a cold cache takes minutes on a loaded machine)
            s, _, digest = check_many([(w, scoring == "live", False, actions[action])], seconds=1800)[0]
            assert s == "exit 0" and digest, f"the intact {scoring} index under {action}: {s}"
            want[scoring, action] = digest
    results = check_many([(w, scoring == "live", not kind.endswith(("add", "delete")), a)
                          for kind, _, scoring, w, a in cases])
    for (kind, label, scoring, w, a), (s, v, digest) in zip(cases, results, strict=True):
        if s == "exit 0":
            s = "exit 0, same answers" if digest == want[scoring, a[0]] else "exit 0, OTHER answers"
        counts[f"{kind}: search"][s] += 1
        if v:
            counts[f"{kind}: verify"][v] += 1
        # an edit the queries read must be refused; a cut or a growth changes a size the open checks; a flip,
        # another index's file or two files of one size swapped may keep every invariant and answer (verify is the
        # content check: those are listed as "silent")
        bad_search = s != "exit 2" if kind == "edit" else s.startswith(("crash", "hang")) or (
            s == "exit 0, OTHER answers" and (kind in ("truncate", "grow") or kind.startswith("cut")))
        if bad_search or v not in ("", "exit 2"):
            failures.append(f"{label}: search {s}, verify {v}")
        elif s == "exit 0, OTHER answers":
            counts["silent (verify catches)"][label] += 1
        shutil.rmtree(w, ignore_errors=True)


def same_content(base: Path, w: Path) -> bool:
    """Whether every file of copy `w` still holds what `base`'s does (JSON files: the same values)."""
    for p in base.rglob("*"):
        if p.is_file():
            mine = w / p.relative_to(base)
            if not mine.is_file():
                return False
            a, b = p.read_bytes(), mine.read_bytes()
            if a != b and not (p.suffix == ".json" and _json(a) is not None and _json(a) == _json(b)):
                return False
    return True


def _json(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def flip(path: Path, pos: int, bit: int) -> None:
    with path.open("r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ (1 << bit)]))


def grow(path: Path, n: int) -> None:
    with path.open("ab") as f:
        f.write(bytes(n))


def swap(x: Path, y: Path) -> None:
    tmp = x.with_name(x.name + ".swap")
    x.rename(tmp)
    y.rename(x)
    tmp.rename(y)


def fresh_copy(base: Path, w: Path) -> Path:
    shutil.rmtree(w, ignore_errors=True)
    shutil.copytree(base, w)
    return w


def kill_cases(args, rnd, work, bases, coll, other, counts, failures) -> None:
    """kill -9 during --force rebuilds, and during add / delete / compact of a live index."""
    from ssr_engine.generations import read_commit

    w = fresh_copy(bases["ssr"], work / "kill")
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
        counts["kill -9: rebuild"]["index opens and verifies" if ok else f"search {s}, verify {v}"] += 1
        if not ok:
            failures.append(f"kill: search {s}, verify {v}, notes kept {(w / 'notes.txt').is_file()}")
    live = fresh_copy(bases["ssr"], work / "live")
    for i in range(args.live_kills):
        op = ("add", "delete", "compact")[i % 3]
        extra = {"add": str(other), "delete": str(rnd.randrange(args.docs)), "compact": ""}[op]
        if op == "add":  # fresh ids each time, so every add is a new segment
            extra = str(make_collection(work / f"add-{i}.tsv", max(args.docs // 4, 1), args.seed + 10 + i,
                                        prefix=f"a{i}-"))
        before = read_commit(live).generation
        proc = subprocess.Popen([sys.executable, "-c", LIVE_CHILD, str(live), op, extra], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()  # imports done
        time.sleep(rnd.uniform(0.05, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        after = read_commit(live).generation
        s, v = child(live, live=True), verify(live)
        ok = s == "exit 0" and v == "exit 0"
        state = "new commit" if after > before else "old commit"
        counts[f"kill -9: live {op}"][f"{state}, opens and verifies" if ok else f"search {s}, verify {v}"] += 1
        if not ok:
            failures.append(f"live {op} kill: search {s}, verify {v}")


def snapshot_cases(args, work, bases, other, counts, failures) -> None:
    """A Searcher opened before a --force rebuild keeps answering from its generation."""
    for r in range(args.snapshots):
        w = fresh_copy(bases["ssr"], work / f"snap-{r}")
        code, out = run([sys.executable, "-c", SNAPSHOT_CHILD, str(w), str(other), *QUERIES], stdout=True)
        if code != 0:
            counts["snapshot during rebuild"][outcome(code, out)] += 1
            failures.append(f"snapshot child: {outcome(code, out)}")
            continue
        res = json.loads(out.splitlines()[-1])
        ok = res["rebuild"] == 0 and res["same"] == res["during"] and res["after"] and res["fresh"]
        counts["snapshot during rebuild"][f"{res['during']} searches during, all as before, same after"
                                          if ok else json.dumps(res)] += 1
        if not ok:
            failures.append(f"snapshot: {res}")


def provider_cases(args, counts, failures) -> None:
    script = Path(__file__).resolve().parent / "fault_providers.py"
    code, out = run([sys.executable, str(script), "--rounds", str(args.provider_rounds)], stdout=True)
    if code != 0:
        counts["providers"][outcome(code, out)] += 1
        failures.append(f"providers: {out[-500:]}")
        return
    res = json.loads(out.splitlines()[-1])
    counts["providers"].update({"calls": res["calls"], "key leaks": res["key leaks"],
                                "requests at the other origin": res["requests at the other origin"],
                                "crash (exception)": len(res["crashes"]),
                                "over the deadline": len(res["over the deadline"])})
    if res["key leaks"] or res["crashes"] or res["over the deadline"] or res["requests at the other origin"]:
        failures.append(f"providers: {res}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (created; its content is replaced)")
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--flips", type=int, default=3, help="bit flips per file")
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--live-kills", type=int, default=9)
    ap.add_argument("--races", type=int, default=3)
    ap.add_argument("--snapshots", type=int, default=2)
    ap.add_argument("--provider-rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=["index", "kill", "snapshot", "race", "provider"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from ssr_engine import build_index

    rnd = random.Random(args.seed)
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    coll = make_collection(work / "c.tsv", args.docs, args.seed)
    other = make_collection(work / "other.tsv", args.docs, args.seed + 1)
    bases = {s: build_index(coll, work / f"base-{s}", scoring=s, quiet=True) for s in ("ssr", "bm25")}
    foreign = {s: build_index(other, work / f"other-{s}", scoring=s, quiet=True) for s in ("ssr", "bm25")}
    add_tsv = make_collection(work / "add.tsv", max(args.docs // 10, 1), args.seed + 2, prefix="a-")
    if "index" in args.only:  # a live index's files too: a second segment, a deletion file, id tables
        from ssr_engine.live import LiveIndex

        live = LiveIndex(fresh_copy(bases["ssr"], work / "base-live"), chunk_docs=200)
        live.add(collection=make_collection(work / "add0.tsv", max(args.docs // 10, 1), args.seed + 3, prefix="b-"))
        live.delete([str(i) for i in range(0, 60, 7)])
        bases["live"] = live.root
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    failures: list[str] = []
    started = time.time()
    if "index" in args.only:
        index_cases(args, rnd, work, bases, foreign, add_tsv, counts, failures)
    if "kill" in args.only:
        kill_cases(args, rnd, work, bases, coll, other, counts, failures)
    if "snapshot" in args.only:
        snapshot_cases(args, work, bases, other, counts, failures)
    for r in range(args.races if "race" in args.only else 0):
        target = work / f"race-{r}"
        cmd = [sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(coll), "--out", str(target),
               "--quiet"]
        procs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        res = sorted(outcome(p.wait(), p.stderr.read() if p.stderr else "") for p in procs)
        counts["race"]["one exit 0, one exit 2" if res == ["exit 0", "exit 2"] else " / ".join(res)] += 1
        if res != ["exit 0", "exit 2"]:
            failures.append(f"race: {res}")
    if "provider" in args.only:
        provider_cases(args, counts, failures)
    report = {"docs": args.docs, "seed": args.seed, "seconds": round(time.time() - started, 1),
              "counts": {k: dict(c) for k, c in counts.items()}, "failures": failures}
    print("| case | outcomes |\n|---|---|")
    for k, c in counts.items():
        print(f"| {k} | " + ", ".join(f"{o}: {n}" for o, n in sorted(c.items())) + " |")
    crashes = sum(n for c in counts.values() for o, n in c.items() if o.startswith("crash"))
    print(f"\ncrashes: {crashes}; failures: {len(failures)}; {report['seconds']} s")
    for f in failures:
        print("  " + f)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
