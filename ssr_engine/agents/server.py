"""`ssr agents serve`: discovery for agents, over an HTTP JSON API and MCP, on one live registry.

HTTP (FastAPI under uvicorn; OpenAPI at /openapi.json, docs at /docs):

    POST   /discover      {"query": "...", "k": 20, "explain": false}
                          -> {"query", "k", "version", "pool": [{"id", "score", "matches", "card"}, ...]}
    GET    /cards/{id}    -> the card as published (ids percent-encoded in the path)
    PUT    /cards/{id}    body: the card -> 201 created / 200 replaced: {"id", "created", "version",
                          "ms" (where the time went), "gc_ms" (collections meanwhile), "merging" (a merge ran)}
    DELETE /cards/{id}    -> 200, or 404
    GET    /health        -> {"status": "ok", "cards", "version", "scoring"}

MCP (the official `mcp` SDK): streamable HTTP at /mcp on the same server, or stdio with
`--stdio`; tools `discover(query, k)` (the pool with cards) and `get_card(id)`.

The registry is live (`agents.live`): each answer reads one commit (`version` is its generation);
a write (PUT, DELETE) is a `LiveIndex` commit made off the event loop, and the server shows it
before it answers, so the write is visible to the next request; commits of other processes
(`ssr agents add`, another server) are picked up by a timer (`refresh`, default every 5 ms: a
stat of the index folder, and a read of the commit point's number when it changed). Segment
merges run in the background once writes pause (`LiveRegistry(background=True)`); the write path
is warmed up at start (`warm_up`), and what is alive once the server is up is frozen out of the garbage
collector (`collector.freeze_survivors`).
Writes need `Authorization: Bearer TOKEN` when a token is set. Request bodies are bounded (413),
bad input is a 4xx with `{"error": "..."}`.
"""


import asyncio
import gc
import hmac
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from ..collector import freeze_survivors
from ..errors import SsrError
from ..generations import remove_in_background
from .asgi import (
    MAX_QUERY_CHARS,
    BodyLimit,
    card_id_of,
    card_of_body,
    discover_arguments,
    error_response,
    json_errors,
    openapi_with,
)
from .cards import AgentCard
from .discovery import Pool
from .live import LiveRegistry
from .view import View

SERVE_EXTRA = "pip install 'ssr_engine[serve]' (fastapi, uvicorn, mcp)"


def _need(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise SsrError(f"`ssr agents serve` needs {module}: {SERVE_EXTRA}")


def pool_json(view: View, query: str, k: int, explain: bool = False) -> str:
    """The pool of one commit as JSON text; each card is spliced in as published (verbatim, never re-encoded)."""
    pool: Pool = view.discover(query, k, with_cards=False, with_texts=True)
    entries = []
    for cid, score, matches, text in zip(pool.ids, pool.scores, pool.matches, pool.texts or [], strict=True):
        # what json.dumps writes for a str and a finite float, without its per-call set-up (0.7 ms a pool)
        head = f'{{"id": {encode_basestring_ascii(cid)}, "score": {score!r}, "matches": {matches}'
        if explain:
            signals = [{"signal": s, "weight": w} for s, w in view.explain(pool.query, cid)]
            head += f', "signals": {json.dumps(signals)}'
        entries.append(f'{head}, "card": {text}}}')
    return (f'{{"query": {json.dumps(pool.query)}, "k": {json.dumps(pool.k)}, "version": {view.version}, '
            f'"pool": [{", ".join(entries)}]}}')


class _GcClock:
    """Seconds this process has spent in the garbage collector since it started counting (every thread
    waits for a collection: the GIL): how much of a slow answer was a collection."""

    def __init__(self) -> None:
        self.seconds, self._began = 0.0, 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began


GC_CLOCK = _GcClock()


async def refresher(registry: LiveRegistry, interval: float) -> None:
    """Show other processes' commits: check the commit point's number every `interval` seconds."""
    while True:
        await asyncio.sleep(interval)
        try:
            # the check is a stat (a read of the newest commit point when the folder changed): inline;
            # opening the commit is not
            if registry.stale():
                await asyncio.to_thread(registry.refresh)
        except SsrError as exc:  # a broken newer commit: keep answering from the last good one
            print(f"ssr: {exc}", file=sys.stderr)


def create_mcp(registry: LiveRegistry, max_k: int = 1000, refresh: bool = False) -> Any:
    """The MCP server (tools `discover` and `get_card`) over `registry`; `refresh`: look for a newer
    commit before each call (on stdio, where no timer runs)."""
    _need("mcp")
    import importlib

    try:  # mcp 2.x
        server_module: Any = importlib.import_module("mcp.server.mcpserver")
        errors_module: Any = importlib.import_module("mcp.server.mcpserver.exceptions")
        MCPServer = server_module.MCPServer
    except ImportError:  # mcp 1.x: the same server under its earlier name
        server_module = importlib.import_module("mcp.server.fastmcp")
        errors_module = importlib.import_module("mcp.server.fastmcp.exceptions")
        MCPServer = server_module.FastMCP
    ToolError = errors_module.ToolError

    server = MCPServer(
        "ssr-agents",
        instructions="Find the agents or tools that can serve a request: `discover` returns at most k cards, "
        "best first, ranked by SSR (exact lexical signal overlap); `get_card` returns one card by id.",
    )

    @server.tool(name="discover", description="At most k agent/tool cards for a request, best first: "
                 "each with id, score, matched signal count and the card as published.")
    async def discover(query: str, k: int = 20) -> dict[str, Any]:
        if not 1 <= k <= max_k:
            raise ToolError(f"k must be in 1..{max_k}, got {k}")
        if len(query) > MAX_QUERY_CHARS:
            raise ToolError(f"query longer than {MAX_QUERY_CHARS} characters")
        if refresh:
            await asyncio.to_thread(registry.refresh)
        return json.loads(pool_json(registry.view(), query, k))

    @server.tool(name="get_card", description="The card with this id, as published.")
    async def get_card(id: str) -> dict[str, Any]:  # noqa: A002 - the tool's parameter is called id
        if refresh:
            await asyncio.to_thread(registry.refresh)
        try:
            return json.loads(registry.card_text(id))
        except KeyError:
            raise ToolError(f"no card with id {id!r}") from None

    return server


def create_app(
    registry: LiveRegistry,
    *,
    token: str | None = None,
    read_only: bool = False,
    max_k: int = 1000,
    max_body: int = 1 << 20,
    mcp: bool = True,
    host: str = "127.0.0.1",
    refresh: float | None = 0.005,
    freeze: bool = False,
) -> Any:
    """The ASGI app: the HTTP JSON API, and MCP at /mcp (streamable HTTP) when `mcp`; other
    processes' writes are shown within `refresh` seconds (None: never). `freeze`: `freeze_survivors`
    once the app starts (a server process; not a test's)."""
    _need("fastapi")
    from fastapi import FastAPI

    mcp_server = create_mcp(registry, max_k) if mcp else None
    mcp_app = mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host) if mcp_server else None
    app = FastAPI(
        title="SSR agent discovery",
        version="1",
        description="Narrow a registry of A2A agent cards and MCP tools to a pool of at most K, ranked by SSR "
        "(exact, training-free lexical signal overlap). MCP (streamable HTTP) at /mcp.",
        lifespan=_lifespan(registry, refresh, mcp_server, freeze),
    )
    json_errors(app)
    _Api(registry, token, read_only, max_k).add_routes(app)
    if mcp_app is not None:
        app.router.routes.extend(mcp_app.routes)
    return BodyLimit(app, max_body)


