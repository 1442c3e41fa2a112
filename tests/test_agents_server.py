"""`ssr agents serve` on loopback: the HTTP API through httpx, MCP through the SDK's own client
(streamable HTTP and stdio), 8 clients discovering while another writes, MetaTool pool for pool."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx  # the serve extra and httpx are in the test extra: a broken install fails here, never skips
import pytest
import uvicorn

from ssr_engine.agents.discovery import Registry, build_registry
from ssr_engine.agents.live import LiveRegistry
from ssr_engine.agents.server import create_app
from ssr_engine.agents.sources import read_cards, write_cards
from ssr_engine.datagen.cards import iter_registry, make_queries

DATA = Path(__file__).parent / "data" / "agents"
ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-token"


class Served:
    """uvicorn in a thread on 127.0.0.1 (a free port)."""

    def __init__(self, app):
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        # the first search may compile a kernel (after a source change: tens of seconds on a loaded
        # machine), longer than a client's timeout; `ssr agents serve` pays it in `warm_up`
        httpx.post(self.url + "/discover", json={"query": "warm up", "k": 1}, timeout=600)

    def close(self):
        self.server.should_exit = True
        self.thread.join(10)


def _build(tmp_path, n=150, seed=4):
    """A registry of the published fixtures (as files, pretty-printed) and n synthetic cards (JSONL)."""
    import shutil

    folder = tmp_path / "cards"
    shutil.copytree(DATA, folder)
    (folder / "synthetic.json").write_text(json.dumps([c.to_dict() for c in iter_registry(n, seed)]))
    write_cards(iter_registry(n, seed), folder / "queries-and-more.jsonl")  # JSONL in a folder is not read
    build_registry(folder, tmp_path / "reg")
    return read_cards(folder)


@pytest.fixture
def served(tmp_path):
    cards = _build(tmp_path)
    registry = LiveRegistry.open(tmp_path / "reg")
    # as `ssr agents serve` does: the first write's searches (several segments) compile in the process
    # otherwise, longer than a client's timeout on a loaded machine
    registry.warm_up()
    s = Served(create_app(registry, token=TOKEN, max_body=64 * 1024))
    s.cards, s.registry, s.path = cards, registry, tmp_path / "reg"
    yield s
    s.close()


def _path(cid):
    return "/cards/" + quote(cid, safe="")


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_discover_equals_the_library_and_returns_cards_verbatim(served):
    ref = Registry.from_cards(served.cards)
    queries = [q.text for q in make_queries(150, 20, 4)] + ["zip code weather", "book a flight to Lisbon"]
    with httpx.Client(base_url=served.url) as c:
        assert c.get("/health").json() == {"status": "ok", "cards": len(served.cards), "version": 1,
                                           "scoring": "ssr"}  # the build's commit
        for q in queries:
            r = c.post("/discover", json={"query": q, "k": 7})
            assert r.status_code == 200
            body = r.json()
            expected = ref.discover(q, 7)
            assert [e["id"] for e in body["pool"]] == expected.ids
            assert [e["score"] for e in body["pool"]] == expected.scores  # bit for bit through JSON
            assert [e["matches"] for e in body["pool"]] == expected.matches
            assert [e["card"] for e in body["pool"]] == [c_.original() for c_ in expected.cards]
        r = c.post("/discover", json={"query": "zip code weather", "k": 20, "explain": True}).json()
        for entry in r["pool"]:
            weights = sorted(s["weight"] for s in entry["signals"])
            total = 0.0
            for w in weights:  # the canonical (ascending) sum of the explained weights is the score
                total += w
            assert total == entry["score"] and len(weights) == entry["matches"]
            assert entry["signals"] == [{"signal": s, "weight": w} for s, w in ref.explain("zip code weather",
                                                                                            entry["id"])]
        assert {s["signal"] for e in r["pool"] if e["id"] == "get_weather" for s in e["signals"]} == {
            "zip", "code", "zip code", "weather"}
        assert c.post("/discover", json={"query": "qqq zzz", "k": 3}).json()["pool"] == []


def test_card_ids_in_paths_and_writes(served):
    v10 = json.loads((DATA / "a2a-v1.0-agent-card.json").read_text())
    with httpx.Client(base_url=served.url) as c:
        r = c.get(_path("https://travel.example.com/a2a/v1"))
        assert r.status_code == 200 and r.json() == v10
        assert r.text == (DATA / "a2a-v1.0-agent-card.json").read_text().strip()  # byte for byte
        odd = "Agent 100% météo/☀?x=1"
        card = {"name": "Meteo", "description": "rain radar for sailors"}
        assert c.put(_path(odd), json=card).status_code == 401
        assert c.put(_path(odd), json=card, headers={"Authorization": "Bearer wrong"}).status_code == 401
        r = c.put(_path(odd), json=card, headers=AUTH)
        body = r.json()
        assert r.status_code == 201 and {key: body[key] for key in ("id", "created", "version")} == {
            "id": odd, "created": True, "version": 2}
        assert {"build", "commit"} <= set(body["ms"])  # where the write's time went
        assert body["merging"] is False and body["gc_ms"] >= 0  # no merge yet; collections meanwhile
        # visible to the very next request
        assert c.post("/discover", json={"query": "rain radar", "k": 1}).json()["pool"][0]["id"] == odd
        assert c.get(_path(odd)).json() == card
        card2 = dict(card, description="snow radar for skiers")
        r = c.put(_path(odd), content=json.dumps(card2), headers=AUTH)
        assert r.status_code == 200 and r.json()["created"] is False
        assert c.get(_path(odd)).json() == card2
        top = c.post("/discover", json={"query": "rain radar", "k": 1}).json()["pool"][0]
        assert top["id"] == odd and top["matches"] == 1 and top["card"] == card2  # "rain" is gone
        assert c.delete(_path(odd)).status_code == 401
        assert c.delete(_path(odd), headers=AUTH).json() == {"id": odd, "deleted": True, "version": 4}
        assert c.get(_path(odd)).status_code == 404
        assert c.delete(_path(odd), headers=AUTH).status_code == 404
        assert c.get("/health").json() == {"status": "ok", "cards": len(served.cards), "version": 4,
                                           "scoring": "ssr"}


@pytest.mark.parametrize(
    "method, path, kwargs, status, fragment",
    [
        ("post", "/discover", {"json": {"query": "x", "k": 0}}, 400, "k"),
        ("post", "/discover", {"json": {"query": "x", "k": 5000}}, 400, "k"),
        ("post", "/discover", {"json": {"k": 3}}, 400, "query"),
        ("post", "/discover", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, ""),
        ("post", "/discover", {"json": {"query": "x" * 70_000}}, 413, "larger than 65536 bytes"),
        ("put", "/cards/a", {"content": b"[1, 2]", "headers": AUTH}, 400, "one card"),
        ("put", "/cards/a", {"content": b"\xff\xfe", "headers": AUTH}, 400, "not a JSON card"),
        ("put", "/cards/a", {"json": {"id": "b", "name": "x"}, "headers": AUTH}, 409, "differs"),
        ("put", "/cards/a", {"json": {"name": 5}, "headers": AUTH}, 400, "'name' must be a string"),
        ("get", "/cards/nope", {}, 404, "no card with id 'nope'"),
        ("get", "/cards/%FF", {}, 400, "UTF-8"),
    ],
)
def test_bad_requests_are_4xx_json(served, method, path, kwargs, status, fragment):
    with httpx.Client(base_url=served.url) as c:
        r = getattr(c, method)(path, **kwargs)
        assert r.status_code == status
        assert fragment in r.json()["error"]
        assert c.get("/health").json()["version"] == 1  # nothing was written


def test_streamed_body_over_the_limit_is_refused(served):
    def chunks():
        for _ in range(100):
            yield b"x" * 1024

    with httpx.Client(base_url=served.url) as c:
        r = c.post("/discover", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413


def test_openapi_describes_the_api(served):
    with httpx.Client(base_url=served.url) as c:
        spec = c.get("/openapi.json").json()
        assert {"/discover", "/cards/{card_id}", "/health"} <= set(spec["paths"])
        assert c.get("/docs").status_code == 200


def _mcp_calls(target):
    from mcp import Client

    async def run():
        async with Client(target) as client:
            tools = await client.list_tools()
            pool = await client.call_tool("discover", {"query": "zip code weather", "k": 3})
            card = await client.call_tool("get_card", {"id": "https://travel.example.com/a2a/v1"})
            missing = await client.call_tool("get_card", {"id": "nope"})
            return tools, pool, card, missing

    return asyncio.run(run())


def _check_mcp(tools, pool, card, missing, ref):
    assert {t.name for t in tools.tools} == {"discover", "get_card"}
    expected = ref.discover("zip code weather", 3)
    data = pool.structured_content
    assert [e["id"] for e in data["pool"]] == expected.ids and [e["score"] for e in data["pool"]] == expected.scores
    assert data["pool"][0]["card"] == expected.cards[0].original()
    assert card.structured_content == json.loads((DATA / "a2a-v1.0-agent-card.json").read_text())
    assert missing.is_error and "no card with id 'nope'" in missing.content[0].text


def test_mcp_over_streamable_http_with_the_sdk_client(served):
    _check_mcp(*_mcp_calls(served.url + "/mcp"), Registry.from_cards(served.cards))


def test_mcp_over_stdio_with_the_sdk_client(tmp_path):
    from mcp.client.stdio import StdioServerParameters

    cards = _build(tmp_path, n=40)
    env = {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ssr_engine", "agents", "serve", "--index",
                                                                 str(tmp_path / "reg"), "--stdio"], env=env)
    _check_mcp(*_mcp_calls(params), Registry.from_cards(cards))


def test_eight_readers_and_a_writer_every_answer_is_a_committed_state(tmp_path):
    cards = _build(tmp_path, n=120, seed=9)
    # as `ssr agents serve` runs it: segments merged in the background (here as soon as they can)
    registry = LiveRegistry(tmp_path / "reg", background=True, merge_quiet=0.0)
    s = Served(create_app(registry, token=TOKEN))
    queries = [q.text for q in make_queries(120, 6, 9)] + ["zip code weather"]
    extra = list(iter_registry(60, 99))
    state = {c.id: c for c in cards}
    snapshots = {registry.version: dict(state)}
    seen: list[tuple[int, str, list, list]] = []
    errors: list[str] = []
    stop = threading.Event()

    def reader(i):
        rng = random.Random(i)
        with httpx.Client(base_url=s.url, timeout=30) as c:
            while not stop.is_set():
                q = rng.choice(queries)
                try:
                    r = c.post("/discover", json={"query": q, "k": 10})
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text}")
                        continue
                    body = r.json()
                    seen.append((body["version"], q, [e["id"] for e in body["pool"]],
                                 [e["score"] for e in body["pool"]]))
                except Exception as exc:  # noqa: BLE001 - any failure is the finding
                    errors.append(repr(exc))

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        rng = random.Random(0)
        with httpx.Client(base_url=s.url, timeout=30) as c:
            for step in range(30):
                if step % 3 == 2:
                    cid = rng.choice(sorted(state))
                    r = c.delete(_path(cid), headers=AUTH)
                    del state[cid]
                else:
                    card = extra[step]
                    r = c.put(_path(card.id + f" v{step}"), json=card.original() | {"id": card.id + f" v{step}"},
                              headers=AUTH)
                    state[card.id + f" v{step}"] = read_cards_from(card, card.id + f" v{step}")
                assert r.status_code in (200, 201), r.text
                snapshots[r.json()["version"]] = dict(state)
                time.sleep(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        s.close()
    assert errors == []
    assert len(seen) > 50 and len({v for v, *_ in seen}) > 5
    registry.close()
    assert len(snapshots) == 31 and max(v for v, *_ in seen) <= registry.version
    refs: dict[int, Registry] = {}
    for version, q, ids, scores in seen:
        # a version no write answered with is a merge: the cards of the last write before it
        version = max(v for v in snapshots if v <= version)
        ref = refs.get(version)
        if ref is None:
            ref = refs[version] = Registry.from_cards(list(snapshots[version].values()))
        expected = ref.discover(q, 10, with_cards=False)
        assert (ids, scores) == (expected.ids, expected.scores), (version, q)


def test_other_processes_writes_are_shown_by_the_timer(tmp_path):
    """A write by another process (here another registry object on the same directory, as
    `ssr agents add` would make) is picked up by the server's refresh timer."""
    cards = _build(tmp_path, n=30, seed=2)
    s = Served(create_app(LiveRegistry.open(tmp_path / "reg"), refresh=0.02))
    other = LiveRegistry.open(tmp_path / "reg")
    try:
        with httpx.Client(base_url=s.url) as c:
            assert c.post("/discover", json={"query": "zqxv lighthouse", "k": 3}).json()["pool"] == []
            new = dataclasses.replace(cards[0], id="outside", description="zqxv lighthouse keeper")
            version = other.put_many([new])["version"]
            deadline = time.monotonic() + 10
            while True:
                body = c.post("/discover", json={"query": "zqxv lighthouse", "k": 3}).json()
                if body["pool"]:
                    break
                assert time.monotonic() < deadline, "another process's write never became visible"
                time.sleep(0.01)
            assert body["version"] == version and body["pool"][0]["id"] == "outside"
            ref = Registry.from_cards(cards + [new])
            q = "zqxv lighthouse " + cards[3].description
            got = c.post("/discover", json={"query": q, "k": 10}).json()["pool"]
            expected = ref.discover(q, 10)
            assert [(e["id"], e["score"]) for e in got] == list(zip(expected.ids, expected.scores, strict=True))
    finally:
        s.close()


