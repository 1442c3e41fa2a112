"""Agent discovery served over HTTP on loopback: latency, throughput, update visibility, a load run
with concurrent writes, and MetaTool through POST /discover against `ssr agents discover`.

    flock /tmp/ssr-bench.lock python benchmarks/bench_agents_serve.py --work /tmp/agents/serve \
        --cards 100000 --metatool /work/shared/data/metatool --out /tmp/agents/serve/results.json

The server is `ssr agents serve` in its own process (uvicorn, one worker) on a copy of a pristine
registry (built once into --work and kept; every run starts from the same cards), started after a
process of its own has warmed the registry up once (kernels compiled into Numba's cache: the served
process's memory is then a restarted server's, without a compiler's). Load generators: wrk (Debian
package `wrk`; a Lua script cycles through generated request bodies) for latency (1 connection) and
throughput (16 connections, 2 threads); an httpx client in this process for the update runs and
the load run with writes (it needs to read each answer). Client and server share the machine's
cores, so the figures include the client's own CPU use. Update visibility: p50, p90, p99, max, a
histogram, every round's value, the rounds a merge ran beside. `SSR_BENCH_TREE` (below): A/B.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil

# SSR_BENCH_TREE=/other/checkout: that checkout's code serves and writes; its processes start in it (`python -m`
# and `-c` put the working folder before PYTHONPATH: started elsewhere, they ran the other folder's code)
ROOT = Path(os.environ.get("SSR_BENCH_TREE") or Path(__file__).resolve().parents[1]).resolve()
sys.path.insert(0, str(ROOT))

from ssr_engine.agents.cards import AgentCard  # noqa: E402
from ssr_engine.agents.discovery import build_registry  # noqa: E402
from ssr_engine.agents.live import LiveRegistry  # noqa: E402
from ssr_engine.agents.sources import write_cards  # noqa: E402
from ssr_engine.datagen.cards import iter_registry, make_queries  # noqa: E402
from ssr_engine.eval.stats import percentiles  # noqa: E402

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
                                      "--port", str(self.port), "--token", TOKEN], env=env, cwd=ROOT)
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


def _wait_visible(c: httpx.Client, word: str, cid: str, t0: float) -> float:
    """POST /discover for `word` until `cid` tops the pool; milliseconds since t0."""
    while True:
        pool = c.post("/discover", json={"query": word, "k": 5}).json()["pool"]
        if pool and pool[0]["id"] == cid:
            return (time.perf_counter() - t0) * 1e3


HISTOGRAM_MS = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 150, 200, 500, 1000)


def _summary(values: list[float]) -> dict[str, Any]:
    """p50, p90, p99 (`eval.stats.percentiles`), max, rounds over 100 ms, a histogram (upper bounds in ms: count)
    and every value."""
    values = sorted(values)
    bins = {f"<={b}": 0 for b in HISTOGRAM_MS} | {f">{HISTOGRAM_MS[-1]}": 0}
    for v in values:
        bins[next((f"<={b}" for b in HISTOGRAM_MS if v <= b), f">{HISTOGRAM_MS[-1]}")] += 1
    pct = percentiles(values, (50, 90, 99))  # the project's definition (`eval.stats`: linear interpolation)
    return {**{f"{q}_ms": round(v, 2) for q, v in pct.items()}, "max_ms": round(values[-1], 2),
            "over_100_ms": sum(v > 100 for v in values),
            "histogram": {k: n for k, n in bins.items() if n}, "values_ms": [round(v, 1) for v in values]}


def update_visibility(url: str, index: Path, rounds: int = 60) -> dict[str, Any]:
    """Own writes: PUT a card with a unique word, then POST /discover for it until it tops the pool
    (time from sending the PUT). Others' writes: this process writes the card through its own
    `LiveRegistry` on the same directory (as `ssr agents add` would), then polls the server (time
    from the end of the commit: the server's refresh delay plus requests)."""
    own, put_ms, other, other_write_ms = [], [], [], []
    phases: list[dict[str, float]] = []  # the server's own account of each PUT (`LiveRegistry.put_many`'s "ms")
    extra: list[dict[str, Any]] = []  # and what else ran meanwhile: collections, a background merge
    writer = LiveRegistry.open(index)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        for i in range(rounds):
            word, cid = f"zqvisible{i}x", f"probe {i}"
            card = {"name": f"Visibility probe {i}", "description": f"probe {word} card"}
            t0 = time.perf_counter()
            r = c.put("/cards/" + quote(cid, safe=""), json=card)
            put_ms.append((time.perf_counter() - t0) * 1e3)
            assert r.status_code in (200, 201), r.text
            answer = r.json()
            phases.append(answer.get("ms") or {})
            extra.append({"gc_ms": answer.get("gc_ms"), "merging": answer.get("merging")})
            own.append(_wait_visible(c, word, cid, t0))
        for i in range(rounds):
            word, cid = f"zqother{i}x", f"other {i}"
            card = AgentCard(id=cid, name=f"Other writer {i}", description=f"probe {word} card")
            t0 = time.perf_counter()
            writer.put_many([card])
            t1 = time.perf_counter()
            other_write_ms.append((t1 - t0) * 1e3)
            other.append(_wait_visible(c, word, cid, t1))
        for i in range(rounds):
            c.delete("/cards/" + quote(f"probe {i}", safe=""))
            c.delete("/cards/" + quote(f"other {i}", safe=""))
    writer.close()
    # what the slowest rounds are made of: the server's phases, the rest of the PUT (HTTP, the event
    # loop, the thread hop) and the polling after it
    worst = sorted(range(rounds), key=lambda i: -own[i])[:10]
    slowest = [{"round": i, "visible_ms": round(own[i], 1), "put_ms": round(put_ms[i], 1), "server_ms": phases[i],
                "put_outside_server_ms": round(put_ms[i] - sum(phases[i].values()), 1),
                "polling_ms": round(own[i] - put_ms[i], 1), **extra[i]} for i in worst]
    server = {k: {s: v for s, v in _summary([ph.get(k, 0.0) for ph in phases]).items() if s != "values_ms"}
              for k in ("build", "wait", "commit", "show", "hop", "back")}
    first = {"visible_ms": round(own[0], 1), "put_ms": round(put_ms[0], 1), "server_ms": phases[0]}
    merging = [bool(e["merging"]) for e in extra]
    beside = {w: [v for v, m in zip(own, merging, strict=True) if m == (w == "with")] for w in ("with", "without")}
    overlap = {"rounds_with_a_merge": sum(merging), "gc_ms_total": round(sum(e["gc_ms"] or 0 for e in extra), 1),
               **{f"median_ms_{w}": round(percentiles(v, (50,))["p50"], 1) if v else None for w, v in beside.items()}}
    return {"rounds": rounds, "own_put_then_visible": _summary(own), "first_write_after_start": first,
            "put_answered": _summary(put_ms), "put_server_phases": server, "slowest_own_rounds": slowest,
            "own_rounds_beside_merges_and_gc": overlap,
            "other_process_commit_then_visible": _summary(other), "other_process_write": _summary(other_write_ms)}


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


def metatool(directory: Path | None, work: Path, cli_queries: int = 20) -> dict[str, Any]:
    """Every MetaTool query through POST /discover (k = 20) against what `ssr agents discover`
    computes: `agents.live.open_registry(reg).discover` in this process for all of them, and the
    CLI itself (`ssr agents discover --json`, a process each) for the first `cli_queries`."""
    from ssr_engine.agents.bench import load_metatool
    from ssr_engine.agents.live import open_registry

    cards, queries = load_metatool(directory)
    src = work / "metatool.jsonl"
    write_cards(cards, src)
    reg_dir = work / "metatool-reg"
    build_registry(src, reg_dir, force=True)
    reg = open_registry(reg_dir)
    server = Server(reg_dir)
    mismatches = cli_mismatches = empty = 0
    cli_failures: list[dict[str, Any]] = []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    try:
        with httpx.Client(base_url=server.url) as c:
            for i, q in enumerate(queries):
                body = c.post("/discover", json={"query": q.text, "k": 20}).json()
                got = [(e["id"], e["score"], e["matches"]) for e in body["pool"]]
                p = reg.discover(q.text, 20, with_cards=False)
                if got != list(zip(p.ids, p.scores, p.matches, strict=True)):
                    mismatches += 1
                empty += not got
                if i < cli_queries:
                    run = subprocess.run([sys.executable, "-m", "ssr_engine", "agents", "discover", "--index",
                                          str(reg_dir), "--json", "-k", "20", q.text], env=env,
                                         capture_output=True, text=True, cwd=ROOT)
                    if run.returncode != 0:  # a finding to report, with what the process said
                        cli_failures.append({"query": q.text, "returncode": run.returncode,
                                             "stderr": run.stderr[-2000:]})
                        continue
                    cli = [(e["id"], e["score"], e["matches"]) for e in json.loads(run.stdout)["pool"]]
                    cli_mismatches += cli != got
    finally:
        server.close()
    return {"cards": len(cards), "queries": len(queries), "pool_mismatches": mismatches, "empty_pools": empty,
            "cli_queries": cli_queries, "cli_mismatches": cli_mismatches, "cli_failures": cli_failures,
            "seconds": round(time.perf_counter() - started, 1),
            "source": str(directory) if directory else "the copy bundled with the package",
            "compared_with": "open_registry(reg).discover(q, 20) for every query (what `ssr agents discover` "
                             f"runs); the CLI process itself for the first {cli_queries}"}


def pristine(work: Path, cards: int, seed: int) -> tuple[Path, float | None]:
    """The registry every run starts from (built once, marked done), and the build time when built now."""
    base = work / f"registry-{cards}-{seed}"
    if (base / ".bench-done").is_file():
        return base, None
    t = time.perf_counter()
    build_registry(iter_registry(cards, seed), base, quiet=True, force=True)
    (base / ".bench-done").write_text("")
    return base, round(time.perf_counter() - t, 1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True, type=Path, help="where the registries are built (kept for reuse)")
    p.add_argument("--cards", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    p.add_argument("--requests", type=int, default=10_000, help="requests of the load run with writes")
    p.add_argument("--update-rounds", type=int, default=60, help="rounds of each update-visibility run")
    p.add_argument("--metatool", type=Path, help="MetaTool data directory (default: the bundled copy)")
    p.add_argument("--skip", default="", help="phases to leave out, comma-separated: latency, throughput, "
                   "updates, load, metatool")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    args = p.parse_args()
    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    if not {"latency", "throughput"} <= skip and shutil.which("wrk") is None:
        # found out before the 100,000-card build, not after it
        p.error("the latency and throughput phases need wrk (Debian package `wrk`); or --skip latency,throughput")

    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"cards": args.cards, "machine_cpus": os.cpu_count(), "tree": str(ROOT),
                               "load_average_at_start": os.getloadavg()}
    base, built = pristine(args.work, args.cards, args.seed)
    if built is not None:
        results["build_seconds"] = built
    reg = args.work / "serving"
    if reg.exists():
        shutil.rmtree(reg)  # the last run's copy (this script's own)
    shutil.copytree(base, reg)
    (reg / ".bench-done").unlink()
    queries = [q.text for q in make_queries(args.cards, 2000, args.seed)]
    bodies = [json.dumps({"query": q, "k": 20}) for q in queries[:1000]]
    extra = [c.original() for c in iter_registry(500, args.seed + 1)]
    for card in extra:
        card.pop("id", None)
    if {"latency", "throughput", "updates", "load"} - skip:
        # kernels this registry's formats need compiled into Numba's disk cache by a process of their
        # own: the served process then loads them, and its memory is a restarted server's (compiling
        # in a process keeps LLVM's memory for its life)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sys\nfrom ssr_engine.agents.live import LiveRegistry\n"
                        "r = LiveRegistry(sys.argv[1])\nr.warm_up()\nr.close()", str(reg)],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True, cwd=ROOT)
        results["cache_warm_up_s"] = round(time.perf_counter() - t, 1)
        server = Server(reg)
        try:
            results["rss_mb_idle"] = round(server.rss() / 2**20, 1)
            wrk(server.url, bodies, 1, 1, 2, args.work)  # warm-up (pages the index in)
            if "latency" not in skip:
                results["latency_1_connection"] = wrk(server.url, bodies, 1, 1, args.seconds, args.work)
            if "throughput" not in skip:
                results["throughput_16_connections"] = wrk(server.url, bodies, 16, 2, args.seconds, args.work)
            if "updates" not in skip:
                results["update_visibility"] = update_visibility(server.url, reg, args.update_rounds)
            if "load" not in skip:
                results["load_with_writes"] = load_with_writes(server, queries, extra, args.requests)
            results["rss_mb_end"] = round(server.rss() / 2**20, 1)
        finally:
            server.close()
    if "metatool" not in skip:
        results["metatool"] = metatool(args.metatool, args.work)
    results["load_average_at_end"] = os.getloadavg()
    text = json.dumps(results, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
