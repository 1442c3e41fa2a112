"""Live indexes (`ssr_engine.live`): add, update, delete and compact, ranked exactly as a fresh build of
the live documents; commits, readers, the writer lock and crashes.

(Over 400 lines on purpose: nearly every test compares with a fresh build through the same oracle helpers
(`assert_same_as_fresh`, `small_index`, `live_order`, `assert_compacts_to_a_fresh_build`); split by operation, the
parts would import them from each other.)"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import write_tsv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssr_engine import build_index
from ssr_engine.cli import main as cli
from ssr_engine.errors import IndexFormatError, SsrError
from ssr_engine.generations import IndexWriter, read_commit
from ssr_engine.live import LiveIndex, LiveSearcher, open_snapshot
from ssr_engine.retrieval import open_retriever
from ssr_engine.search import Searcher

ROOT = Path(__file__).resolve().parents[1]
WORDS = "alpha beta gamma delta epsilon zeta eta theta".split()


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))


QUERIES = [" ".join(WORDS[i:i + n]) for n in (1, 2, 3) for i in range(len(WORDS))] + ["alpha alpha", "", "none"]


def assert_same_as_fresh(index: Path, live: dict[str, str], tmp: Path, scoring: str, tag: str) -> None:
    """Every query, k in (1, 4, all): ids, scores (bits) and matches equal a fresh build's."""
    method = "ssr" if scoring == "ssr" else "bm25"
    got_searcher = open_retriever(index, method)
    if not live:
        assert all(len(r) == 0 for r in got_searcher.search_batch(QUERIES, None))
        return
    fresh = build_index(write_tsv(tmp / f"fresh-{tag}.tsv", sorted(live.items())), tmp / f"fresh-{tag}",
                        quiet=True, scoring=scoring)
    want_searcher = open_retriever(fresh, method)
    assert got_searcher.n_docs == want_searcher.n_docs == len(live)
    for k in (1, 4, None):
        got = got_searcher.search_batch(QUERIES, k)
        want = want_searcher.search_batch(QUERIES, k)
        for q, a, b in zip(QUERIES, got, want, strict=True):
            assert a.ids.tolist() == b.ids.tolist(), (q, k)
            assert a.scores.tobytes() == b.scores.tobytes(), (q, k)
            assert a.matches.tolist() == b.matches.tolist(), (q, k)
    if scoring == "ssr":
        got = Searcher(index, method="exhaustive").search_batch(QUERIES, None)
        for a, b in zip(got, want_searcher.search_batch(QUERIES, None), strict=True):
            assert a.ids.tolist() == b.ids.tolist()
            assert a.scores.tobytes() == b.scores.tobytes()


# ids: integers (some equal as numbers, "7" and "007") and a few strings, so deleting or adding the
# last non-integer id flips the collection's id order
id_pool = [str(i) for i in range(30)] + ["007", "-2", "x1", "y"]
op = st.one_of(
    st.tuples(st.just("add"), st.lists(st.sampled_from(id_pool), min_size=1, max_size=8, unique=True),
              st.booleans()),
    st.tuples(st.just("delete"), st.lists(st.sampled_from(id_pool), min_size=1, max_size=6), st.just(False)),
    st.tuples(st.just("compact"), st.just([]), st.just(False)),
)