def read_cards_from(card, new_id):
    return dataclasses.replace(card, id=new_id)


def test_metatool_through_http_equals_the_cli(tmp_path, capsys):
    from ssr_engine.agents.bench import load_metatool
    from ssr_engine.cli import main

    cards, queries = load_metatool()  # the copy bundled with the package
    write_cards(cards, tmp_path / "metatool.jsonl")
    build_registry(tmp_path / "metatool.jsonl", tmp_path / "reg")
    s = Served(create_app(LiveRegistry.open(tmp_path / "reg")))
    reg = Registry.open(tmp_path / "reg")
    try:
        picked = random.Random(0).sample(queries, 300)
        with httpx.Client(base_url=s.url) as c:
            for i, q in enumerate(picked):
                body = c.post("/discover", json={"query": q.text, "k": 20}).json()
                http_pool = [(e["id"], e["score"], e["matches"]) for e in body["pool"]]
                if i < 10:  # the CLI itself for a few (a process-level check), the library for all
                    assert main(["agents", "discover", "--index", str(tmp_path / "reg"), "--json", "-k", "20",
                                 q.text]) == 0
                    cli = json.loads(capsys.readouterr().out)
                    assert http_pool == [(e["id"], e["score"], e["matches"]) for e in cli["pool"]]
                p = reg.discover(q.text, 20)
                assert http_pool == list(zip(p.ids, p.scores, p.matches, strict=True))
    finally:
        s.close()


