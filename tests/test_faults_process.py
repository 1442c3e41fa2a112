"""Fault injection (issue 12) around processes and places: kill -9 during builds, concurrent builds,
bad inputs naming file and line, unwritable places and full disks (nothing left behind).
The corrupted-index cases are in test_faults.py."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults_common import QUERIES, assert_clean_error, build_cli, copy, make_base, ssr_many

from ssr_engine import build_index, open_index, verify_index
from ssr_engine.generations import read_commit
from ssr_engine.search import Searcher


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_base(tmp_path_factory)


# ---- kill -9 during builds and replaces -----------------------------------------------------------


def test_kill_9_at_random_points_leaves_an_index_that_opens(base, tmp_path):
    coll, out, _ = base
    w = copy(out, tmp_path / "w")
    expected = Searcher(w).search_batch(QUERIES, 10)
    other = tmp_path / "other.tsv"
    other.write_text("".join(f"x{i}\tw1 w2 w{i % 50}\n" for i in range(3000)), encoding="utf-8")
    (w / "notes.txt").write_text("mine")
    rnd = random.Random(3)
    outcomes = []
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(other),
                                 "--out", str(w), "--force", "--quiet", "--chunk-docs", "300"],
                                stderr=subprocess.PIPE)
        time.sleep(rnd.uniform(0.2, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        outcomes.append(proc.returncode)
        got = Searcher(w).search_batch(QUERIES, 10)
        ids = [r.ids.tolist() for r in got]
        if ids != [r.ids.tolist() for r in expected]:  # the new generation was committed before the kill
            assert all(i.startswith("x") for r in got for i in r.ids.tolist())
            expected = got
        assert (w / "notes.txt").read_text() == "mine"
    build_index(coll, w, force=True, quiet=True)  # the next writer removes every leftover
    names = {p.name for p in w.iterdir()}
    assert names == {"commit-" + str(read_commit(w).generation) + ".json", "ssr-index.json", "write.lock",
                     "notes.txt", read_commit(w).segments[0].name}
    assert verify_index(w) == []


def test_concurrent_builds_into_one_new_folder(base, tmp_path):
    coll, _, _ = base
    target = tmp_path / "new"
    cmd = [sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(coll), "--out", str(target),
           "--quiet"]
    procs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "Traceback" not in loser
    assert "another process is writing" in loser or "already exists" in loser
    assert read_commit(target).generation == 1 and verify_index(target) == []


# ---- bad input and bad places: exit 2 with FILE[:LINE]: reason, nothing left behind ----------------


def test_bad_inputs_exit_2_naming_file_and_line(tmp_path):
    notab = tmp_path / "notab.tsv"
    notab.write_text("no tab here\nnor here\n")
    surrogate = tmp_path / "s.jsonl"
    surrogate.write_text('{"id": "ok", "text": "fine"}\n{"id": "\\ud800", "text": "hello"}\n')
    a, b = ssr_many(["build-index", "--collection", str(notab), "--out", str(tmp_path / "a"), "--quiet"],
                    ["build-index", "--collection", str(surrogate), "--out", str(tmp_path / "b"), "--quiet"])
    assert_clean_error(a, "notab.tsv:1: no tab between id and text")
    assert_clean_error(b, "s.jsonl:2: document id")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notab.tsv", "s.jsonl"]


def test_gzip_input_is_read_and_a_bom_is_stripped_and_said(tmp_path):
    import gzip

    gz = tmp_path / "c.tsv"  # compressed, named as plain TSV
    gz.write_bytes(gzip.compress(b"1\thello world\n2\tfoo bar\n"))
    bom = tmp_path / "bom.tsv"
    bom.write_bytes(b"\xef\xbb\xbf10\thello world\n9\thello there\n")
    gz_build, proc = ssr_many(["build-index", "--collection", str(gz), "--out", str(tmp_path / "gz"), "--quiet"],
                              ["build-index", "--collection", str(bom), "--out", str(tmp_path / "bom")])
    assert gz_build.returncode == 0, gz_build.stderr[-2000:]
    assert open_index(tmp_path / "gz").doc_ids() == ["1", "2"]
    assert proc.returncode == 0 and "byte order mark" in proc.stderr
    ix = open_index(tmp_path / "bom")
    assert ix.doc_ids() == ["10", "9"] and ix.manifest.ids["integer"] is True
    assert ix.manifest.input["utf8_bom_stripped"] is True
    assert Searcher(tmp_path / "bom").search("hello", 5).ids.tolist() == ["9", "10"]  # integer id order


def test_huge_k_is_every_candidate(base):
    _, out, bm25 = base
    ssr_k, bm25_k = ssr_many(["search", "--index", str(out), "-k", str(2**63), QUERIES[0]],
                             ["search", "--index", str(bm25), "--method", "bm25", "-k", str(2**63), QUERIES[0]])
    assert ssr_k.returncode == 0, ssr_k.stderr[-2000:]
    assert len(ssr_k.stdout.splitlines()) == len(Searcher(out).search(QUERIES[0], None))
    assert bm25_k.returncode == 0, bm25_k.stderr[-2000:]


def test_unwritable_place_and_full_disk_exit_2_and_leave_nothing(base, tmp_path):
    import os
    import resource

    coll, _, _ = base
    try:
        os.mkdir("/sys/ssr-probe")
        os.rmdir("/sys/ssr-probe")
        writable_sys = True
    except OSError:
        writable_sys = False
    if not writable_sys:
        assert_clean_error(build_cli(coll, Path("/sys/ssr-idx"), "--quiet"), "/sys/ssr-idx: cannot")

    def small_files() -> None:  # "disk full" for this process: writes past 64 KiB fail (EFBIG)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))

    out = tmp_path / "full"
    assert_clean_error(build_cli(coll, out, "--quiet", preexec_fn=small_files), "cannot write")
    assert not out.exists()
    proc = subprocess.run([sys.executable, "-m", "ssr_engine", "search", "--index", str(base[1]), "--all",
                           "--output", str(tmp_path / "run.trec"), QUERIES[0]], capture_output=True, text=True,
                          timeout=300, preexec_fn=small_files)
    assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr  # small enough to fit, or refused
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["run.trec"])
