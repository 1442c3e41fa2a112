"""Registry segment merges (tiered, in the background for a server), compaction that carries the
card stores, and the write-path warm-up: rankings stay those of a rebuild, a merge never
undoes a write committed after the cards it re-adds were read, and writes go on while a merge builds."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ssr_engine.agents import live as agents_live
from ssr_engine.agents import merges as agents_merges
from ssr_engine.agents.cards import AgentCard
from ssr_engine.agents.discovery import Registry, build_registry
from ssr_engine.agents.live import LiveRegistry, is_registry
from ssr_engine.agents.merges import absorbable, merge_plan
from ssr_engine.cli import main
from ssr_engine.datagen.cards import iter_registry, make_queries
from ssr_engine.errors import SsrError
from ssr_engine.format import CARD_STORE, verify_index
from ssr_engine.generations import read_commit
from ssr_engine.live import LiveIndex, StaleCommit


def _same(a, b):
    assert (a.ids, a.scores, a.matches) == (b.ids, b.scores, b.matches)


def _check_rebuild(live: LiveRegistry, cards: list[AgentCard], seed: int = 0) -> None:
    ref = Registry.from_cards(cards)
    assert sorted(c.id for c in live.cards()) == sorted(c.id for c in cards)
    for q in [q.text for q in make_queries(len(cards), 25, seed)] + ["weather forecast", "zzz nothing"]:
        for k in (1, 10, None):
            _same(live.discover(q, k, with_cards=False), ref.discover(q, k, with_cards=False))


def test_merge_plan_is_tiered_and_capped():
    # one tier (1-9 cards) reaching 4 segments: those merge, the big ones stay
    assert merge_plan([100_000, 1, 3, 2]) == []
    assert merge_plan([100_000, 1, 3, 2, 5]) == [1, 2, 3, 4]
    # a full tier of 10-99 takes every smaller segment with it, never a larger one
    assert merge_plan([5000, 20, 30, 1, 40, 50]) == [1, 2, 3, 4, 5]
    # three per tier over many tiers: the cap merges the smallest down to it
    live = [100_000, 10_000, 20_000, 1000, 2000, 100, 200, 10, 20, 1]
    assert merge_plan(live, max_segments=8) == [7, 8, 9]
    assert merge_plan([7, 3], max_segments=1) == [0, 1]
    assert merge_plan([0, 1, 2, 3]) == [0, 1, 2, 3]  # an emptied segment counts as the smallest tier


def test_background_merges_keep_rankings_and_writes_visible_at_once(tmp_path):
    cards = list(iter_registry(120, 4))
    build_registry(cards[:100], tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", background=True, merge_quiet=0.05)
    current = {c.id: c for c in cards[:100]}
    for i, c in enumerate(cards[100:]):
        live.put(c)
        current[c.id] = c
        assert c.id in live and live.discover(c.description, 200, with_cards=False).ids.count(c.id) == 1
        if i % 3 == 2:
            gone = sorted(current)[i]
            assert live.delete(gone) and gone not in live
            del current[gone]
    live.merges.wait()
    assert not merge_plan([ref.documents for ref in read_commit(tmp_path / "reg").segments])
    assert verify_index(tmp_path / "reg") == []
    _check_rebuild(live, list(current.values()))
    live.close()


def test_a_merge_never_undoes_another_writers_commit(tmp_path):
    cards = list(iter_registry(40, 2))
    build_registry(cards[:30], tmp_path / "reg")
    mine = LiveRegistry(tmp_path / "reg", max_segments=100, merge_at=100)
    for c in cards[30:35]:
        mine.put(c)
    mine.merge_at = 4
    assert len(mine.view().stores) == 6 and mine._plan()
    other = LiveRegistry(tmp_path / "reg", max_segments=100, merge_at=100)
    victim = cards[31].id
    assert other.delete(victim)
    # the merge reads a view older than the delete (as if the delete landed between read and write)
    stale = mine.view()
    mine.refresh = lambda: False  # type: ignore[method-assign]
    assert mine.view() is stale and victim in stale
    assert mine.merge_once() is False
    with pytest.raises(StaleCommit):
        LiveIndex(tmp_path / "reg").add([("x", "text")], expect_generation=stale.version)
    fresh = LiveRegistry.open(tmp_path / "reg")
    assert victim not in fresh and len(fresh.view().stores) == 5  # its segment emptied: it left
    del mine.refresh
    assert mine.merge_once() is True and victim not in mine
    _check_rebuild(mine, [c for c in cards[:35] if c.id != victim])


def test_writes_during_background_merges_stay(tmp_path):
    cards = list(iter_registry(60, 9))
    build_registry(cards[:40], tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", background=True, merge_quiet=0.0)
    writers = [threading.Thread(target=live.put, args=(c,)) for c in cards[40:]]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    live.merges.wait()
    _check_rebuild(live, cards)
    live.close()


def test_a_write_goes_on_while_a_merge_builds_and_both_commit(tmp_path, monkeypatch):
    # the merge's build is held inside LiveIndex.prepare; a put (and a delete in a segment the merge does
    # not touch) commit meanwhile; the merge then commits on top of them: its segments are unchanged
    cards = list(iter_registry(50, 5))
    build_registry(cards[:40], tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", background=True, merge_quiet=0.0, max_segments=100, merge_at=4)
    building, release = threading.Event(), threading.Event()
    prepare = LiveIndex.prepare

    def held(self, *args, **kwargs):
        if threading.current_thread().name == "ssr-registry-merge":
            building.set()
            assert release.wait(60)
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(LiveIndex, "prepare", held)
    monkeypatch.setattr(agents_merges, "ABSORB", 0)  # no write absorbs: the merge runs beside them (a big one's way)
    assert live.put_many(cards[40:41])["merging"] is False  # no merge ran beside this write
    for c in cards[41:44]:
        live.put(c)  # the fourth one-card segment starts a merge of the four
    assert building.wait(60)
    before = live.version
    # would wait for the merge if merges held the registry's lock while building; it tells of the merge
    assert live.put_many(cards[44:45])["merging"] is True
    assert live.delete(cards[0].id)  # the built segment: not one the merge replaces
    assert live.version == before + 2 and cards[44].id in live and cards[0].id not in live
    release.set()
    live.merges.wait()
    assert len(live.view().stores) == 3  # the base, the merged four, the later put
    _check_rebuild(live, cards[1:45])
    live.close()


def test_compact_carries_the_card_stores(tmp_path, capsys):
    cards = list(iter_registry(50, 1))
    build_registry(cards[:30], tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", max_segments=100, merge_at=100)
    for c in cards[30:40]:
        live.put(c)
    live.put_many(cards[40:])
    live.put(dataclasses.replace(cards[3], description="replaced text for weather maps"))
    live.delete_many([cards[0].id, cards[35].id])
    expected = [c for c in cards if c.id not in (cards[0].id, cards[35].id, cards[3].id)]
    expected.append(dataclasses.replace(cards[3], description="replaced text for weather maps"))
    assert len(live.view().stores) > 2 and is_registry(tmp_path / "reg")
    # the plain live-index compaction refuses what it cannot carry, and writes nothing
    before = read_commit(tmp_path / "reg").generation
    with pytest.raises(SsrError, match=CARD_STORE):
        LiveIndex(tmp_path / "reg").compact()
    assert read_commit(tmp_path / "reg").generation == before
    assert main(["compact", "--index", str(tmp_path / "reg"), "--json"]) == 0
    report = capsys.readouterr().out
    assert '"documents": 48' in report and '"segments_before": 12' in report
    commit = read_commit(tmp_path / "reg")
    assert len(commit.segments) == 1 and commit.segments[0].deletes is None
    assert (tmp_path / "reg" / commit.segments[0].name / CARD_STORE).is_file()
    assert verify_index(tmp_path / "reg") == []
    again = LiveRegistry.open(tmp_path / "reg")
    _check_rebuild(again, expected, seed=1)
    assert [c.original() for c in again.cards()] == [c.original() for c in live.cards()]
    # compacting a compact registry writes nothing
    assert again.compact()["generation"] == commit.generation
    assert main(["compact", "--index", str(tmp_path / "reg")]) == 0  # a line for a person (no seconds here)
    assert f"compacted {tmp_path / 'reg'}: 1 segments -> 1, 48 documents" in capsys.readouterr().err
    assert not is_registry(tmp_path / "nothing")


def _files(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_nlink, p.read_bytes()) for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("ids", ["text", "integer"])
def test_warm_up_leaves_no_trace(tmp_path, monkeypatch, ids):
    cards = list(iter_registry(20, 3))
    if ids == "integer":  # the live searcher orders integer ids as numbers: its own kernels
        cards = [dataclasses.replace(c, id=str(1000 + i)) for i, c in enumerate(cards)]
    build_registry(cards, tmp_path / "reg")
    live = LiveRegistry.open(tmp_path / "reg", background=True)
    before = read_commit(tmp_path / "reg")
    files = _files(tmp_path / "reg")
    live.warm_up()
    assert read_commit(tmp_path / "reg") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reg"]
    # the mirror's hard links are gone and every file the registry had is as it was
    after = _files(tmp_path / "reg")
    assert {name: after[name] for name in files} == files
    # the writer holds the build's segment's ids (read once, no file written) so the first write does not read them
    assert (before.segments[0].name, before.segments[0].manifest_sha256) in live._writer._ids
    assert verify_index(tmp_path / "reg") == []
    _check_rebuild(live, cards)
    # the first writes after the warm-up meet no kernel signature it left out (a compile, or a cache
    # load, on a request: seconds after an upgrade, ~0.5 s once served)
    import numba.core.dispatcher as dispatcher

    compiled: list[str] = []
    compile_ = dispatcher.Dispatcher.compile

    def counting(self, sig):
        known = len(self.overloads)
        out = compile_(self, sig)
        if len(self.overloads) > known:
            compiled.append(f"{self.py_func.__qualname__}{sig}")
        return out

    monkeypatch.setattr(dispatcher.Dispatcher, "compile", counting)
    q = cards[0].name
    for i in range(5):
        live.put(AgentCard(id=str(i) if ids == "integer" and i < 3 else f"probe {i}", name=f"probe {i}", description=q))
        live.discover(q, 5)
        live.view().discover(q, 5, with_cards=False, with_texts=True)
    live.delete(cards[1].id)
    live.discover(q, 5)
    live.merges.wait()
    monkeypatch.undo()
    assert compiled == []
    live.close()


_CRASH = """
import os, sys
import ssr_engine.live as live
from ssr_engine.agents.live import LiveRegistry