def test_the_gc_clock_counts_collections():
    # a PUT's "gc_ms" is this clock's advance over the write: a collection (any thread's) advances it
    import gc

    from ssr_engine.agents.server import GC_CLOCK

    before = GC_CLOCK.seconds
    cycles = []
    for _ in range(20_000):
        a: list = []
        a.append(a)  # garbage only a collection frees
        cycles.append(a)
    del cycles, a
    gc.collect()
    assert GC_CLOCK.seconds > before


def test_after_freeze_survivors_full_collections_come_without_a_quarter_of_the_frozen():
    # a full collection waits until the objects promoted since the last exceed a quarter of those it
    # counted then: counted after the freeze (~0), it comes after a few thousand, not ~57,000 at 100,000 cards
    import gc

    from ssr_engine.agents.server import freeze_survivors

    kept = [[] for _ in range(50_000)]  # objects that stay alive: the count before a freeze would include them
    thresholds = gc.get_threshold()
    try:
        freeze_survivors()
        assert gc.get_freeze_count() >= len(kept)
        gc.set_threshold(100, 2, 2)  # a full collection after about 400 objects promoted, if allowed
        before = gc.get_stats()[2]["collections"]
        young = [[] for _ in range(3_000)]  # far below a quarter of the frozen 50,000
        assert gc.get_stats()[2]["collections"] > before
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    del kept, young


def test_a_served_app_freezes_what_is_alive_once_it_starts(tmp_path):
    import gc

    build_registry(list(iter_registry(20, 1)), tmp_path / "reg")
    registry = LiveRegistry.open(tmp_path / "reg")
    try:
        gc.unfreeze()
        s = Served(create_app(registry, mcp=False, freeze=True))
        try:
            assert gc.get_freeze_count() > 0
            assert httpx.get(s.url + "/health").json()["cards"] == 20
        finally:
            s.close()
    finally:
        gc.unfreeze()
        registry.close()
