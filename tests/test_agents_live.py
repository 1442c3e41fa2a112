"""Live registries on the live index: writes rank exactly as a rebuild over the live cards; every
segment carries its card store (checked by `ssr verify`); a crash mid-write leaves the last commit."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ssr_engine.agents.discovery import Registry, build_registry
from ssr_engine.agents.live import LiveRegistry
from ssr_engine.agents.sources import read_cards, write_cards
from ssr_engine.cli import main
from ssr_engine.datagen.cards import iter_registry, make_queries
from ssr_engine.errors import IndexFormatError
from ssr_engine.format import CARD_STORE, verify_index
from ssr_engine.generations import read_commit

ROOT = Path(__file__).resolve().parents[1]


def _same(a, b):
    assert (a.ids, a.scores, a.matches) == (b.ids, b.scores, b.matches)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("live")
    cards = list(iter_registry(200, 3))
    build_registry(cards, d / "reg")
    return d, cards


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_writes_rank_as_the_reference_and_as_a_rebuild(tmp_path, base, seed):
    d, cards = base
    shutil.copytree(d / "reg", tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", max_segments=3 + seed)  # merges happen along the way
    rng = random.Random(seed)
    extra = list(iter_registry(300, 10 + seed))
    current = {c.id: c for c in cards}
    queries = [q.text for q in make_queries(200, 30, seed)] + ["zzz nothing", "maps", "weather forecast"]
    most_segments = 0
    for step in range(24):
        r = rng.random()
        if r < 0.3:  # new cards, one to three per commit; ids with spaces and non-integer ids mixed in
            new = [dataclasses.replace(rng.choice(extra), id=rng.choice([f"new card {step}.{j}", f"n{step}.{j}",
                                                                         f"é{step}.{j}"])) for j in range(3)]
            new = list({c.id: c for c in new}.values())
            report = live.put_many(new)
            assert report["added"] == len(new) and report["replaced"] == 0
            current.update((c.id, c) for c in new)
        elif r < 0.6 and current:
            gone = rng.sample(sorted(current), 2)
            assert live.delete_many(gone + ["never there"])["deleted"] == 2
            for cid in gone:
                del current[cid]
        else:  # replace an existing card with other text
            cid = rng.choice(sorted(current))
            c = dataclasses.replace(rng.choice(extra), id=cid)
            assert live.put(c) is True
            current[cid] = c
        most_segments = max(most_segments, len(live.view().stores))
        if step % 6 == 5:
            ref = Registry.from_cards(list(current.values()))
            for q in queries:
                for k in (1, 10, None):
                    _same(live.discover(q, k, with_cards=False), ref.discover(q, k, with_cards=False))
    assert len(live) == len(current) and set(c.id for c in live.cards()) == set(current)
    assert most_segments <= live.max_segments and verify_index(tmp_path / "reg") == []
    # the same cards built from scratch: identical pools, bit for bit, identical cards and explanations
    write_cards(list(current.values()), tmp_path / "live.jsonl")
    build_registry(tmp_path / "live.jsonl", tmp_path / "rebuilt")
    rebuilt = Registry.open(tmp_path / "rebuilt")
    for q in queries:
        a, b = live.discover(q, 20), rebuilt.discover(q, 20)
        _same(a, b)
        assert [c.original() for c in a.cards] == [c.original() for c in b.cards]
        for cid in b.ids[:3]:
            assert live.explain(q, cid) == rebuilt.explain(q, cid)
    # another process (a new registry object) reads the same commit
    again = LiveRegistry.open(tmp_path / "reg")
    assert again.version == live.version
    for q in queries:
        _same(again.discover(q, 20, with_cards=False), live.discover(q, 20, with_cards=False))


def test_integer_ids_turning_into_string_ids_keep_the_rebuild_order(tmp_path):
    cards = [dataclasses.replace(c, id=str(i * 7)) for i, c in enumerate(iter_registry(60, 5))]
    build_registry(cards, tmp_path / "reg")
    live = LiveRegistry.open(tmp_path / "reg")
    # one non-integer id switches the whole collection to string order ("14" < "7")
    live.put(dataclasses.replace(cards[0], id="x"))
    ref = Registry.from_cards(cards + [dataclasses.replace(cards[0], id="x")])
    for q in [c.description for c in cards[:20]]:
        _same(live.discover(q, 5, with_cards=False), ref.discover(q, 5, with_cards=False))
    live.delete("x")
    ref = Registry.from_cards(cards)
    for q in [c.description for c in cards[:20]]:
        _same(live.discover(q, 5, with_cards=False), ref.discover(q, 5, with_cards=False))


def test_cli_add_and_remove(tmp_path, capsys):
    cards = list(iter_registry(50, 1))
    write_cards(cards[:40], tmp_path / "a.jsonl")
    write_cards(cards[40:], tmp_path / "b.jsonl")
    assert main(["agents", "build", "--cards", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "reg")]) == 0
    assert main(["agents", "add", "--index", str(tmp_path / "reg"), "--cards", str(tmp_path / "b.jsonl")]) == 0
    assert "10 cards added, 0 replaced; the registry holds 50 cards (generation 2)" in capsys.readouterr().out
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{cards[0].id}\n\n{cards[45].id}\n")
    assert main(["agents", "remove", "--index", str(tmp_path / "reg"), "--ids", str(ids)]) == 0
    assert "2 cards removed; the registry holds 48 cards (generation 3)" in capsys.readouterr().out
    ids.write_text(f"{cards[1].id}\nnot there\n")
    assert main(["agents", "remove", "--index", str(tmp_path / "reg"), "--ids", str(ids)]) == 2
    err = capsys.readouterr().err
    assert f"{ids}:2: no card 'not there'" in err and "nothing removed" in err
    assert cards[1].id in LiveRegistry.open(tmp_path / "reg")
    assert main(["verify", str(tmp_path / "reg")]) == 0
    capsys.readouterr()
    live_cards = cards[1:45] + cards[46:]
    ref = Registry.from_cards(live_cards)
    q = make_queries(50, 5, 1)[0].text
    assert main(["agents", "discover", "--index", str(tmp_path / "reg"), "--json", "-k", "10", q]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = ref.discover(q, 10)
    assert [e["id"] for e in out["pool"]] == expected.ids and [e["score"] for e in out["pool"]] == expected.scores
    # a bad card in --cards names its file and line; nothing is written
    (tmp_path / "bad.jsonl").write_text('{"name": "ok", "description": "fine"}\n{"name": 5}\n')
    before = read_commit(tmp_path / "reg").generation
    assert main(["agents", "add", "--index", str(tmp_path / "reg"), "--cards", str(tmp_path / "bad.jsonl")]) == 2
    assert f"{tmp_path / 'bad.jsonl'}:2" in capsys.readouterr().err
    assert read_commit(tmp_path / "reg").generation == before


def test_every_segment_has_its_card_store_and_verify_checks_it(tmp_path):
    cards = list(iter_registry(40, 6))
    build_registry(cards[:30], tmp_path / "reg")
    live = LiveRegistry.open(tmp_path / "reg")
    live.put_many(cards[30:])
    commit = read_commit(tmp_path / "reg")
    assert len(commit.segments) == 2
    stores = [tmp_path / "reg" / ref.name / CARD_STORE for ref in commit.segments]
    assert all(p.is_file() for p in stores)
    assert verify_index(tmp_path / "reg") == []
    data = bytearray(stores[1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    stores[1].write_bytes(bytes(data))
    problems = verify_index(tmp_path / "reg")
    assert len(problems) == 1 and CARD_STORE in problems[0] and "checksum" in problems[0]
    # open does not hash every file (verify does); a store it cannot read is an error naming it, never a crash
    stores[1].write_bytes(bytes(data[: len(data) // 3]))
    with pytest.raises(IndexFormatError, match=CARD_STORE):
        LiveRegistry.open(tmp_path / "reg").discover(cards[35].description, 5)


def test_bm25_registries_take_writes_and_rank_as_a_rebuild(tmp_path):
    cards = list(iter_registry(40, 0))
    src = tmp_path / "c.jsonl"
    write_cards(cards[:30], src)
    build_registry(src, tmp_path / "reg", scoring="bm25")
    live = LiveRegistry.open(tmp_path / "reg")
    assert live.scoring == "bm25"
    live.put_many(cards[30:])
    live.delete_many([cards[0].id, cards[31].id])
    live_cards = cards[1:31] + cards[32:]
    write_cards(live_cards, tmp_path / "live.jsonl")
    build_registry(tmp_path / "live.jsonl", tmp_path / "rebuilt", scoring="bm25")
    rebuilt = Registry.open(tmp_path / "rebuilt")
    for q in [q.text for q in make_queries(40, 15, 0)]:
        _same(live.discover(q, 10, with_cards=False), rebuilt.discover(q, 10, with_cards=False))


def test_a_forced_rebuild_replaces_the_live_registry(tmp_path):
    cards = list(iter_registry(30, 0))
    write_cards(cards, tmp_path / "c.jsonl")
    assert main(["agents", "build", "--cards", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "reg")]) == 0
    LiveRegistry.open(tmp_path / "reg").delete(cards[1].id)
    assert len(LiveRegistry.open(tmp_path / "reg")) == 29
    assert main(["agents", "build", "--cards", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "reg"),
                 "--force"]) == 0
    rebuilt = LiveRegistry.open(tmp_path / "reg")
    assert len(rebuilt) == 30 and cards[1].id in rebuilt and len(rebuilt.view().stores) == 1


_CRASH = """
import os, sys
import ssr_engine.live as live
from ssr_engine.agents.sources import read_cards
from ssr_engine.agents.live import LiveRegistry

