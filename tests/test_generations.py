"""Ownership of --out, the writer lock, commit points, snapshots and leftovers (issue 12)."""

from __future__ import annotations

import fcntl
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import write_tsv

from ssr_engine import build_index, open_index, verify_index
from ssr_engine.errors import IndexFormatError, SsrError
from ssr_engine.generations import LOCK, OWNER, IndexWriter, WriterLock, read_commit, scratch_dir
from ssr_engine.live import LiveIndex
from ssr_engine.locks import READERS
from ssr_engine.search import METHODS, Searcher

DOCS_A = [("1", "alpha beta gamma"), ("2", "beta delta"), ("3", "gamma delta alpha")]
DOCS_B = [("x1", "alpha beta gamma"), ("x2", "alpha zeta"), ("x3", "zeta eta theta"), ("x4", "beta beta")]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def ssr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ssr_engine", *args], capture_output=True, text=True, timeout=300)


def test_force_never_touches_a_folder_that_is_not_an_index(tmp_path):
    coll = write_tsv(tmp_path / "c.tsv", DOCS_A)
    site = tmp_path / "site"
    (site / "src").mkdir(parents=True)
    (site / "manifest.json").write_text('{"manifest_version": 3}')
    (site / "src" / "app.js").write_text("keep")
    before = tree(site)
    for force in (False, True):
        with pytest.raises(SsrError, match="not an ssr index; refusing"):
            build_index(coll, site, force=force, quiet=True)
    assert tree(site) == before
    # a forged marker that fails its checksum is not ours either
    (site / OWNER).write_text(json.dumps({"magic": "ssr-index", "format_version": 2, "checksum": "0" * 64}))
    with pytest.raises(SsrError, match="checksum"):
        build_index(coll, site, force=True, quiet=True)
    assert (site / "src" / "app.js").read_text() == "keep"
    a_file = tmp_path / "file"
    a_file.write_text("data")
    with pytest.raises(SsrError, match="not a directory"):
        build_index(coll, a_file, force=True, quiet=True)
    assert a_file.read_text() == "data"


def test_empty_folder_is_claimed_and_rebuild_needs_force(tmp_path):
    coll = write_tsv(tmp_path / "c.tsv", DOCS_A)
    out = tmp_path / "idx"
    out.mkdir()
    build_index(coll, out, quiet=True)
    assert open_index(out).n_docs == 3
    with pytest.raises(SsrError, match="already exists"):
        build_index(coll, out, quiet=True)
    build_index(coll, out, force=True, quiet=True)
    assert read_commit(out).generation == 2
    assert {p.name for p in out.iterdir()} == {"commit-2.json", OWNER, "seg-2", LOCK}


def test_a_second_writer_fails_fast_and_changes_nothing(tmp_path):
    coll = write_tsv(tmp_path / "c.tsv", DOCS_A)
    out = build_index(coll, tmp_path / "idx", quiet=True)
    before = tree(out)
    with WriterLock(out):  # another writer holds the lock
        with pytest.raises(SsrError, match="another process is writing"):
            build_index(coll, out, force=True, quiet=True)
        proc = ssr("build-index", "--collection", str(coll), "--out", str(out), "--force", "--quiet")
        assert proc.returncode == 2 and "another process is writing" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert tree(out) == before


def test_open_searcher_keeps_its_generation_through_rebuilds(tmp_path):
    out = build_index(write_tsv(tmp_path / "a.tsv", DOCS_A), tmp_path / "idx", quiet=True)
    old = Searcher(out)
    first = old.search("alpha beta gamma", 10)
    old_segment = old.index.path
    build_index(write_tsv(tmp_path / "b.tsv", DOCS_B), out, force=True, quiet=True)
    new = Searcher(out)
    assert new.search("alpha beta gamma", 10).ids.tolist()[0] == "x1"
    again = old.search("alpha beta gamma", 10)
    assert again.ids.tolist() == first.ids.tolist() == ["1", "3", "2"]
    assert np.array_equal(again.scores, first.scores)
    assert old_segment.is_dir()  # held by the open searcher: not removed
    old.index.close()
    new.index.close()
    build_index(write_tsv(tmp_path / "b.tsv", DOCS_B), out, force=True, quiet=True)
    assert not old_segment.exists()  # released: the next writer removed it
    assert [p.name for p in out.glob("seg-*")] == ["seg-3"]


