"""Where cards come from and go to: JSONL files, `.json` files, folders, MCP `tools/list` answers.

A JSONL file holds one value per line; a `.json` file one value; a folder is searched recursively
for `.json` files (`card_files`; `.well-known/agent-card.json` layouts included). A value is a card,
an MCP `tools/list` answer (the JSON-RPC envelope or its `result` object: one card per tool), an MCP
registry's server list (`{"servers": [...]}`: one card per server.json, `_server_card`), one
server.json (`_is_server`: a seed file's entry, a publisher's file; a smithery-like server with its
tools, named by `qualifiedName`) or an array of these. Markdown (an awesome-list) is refused, naming
the file and its first list line (`_markdown`). Each card is parsed by `cards.parse_card` and named
by the line where it starts in its file (found by a key-path walk with the C JSON decoder,
`_item_offsets`), so every error names the user's file and line. `unique_cards` enforces unique ids;
the writers write JSONL atomically.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..atomic import atomic_write
from ..errors import InputError
from .cards import AgentCard, Where, card_document, json_text, parse_card, valid_unicode

# a folder's card files: `.json` only, so that a JSONL of something else kept beside the cards
# (`ssr agents generate` writes queries.jsonl next to cards.jsonl) is never read as cards
CARD_SUFFIXES = (".json",)


# ---- where each card starts (line numbers inside a .json file) ---------------------------------

_WS = " \t\r\n"


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _item_offsets(text: str, start: int, path: tuple[str, ...]) -> list[int] | None:
    """Offsets of the items of the array found by following object keys `path` from `start`.

    Uses the C decoder to skip every value not on the path, so it costs one more pass over
    the file. None when the path does not lead to an array (the caller then has no lines).
    """
    dec = json.JSONDecoder()
    i = _skip_ws(text, start)
    for key in path:
        if i >= len(text) or text[i] != "{":
            return None
        i = _skip_ws(text, i + 1)
        found = False
        while i < len(text) and text[i] != "}":
            name, i = dec.raw_decode(text, i)
            i = _skip_ws(text, i)
            i = _skip_ws(text, i + 1)  # the ':'
            if name == key:
                found = True
                break
            _, i = dec.raw_decode(text, i)
            i = _skip_ws(text, i)
            if i < len(text) and text[i] == ",":
                i = _skip_ws(text, i + 1)
        if not found:
            return None
    if i >= len(text) or text[i] != "[":
        return None
    offsets = []
    i = _skip_ws(text, i + 1)
    while i < len(text) and text[i] != "]":
        offsets.append(i)
        _, i = dec.raw_decode(text, i)
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
    return offsets


class _Lines:
    """1-based line numbers of character offsets in a text (a sorted array of newline offsets)."""

    def __init__(self, text: str, first_line: int = 1):
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.first = first_line

    def at(self, offset: int) -> int:
        return self.first + bisect.bisect_left(self.newlines, offset)


def _tool_list(value: Any) -> tuple[list[Any], tuple[str, ...]] | None:
    """The tools of a `tools/list` answer (envelope or result object) and their key path, else None."""
    if not isinstance(value, dict):
        return None
    if "jsonrpc" in value and ("result" in value or "error" in value):
        result = value.get("result")
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            return result["tools"], ("result", "tools")
        return None
    if isinstance(value.get("tools"), list) and "name" not in value and "id" not in value \
            and not _smithery_like(value):  # a server's detail lists its tools: one card (`_server_card`)
        return value["tools"], ("tools",)
    return None


def _smithery_like(value: Any) -> bool:
    """Whether a JSON value is a server of a smithery-like registry (a list's entry or a server's detail,
    with its `tools`): named by `qualifiedName`, with neither `name` nor `id`."""
    return isinstance(value, dict) and isinstance(value.get("qualifiedName"), str) and "name" not in value \
        and "id" not in value


def _server_list(value: Any) -> list[Any] | None:
    """The entries of an MCP registry's server list (`GET /v0/servers`: {"servers": [...], ...}), else None."""
    if isinstance(value, dict) and isinstance(value.get("servers"), list) and "name" not in value \
            and "id" not in value:
        return value["servers"]
    return None


def _is_server(value: Any) -> bool:
    """Whether a JSON value is one server of an MCP registry outside a server list: a server.json (a seed
    file's entry, a publisher's file) names its schema or carries the first answers' `version_detail`; a
    registry's answer for one version (`GET /v0/servers/{name}/versions/latest`) wraps it in `server`."""
    if _smithery_like(value):
        return True
    if isinstance(value, dict) and isinstance(value.get("server"), dict) and "name" not in value:
        return True
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return False
    schema = value.get("$schema")
    return (isinstance(schema, str) and schema.endswith("/server.schema.json")) or \
        isinstance(value.get("version_detail"), dict)