def crash(*args, **kwargs):
    os._exit(9)

setattr(live, sys.argv[3], crash)
LiveRegistry.open(sys.argv[1]).put_many(read_cards(sys.argv[2]))
"""


def _crash_in(where: str, reg: Path, cards: Path) -> None:
    """A process writing `cards` into `reg` dies (kill -9 alike) when it reaches `ssr_engine.live.<where>`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _CRASH, str(reg), str(cards), where], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 9, r.stderr


def test_a_crash_mid_write_leaves_the_last_commit(tmp_path):
    cards = list(iter_registry(40, 8))
    build_registry(cards[:30], tmp_path / "reg")
    live = LiveRegistry.open(tmp_path / "reg")
    live.delete(cards[0].id)
    before = read_commit(tmp_path / "reg")
    write_cards([dataclasses.replace(c, description="crash probe " + c.description) for c in cards[30:]],
                tmp_path / "more.jsonl")
    _crash_in("_commit", tmp_path / "reg", tmp_path / "more.jsonl")  # the segment is staged, not committed
    assert read_commit(tmp_path / "reg") == before
    assert verify_index(tmp_path / "reg") == []
    after = LiveRegistry.open(tmp_path / "reg")
    ref = Registry.from_cards(cards[1:30])
    for q in [c.description for c in cards[:40:3]] + ["crash probe"]:
        _same(after.discover(q, 10, with_cards=False), ref.discover(q, 10, with_cards=False))
    # the next writer cleans the dead one's staging and writes
    after.put_many(read_cards(tmp_path / "more.jsonl"))
    assert len(after) == 39 and verify_index(tmp_path / "reg") == []
    assert not [p for p in (tmp_path / "reg").iterdir() if p.name.startswith(".staging")]