def test_leftovers_of_dead_writers_are_removed_and_nothing_else(tmp_path):
    coll = write_tsv(tmp_path / "c.tsv", DOCS_A)
    out = build_index(coll, tmp_path / "idx", quiet=True)
    (out / ".staging-999-dead").mkdir()
    (out / ".staging-999-dead" / "vocab.npy").write_bytes(b"x")
    (out / "seg-77").mkdir()  # a segment no commit refers to (a crash after the rename)
    (out / "seg-77" / "readers.lock").touch()
    (out / ".commit-2.json.tmp-1-ab").write_text("{")
    (out / "notes.txt").write_text("mine")  # not of the engine's kinds: kept
    build_index(coll, out, force=True, quiet=True)
    assert {p.name for p in out.iterdir()} == {"commit-2.json", "notes.txt", OWNER, "seg-2", LOCK}
    assert verify_index(out) == []


def test_failed_first_build_leaves_nothing_and_failed_rebuild_keeps_the_old(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("1\talpha\n1\tbeta\n")  # duplicate id
    with pytest.raises(SsrError, match="duplicate"):
        build_index(bad, tmp_path / "idx", quiet=True)
    assert not (tmp_path / "idx").exists()
    out = build_index(write_tsv(tmp_path / "c.tsv", DOCS_A), tmp_path / "idx", quiet=True)
    before = tree(out)
    with pytest.raises(SsrError, match="duplicate"):
        build_index(bad, out, force=True, quiet=True)
    assert tree(out) == before
    assert Searcher(out).search("alpha", 5).ids.tolist() == ["1", "3"]


def test_format_1_index_gives_the_rebuild_command_and_force_migrates_it(tmp_path):
    coll = write_tsv(tmp_path / "c.tsv", DOCS_A)
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(json.dumps(
        {"format": "ssr-index", "format_version": 1, "input": {"path": str(coll)}, "scoring": "ssr"}))
    (old / "vocab.npy").write_bytes(b"v1 data")
    with pytest.raises(IndexFormatError, match=f"format version 1.*ssr build-index --collection {coll} --out"):
        open_index(old)
    with pytest.raises(SsrError, match="already exists"):
        build_index(coll, old, quiet=True)
    (old / "thesis.tex").write_text("precious")
    with pytest.raises(SsrError, match="other files in it"):
        build_index(coll, old, force=True, quiet=True)
    (old / "thesis.tex").unlink()
    build_index(coll, old, force=True, quiet=True)
    assert {p.name for p in old.iterdir()} == {"commit-1.json", OWNER, "seg-1", LOCK}
    assert open_index(old).n_docs == 3


def test_no_commit_yet_is_a_clear_error(tmp_path):
    out = tmp_path / "idx"
    with IndexWriter(out) as w:
        w.staging()
        with pytest.raises(IndexFormatError, match="no committed generation"):
            open_index(out)


def test_scratch_folders_of_dead_processes_are_removed(tmp_path):
    dead = tmp_path / ".reg.agents-dead"
    dead.mkdir()
    (dead / "ssr-scratch.lock").touch()
    (dead / "documents.jsonl").write_text("{}")
    other = tmp_path / ".reg.agents-notours"
    other.mkdir()  # no lock file: not a scratch folder of ours
    with scratch_dir(tmp_path, ".reg.agents-") as work:
        assert work.is_dir() and not dead.exists()
        with scratch_dir(tmp_path, ".reg.agents-") as second:  # the live one is not removed
            assert work.is_dir() and second != work
    assert sorted(p.name for p in tmp_path.iterdir()) == [".reg.agents-notours"]


def test_agents_bench_keeps_what_was_in_its_output_folder(tmp_path):
    from ssr_engine.agents.bench import run_bench

    out = tmp_path / "bench"
    (out / "indexes").mkdir(parents=True)
    (out / "indexes" / "precious.txt").write_text("keep")
    run_bench(out, synthetic_cards=40, synthetic_queries=10, latency_cards=0, methods=("ssr",))
    assert (out / "indexes" / "precious.txt").read_text() == "keep"
    assert sorted(p.name for p in out.iterdir()) == ["agents-bench.json", "agents-bench.md", "indexes"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names the fsynced files through /proc (Linux)")
def test_a_commit_syncs_everything_it_names_before_its_commit_point_then_the_folder(tmp_path, monkeypatch):
    """Every file and folder a commit point names (a new segment's files and folder, a new deletion file and
    its segment folder, the renames in the index folder, the commit point's own bytes) is fsynced before the
    commit point takes its name; after that rename, only the index folder (then older commits may go)."""
    from ssr_engine.live import LiveIndex

    write_tsv(tmp_path / "a.tsv", DOCS_A)
    build_index(tmp_path / "a.tsv", tmp_path / "idx")
    events: list[tuple[str, str]] = []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return fsync(fd)

    def recording_replace(src, dst, **kw):
        events.append(("replace", str(dst)))
        return replace(src, dst, **kw)

    live = LiveIndex(tmp_path / "idx", merge=False)  # one commit a write
    live.add([("8", "alpha psi")])  # the first write also reads the built segment's ids
    root = (tmp_path / "idx").resolve()
    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    for generation, docs in ((3, [("9", "alpha omega")]), (4, [("2", "beta omega"), ("10", "eta")])):
        events.clear()
        live.add(docs, upsert=True)
        commit = read_commit(root)
        assert commit.generation == generation
        point = events.index(("replace", str(root / f"commit-{generation}.json")))
        before = {Path(p) for kind, p in events[:point] if kind == "fsync"}
        new_seg = root / commit.segments[-1].name
        named = {new_seg, root, *new_seg.iterdir()}
        named |= {p for p in before if p.name.startswith(f".commit-{generation}.json")}  # its own bytes
        assert any(p.name.startswith(f".commit-{generation}.json") for p in named)
        if generation == 4:  # "2" replaced: a deletion file in the first segment, and that folder
            first = root / commit.segments[0].name
            assert (commit.segments[0].deletes, commit.segments[0].documents) == ("deletes-4.npz", 2)
            named |= {first / "deletes-4.npz", first}
        assert named <= before, named - before
        assert events[point + 1:] == [("fsync", str(root))]


def test_a_folder_that_refuses_fsync_is_tolerated_a_file_that_fails_is_not(tmp_path, monkeypatch):
    """Some file systems refuse fsync on a folder (EINVAL): a commit goes on, as `atomic.fsync_dir` would. A
    file whose fsync fails stops the commit: an error, the previous commit current, no temporary left."""
    import errno
    import stat

    from ssr_engine.live import LiveIndex

    build_index(write_tsv(tmp_path / "a.tsv", DOCS_A), tmp_path / "idx", quiet=True)
    root = (tmp_path / "idx").resolve()
    live = LiveIndex(root, merge=False)
    fsync = os.fsync
    failing = {"kind": stat.S_ISDIR}

    def refusing(fd):
        if failing["kind"](os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL if failing["kind"] is stat.S_ISDIR else errno.EIO, "refused")
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", refusing)
    live.add([("8", "alpha psi")])
    assert read_commit(root).generation == 2
    failing["kind"] = stat.S_ISREG
    with pytest.raises(SsrError, match="cannot"):
        live.add([("9", "alpha omega")])
    assert read_commit(root).generation == 2
    assert not [p.name for p in root.iterdir() if p.name.startswith(".commit-")]


def held(root: Path) -> list[str]:
    """The segments of index `root` that an open reader holds (a writer could not remove them)."""
    out = []
    for lock in sorted(root.glob(f"*/{READERS}")):
        fd = os.open(lock, os.O_RDONLY)
        try:  # flock locks belong to open files: this one conflicts with a hold of this same process
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            out.append(lock.parent.name)
        finally:
            os.close(fd)
    return out


@pytest.mark.parametrize("live", [False, True], ids=["one-segment", "live"])
def test_a_dropped_searcher_releases_its_segments_without_the_garbage_collector(tmp_path, live):
    """Nothing a Searcher owns (its `answer.Answers`, a live index's searcher and parts) refers back to it: once
    dropped, its segment holds close at once, not when the garbage collector finds a cycle (a writer meanwhile
    cannot remove the segments)."""
    out = tmp_path / "idx"
    build_index(write_tsv(tmp_path / "c.tsv", DOCS_B), out, quiet=True)
    if live:  # two segments and a deletion: answered through live.LiveSearcher over parts
        LiveIndex(out, merge=False).add([("y1", "alpha eta"), ("y2", "theta beta")])
        LiveIndex(out, merge=False).delete(["x3"])
    queries = [f"alpha beta {w}" for w in ("gamma", "zeta", "eta", "theta")] * 10  # > 16: pieces on 2 threads
    methods = [m for m in METHODS if not (live and m == "maxscore")]  # (not on several parts yet)

    def use(s: Searcher) -> None:
        for method in methods:
            for threads in (1, 2):
                assert s.search_batch(queries, 3, threads=threads, method=method)[0].ids.tolist()
        assert s.search_batch(queries[:2], None)[1].ids.tolist()
        assert s.explain("alpha beta", "x1") and s.pool_sizes(queries[:3]).tolist()
        s.reopen()

    use(Searcher(out))  # first calls compile, and Numba's compiler leaves cycles of its own to the collector
    gc.collect()
    assert held(out) == []
    gc.disable()
    try:
        s = Searcher(out)
        assert len(held(out)) == 1 + live
        use(s)
        del s
        assert held(out) == []
    finally:
        gc.enable()


def test_removal_in_background_renames_under_the_lock_and_removes_on_its_own_thread(tmp_path, monkeypatch):
    import shutil
    import threading

    from ssr_engine import generations

    coll = write_tsv(tmp_path / "c.tsv", DOCS_A)
    out = build_index(coll, tmp_path / "idx", quiet=True)
    (out / ".trash-seg-9-dead").mkdir()  # a dead writer's half-removed segment
    (out / ".trash-seg-9-dead" / "vocab.npy").write_bytes(b"x")
    real, threads, gate = shutil.rmtree, [], threading.Event()

    def rmtree(path, *args, **kwargs):
        threads.append((Path(path).name.split("-")[1], threading.current_thread().name))
        gate.wait(10)  # the removal is held: the writer must not wait for it
        real(path, *args, **kwargs)

    monkeypatch.setattr(generations.shutil, "rmtree", rmtree)
    generations.remove_in_background()
    try:
        build_index(coll, out, force=True, quiet=True)  # seg-1 is no longer needed; nobody holds it
        names = {p.name for p in out.iterdir()}
        assert "seg-1" not in names and "seg-2" in names  # renamed away before the writer returned
        assert {n for n in names if n.startswith(".trash-")}  # still there: the removal waits on the gate
        gate.set()
        generations.removals_done()
    finally:
        gate.set()
        generations.remove_in_background(False)
    assert {p.name for p in out.iterdir()} == {"commit-2.json", OWNER, "seg-2", LOCK}
    assert threads and all(name.startswith("ssr-remove") for _, name in threads)
    assert verify_index(out) == []
    # off again: the next writer removes inline (on its own thread)
    threads.clear()
    build_index(coll, out, force=True, quiet=True)
    assert threads and all(name == threading.current_thread().name for _, name in threads)


def test_a_commit_point_removed_after_the_listing_is_read_again_from_the_newer_one(tmp_path, monkeypatch):
    # a reader lists commit N, a writer commits N+1 and removes N, then the reader reads: it lists again
    from ssr_engine import generations

    idx = tmp_path / "idx"
    build_index(write_tsv(tmp_path / "a.tsv", DOCS_A), idx)
    first = read_commit(idx)
    LiveIndex(idx, workers=1).add([("4", "alpha omega")])
    assert not (idx / first.path.name).exists()  # the writer removed the older commit point
    listing = generations._numbered
    stale = [[(first.generation, first.path.name)]]
    monkeypatch.setattr(generations, "_numbered", lambda root, kind: stale.pop() if stale else listing(root, kind))
    assert read_commit(idx).generation == first.generation + 1
    # a commit point that stays missing (not a race: the folder was tampered with) is an error, not a loop
    monkeypatch.setattr(generations, "_numbered", lambda root, kind: [(first.generation, first.path.name)])
    with pytest.raises(IndexFormatError, match="keep changing"):
        read_commit(idx)


def test_a_searcher_alive_at_interpreter_exit_closes_its_holds_quietly(tmp_path):
    """Its segment holds are collected after the `locks` module's globals are gone (`os` is None then)."""
    write_tsv(tmp_path / "c.tsv", [("1", "alpha beta"), ("2", "beta gamma")])
    build_index(tmp_path / "c.tsv", tmp_path / "idx", quiet=True, workers=1)
    script = ("import numpy as np, numba as nb\n"
              "from ssr_engine.retrieval import open_retriever\n"
              "@nb.njit\n"
              "def f(a):\n"
              "    return a.sum()\n"
              "f(np.ones(3))\n"
              f"s = open_retriever({str(tmp_path / 'idx')!r})\n"
              "assert len(s.search_batch(['alpha', 'beta'], 1, threads=1)) == 2\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Error" not in done.stderr, done.stderr
