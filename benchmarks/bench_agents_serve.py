"""Agent discovery served over HTTP on loopback: latency, throughput, update visibility, a load run
with concurrent writes, and MetaTool through POST /discover against the in-process registry.

    flock /tmp/ssr-bench.lock python benchmarks/bench_agents_serve.py --work /tmp/agents-serve \
        --metatool ../shared/data/metatool --out benchmarks/results/agents-serve.json

The server is `ssr agents serve` in its own process (uvicorn, one worker). Load generators:
wrk (Debian package `wrk`; a Lua script cycles through generated request bodies) for latency
(1 connection) and throughput (16 connections, 2 threads); an httpx/asyncio client in this
process for the update and load-with-writes runs (it needs to read each answer). Client and
server share the machine's cores, so the figures include the client's own CPU use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ssr_engine.agents.cards import write_cards  # noqa: E402
from ssr_engine.agents.discovery import Registry, build_registry  # noqa: E402
from ssr_engine.datagen.cards import iter_registry, make_queries  # noqa: E402

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, index: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "ssr_engine", "agents", "serve", "--index", str(index),
                                      "--port", str(self.port), "--token", TOKEN], env=env)
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("server did not start")
            time.sleep(0.2)
        self.ps = psutil.Process(self.proc.pid)

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def wrk(url: str, bodies: list[str], connections: int, threads: int, seconds: int, work: Path) -> dict[str, Any]:
    """Run wrk against POST /discover; returns requests/s, latency percentiles (ms), errors."""
    script = work / "discover.lua"
    lua_bodies = ",\n".join("[==[" + b + "]==]" for b in bodies)
    script.write_text(
        "local bodies = {\n" + lua_bodies + "\n}\n"
        "local i = 0\n"
        "request = function()\n"
        "  i = i + 1\n"
        "  return wrk.format('POST', '/discover', {['Content-Type'] = 'application/json'}, "
        "bodies[(i % #bodies) + 1])\n"
        "end\n"
    )
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script),
           url + "/discover"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    def ms(text: str) -> float:
        value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

    pct = {p: ms(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M)}
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    return {"command": " ".join(cmd[:-3]) + " (lua: POST /discover, cycling bodies)", "connections": connections,
            "threads": threads, "seconds": seconds, "requests": total, "requests_per_s": rps,
            "p50_ms": pct.get("50"), "p90_ms": pct.get("90"), "p99_ms": pct.get("99"),
            "non_2xx": int(non2xx.group(1)) if non2xx else 0, "socket_errors": sock.group(1) if sock else None}


def update_visibility(url: str, rounds: int = 100) -> dict[str, Any]:
    """PUT a card with a unique word, then POST /discover for that word: time until it is in the pool."""
    times, put_ms = [], []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        for i in range(rounds):
            word = f"zqvisible{i}x"
            card = {"name": f"Visibility probe {i}", "description": f"probe {word} card"}
            t0 = time.perf_counter()
            r = c.put("/cards/" + quote(f"probe {i}", safe=""), json=card)
            t1 = time.perf_counter()
            assert r.status_code in (200, 201), r.text
            while True:
                pool = c.post("/discover", json={"query": word, "k": 5}).json()["pool"]
                if pool and pool[0]["id"] == f"probe {i}":
                    break
            times.append((time.perf_counter() - t0) * 1e3)
            put_ms.append((t1 - t0) * 1e3)
        for i in range(rounds):
            c.delete("/cards/" + quote(f"probe {i}", safe=""))
    times.sort()
    return {"rounds": rounds, "visible_p50_ms": statistics.median(times), "visible_max_ms": times[-1],
            "put_p50_ms": statistics.median(put_ms), "put_max_ms": max(put_ms)}


def load_with_writes(server: Server, queries: list[str], extra_cards: list[dict], n_requests: int = 10_000,
                     concurrency: int = 8) -> dict[str, Any]:
    """n_requests discoveries from `concurrency` async clients while a writer PUTs and DELETEs cards."""
    errors: list[str] = []
    rss: list[tuple[float, int]] = []
    done = 0
    writes = 0
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            rss.append((time.monotonic(), server.rss()))
            time.sleep(0.25)

    async def main() -> None:
        nonlocal done, writes
        counter = iter(range(n_requests))
        limits = httpx.Limits(max_connections=concurrency + 2)
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=30) as c:

            async def reader(seed: int) -> None:
                nonlocal done
                for i in counter:
                    q = queries[(i * 7919 + seed) % len(queries)]
                    try:
                        r = await c.post("/discover", json={"query": q, "k": 20})
                        if r.status_code != 200:
                            errors.append(f"discover {r.status_code}")
                        else:
                            r.json()
                    except httpx.HTTPError as exc:
                        errors.append(repr(exc))
                    done += 1

            async def writer() -> None:
                nonlocal writes
                auth = {"Authorization": f"Bearer {TOKEN}"}
                i = 0
                while done < n_requests:
                    card = extra_cards[i % len(extra_cards)]
                    cid = quote(f"live {i}", safe="")
                    try:
                        r = await c.put(f"/cards/{cid}", json=card, headers=auth)
                        if r.status_code not in (200, 201):
                            errors.append(f"put {r.status_code}")
                        if i >= 50:  # keep about 50 added cards live: delete the one added 50 writes ago
                            old = quote(f"live {i - 50}", safe="")
                            r = await c.delete(f"/cards/{old}", headers=auth)
                            if r.status_code != 200:
                                errors.append(f"delete {r.status_code}")
                            writes += 1
                    except httpx.HTTPError as exc:
                        errors.append(repr(exc))
                    writes += 1
                    i += 1
                    await asyncio.sleep(0.01)

            await asyncio.gather(writer(), *(reader(s) for s in range(concurrency)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    asyncio.run(main())
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    values = [v for _, v in rss]
    quarter = max(1, len(values) // 4)
    return {"requests": done, "concurrency": concurrency, "writes": writes, "errors": len(errors),
            "error_examples": errors[:5], "seconds": round(seconds, 2),
            "requests_per_s": round(done / seconds, 1),
            "rss_mb_first_quarter_max": round(max(values[:quarter]) / 2**20, 1),
            "rss_mb_last_quarter_max": round(max(values[-quarter:]) / 2**20, 1),
            "rss_mb_max": round(max(values) / 2**20, 1), "rss_samples": len(values),
            "client": f"httpx.AsyncClient, {concurrency} concurrent readers + 1 writer (PUT every ~10 ms, DELETE "
                      "of the card added 50 writes earlier)"}


def metatool(directory: Path, work: Path) -> dict[str, Any]:
    from ssr_engine.agents.bench import load_metatool

    cards, queries = load_metatool(directory)
    src = work / "metatool.jsonl"
    write_cards(cards, src)
    reg_dir = work / "metatool-reg"
    if reg_dir.exists():
        shutil.rmtree(reg_dir)
    build_registry(src, reg_dir)
    reg = Registry.open(reg_dir)
    server = Server(reg_dir)
    mismatches = 0
    empty = 0
    try:
        with httpx.Client(base_url=server.url) as c:
            for q in queries:
                body = c.post("/discover", json={"query": q.text, "k": 20}).json()
                got = [(e["id"], e["score"], e["matches"]) for e in body["pool"]]
                p = reg.discover(q.text, 20, with_cards=False)
                if got != list(zip(p.ids, p.scores, p.matches, strict=True)):
                    mismatches += 1
                empty += not got
    finally:
        server.close()
    return {"cards": len(cards), "queries": len(queries), "pool_mismatches": mismatches, "empty_pools": empty,
            "compared_with": "Registry.open(reg).discover(q, 20) in this process (what `ssr agents discover` runs)"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True, type=Path, help="where the registries are built (kept for reuse)")
    p.add_argument("--cards", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    p.add_argument("--requests", type=int, default=10_000, help="requests of the load run with writes")
    p.add_argument("--metatool", type=Path, help="MetaTool data directory (skip when absent)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    args = p.parse_args()

    args.work.mkdir(parents=True, exist_ok=True)
    reg = args.work / f"registry-{args.cards}-{args.seed}"
    results: dict[str, Any] = {"cards": args.cards, "machine_cpus": os.cpu_count(),
                               "load_average_at_start": os.getloadavg()}
    if not (reg / "agent_cards.parquet").is_file():
        if reg.exists():
            shutil.rmtree(reg)
        t = time.perf_counter()
        build_registry(iter_registry(args.cards, args.seed), reg, quiet=True)
        results["build_seconds"] = round(time.perf_counter() - t, 1)
    queries = [q.text for q in make_queries(args.cards, 2000, args.seed)]
    bodies = [json.dumps({"query": q, "k": 20}) for q in queries[:1000]]
    extra = [c.original() for c in iter_registry(500, args.seed + 1)]
    for card in extra:
        card.pop("id", None)
    server = Server(reg)
    try:
        results["rss_mb_idle"] = round(server.rss() / 2**20, 1)
        wrk(server.url, bodies, 1, 1, 2, args.work)  # warm-up (first requests compile nothing, but page in)
        results["latency_1_connection"] = wrk(server.url, bodies, 1, 1, args.seconds, args.work)
        results["throughput_16_connections"] = wrk(server.url, bodies, 16, 2, args.seconds, args.work)
        results["update_visibility"] = update_visibility(server.url)
        results["load_with_writes"] = load_with_writes(server, queries, extra, args.requests)
        results["load_average_at_end"] = os.getloadavg()
    finally:
        server.close()
    if args.metatool is not None and (args.metatool / "plugin_des.json").is_file():
        results["metatool"] = metatool(args.metatool, args.work)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