def test_a_crash_while_a_write_builds_leaves_the_index_and_its_scratch_is_cleaned(tmp_path):
    cards = list(iter_registry(30, 6))
    build_registry(cards[:25], tmp_path / "reg")
    before = read_commit(tmp_path / "reg")
    write_cards(cards[25:], tmp_path / "more.jsonl")
    _crash_in("build_segment", tmp_path / "reg", tmp_path / "more.jsonl")  # building, before any lock
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".reg."))
    assert left and all(n.startswith((".reg.agents-", ".reg.build-")) for n in left)  # the dead writer's scratch
    assert read_commit(tmp_path / "reg") == before and verify_index(tmp_path / "reg") == []
    live = LiveRegistry.open(tmp_path / "reg")
    live.put_many(read_cards(tmp_path / "more.jsonl"))
    assert len(live) == 30 and verify_index(tmp_path / "reg") == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".reg.")]  # cleaned by the next writer


def test_another_processes_commit_is_seen_after_a_quiet_time(tmp_path):
    # `stale` skips reading the commit point while the folder's time is unchanged and old enough
    cards = list(iter_registry(12, 7))
    build_registry(cards[:10], tmp_path / "reg")
    reader, writer = LiveRegistry.open(tmp_path / "reg"), LiveRegistry.open(tmp_path / "reg")
    for card in cards[10:]:
        assert not reader.stale()
        time.sleep(0.15)
        assert not reader.stale()  # now from the folder's time alone
        writer.put(card)
        assert reader.stale() and reader.refresh() and card.id in reader and not reader.stale()