def stored_card(obj: Any, path: str | os.PathLike[str], position: int, raw: str) -> AgentCard:
    """A card read back from a card store (`raw`, its published text, decoded as `obj`), parsed as its
    source was: a smithery-like server is named by its `qualifiedName` (it has no `name`)."""
    if _smithery_like(obj):
        return _server_card(obj, Path(path), None, position, raw) or parse_card(obj, path, None, position, raw)
    return parse_card(obj, path, None, position, raw)


def _server_card(entry: Any, path: Path, line: int | None, position: int, raw: str | None = None) -> AgentCard | None:
    """One entry of an MCP registry's server list as a card, or None for a version the registry marks
    as not the latest (a list may hold every version of a server; a client installs the latest) or as
    deleted.

    The card is the entry's server.json (the entry itself, or its `server` member in the registry's
    newer answers, whose `_meta` holds the registry's own fields; in the answers of 2025-07 to 2025-09
    the server's own `_meta` held them, snake_case), named by the server's `name` (the registry's unique
    key; an older answer's `id` is a UUID per version). Its `packages` and `remotes` are indexed
    (`cards.Package`); every field stays in the stored card.
    """
    server: Any = entry.get("server") if isinstance(entry, dict) and isinstance(entry.get("server"), dict) else entry
    if isinstance(entry, dict) and isinstance(server, dict):
        meta = entry.get("_meta")
        official = meta.get("io.modelcontextprotocol.registry/official") if isinstance(meta, dict) else None
        official = official if isinstance(official, dict) else {}
        detail = server.get("version_detail")
        latest = [official.get("isLatest"), official.get("is_latest")]
        latest.append(detail.get("is_latest") if isinstance(detail, dict) else None)
        if False in latest or official.get("status") == "deleted":
            return None
    if _smithery_like(server):
        # `qualifiedName` is the unique key, `displayName` what a person reads; a server's detail lists
        # its tools (indexed as a card's tools); the stored card stays the entry as published
        raw = raw if raw is not None else json.dumps(server, ensure_ascii=False)
        named = {**server, "name": server["qualifiedName"]}
        if isinstance(server.get("displayName"), str) and "title" not in server:
            named["title"] = server["displayName"]
        server = named
    card = parse_card(server, path, line, position, raw)
    name = server.get("name") if isinstance(server, dict) else None
    if isinstance(name, str) and name and valid_unicode(name) and name != card.id:
        card = dataclasses.replace(card, id=name)  # kept by the card store, as an id given at build time
    return card


def _cards_of_value(value: Any, text: str, start: int, lines: _Lines, path: Path,
                    position: int, raw: str | None = None) -> Iterator[AgentCard]:
    """The cards one decoded JSON value holds (it starts at `start` in `text`)."""
    where = Where(path, lines.at(start), f"#{position}")
    if isinstance(value, dict) and "jsonrpc" in value and "error" in value and "result" not in value:
        err = value.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        raise where.error(f"a JSON-RPC error response, not a tools/list result ({msg!r})")
    if isinstance(value, dict) and "jsonrpc" in value and _tool_list(value) is None:
        raise where.error("a JSON-RPC message without result.tools: expected a tools/list response")
    listed = _tool_list(value)
    servers = _server_list(value)
    if listed is not None:
        items, key_path = listed
    elif servers is not None:
        items, key_path = servers, ("servers",)
    elif isinstance(value, list):
        items, key_path = value, ()
    elif _is_server(value):
        card = _server_card(value, path, lines.at(start), position)
        if card is not None:
            yield card
        return
    else:
        yield parse_card(value, path, lines.at(start), position, raw)
        return
    offsets = _item_offsets(text, start, key_path)
    for j, item in enumerate(items):
        at = offsets[j] if offsets is not None and j < len(offsets) else start
        if isinstance(item, (dict, list)) and _tool_list(item) is not None:
            yield from _cards_of_value(item, text, at, lines, path, position + j)
        elif servers is not None or _is_server(item):
            card = _server_card(item, path, lines.at(at), position + j)
            if card is not None:
                yield card
        else:
            yield parse_card(item, path, lines.at(at), position + j)


