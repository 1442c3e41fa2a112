"""Discovery: registries on disk (SSR and BM25) against the reference scorer, the card store, the CLI."""

from __future__ import annotations

import json

import pytest

from ssr_engine import card_signals
from ssr_engine.agents.cards import capability_values
from ssr_engine.agents.discovery import CARD_STORE, Registry, build_registry, discover
from ssr_engine.agents.sources import write_cards
from ssr_engine.cli import main
from ssr_engine.datagen.cards import iter_registry, make_queries
from ssr_engine.errors import IndexFormatError, SsrError
from ssr_engine.reference import ReferenceIndex

N_CARDS = 300


@pytest.fixture(scope="module")
def cards():
    return list(iter_registry(N_CARDS, seed=3))


@pytest.fixture(scope="module")
def queries():
    return make_queries(N_CARDS, 60, seed=3)


@pytest.fixture(scope="module")
def ssr_dir(tmp_path_factory, cards):
    src = tmp_path_factory.mktemp("cards") / "cards.jsonl"
    write_cards(cards, src)
    return build_registry(src, tmp_path_factory.mktemp("reg") / "ssr")


def test_built_index_holds_card_signals_of_capability_values(ssr_dir, cards):
    from ssr_engine.format import open_index

    index = open_index(ssr_dir)
    ids = index.doc_ids()
    assert sorted(ids) == sorted(c.id for c in cards)
    by_id = {c.id: c for c in cards}
    for row, cid in enumerate(ids):
        stored = {index.signal(int(t)) for t in index.forward_row(row)}
        assert stored == card_signals(capability_values(by_id[cid])), cid


def test_disk_registry_equals_reference(ssr_dir, cards, queries):
    registry = Registry.open(ssr_dir)
    assert len(registry) == N_CARDS and registry.scoring == "ssr"
    oracle = ReferenceIndex.from_fields([c.id for c in cards], [capability_values(c) for c in cards])
    memory = Registry.from_cards(cards)
    texts = [q.text for q in queries] + ["zzzz unknown words qqqq", ""]
    for k in (1, 7, 20):
        for text, pool in zip(texts, registry.discover_batch(texts, k), strict=True):
            hits = oracle.search(text, k)
            assert pool.ids == hits.ids.tolist()
            assert pool.scores == hits.scores.tolist()  # bit-identical
            assert pool.matches == hits.matches.tolist()
            assert [c.id for c in pool.cards] == pool.ids
            assert memory.discover(text, k).ids == pool.ids
    assert len(registry.discover("zzzz unknown words qqqq", 20)) == 0  # empty, never padded


def test_pool_cards_are_the_cards_and_explain_sums_to_the_score(ssr_dir, cards, queries):
    registry = Registry.open(ssr_dir)
    by_id = {c.id: c for c in cards}
    pool = discover(ssr_dir, queries[0].text, 5)
    assert pool.cards == [by_id[i] for i in pool.ids]
    for cid, score, matches in zip(pool.ids, pool.scores, pool.matches, strict=True):
        explained = registry.explain(queries[0].text, cid)
        assert len(explained) == matches
        assert sum(w for _, w in explained) == pytest.approx(score, rel=1e-12)
        memory = Registry.from_cards(cards).explain(queries[0].text, cid)
        assert [s for s, _ in memory] == [s for s, _ in explained]
    with pytest.raises(SsrError):
        registry.discover("x", 0)


def test_bm25_preselection_registry(tmp_path, cards, queries):
    out = build_registry(iter(cards), tmp_path / "bm25", scoring="bm25")
    registry = Registry.open(out)
    assert registry.scoring == "bm25"
    pools = registry.discover_batch([q.text for q in queries], 20)
    assert all(len(p) <= 20 for p in pools)
    assert all(p.scores == sorted(p.scores, reverse=True) for p in pools)
    hits = sum(q.gold in p.ids for q, p in zip(queries, pools, strict=True))
    assert hits >= 0.8 * len(queries)  # BM25 finds most gold cards of this synthetic registry
    assert registry.discover(queries[0].text, 3).ids == pools[0].ids[:3]