@pytest.mark.parametrize("collide", [False, True])
def test_a_one_worker_build_writes_the_files_of_a_pooled_build(tmp_path, collide):
    """A live write builds with one worker: on the calling thread, Numba's kernels serial
    (`indexing.pools`). Its files are those of a build on a thread pool, byte for byte, including
    after hash collisions (a narrow hash: the build restarts with the next seed)."""
    import numpy as np

    from ssr_engine.errors import SsrError
    from ssr_engine.format import open_index
    from ssr_engine.indexing import build_index

    rng = random.Random(7)
    words = [f"w{i}" for i in range(60)]
    docs = [(f"d{i}", " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))) for i in range(50)]
    bits = 64
    if collide:  # the narrowest hash whose build succeeds only after a collision
        for bits in range(8, 40):
            try:
                out = build_index(docs, tmp_path / "probe", workers=1, chunk_docs=17, hash_bits=bits, quiet=True,
                                  force=True)
            except SsrError:
                continue
            if open_index(out).settings.hash.seed > 0:
                break
    seeds = []
    for workers in (1, 2):
        out = build_index(docs, tmp_path / f"w{workers}", workers=workers, chunk_docs=17, hash_bits=bits,
                          quiet=True)
        seeds.append(open_index(out).settings.hash.seed)
    assert (seeds[0] > 0) == collide
    one, two = (next(p for p in (tmp_path / f"w{w}").iterdir() if p.name.startswith("seg-")) for w in (1, 2))
    names = sorted(p.name for p in one.iterdir())
    assert names == sorted(p.name for p in two.iterdir()) and "postings_docs.npy" in names
    for name in names:
        if name != "manifest.json":  # it records the workers and the times
            assert (one / name).read_bytes() == (two / name).read_bytes(), name
    m1, m2 = (json.loads((s / "manifest.json").read_text()) for s in (one, two))
    assert m1["files"] == m2["files"] and m1["signals"] == m2["signals"] and seeds[0] == seeds[1]
    assert np.array_equal(open_index(tmp_path / "w1").postings_docs, open_index(tmp_path / "w2").postings_docs)


def test_pools_run_one_worker_inline_and_keep_numba_threads():
    import numba

    from ssr_engine.indexing.pools import SMALL, pool, serial_if_small

    threads = numba.get_num_threads()
    with serial_if_small(10):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == threads
    with serial_if_small(SMALL):
        assert numba.get_num_threads() == threads
    with pool(1, "t") as p:
        import threading

        assert p.submit(threading.get_ident).result() == threading.get_ident()
        failed = p.submit(int, "not a number")
        with pytest.raises(ValueError):
            failed.result()


def test_a_new_commit_reads_no_ids_back_and_reuses_the_older_segments_id_pieces(tmp_path, base, monkeypatch):
    from ssr_engine import parts_tables
    from ssr_engine.format import Index

    d, cards = base
    shutil.copytree(d / "reg", tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg")
    added = [dataclasses.replace(cards[1], id="new one"), dataclasses.replace(cards[2], id="another one")]
    queries = [c.description for c in cards[:10]]
    live.put(added[0])
    for q in queries:
        live.discover(q, 5)
    first = live.view().snapshot.indexes
    pieces = [parts_tables.part_ids(ix) for ix in first]
    live.put(added[1])
    view = live.view()
    assert len(view.stores) == 3 and all(a is b for a, b in zip(view.snapshot.indexes[:2], first, strict=True))
    # the new segment's ids come from its card store; the older segments' pieces are kept on their indexes
    monkeypatch.setattr(Index, "doc_id_array", lambda self: pytest.fail(f"{self.path}: ids read back"))
    ref = Registry.from_cards(cards + added)
    for q in queries:
        _same(live.discover(q, 5, with_cards=False), ref.discover(q, 5, with_cards=False))
    assert all(parts_tables.part_ids(ix) is p for ix, p in zip(first, pieces, strict=True))


def test_the_card_stores_of_segments_merged_away_are_let_go(tmp_path, base):
    # a long-running server merges hundreds of small segments away: their stores must not be kept
    import gc
    import weakref

    d, cards = base
    shutil.copytree(d / "reg", tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", merge_at=10**6, max_segments=10**6)  # no merge until asked
    for i in range(3):
        live.put(dataclasses.replace(cards[i], id=f"added {i}"))
    small = [weakref.ref(store) for store in live.view().stores[1:]]
    assert len(small) == 3
    live.compact()
    live.put(dataclasses.replace(cards[5], id="after"))  # the view the compaction showed is retired, then dropped
    gc.collect()
    assert [r() for r in small] == [None, None, None]
    _same(live.discover(cards[0].description, 5), Registry.from_cards(
        cards + [dataclasses.replace(cards[i], id=f"added {i}") for i in range(3)]
        + [dataclasses.replace(cards[5], id="after")]).discover(cards[0].description, 5))