def _decode(raw: bytes, path: Path, line: int | None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, line, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def _iter_jsonl(path: Path) -> Iterator[AgentCard]:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            text = _decode(raw, path, lineno)
            if lineno == 1:
                text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark is not part of the card
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                if lineno == 1 and _MD_LINE.match(text):
                    raise _markdown(path, path.read_text("utf-8", "replace")) from exc
                raise InputError(path, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
            except RecursionError as exc:
                raise InputError(path, lineno, "invalid JSON: nested too deeply") from exc
            stripped = text.strip()
            # one card per line keeps the line's own text; a list or a tools/list answer is split
            yield from _cards_of_value(obj, stripped, 0, _Lines(stripped, lineno), path, lineno,
                                       stripped if valid_unicode(stripped) else None)


def _iter_json_file(path: Path) -> Iterator[AgentCard]:
    text = _decode(path.read_bytes(), path, None).removeprefix("\ufeff")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        if _MD_LINE.match(text):
            raise _markdown(path, text) from exc
        raise InputError(path, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError as exc:
        raise InputError(path, None, "invalid JSON: nested too deeply") from exc
    whole = text.strip()
    yield from _cards_of_value(obj, text, 0, _Lines(text), path, 1, whole if valid_unicode(whole) else None)


def card_files(folder: Path) -> list[Path]:
    """Card files under a folder, recursively, sorted by relative path.

    `.json` files (each a card, a list, or a tools/list answer); hidden folders are skipped except `.well-known`
    (the A2A layout `NAME/.well-known/agent-card.json`).
    """
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") or d == ".well-known")
        for name in files:
            if name.lower().endswith(CARD_SUFFIXES) and not name.startswith("."):
                found.append(Path(root) / name)
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def iter_cards(path: str | os.PathLike[str]) -> Iterator[AgentCard]:
    """Cards from a JSONL file, a `.json` file, or a folder of card files (see `card_files`).

    Streams; does not check ids for uniqueness (`read_cards` and `unique_cards` do).
    """
    p = Path(path)
    if p.is_dir():
        files = card_files(p)
        if not files:
            raise InputError(p, None, "no .json card files in this folder")
        for f in files:
            yield from _iter_file(f)
    elif p.is_file():
        yield from _iter_file(p)
    else:
        raise InputError(p, None, "no such file or folder")


def _iter_file(p: Path) -> Iterator[AgentCard]:
    if p.suffix.lower() in MARKDOWN_SUFFIXES:
        raise _markdown(p, _decode(p.read_bytes(), p, None))
    yield from (_iter_json_file(p) if p.suffix.lower() == ".json" else _iter_jsonl(p))


MARKDOWN_SUFFIXES = (".md", ".markdown")
_MD_LINE = re.compile(r"\s*(#{1,6}\s|[-*+]\s+\[[^\]]*\]\()")  # a heading, or a list item opening with a link


def _markdown(path: Path, text: str) -> InputError:
    """The refusal of a Markdown file (an awesome-list of servers is prose: no ids, no fields), naming
    its first list line with a link (or its first line)."""
    lines = text.splitlines()
    line = next((i for i, t in enumerate(lines, 1) if re.match(r"\s*[-*+]\s+\[", t)), 1)
    return InputError(path, line, "Markdown (an awesome-list?), not cards: give A2A agent cards, MCP tools/list "
                                  "answers or an MCP registry's server list, as JSON or JSONL")


ON_DUPLICATE = ("error", "keep-last")


def unique_cards(cards: Iterable[AgentCard], on_duplicate: str = "error") -> Iterator[AgentCard]:
    """Cards with unique ids.

    on_duplicate="error" (streams): a repeated id raises an error naming both places.
    "keep-last": the last card with an id replaces the earlier ones, at the first one's position
    (reads every card before yielding).
    """
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}")
    if on_duplicate == "keep-last":
        latest: dict[str, AgentCard] = {}
        for card in cards:
            latest[card.id] = card
        yield from latest.values()
        return
    seen: dict[str, str] = {}
    for card in cards:
        first = seen.get(card.id)
        if first is not None:
            where = "" if card.source_line is not None else f" (card #{card.source_position})"
            raise InputError(
                card.source_path, card.source_line,
                f"duplicate card id {card.id!r}{where}; first at {first} (--on-duplicate keep-last keeps the last)",
            )
        seen[card.id] = card.source
        yield card


def read_cards(path: str | os.PathLike[str], on_duplicate: str = "error") -> list[AgentCard]:
    """All cards of `path`, ids unique; an empty input is an error."""
    cards = list(unique_cards(iter_cards(path), on_duplicate))
    if not cards:
        raise InputError(path, None, "no cards")
    return cards


# ---- writing ---------------------------------------------------------------------------------


def _write_lines(lines: Iterable[str], out: str | os.PathLike[str]) -> int:
    """Write one text per line, atomically (`atomic_write`); returns the count."""
    n = 0
    with atomic_write(out) as f:
        for line in lines:
            f.write(line)
            f.write("\n")
            n += 1
    return n


def write_jsonl(rows: Iterable[dict[str, Any]], out: str | os.PathLike[str]) -> int:
    """Stream rows to a JSONL file, atomically."""
    return _write_lines((json_text(row) for row in rows), out)


def write_documents(cards: Iterable[AgentCard], out: str | os.PathLike[str]) -> int:
    """Write cards as the JSONL documents `build_index(..., fmt="jsonl")` reads; returns the count."""
    return write_jsonl((card_document(c) for c in cards), out)


def write_cards(cards: Iterable[AgentCard], out: str | os.PathLike[str]) -> int:
    """Write cards as JSONL, each as published (or its structural fields when made in code).

    A card published over several lines (a pretty-printed .json file) is written on one line:
    the same JSON value, re-encoded compactly.
    """

    def one_line(card: AgentCard) -> str:
        text = card.published()
        return json_text(json.loads(text)) if "\n" in text or "\r" in text else text

    return _write_lines((one_line(c) for c in cards), out)
