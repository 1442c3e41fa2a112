"""Agent Cards and MCP tools as they are published: read them, validate them, list their capability text.

Accepted shapes (DESIGN.md section 6), in a JSONL file (one value per line), a `.json` file, or a
folder of such files searched recursively (`.well-known/agent-card.json` layouts included):

- an A2A AgentCard, v0.3 (top-level `url`) or v1.0 (`supportedInterfaces[].url`), any fields;
- an MCP tool (`name`, `title`, `description`, `inputSchema`, ...): one card;
- an MCP `tools/list` answer: the JSON-RPC envelope `{"jsonrpc", "id", "result": {"tools": [...]}}`,
  the `result` object `{"tools": [...]}`, or a bare array: one card per tool;
- a JSON array of any of the above.

Indexed (capability text only): `name`, `title`, `description`, card-level `tags` and
`examples`, each skill's `name`, `description`, `tags`, `examples`, each tool's `name`,
`title`, `description`, and the property names and descriptions of an `inputSchema`
(nested properties included). URLs, versions, provider and security fields are never
indexed. The card itself is kept verbatim (`AgentCard.raw`) and returned as published.

A card's id: an explicit `"id"` (string, or an integer read as its decimal form), else its
endpoint URL (v1.0: the first `supportedInterfaces[].url`; v0.3: `url`), else `name`. Any
non-empty string is an id, spaces and Unicode included. Every error names the user's file
and the line where the card starts.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

# a folder's card files: `.json` only, so that a JSONL of something else kept beside the cards
# (`ssr agents generate` writes queries.jsonl next to cards.jsonl) is never read as cards
CARD_SUFFIXES = (".json",)
# nested inputSchema properties deeper than this are not indexed (a schema can nest without end)
MAX_SCHEMA_DEPTH = 8


@dataclass(frozen=True)
class Skill:
    id: str | None = None
    name: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Param:
    """One `inputSchema` property: its name (dotted path when nested) and description."""

    name: str
    description: str = ""


@dataclass(frozen=True)
class Tool:
    name: str = ""
    description: str = ""
    title: str = ""
    params: tuple[Param, ...] = ()


@dataclass(frozen=True)
class AgentCard:
    """One agent's (or one MCP tool's) card: the indexed fields, and the card as published in `raw`.

    `kind` is "agent" (an A2A card, or any object with a name) or "tool" (an MCP tool: its
    `inputSchema` properties are in `params`). `url` is the endpoint (v1.0: the first
    supported interface's url; v0.3: `url`).
    """

    id: str
    name: str = ""
    description: str = ""
    url: str | None = None
    skills: tuple[Skill, ...] = ()
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    tools: tuple[Tool, ...] = ()
    title: str = ""
    params: tuple[Param, ...] = ()
    kind: str = "agent"
    # the card as published (JSON text); None for cards made in code (then `to_dict` builds one)
    raw: str | None = field(default=None, compare=False, repr=False)
    # where the card was read: file and 1-based line where it starts; not part of equality
    source_path: str = field(default="", compare=False)
    source_line: int | None = field(default=None, compare=False)
    source_position: int = field(default=1, compare=False)

    @property
    def source(self) -> str:
        """Where the card was read: `file:line` (`file (card #n)` when the line is unknown)."""
        if self.source_line is not None:
            return f"{self.source_path}:{self.source_line}"
        return f"{self.source_path} (card #{self.source_position})"

    @property
    def label(self) -> str:
        """What to call the card in a listing: its title, else its name, else its id."""
        return self.title or self.name or self.id

    def original(self) -> dict[str, Any]:
        """The card as published (a fresh dict; for a card made in code, its structural fields)."""
        if self.raw is not None:
            value = json.loads(self.raw)
            if isinstance(value, dict):
                return value
        return self.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The card as JSON-ready structural fields (what `parse_card` reads back equal)."""
        out: dict[str, Any] = {"id": self.id, "name": self.name, "description": self.description}
        if self.title:
            out["title"] = self.title
        if self.url is not None:
            out["url"] = self.url
        if self.skills:
            out["skills"] = [_skill_dict(s) for s in self.skills]
        if self.tags:
            out["tags"] = list(self.tags)
        if self.examples:
            out["examples"] = list(self.examples)
        if self.tools:
            out["tools"] = [_tool_dict(t) for t in self.tools]
        if self.kind == "tool" or self.params:
            out["inputSchema"] = _schema_dict(self.params)
        return out

    def published(self) -> str:
        """The card's JSON text as stored (verbatim when it was read from a file)."""
        if self.raw is not None:
            return self.raw
        return _dumps(self.to_dict())


def _skill_dict(s: Skill) -> dict[str, Any]:
    d: dict[str, Any] = {"name": s.name, "description": s.description}
    if s.id is not None:
        d["id"] = s.id
    for key, value in (("tags", s.tags), ("examples", s.examples), ("inputModes", s.input_modes),
                       ("outputModes", s.output_modes)):
        if value:
            d[key] = list(value)
    return d


def _tool_dict(t: Tool) -> dict[str, Any]:
    d: dict[str, Any] = {"name": t.name, "description": t.description}
    if t.title:
        d["title"] = t.title
    if t.params:
        d["inputSchema"] = _schema_dict(t.params)
    return d


def _schema_dict(params: tuple[Param, ...]) -> dict[str, Any]:
    # flat: a nested parameter keeps its dotted name (parse_card reads it back as the same Param)
    return {"type": "object", "properties": {p.name: {"description": p.description} if p.description else {}
                                             for p in params}}


def capability_values(card: AgentCard) -> list[str]:
    """The card's capability text, one entry per field value or list item (empty ones dropped).

    Signals of a card are `card_signals(capability_values(card))`: bigrams never span two
    entries. Ids, urls, versions, provider and security fields are not capability text.
    """
    values = [card.name, card.title, card.description, *card.tags, *card.examples]
    for p in card.params:
        values += [p.name, p.description]
    for s in card.skills:
        values += [s.name, s.description, *s.tags, *s.examples]
    for t in card.tools:
        values += [t.name, t.title, t.description]
        for p in t.params:
            values += [p.name, p.description]
    return [v for v in values if v]


# ---- parsing ---------------------------------------------------------------------------------


class _Where:
    """Builds InputErrors that name the user's file, the line where the card starts, and the card."""

    def __init__(self, path: Path, line: int | None, label: str):
        self.path, self.line, self.label = path, line, label

    def error(self, message: str) -> InputError:
        return InputError(self.path, self.line, f"card {self.label}: {message}")


def _string(obj: dict[str, Any], key: str, where: _Where, ctx: str = "") -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise where.error(f"{ctx}{key!r} must be a string, got {type(value).__name__}")
    return value


def _strings(obj: dict[str, Any], key: str, where: _Where, ctx: str = "") -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"{ctx}{key!r} must be a list of strings, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise where.error(f"{ctx}{key}[{i}] must be a string, got {type(item).__name__}")
    return tuple(value)


def _objects(obj: dict[str, Any], key: str, where: _Where, ctx: str = "") -> list[dict[str, Any]]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error(f"{ctx}{key!r} must be a list of objects, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise where.error(f"{ctx}{key}[{i}] must be an object, got {type(item).__name__}")
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _endpoint(obj: dict[str, Any], where: _Where) -> str | None:
    """v1.0: the first supportedInterfaces[].url; v0.3: url."""
    for i, iface in enumerate(_objects(obj, "supportedInterfaces", where)):
        url = _string(iface, "url", where, f"supportedInterfaces[{i}].")
        if url:
            return url
    return _string(obj, "url", where)


def _card_id(obj: dict[str, Any], endpoint: str | None, where: _Where) -> str:
    raw = obj.get("id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)  # JSON integer ids are common; they name the card as their decimal form
    if raw is not None and not isinstance(raw, str):
        raise where.error(f"'id' must be a string or an integer, got {type(raw).__name__}")
    for candidate in (raw, endpoint, _string(obj, "name", where)):
        if candidate:
            if not _utf8(candidate):
                raise where.error(f"id {candidate!r} is not valid Unicode (a lone surrogate escape)")
            return candidate
    raise where.error("no 'id', endpoint url or 'name' to identify it")


def _params(schema: Any, where: _Where, ctx: str) -> tuple[Param, ...]:
    """Property names and descriptions of a JSON Schema (nested objects and array items too)."""
    if schema is None:
        return ()
    if not isinstance(schema, dict):
        raise where.error(f"{ctx}inputSchema must be an object, got {type(schema).__name__}")
    out: list[Param] = []

    def walk(node: Any, prefix: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > MAX_SCHEMA_DEPTH:
            return
        props = node.get("properties")
        if isinstance(props, dict):
            for name, spec in props.items():
                desc = spec.get("description") if isinstance(spec, dict) else None
                full = f"{prefix}{name}"
                out.append(Param(full, desc if isinstance(desc, str) else ""))
                walk(spec, full + ".", depth + 1)
        items = node.get("items")
        if isinstance(items, dict):
            walk(items, prefix, depth + 1)

    walk(schema, "", 0)
    return tuple(out)


def _title(obj: dict[str, Any], where: _Where, ctx: str = "") -> str:
    # MCP puts a display name in `title` (2025-06-18) or, earlier, in annotations.title
    title = _string(obj, "title", where, ctx)
    if title is None and isinstance(obj.get("annotations"), dict):
        value = obj["annotations"].get("title")
        title = value if isinstance(value, str) else None
    return title or ""


def _dumps(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    # a lone surrogate (valid JSON escape, invalid Unicode) cannot be stored as UTF-8: keep it escaped
    return text if _utf8(text) else json.dumps(obj, ensure_ascii=True)


def parse_card(
    obj: Any, path: str | os.PathLike[str], line: int | None = None, position: int = 1, raw: str | None = None
) -> AgentCard:
    """Validate one decoded card (an A2A card or an MCP tool); unknown fields are tolerated.

    `position` (1-based) names the card when it has no id; `raw` is its published JSON text
    (default: `obj` serialised).
    """
    label = f"#{position}"
    if isinstance(obj, dict):
        for key in ("id", "name"):
            value = obj.get(key)
            if (isinstance(value, str) and value) or (isinstance(value, int) and not isinstance(value, bool)):
                label = repr(str(value))
                break
    where = _Where(Path(path), line, label)
    if not isinstance(obj, dict):
        raise where.error(f"must be a JSON object, got {type(obj).__name__}")
    endpoint = _endpoint(obj, where)
    card_id = _card_id(obj, endpoint, where)
    skills = []
    for i, s in enumerate(_objects(obj, "skills", where)):
        ctx = f"skills[{i}]."
        skill_id = s.get("id")
        if isinstance(skill_id, int) and not isinstance(skill_id, bool):
            skill_id = str(skill_id)
        elif skill_id is not None and not isinstance(skill_id, str):
            raise where.error(f"{ctx}'id' must be a string, got {type(skill_id).__name__}")
        skills.append(
            Skill(
                id=skill_id,
                name=_string(s, "name", where, ctx) or "",
                description=_string(s, "description", where, ctx) or "",
                tags=_strings(s, "tags", where, ctx),
                examples=_strings(s, "examples", where, ctx),
                input_modes=_strings(s, "inputModes", where, ctx),
                output_modes=_strings(s, "outputModes", where, ctx),
            )
        )
    tools = []
    for i, t in enumerate(_objects(obj, "tools", where)):
        ctx = f"tools[{i}]."
        tools.append(
            Tool(
                name=_string(t, "name", where, ctx) or "",
                description=_string(t, "description", where, ctx) or "",
                title=_title(t, where, ctx),
                params=_params(t.get("inputSchema"), where, ctx),
            )
        )
    is_tool = "inputSchema" in obj
    return AgentCard(
        id=card_id,
        name=_string(obj, "name", where) or "",
        description=_string(obj, "description", where) or "",
        url=endpoint,
        skills=tuple(skills),
        tags=_strings(obj, "tags", where),
        examples=_strings(obj, "examples", where),
        tools=tuple(tools),
        title=_title(obj, where),
        params=_params(obj.get("inputSchema"), where, ""),
        kind="tool" if is_tool else "agent",
        raw=raw if raw is not None else _dumps(obj),
        source_path=str(path),
        source_line=line,
        source_position=position,
    )


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
    if isinstance(value.get("tools"), list) and "name" not in value and "id" not in value:
        return value["tools"], ("tools",)
    return None


def _cards_of_value(value: Any, text: str, start: int, lines: _Lines, path: Path,
                    position: int, raw: str | None = None) -> Iterator[AgentCard]:
    """The cards one decoded JSON value holds (it starts at `start` in `text`)."""
    where = _Where(path, lines.at(start), f"#{position}")
    if isinstance(value, dict) and "jsonrpc" in value and "error" in value and "result" not in value:
        err = value.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        raise where.error(f"a JSON-RPC error response, not a tools/list result ({msg!r})")
    if isinstance(value, dict) and "jsonrpc" in value and _tool_list(value) is None:
        raise where.error("a JSON-RPC message without result.tools: expected a tools/list response")
    listed = _tool_list(value)
    if listed is not None:
        items, key_path = listed
    elif isinstance(value, list):
        items, key_path = value, ()
    else:
        yield parse_card(value, path, lines.at(start), position, raw)
        return
    offsets = _item_offsets(text, start, key_path)
    for j, item in enumerate(items):
        at = offsets[j] if offsets is not None and j < len(offsets) else start
        if isinstance(item, (dict, list)) and _tool_list(item) is not None:
            yield from _cards_of_value(item, text, at, lines, path, position + j)
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
                raise InputError(path, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
            except RecursionError as exc:
                raise InputError(path, lineno, "invalid JSON: nested too deeply") from exc
            stripped = text.strip()
            # one card per line keeps the line's own text; a list or a tools/list answer is split
            yield from _cards_of_value(obj, stripped, 0, _Lines(stripped, lineno), path, lineno,
                                       stripped if _utf8(stripped) else None)


def _iter_json_file(path: Path) -> Iterator[AgentCard]:
    text = _decode(path.read_bytes(), path, None).removeprefix("\ufeff")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError as exc:
        raise InputError(path, None, "invalid JSON: nested too deeply") from exc
    whole = text.strip()
    yield from _cards_of_value(obj, text, 0, _Lines(text), path, 1, whole if _utf8(whole) else None)


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
    yield from (_iter_json_file(p) if p.suffix.lower() == ".json" else _iter_jsonl(p))


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


def clean_text(text: str) -> str:
    """Text safe to put on one prompt line: whitespace runs (newlines included) become one space,
    and control and format characters (C0/C1 controls, bidi overrides, zero-width) are dropped."""
    kept = "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf") or c.isspace())
    return " ".join(kept.split())


# ---- writing ---------------------------------------------------------------------------------


def card_document(card: AgentCard) -> dict[str, Any]:
    """The build's JSONL document form of a card: its id and its capability values."""
    return {"id": card.id, "fields": capability_values(card)}


def write_jsonl(rows: Iterable[dict[str, Any]], out: str | os.PathLike[str]) -> int:
    """Stream rows to a JSONL file, atomically (a temporary file renamed at the end)."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(_dumps(row))
                f.write("\n")
                n += 1
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return n


def write_documents(cards: Iterable[AgentCard], out: str | os.PathLike[str]) -> int:
    """Write cards as the JSONL documents `build_index(..., fmt="jsonl")` reads; returns the count."""
    return write_jsonl((card_document(c) for c in cards), out)


def write_cards(cards: Iterable[AgentCard], out: str | os.PathLike[str]) -> int:
    """Write cards as JSONL, each as published (or its structural fields when made in code).

    A card published over several lines (a pretty-printed .json file) is written on one line:
    the same JSON value, re-encoded compactly.
    """
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for card in cards:
                text = card.published()
                if "\n" in text or "\r" in text:
                    text = _dumps(json.loads(text))
                f.write(text)
                f.write("\n")
                n += 1
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return n