def _lifespan(registry: LiveRegistry, refresh: float | None, mcp_server: Any, freeze: bool) -> Any:
    """The app's lifespan: the refresh timer (`refresher`) and the MCP session manager run while it serves;
    `freeze`: `freeze_survivors` at start (the app and uvicorn are built by then)."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if freeze:
            freeze_survivors()
        task = asyncio.create_task(refresher(registry, refresh)) if refresh else None
        try:
            if mcp_server is not None:
                async with mcp_server.session_manager.run():
                    yield
            else:
                yield
        finally:
            if task is not None:
                task.cancel()

    return lifespan


class _Api:
    """The HTTP routes over one registry (`add_routes`); writes are checked by `authorize`."""

    def __init__(self, registry: LiveRegistry, token: str | None, read_only: bool, max_k: int):
        self.registry, self.token, self.read_only, self.max_k = registry, token, read_only, max_k

    def add_routes(self, app: Any) -> None:
        from fastapi import Request
        from pydantic import BaseModel, Field
        from starlette.responses import Response
        from starlette.routing import Route

        max_k = self.max_k

        class DiscoverRequest(BaseModel):
            query: str = Field(max_length=MAX_QUERY_CHARS, description="the request to route")
            k: int = Field(20, ge=1, le=max_k, description="pool size K")
            explain: bool = Field(False, description="add each card's matched signals with their weights")

        class Health(BaseModel):
            status: str
            cards: int
            version: int
            scoring: str

        # a plain Starlette route: FastAPI's validation and dependency machinery cost about a third of a
        # request's CPU here (0.3 of 1 ms); the route is documented through `DiscoverRequest`
        app.router.routes.append(Route("/discover", self.discover, methods=["POST"]))
        app.openapi = lambda: openapi_with(app, "/discover", DiscoverRequest)

        # the path's card_id documents the route; the id itself is read from the raw path (`card_id_of`)
        @app.get("/cards/{card_id:path}", summary="One card, as published")
        async def get_card(request: Request, card_id: str) -> Response:
            return await self.get_card(request)

        @app.put("/cards/{card_id:path}", summary="Add or replace a card (body: the card as published)",
                 status_code=201)
        async def put_card(request: Request, card_id: str) -> Response:
            return await self.put_card(request)

        @app.delete("/cards/{card_id:path}", summary="Remove a card")
        async def delete_card(request: Request, card_id: str) -> Response:
            return await self.delete_card(request)

        @app.get("/health", summary="Liveness and registry size")
        async def health() -> Health:
            view = self.registry.view()
            return Health(status="ok", cards=len(view), version=view.version, scoring=self.registry.scoring)

    def authorize(self, request: Any) -> None:
        """Raise a 403 (read-only server) or 401 (no or a wrong bearer token) for a write."""
        from starlette.exceptions import HTTPException

        if self.read_only:
            raise HTTPException(403, "this server is read-only")
        if self.token is None:
            return
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            raise HTTPException(401, "writes need Authorization: Bearer <token>",
                                headers={"WWW-Authenticate": "Bearer"})

    async def discover(self, request: Any) -> Any:
        from starlette.responses import Response

        try:
            query, k, explain = discover_arguments(await request.body(), self.max_k)
        except ValueError as exc:
            return error_response(400, str(exc))
        return Response(pool_json(self.registry.view(), query, k, explain), media_type="application/json")

    async def get_card(self, request: Any) -> Any:
        from starlette.responses import Response

        cid = card_id_of(request)
        try:
            text = self.registry.card_text(cid)
        except KeyError:
            return error_response(404, f"no card with id {cid!r}")
        return Response(text, media_type="application/json")

    async def put_card(self, request: Any) -> Any:
        from starlette.responses import Response

        self.authorize(request)
        cid = card_id_of(request)
        card = card_of_body(cid, await request.body())
        if not isinstance(card, AgentCard):
            return card  # the error response
        try:
            # committed (durable) and shown off the event loop: other requests are answered meanwhile
            report = await timed_write(lambda: self.registry.put_many([card]))
        except SsrError as exc:
            return error_response(409, str(exc))
        replaced = report["replaced"] > 0
        body = json.dumps({"id": cid, "created": not replaced, "version": report["version"],
                           "ms": report.get("ms"), "gc_ms": report["gc_ms"], "merging": report.get("merging")})
        return Response(body, status_code=200 if replaced else 201, media_type="application/json")

    async def delete_card(self, request: Any) -> Any:
        from starlette.responses import Response

        self.authorize(request)
        cid = card_id_of(request)
        try:
            report = await asyncio.to_thread(self.registry.delete_many, [cid])
        except SsrError as exc:
            return error_response(409, str(exc))
        if not report["deleted"]:
            return error_response(404, f"no card with id {cid!r}")
        return Response(json.dumps({"id": cid, "deleted": True, "version": report["version"]}),
                        media_type="application/json")


async def timed_write(write: Any) -> dict[str, Any]:
    """Run a registry write (`put_many`) on a thread; its report gets where the time went besides its own
    phases: "hop" (to the thread) and "back" (to the event loop) in its "ms", and "gc_ms" (collections
    within the phases)."""
    sent = time.perf_counter()

    def run() -> dict[str, Any]:
        started, paused = time.perf_counter(), GC_CLOCK.seconds
        out = write()
        out["ms"]["hop"], out["ended"] = round((started - sent) * 1e3, 2), time.perf_counter()
        out["gc_ms"] = round((GC_CLOCK.seconds - paused) * 1e3, 2)
        return out

    report = await asyncio.to_thread(run)
    report["ms"]["back"] = round((time.perf_counter() - report.pop("ended")) * 1e3, 2)
    return report


def serve(
    index_dir: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    stdio: bool = False,
    read_only: bool = False,
    max_k: int = 1000,
    max_body: int = 1 << 20,
) -> int:
    """Run the server until interrupted (HTTP + MCP, or MCP on stdio)."""
    if max_k < 1 or max_body < 1:
        raise SsrError("--max-k and --max-body must be >= 1")
    if not 0 <= port <= 65535:
        raise SsrError(f"--port must be in 0..65535, got {port}")
    # HTTP writes merge segments in the background: a write's visibility never waits for its merge, nor
    # for the removal of the segments a merge replaced
    registry = LiveRegistry.open(index_dir, background=not (stdio or read_only))
    if not (stdio or read_only):
        remove_in_background()
    if stdio:
        registry.warm_up(writes=False)
        mcp_server = create_mcp(registry, max_k, refresh=True)
        mcp_server.run("stdio")
        return 0
    _need("uvicorn")
    import uvicorn

    # else the first request pays imports and kernel loads (or compiles: seconds after an upgrade)
    registry.warm_up(writes=not read_only)
    app = create_app(registry, token=token, read_only=read_only, max_k=max_k, max_body=max_body, host=host,
                     freeze=True)
    if token is None and not read_only and host not in ("127.0.0.1", "localhost", "::1"):
        print(f"ssr: warning: serving on {host} with writes open to anyone (use --token or --read-only)",
              file=sys.stderr)
    print(f"ssr: serving {Path(index_dir)} ({len(registry)} cards) on http://{host}:{port} (MCP at /mcp)",
          file=sys.stderr)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        registry.close()  # a running merge finishes (a kill leaves the last commit whole anyway)
    return 0