@pytest.mark.parametrize("scoring", ["ssr", "bm25"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_any_sequence_of_changes_ranks_as_a_fresh_build(tmp_path_factory, scoring, ops, seed):
    tmp = tmp_path_factory.mktemp("live")
    rng = random.Random(seed)
    first = [(i, text(rng)) for i in rng.sample(id_pool, 10)]
    index = build_index(write_tsv(tmp / "c.tsv", first), tmp / "idx", quiet=True, scoring=scoring)
    live = dict(first)
    writer = LiveIndex(index)
    for n, (kind, ids, upsert) in enumerate(ops):
        if kind == "add":
            docs = [(i, text(rng)) for i in ids]
            clash = [i for i in ids if i in live]
            if clash and not upsert:
                before = read_commit(index).generation
                with pytest.raises(SsrError, match="already in the index"):
                    writer.add(docs)
                assert read_commit(index).generation == before  # nothing written
                continue
            report = writer.add(docs, upsert=upsert)
            assert (report["added"], report["replaced"]) == (len(ids), len(clash))
            live.update(docs)
        elif kind == "delete":
            report = writer.delete(ids)
            unique = list(dict.fromkeys(ids))
            assert report["deleted"] == sum(i in live for i in unique)
            assert report["unknown"] == sum(i not in live for i in unique)
            assert report["repeated"] == len(ids) - len(unique)
            for i in unique:
                live.pop(i, None)
        elif live:
            writer.compact()
            assert len(open_snapshot(index).indexes) == 1
        if n == len(ops) // 2:
            assert_same_as_fresh(index, live, tmp, scoring, f"mid{n}")
    assert writer.info()["live"] == len(live)
    assert_same_as_fresh(index, live, tmp, scoring, "end")


def small_index(tmp: Path, n: int = 40, scoring: str = "ssr", seed: int = 0) -> tuple[Path, dict[str, str]]:
    rng = random.Random(seed)
    docs = {str(i): text(rng) for i in range(n)}
    return build_index(write_tsv(tmp / "c.tsv", docs.items()), tmp / "idx", quiet=True, scoring=scoring), docs


def reseeded_index(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A base segment of seed 0 and an added segment of another seed: its signals collided under 0 (the
    narrowest hash width where the base is clean and the add collides). Returns (index, live documents)."""
    rng = random.Random(11)
    base = {str(i): text(rng) for i in range(40)}
    extra = [f"x{i}" for i in range(40)]
    added = {str(100 + i): f"{text(rng)} {rng.choice(extra)} {rng.choice(extra)}" for i in range(40)}
    for bits in range(6, 40):
        out = tmp_path / f"idx{bits}"
        try:
            build_index(write_tsv(tmp_path / "base.tsv", base.items()), out, quiet=True, hash_bits=bits)
        except SsrError:
            continue
        snap = open_snapshot(out)
        clean = snap.indexes[0].manifest.signals.hash.seed == 0
        snap.close()
        if not clean:
            continue
        try:
            LiveIndex(out, merge=False).add(collection=write_tsv(tmp_path / f"add{bits}.tsv", added.items()))
        except SsrError:
            continue
        snap = open_snapshot(out)
        seeds = [ix.manifest.signals.hash.seed for ix in snap.indexes]
        snap.close()
        if seeds[-1] != 0:
            assert seeds[0] == 0 and seeds[1] > 0
            return out, {**base, **added}
    pytest.fail("no hash width gave a clean base and a colliding add")


def test_a_segment_reseeded_after_a_collision_ranks_as_a_fresh_build(tmp_path):
    """Term ids of the added segment come in another order than the base segment's; rankings stay a fresh
    build's, bit for bit. (BM25's unigrams find no such width here; test_parts covers a BM25 part of another
    seed.)"""
    out, live = reseeded_index(tmp_path)
    assert_same_as_fresh(out, live, tmp_path, "ssr", "reseeded")


def live_order(index: Path) -> list[str]:
    """The live documents' ids in segment order, then document order (the order compaction keeps)."""
    snap = open_snapshot(index)
    try:
        return [i for ix, d in zip(snap.indexes, snap.deletions, strict=True)
                for j, i in enumerate(ix.doc_ids()) if d is None or not d.mask[j]]
    finally:
        snap.close()


def assert_compacts_to_a_fresh_build(index: Path, live: dict[str, str], tmp: Path, scoring: str) -> None:
    """Compaction merges the segments' lists and rows (`live_compact`), never inverting again: the new
    segment's arrays equal, array for array, a fresh build's of the live documents in the same order."""
    order = live_order(index)
    LiveIndex(index).compact()
    fresh = build_index(write_tsv(tmp / "fresh.tsv", [(i, live[i]) for i in order]), tmp / "fresh", quiet=True,
                        scoring=scoring, hash_bits=open_snapshot(index).indexes[0].settings.hash.bits)
    got, want = open_snapshot(index), open_snapshot(fresh)
    try:
        assert len(got.indexes) == 1
        a, b = got.indexes[0], want.indexes[0]
        assert a.manifest.counts == b.manifest.counts
        assert a.settings.hash.seed == b.settings.hash.seed
        names = sorted(p.name for p in b.path.iterdir() if p.suffix == ".npy")
        assert names == sorted(p.name for p in a.path.iterdir() if p.suffix == ".npy" and "live-ids" not in p.name)
        for name in names:
            x, y = np.load(a.path / name), np.load(b.path / name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name
    finally:
        got.close()
        want.close()
    assert cli(["verify", str(index)]) == 0


@pytest.mark.parametrize("scoring", ["ssr", "bm25"])
def test_compaction_writes_what_a_fresh_build_writes(tmp_path, scoring):
    rng = random.Random(5)
    words = [f"w{i}" for i in range(200)]
    docs = {str(i): " ".join(rng.choice(words) for _ in range(rng.randint(0, 9))) for i in range(300)}
    index = build_index(write_tsv(tmp_path / "c.tsv", docs.items()), tmp_path / "idx", quiet=True, scoring=scoring)
    writer, live = LiveIndex(index, merge=False), dict(docs)
    for r in range(3):
        more = {f"n{r}-{i}": " ".join(rng.choice(words[150:] + ["new"]) for _ in range(5)) for i in range(40)}
        writer.add(list(more.items()))
        live.update(more)
        gone = rng.sample(sorted(live), 25)  # some terms lose every live posting
        writer.delete(gone)
        for i in gone:
            live.pop(i)
    assert_compacts_to_a_fresh_build(index, live, tmp_path, scoring)


def test_compaction_with_a_reseeded_segment_writes_what_a_fresh_build_writes(tmp_path):
    """The added segment's terms merge in another order (rows re-sorted); under the base's seed its
    signals collide, so compaction takes the next seed, as the fresh build of the same documents does."""
    index, live = reseeded_index(tmp_path)
    assert_compacts_to_a_fresh_build(index, live, tmp_path, "ssr")
    assert open_snapshot(index).indexes[0].settings.hash.seed > 0


def test_searcher_keeps_its_commit_until_reopen(tmp_path):
    index, docs = small_index(tmp_path)
    searcher = Searcher(index)
    before = searcher.search_batch(QUERIES, None)
    LiveIndex(index).add([("100", "alpha beta gamma"), ("101", "alpha")])
    LiveIndex(index).delete([i for i in docs if int(i) % 3 == 0])
    after = searcher.search_batch(QUERIES, None)  # the old commit: same answers, old segments still held
    for a, b in zip(before, after, strict=True):
        assert a.ids.tolist() == b.ids.tolist() and a.scores.tobytes() == b.scores.tobytes()
    assert searcher.reopen() is True
    assert searcher.reopen() is False
    assert searcher.n_docs == len(docs) + 2 - len([i for i in docs if int(i) % 3 == 0])
    assert "100" in searcher.search("alpha beta gamma", 3).ids.tolist()
    refreshing = Searcher(index, refresh=True)
    LiveIndex(index).delete(["100"])
    assert "100" not in refreshing.search("alpha beta gamma", 50).ids.tolist()


def test_old_segments_leave_only_when_no_commit_and_no_reader_needs_them(tmp_path):
    index, _ = small_index(tmp_path)
    LiveIndex(index).add([("100", "alpha beta")])
    reader = LiveSearcher(index)
    held = {ref.name for ref in reader.snapshot.commit.segments}
    LiveIndex(index).compact()
    assert held <= {p.name for p in index.iterdir()}  # held by the reader: kept
    assert len(reader.search("alpha beta", None)) > 0
    reader.close()
    LiveIndex(index).add([("101", "beta")])  # the next writer removes what nobody references
    names = {p.name for p in index.iterdir()}
    assert not held & names
    assert {ref.name for ref in read_commit(index).segments} <= names


def test_one_writer_at_a_time(tmp_path):
    index, _ = small_index(tmp_path)
    with IndexWriter(index, append=True):
        with pytest.raises(SsrError, match="another process is writing"):
            LiveIndex(index).add([("100", "alpha")])
        with pytest.raises(SsrError, match="another process is writing"):
            LiveIndex(index).delete(["1"])
    assert LiveIndex(index).add([("100", "alpha")])["added"] == 1


def test_corrupt_deletion_file_is_an_error(tmp_path):
    index, _ = small_index(tmp_path)
    LiveIndex(index).delete(["1", "2"])
    ref = read_commit(index).segments[0]
    path = index / ref.name / ref.deletes
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(IndexFormatError, match="checksum"):
        Searcher(index)
    assert cli(["search", "--index", str(index), "alpha"]) == 2
    problems = __import__("ssr_engine").verify_index(index)
    assert any(ref.deletes in p for p in problems)


def test_deleting_every_document_leaves_an_empty_openable_index(tmp_path):
    index, docs = small_index(tmp_path, n=5)
    LiveIndex(index).add([("9", "alpha")])
    report = LiveIndex(index).delete(list(docs) + ["9"])
    assert report["deleted"] == 6
    searcher = Searcher(index)
    assert searcher.n_docs == 0 and len(searcher.search("alpha", None)) == 0
    with pytest.raises(SsrError, match="every document is deleted"):
        LiveIndex(index).compact()
    LiveIndex(index).add([("10", "alpha beta")])
    assert Searcher(index).search("alpha", 5).ids.tolist() == ["10"]


def test_documents_as_dicts_and_cards(tmp_path):
    index, _ = small_index(tmp_path)
    LiveIndex(index).add([{"id": "a", "text": "theta eta"}, {"id": "b", "fields": ["theta", "eta zeta"]}])
    assert set(Searcher(index).search("theta eta", 10).ids.tolist()) >= {"a", "b"}
    before = read_commit(index).generation
    with pytest.raises(SsrError):
        LiveIndex(index).add(["just a string"])
    assert read_commit(index).generation == before


def test_cli_add_delete_compact_index_info(tmp_path, capsys):
    index, docs = small_index(tmp_path)
    more = write_tsv(tmp_path / "more.tsv", [("100", "alpha beta"), ("3", "gamma")])
    assert cli(["add", "--index", str(index), "--collection", str(more), "--quiet"]) == 2
    assert "already in the index; use --upsert" in capsys.readouterr().err
    assert read_commit(index).generation == 1
    assert cli(["add", "--index", str(index), "--collection", str(more), "--quiet", "--upsert"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "added 2 documents" in err and "(1 replaced), generation 2" in err
    ids = tmp_path / "ids.txt"
    ids.write_text("4\n5\nnope\n4\n\n", encoding="utf-8")
    assert cli(["delete", "--index", str(index), "--ids", str(ids)]) == 0
    err = capsys.readouterr().err
    assert "deleted 2 documents" in err and "1 ids not in the index" in err and "'nope'" in err
    assert "1 ids repeated" in err
    assert cli(["index-info", str(index), "--json"]) == 0
    info = __import__("json").loads(capsys.readouterr().out)
    assert [(s["documents"], s["live"], s["deleted"]) for s in info["segments"]] == [(40, 37, 3), (2, 2, 0)]
    assert cli(["index-info", str(index)]) == 0
    assert "seg-2" in capsys.readouterr().out
    assert cli(["compact", "--index", str(index), "--quiet", "--json"]) == 0
    assert __import__("json").loads(capsys.readouterr().out)["segments_before"] == 2
    assert len(read_commit(index).segments) == 1
    assert cli(["verify", str(index)]) == 0
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"1\n\xff\n")
    assert cli(["delete", "--index", str(index), "--ids", str(bad)]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    assert cli(["add", "--index", str(tmp_path / "nothing"), "--collection", str(more)]) == 2


def test_settings_of_the_index_apply_to_added_documents(tmp_path):
    stop = tmp_path / "stop.txt"
    stop.write_text("alpha\n", encoding="utf-8")
    index = build_index(write_tsv(tmp_path / "c.tsv", [("1", "beta gamma")]), tmp_path / "idx", quiet=True,
                        stopwords=stop, cap=2)
    LiveIndex(index).add([("2", "alpha beta gamma delta")])
    fresh = build_index(write_tsv(tmp_path / "f.tsv", [("1", "beta gamma"), ("2", "alpha beta gamma delta")]),
                        tmp_path / "fresh", quiet=True, stopwords=stop, cap=2)
    for q in ("alpha", "beta gamma", "gamma delta", "delta"):
        a, b = Searcher(index).search(q, None), Searcher(fresh).search(q, None)
        assert a.ids.tolist() == b.ids.tolist() and a.scores.tobytes() == b.scores.tobytes()


_CRASH = """
import sys
from ssr_engine.live import LiveIndex
op = sys.argv[2]
w = LiveIndex(sys.argv[1], chunk_docs=50)
print("ready", flush=True)
if op == "add":
    w.add(collection=sys.argv[3])
elif op == "delete":
    w.delete([str(i) for i in range(0, 4000, 3)])
else:
    w.compact()
"""


@pytest.mark.parametrize("operation", ["add", "delete", "compact"])
def test_kill_during_a_change_leaves_the_previous_commit(tmp_path, operation):
    rng = random.Random(operation)
    docs = [(str(i), text(rng)) for i in range(4000)]
    index = build_index(write_tsv(tmp_path / "c.tsv", docs[:2000]), tmp_path / "idx", quiet=True)
    LiveIndex(index).add(docs[2000:2500])
    LiveIndex(index).delete(["1", "2"])
    before = {r.name: r.documents for r in read_commit(index).segments}
    want = [r.ids.tolist() for r in Searcher(index).search_batch(QUERIES, 20)]
    more = write_tsv(tmp_path / "more.tsv", docs[2500:])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outcomes = set()
    for delay in (0.05, 0.3, 0.8, 1.5):
        proc = subprocess.Popen([sys.executable, "-c", _CRASH, str(index), operation, str(more)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        proc.stdout.readline()  # imports done
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        commit = read_commit(index)
        now = {r.name: r.documents for r in commit.segments}
        if now == before:
            outcomes.add("old")
            got = [r.ids.tolist() for r in Searcher(index).search_batch(QUERIES, 20)]
            assert got == want
        else:
            outcomes.add("new")  # the change committed before the kill: a complete new generation
            Searcher(index).search_batch(QUERIES, 20)
            break
    # the next writer cleans what the dead one left, and works
    LiveIndex(index).add([("9999", "alpha")])
    leftovers = [p.name for p in index.iterdir() if p.name.startswith((".staging", ".trash"))]
    assert leftovers == []
    assert outcomes


def test_ids_found_by_hash_are_checked_by_string(tmp_path):
    from ssr_engine.live_files import IdTable, Wanted

    index, _ = small_index(tmp_path)
    LiveIndex(index, merge=False).add([(str(100 + i), "alpha") for i in range(8)])
    ref = read_commit(index).segments[-1]
    table = IdTable(index / ref.name, 8)
    wanted = Wanted([b"105", b"nope"], np.array([int(table.hash[np.flatnonzero(np.asarray(table.doc) == 5)[0]]),
                                                 int(table.hash[0])], dtype=np.uint64), np.zeros(3), np.zeros(0))
    assert table.lookup(wanted).tolist() == [5, -1]  # "nope" given a hash of the table: its string decides


@pytest.mark.parametrize("ids", [
    ["7", "007", "-2", "-0", "0", "10", "9", "99999999999999999999999", "-99999999999999999999999", "000"],
    ["b", "a", "é", "ab", "Z", "10", "9", "日本", "a-b", "€"],
])
@pytest.mark.parametrize("order", ["shuffled", "sorted"])
def test_a_built_segment_is_searched_in_its_id_order(tmp_path, ids, order):
    """A segment made by build_index has no id table: its ids are found by binary search in its id order (rank
    given by doc_rank or the identity), under integer and string order; present and absent ids alike."""
    from ssr_engine.ids import id_order
    from ssr_engine.live_files import SortedIds, segment_ids, wanted_ids

    docs = [ids[i] for i in id_order(ids)] if order == "sorted" else ids
    index = build_index(write_tsv(tmp_path / "c.tsv", [(i, "alpha") for i in docs]), tmp_path / "idx", quiet=True)
    ix = open_snapshot(index).indexes[0]
    assert (ix.manifest.ids.get("rank") == "identity") == (order == "sorted")
    table = segment_ids(ix.path, ix)
    assert isinstance(table, SortedIds)
    row = {d: r for r, d in enumerate(ix.doc_id_array().to_pylist())}
    asked = ids + ["8", "-7", "00", "1" + "0" * 30, "c", "", "日", "€€"]
    assert table.lookup(wanted_ids([a.encode() for a in asked])).tolist() == [row.get(a, -1) for a in asked]
    # a first change writes nothing into the built segment
    files = sorted(p.name for p in ix.path.iterdir())
    LiveIndex(index, merge=False).delete([docs[3], "absent"])
    LiveIndex(index, merge=False).add([("new", "beta")])
    assert sorted(p.name for p in ix.path.iterdir() if not p.name.startswith("deletes-")) == files


def test_a_corrupt_id_table_is_an_error_naming_it(tmp_path):
    index, _ = small_index(tmp_path)
    LiveIndex(index, merge=False).add([(str(100 + i), "alpha") for i in range(8)])
    table = index / read_commit(index).segments[-1].name / "live-ids.doc.npy"
    np.save(table, np.zeros(3, dtype=np.uint32))  # sizes that differ from the segment's
    with pytest.raises(IndexFormatError, match="id table.*removing them all repairs"):
        LiveIndex(index).delete(["101"])
    for p in table.parent.glob("live-ids.*.npy"):
        p.unlink()
    assert LiveIndex(index).delete(["101"])["deleted"] == 1  # looked up in the segment's id order instead


def test_a_corrupt_doc_rank_is_an_error_on_the_first_change(tmp_path):
    index = build_index(write_tsv(tmp_path / "c.tsv", [(str(9 - i), "alpha") for i in range(10)]), tmp_path / "idx",
                        quiet=True)
    seg = index / read_commit(index).segments[0].name
    rank = np.load(seg / "doc_rank.npy")
    rank[0] = rank[1]  # the same size, not a permutation
    np.save(seg / "doc_rank.npy", rank)
    with pytest.raises(IndexFormatError, match="doc_rank"):
        LiveIndex(index).delete(["3"])


def test_extra_files_travel_with_the_added_segment(tmp_path):
    index, _ = small_index(tmp_path)
    store = tmp_path / "cards.bin"
    store.write_bytes(b"cards of the added documents")
    LiveIndex(index).add([("100", "alpha")], extra_files={"agent_cards.parquet": (store, "test-store")})
    ref = read_commit(index).segments[-1]
    seg = open_snapshot(index).indexes[-1]
    assert seg.manifest.extra_files == {"agent_cards.parquet": "test-store"}
    assert (index / ref.name / "agent_cards.parquet").read_bytes() == b"cards of the added documents"
    assert not store.exists()
    assert cli(["verify", str(index)]) == 0


def test_stored_texts_survive_changes_and_compaction(tmp_path):
    rng = random.Random(3)
    docs = {str(i): f"{text(rng)} doc{i}" for i in range(30)}
    index = build_index(write_tsv(tmp_path / "c.tsv", docs.items()), tmp_path / "idx", quiet=True, store_text=True)
    writer = LiveIndex(index)
    more = {f"n{i}": f"{text(rng)} new{i}" for i in range(12)}
    writer.add(list(more.items()))
    writer.delete(["3", "17", "n4"])
    live = {i: t for i, t in {**docs, **more}.items() if i not in {"3", "17", "n4"}}
    searcher = Searcher(index)
    assert all(searcher.doc(i) == t for i, t in live.items())  # across segments, before compaction
    with pytest.raises(SsrError):
        searcher.doc("3")  # deleted
    writer.compact()
    assert len(read_commit(index).segments) == 1
    assert cli(["verify", str(index)]) == 0
    compacted = Searcher(index)
    assert compacted.n_docs == len(live)
    assert all(compacted.doc(i) == t for i, t in live.items())


def test_maxscore_on_a_live_index_is_a_clear_error(tmp_path):
    index, _ = small_index(tmp_path)
    LiveIndex(index).delete(["1"])
    with pytest.raises(SsrError, match="maxscore.*ssr compact"):
        open_retriever(index, "maxscore").search("alpha", 10)


def test_evaluate_runs_on_a_live_index_as_on_a_fresh_build(tmp_path):
    from ssr_engine.eval.evaluate import run_evaluation

    index, docs = small_index(tmp_path, n=60)
    writer = LiveIndex(index)
    rng = random.Random(9)
    more = {str(100 + i): text(rng) for i in range(20)}
    writer.add(list(more.items()))
    writer.delete([str(i) for i in range(0, 60, 7)])
    live = {i: t for i, t in {**docs, **more}.items() if not (int(i) < 60 and int(i) % 7 == 0)}
    fresh = build_index(write_tsv(tmp_path / "fresh.tsv", sorted(live.items())), tmp_path / "fresh", quiet=True)
    queries = tmp_path / "q.tsv"
    queries.write_text("".join(f"q{n}\t{q}\n" for n, q in enumerate(QUERIES[:20])), encoding="utf-8")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{n} 0 {i} 1\n" for n in range(20) for i in sorted(live)[n::20]), encoding="utf-8")
    got = run_evaluation(index, queries, qrels, "ssr", 10, run_path=tmp_path / "a.run", latency_queries=0)
    want = run_evaluation(fresh, queries, qrels, "ssr", 10, run_path=tmp_path / "b.run", latency_queries=0)
    assert got["metrics"] == want["metrics"]
    assert (tmp_path / "a.run").read_text() == (tmp_path / "b.run").read_text()
    assert got["index"]["counts"]["documents"] == len(live) and len(got["index"]["live"]["segments"]) == 2


_NO_PANDAS = """
import sys
from ssr_engine.live import LiveIndex
w = LiveIndex(sys.argv[1])
w.add([("100", "alpha beta"), ("101", "gamma")])
w.delete(["1", "100"])
print("pandas" in sys.modules)
"""


def test_a_change_in_a_fresh_process_does_not_import_pandas(tmp_path):
    """A process's first add reads the base segment's ids and ranks the new ones (pyarrow): `pa.array` of a
    list, `Array.to_numpy` and `pq.read_table` each import pandas (0.3-0.6 CPU s), which no step needs."""
    rng = random.Random(5)
    index = build_index(write_tsv(tmp_path / "c.tsv", [(str(i), text(rng)) for i in range(50)]), tmp_path / "idx",
                        quiet=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _NO_PANDAS, str(index)], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
    assert LiveIndex(index).info()["live"] == 50