def crash(*args, **kwargs):  # the merged segment is staged; the process dies before its commit point
    os._exit(9)

live._commit = crash
registry = LiveRegistry(sys.argv[1], max_segments=100, merge_at=100)
registry.compact() if sys.argv[2] == "compact" else (setattr(registry, "merge_at", 2), registry.merge_once())
"""


@pytest.mark.parametrize("how", ["compact", "merge"])
def test_a_crash_mid_merge_or_compaction_leaves_the_last_commit(tmp_path, how):
    cards = list(iter_registry(40, 7))
    build_registry(cards[:30], tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", max_segments=100, merge_at=100)
    for c in cards[30:]:
        live.put(c)
    live.delete(cards[2].id)
    before = read_commit(tmp_path / "reg")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path / "reg"), how], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 9, r.stderr
    assert read_commit(tmp_path / "reg") == before and verify_index(tmp_path / "reg") == []
    again = LiveRegistry(tmp_path / "reg", max_segments=100, merge_at=100)
    expected = [c for c in cards if c.id != cards[2].id]
    _check_rebuild(again, expected, seed=2)
    # the next writer cleans the dead one's staging folder and compacts
    assert again.compact()["documents"] == 39 and len(again.view().stores) == 1
    assert not [p for p in (tmp_path / "reg").iterdir() if p.name.startswith(".staging")]
    _check_rebuild(again, expected, seed=2)


def test_a_background_merge_commits_after_the_writes_under_way():
    from ssr_engine.agents.merges import Merger

    events: list[str] = []
    merger = Merger(registry=None, background=True, quiet=0.0)

    def merge_commit() -> None:
        merger.yield_to_writes(most=30.0)
        events.append("merge commits")

    with merger.writing():
        thread = threading.Thread(target=merge_commit)
        thread.start()
        thread.join(0.2)  # the merge waits while the write is under way
        events.append("write commits")
    thread.join(30.0)
    assert events == ["write commits", "merge commits"]
    inline = Merger(registry=None, background=False, quiet=0.0)
    with inline.writing():  # a merge run by the write itself (no background thread) must not wait for it
        thread = threading.Thread(target=inline.yield_to_writes, args=(30.0,))
        thread.start()
        thread.join(10.0)
        assert not thread.is_alive()


def test_writes_absorb_the_small_segments_and_rank_as_a_rebuild(tmp_path, monkeypatch):
    # a write takes the small segments the plan names into its own segment: no merge runs beside writes,
    # the segment count stays bounded and rankings stay those of a rebuild (replaced ids included)
    cards = list(iter_registry(160, 6))
    build_registry(cards[:120], tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", background=True, merge_quiet=3600)  # no background merge while writing
    current = {c.id: c for c in cards[:120]}
    absorbed = []
    for i, c in enumerate(cards[120:150]):
        if i % 5 == 4:  # the newest earlier write again (its id live in a small segment): replaced, not added
            c = dataclasses.replace(cards[120 + i - 1], description=f"rewritten {i} " + c.description)
        elif i % 7 == 6:  # a card of the base, replaced
            c = dataclasses.replace(cards[i], description=f"replaced {i} " + c.description)
        report = live.put_many([c])
        assert (report["added"], report["replaced"]) == ((0, 1) if c.id in current else (1, 0))
        current[c.id] = c
        absorbed.append(report["absorbed"])
        assert len(live.view().stores) <= 5 and not live._plan()  # nothing left for a merge
        if i % 6 == 5:
            _check_rebuild(live, list(current.values()), seed=i)
    assert sum(a > 0 for a in absorbed) >= 5 and live.merges.started == 0
    # a segment it meant to absorb changed meanwhile (another thread's write): the write goes on without it
    for c in cards[150:155]:
        if absorbable(live, [cards[155]]) is not None:
            break
        live.put(c)
        current[c.id] = c
    stale = absorbable(live, [cards[155]])
    assert stale is not None
    victim = stale[1][0].id  # a card of a segment it would absorb
    assert live.delete(victim)
    del current[victim]
    monkeypatch.setattr(agents_live, "absorbable", lambda _reg, _cards: stale)
    report = live.put_many([cards[155]])
    current[cards[155].id] = cards[155]
    assert report["absorbed"] == 0 and report["added"] == 1
    _check_rebuild(live, list(current.values()))
    assert verify_index(tmp_path / "reg") == []
    live.close()


def test_an_absorbing_publish_that_misses_a_live_document_writes_nothing(tmp_path):
    cards = list(iter_registry(30, 8))
    build_registry(cards[:20], tmp_path / "reg")
    live = LiveRegistry(tmp_path / "reg", merge_at=10**6, max_segments=10**6)
    live.put_many(cards[20:23])
    small = live.view().snapshot.commit.segments[-1]
    before = read_commit(tmp_path / "reg").generation
    with live._segment([cards[25]]) as (segment, _store):  # holds none of the small segment's 3 cards
        with pytest.raises(SsrError, match="holds 0 of the 3 live documents"):
            LiveIndex(tmp_path / "reg").publish(segment, upsert=True, replaces={small.name: small.deletes_sha256})
    assert read_commit(tmp_path / "reg").generation == before
    live.close()