def test_card_store_is_registered_and_checked(tmp_path, cards, ssr_dir):
    import shutil

    from ssr_engine.agents.discovery import write_card_store
    from ssr_engine.format import open_index, verify_index
    from ssr_engine.indexing import build_index

    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"id": "a", "text": "alpha beta"}\n')
    with pytest.raises(IndexFormatError, match="not an agent registry"):
        Registry.open(build_index(plain, tmp_path / "plain", quiet=True))
    copy = tmp_path / "copy"
    shutil.copytree(ssr_dir, copy)
    store = open_index(copy).path / CARD_STORE
    assert verify_index(copy) == []
    raw = store.read_bytes()
    store.write_bytes(raw[:-1] + bytes([raw[-1] ^ 0x55]))  # same size: open passes, verify does not
    assert any("agent_cards.parquet: checksum mismatch" in p for p in verify_index(copy))
    write_card_store(cards[:10], store)
    with pytest.raises(IndexFormatError, match="agent_cards.parquet: size differs"):
        Registry.open(copy)
    store.unlink()
    with pytest.raises(IndexFormatError, match="agent_cards.parquet: missing"):
        Registry.open(copy)
    store.write_bytes(b"garbage".ljust(len(raw), b"!"))
    with pytest.raises(IndexFormatError, match="unreadable card store"):
        Registry.open(copy)


def test_card_store_from_its_written_rows_equals_the_store_read_back(tmp_path, cards):
    from ssr_engine.agents.discovery import CardStore, write_card_store

    rows: tuple[list[str], list[str]] = ([], [])
    path = tmp_path / CARD_STORE
    assert write_card_store(cards[:25], path, batch=10, rows=rows) == 25  # three batches
    kept, read = CardStore(path, rows), CardStore(path)
    assert kept.ids() == read.ids() == [c.id for c in cards[:25]]
    for c in cards[:25]:
        assert kept.text(c.id) == read.text(c.id)
        assert kept.get(c.id) == read.get(c.id)


def test_build_rejects_duplicates_and_leaves_nothing(tmp_path):
    src = tmp_path / "dup.jsonl"
    src.write_text('{"id": "a", "name": "x"}\n{"id": "a", "name": "y"}\n')
    with pytest.raises(SsrError, match=r"dup.jsonl:2: duplicate card id 'a'"):
        build_registry(src, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.jsonl"]


def test_cli_build_and_discover(tmp_path, capsys, cards, queries):
    src = tmp_path / "cards.jsonl"
    write_cards(cards[:50], src)
    out = tmp_path / "reg"
    assert main(["agents", "build", "--cards", str(src), "--out", str(out)]) == 0
    capsys.readouterr()
    q = make_queries(50, 1, seed=3)[0]
    assert main(["agents", "discover", "--index", str(out), "-k", "3", "--json", q.text]) == 0
    printed = json.loads(capsys.readouterr().out)
    pool = Registry.open(out).discover(q.text, 3)
    assert printed == {"query": q.text, "k": 3, "pool": [
        {"id": i, "score": s, "matches": m} for i, s, m in zip(pool.ids, pool.scores, pool.matches, strict=True)]}
    assert main(["agents", "discover", "--index", str(out), "-k", "2", "--explain", q.text]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split("\t")[:2] == ["1", pool.ids[0]]
    assert len([ln for ln in text if ln.startswith("\t\t")]) == sum(pool.matches[:2])
    assert main(["agents", "discover", "--index", str(out), "-k", "0", "x"]) == 2
    assert "k must be >= 1" in capsys.readouterr().err
    assert main(["agents", "discover", "--index", str(tmp_path), "x"]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "tags": "x"}\n')
    assert main(["agents", "build", "--cards", str(bad), "--out", str(tmp_path / "r2")]) == 2
    assert "bad.jsonl:1: card 'a': 'tags' must be a list of strings" in capsys.readouterr().err
