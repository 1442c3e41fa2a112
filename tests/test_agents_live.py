"""Live registries: writes rank exactly as a rebuild over the live cards; the journal survives a restart."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from ssr_engine.agents.cards import read_cards, write_cards
from ssr_engine.agents.discovery import Registry, build_registry
from ssr_engine.agents.live import JOURNAL, LiveRegistry
from ssr_engine.cli import main
from ssr_engine.datagen.cards import iter_registry, make_queries
from ssr_engine.errors import SsrError


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
    import shutil

    shutil.copytree(d / "reg", tmp_path / "reg")
    live = LiveRegistry.open(tmp_path / "reg")
    rng = random.Random(seed)
    extra = list(iter_registry(300, 10 + seed))
    current = {c.id: c for c in cards}
    queries = [q.text for q in make_queries(200, 30, seed)] + ["zzz nothing", "maps", "weather forecast"]
    for step in range(40):
        r = rng.random()
        if r < 0.35:  # a new card; ids with spaces and non-integer ids mixed in
            c = dataclasses.replace(rng.choice(extra), id=rng.choice([f"new card {step}", f"n{step}", f"é{step}"]))
            assert live.put(c) is False
        elif r < 0.7 and current:
            cid = rng.choice(sorted(current))
            assert live.delete(cid) is True
            del current[cid]
            continue
        else:  # replace an existing card with other text
            cid = rng.choice(sorted(current))
            c = dataclasses.replace(rng.choice(extra), id=cid)
            assert live.put(c) is True
        current[c.id] = c
        if step % 8 == 7:
            ref = Registry.from_cards(list(current.values()))
            for q in queries:
                for k in (1, 10, None):
                    _same(live.discover(q, k, with_cards=False), ref.discover(q, k, with_cards=False))
    assert len(live) == len(current) and live.version == sum(1 for _ in open(tmp_path / "reg" / JOURNAL))
    # the same cards built from scratch: identical pools, bit for bit, and identical explanations
    write_cards(list(current.values()), tmp_path / "live.jsonl")
    build_registry(tmp_path / "live.jsonl", tmp_path / "rebuilt")
    rebuilt = Registry.open(tmp_path / "rebuilt")
    for q in queries:
        a, b = live.discover(q, 20), rebuilt.discover(q, 20)
        _same(a, b)
        assert [c.original() for c in a.cards] == [c.original() for c in b.cards]
        for cid in b.ids[:3]:
            assert live.explain(q, cid) == rebuilt.explain(q, cid)
    # a restart replays the journal to the same state
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
    assert "10 cards added, 0 replaced; the registry holds 50 cards" in capsys.readouterr().out
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{cards[0].id}\n\n{cards[45].id}\n")
    assert main(["agents", "remove", "--index", str(tmp_path / "reg"), "--ids", str(ids)]) == 0
    assert "2 cards removed; the registry holds 48 cards" in capsys.readouterr().out
    ids.write_text(f"{cards[1].id}\nnot there\n")
    assert main(["agents", "remove", "--index", str(tmp_path / "reg"), "--ids", str(ids)]) == 2
    err = capsys.readouterr().err
    assert f"{ids}:2: no card 'not there'" in err and "nothing removed" in err
    assert cards[1].id in LiveRegistry.open(tmp_path / "reg")
    live_cards = cards[1:45] + cards[46:]
    ref = Registry.from_cards(live_cards)
    q = make_queries(50, 5, 1)[0].text
    assert main(["agents", "discover", "--index", str(tmp_path / "reg"), "--json", "-k", "10", q]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = ref.discover(q, 10)
    assert [e["id"] for e in out["pool"]] == expected.ids and [e["score"] for e in out["pool"]] == expected.scores


def test_torn_journal_line_is_ignored_and_corrupt_lines_are_errors(tmp_path):
    cards = list(iter_registry(20, 2))
    build_registry(cards, tmp_path / "reg")
    live = LiveRegistry.open(tmp_path / "reg")
    live.delete(cards[0].id)
    journal = tmp_path / "reg" / JOURNAL
    with open(journal, "a") as f:
        f.write('{"op": "delete", "id": "' + cards[1].id)  # a write that never returned
    again = LiveRegistry.open(tmp_path / "reg")
    assert cards[1].id in again and cards[0].id not in again and again.version == 1
    journal.write_text('{"op": "delete", "id": "x"}\nnot json\n')
    with pytest.raises(SsrError, match=rf"{JOURNAL}:2: corrupt journal record"):
        LiveRegistry.open(tmp_path / "reg")


def test_bm25_registries_refuse_writes(tmp_path):
    src = tmp_path / "c.jsonl"
    write_cards(list(iter_registry(10, 0)), src)
    build_registry(src, tmp_path / "reg", scoring="bm25")
    live = LiveRegistry.open(tmp_path / "reg")
    with pytest.raises(SsrError, match="live updates need an SSR registry"):
        live.put(read_cards(src)[0])
    assert not (tmp_path / "reg" / JOURNAL).exists()


def test_a_forced_rebuild_starts_without_the_old_journal(tmp_path):
    cards = list(iter_registry(30, 0))
    write_cards(cards, tmp_path / "c.jsonl")
    assert main(["agents", "build", "--cards", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "reg")]) == 0
    LiveRegistry.open(tmp_path / "reg").delete(cards[1].id)
    assert len(LiveRegistry.open(tmp_path / "reg")) == 29
    assert main(["agents", "build", "--cards", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "reg"),
                 "--force"]) == 0
    rebuilt = LiveRegistry.open(tmp_path / "reg")
    assert len(rebuilt) == 30 and rebuilt.version == 0 and cards[1].id in rebuilt
