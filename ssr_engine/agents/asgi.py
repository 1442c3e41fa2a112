"""HTTP plumbing of `ssr agents serve` below the routes: the body bound (an ASGI middleware), the
POST /discover body's checks, the OpenAPI entry of that plain route, errors as JSON, card ids from paths."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from ..errors import InputError
from .cards import parse_card

MAX_QUERY_CHARS = 10_000


def discover_arguments(raw: bytes, max_k: int) -> tuple[str, int, bool]:
    """(query, k, explain) of a POST /discover body; ValueError with the message for the client."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"the body is not JSON ({str(exc)[:200]})") from None
    if not isinstance(body, dict):
        raise ValueError(f"the body must be a JSON object, got {type(body).__name__}")
    query, k, explain = body.get("query"), body.get("k", 20), body.get("explain", False)
    if not isinstance(query, str):
        raise ValueError("query: a string is required")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"query: at most {MAX_QUERY_CHARS} characters")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        raise ValueError(f"k: an integer in 1..{max_k}, got {json.dumps(k)[:40]}")
    if not isinstance(explain, bool):
        raise ValueError("explain: true or false")
    return query, k, explain


def openapi_with(app: Any, path: str, model: Any) -> dict[str, Any]:
    """FastAPI's OpenAPI document plus the plain POST `path` route, whose body is `model`."""
    from fastapi.openapi.utils import get_openapi

    if app.openapi_schema is None:
        spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        spec.setdefault("components", {}).setdefault("schemas", {})[model.__name__] = model.model_json_schema()
        spec["paths"][path] = {"post": {
            "summary": "The pool for a request",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}},
            "responses": {
                "200": {"description": "`{query, k, version, pool: [{id, score, matches, card, signals?}]}` in "
                                       "SSR order; cards as published"},
                "400": {"description": "`{error}`: a body that is not a valid request"}}}}
        app.openapi_schema = spec
    return app.openapi_schema


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
    """`{"error": message}` with this status."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=headers)


def json_errors(app: Any) -> None:
    """Answer FastAPI's validation errors with a 400 and HTTP errors with their status, as `{"error": ...}`."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    async def bad_request(request: Any, exc: Any) -> Any:
        parts = []
        for e in exc.errors():
            where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            parts.append(f"{where}: {e.get('msg')}" if where else str(e.get("msg")))
        return error_response(400, "; ".join(parts) or "bad request")

    async def http_error(request: Any, exc: Any) -> Any:
        return error_response(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    app.add_exception_handler(RequestValidationError, bad_request)
    app.add_exception_handler(HTTPException, http_error)


def card_id_of(request: Any) -> str:
    """The card id of a /cards/{id} request, percent-decoded from the raw path (so that an id holding '/',
    '%' or '?' arrives exactly as it was encoded); a 400 for an empty id or one that is not UTF-8."""
    from starlette.exceptions import HTTPException

    raw = request.scope.get("raw_path") or request.url.path.encode()
    tail = raw.decode("latin-1").split("?", 1)[0][len("/cards/"):]
    try:
        cid = unquote(tail, errors="strict")
    except UnicodeDecodeError:
        raise HTTPException(400, "card id is not percent-encoded UTF-8") from None
    if not cid:
        raise HTTPException(400, "empty card id")
    return cid


def card_of_body(cid: str, raw: bytes) -> Any:
    """The card a PUT /cards/{cid} body holds (its id: the body's own "id", which must equal `cid`, else
    `cid`), or the 400/409 error response to answer."""
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff").strip()
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return error_response(400, f"the body is not a JSON card ({str(exc)[:200]})")
    if not isinstance(obj, dict):
        return error_response(400, f"the body must be one card (a JSON object), got {type(obj).__name__}")
    explicit = obj.get("id")
    if explicit is not None and str(explicit) != cid:
        return error_response(409, f"the card's own id {explicit!r} differs from the id in the path {cid!r}")
    try:
        return parse_card(obj if explicit is not None else {**obj, "id": cid}, f"PUT /cards/{cid}", None, 1, raw=text)
    except InputError as exc:
        return error_response(400, str(exc))


class BodyLimit:
    """ASGI middleware: a request body larger than `limit` bytes gets 413 (Content-Length or streamed)."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http" or scope.get("path", "").startswith("/mcp"):
            await self.app(scope, receive, send)  # the MCP transport bounds its own bodies
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await send_error(send, 413, f"request body larger than {self.limit} bytes")
                return
        seen = 0
        refused = False

        async def bounded() -> dict[str, Any]:
            # a streamed body over the limit: answer 413 here, then tell the app the client left
            # (FastAPI would turn an exception raised while reading into a 400)
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    refused = True
                    await send_error(send, 413, f"request body larger than {self.limit} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: dict[str, Any]) -> None:
            if not refused:
                await send(message)

        try:
            await self.app(scope, bounded, guarded_send)
        except Exception:
            if not refused:
                raise


async def send_error(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
