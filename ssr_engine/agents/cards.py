"""A2A Agent Cards: read and validate them, list their capability text, write them out.

Cards come from a JSONL file (one card per line) or from a folder of `.json` files (each a
card or a list of cards); a single `.json` file is read like one file of such a folder.
Only the structural fields are kept (DESIGN.md section 6): `name`, `description`, `skills[]`
(`id`, `name`, `description`, `tags`, `examples`), card-level `tags` and `examples`, MCP-style
`tools[]` (`name`, `description`), plus `id` and `url`. Unknown keys are ignored; a known key
of the wrong type is an `InputError` naming the file, the line (JSONL) and the card.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError


@dataclass(frozen=True)
class Skill:
    id: str | None = None
    name: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tool:
    name: str = ""
    description: str = ""


@dataclass(frozen=True)
class AgentCard:
    """One agent's card. `id` comes from the card's `id`, else its `url`, else its `name`."""

    id: str
    name: str = ""
    description: str = ""
    url: str | None = None
    skills: tuple[Skill, ...] = ()
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    tools: tuple[Tool, ...] = ()
    # where the card was read (file, 1-based line for JSONL); not part of equality
    source_path: str = field(default="", compare=False)
    source_line: int | None = field(default=None, compare=False)
    source_position: int = field(default=1, compare=False)

    @property
    def source(self) -> str:
        """Where the card was read: `file:line` for JSONL, `file (card #n)` for a .json file."""
        if self.source_line is not None:
            return f"{self.source_path}:{self.source_line}"
        return f"{self.source_path} (card #{self.source_position})"

    @property
    def title(self) -> str:
        return self.name or self.id

    def to_dict(self) -> dict[str, Any]:
        """The card as JSON-ready structural fields (what `parse_card` reads back)."""
        out: dict[str, Any] = {"id": self.id, "name": self.name, "description": self.description}
        if self.url is not None:
            out["url"] = self.url
        if self.skills:
            out["skills"] = [_skill_dict(s) for s in self.skills]
        if self.tags:
            out["tags"] = list(self.tags)
        if self.examples:
            out["examples"] = list(self.examples)
        if self.tools:
            out["tools"] = [{"name": t.name, "description": t.description} for t in self.tools]
        return out


def _skill_dict(s: Skill) -> dict[str, Any]:
    d: dict[str, Any] = {"name": s.name, "description": s.description}
    if s.id is not None:
        d["id"] = s.id
    if s.tags:
        d["tags"] = list(s.tags)
    if s.examples:
        d["examples"] = list(s.examples)
    return d


def capability_values(card: AgentCard) -> list[str]:
    """The card's capability text, one entry per field value or list item (empty ones dropped).

    Signals of a card are `card_signals(capability_values(card))`: bigrams never span two
    entries. Ids and urls are not capability text and are left out.
    """
    values = [card.name, card.description, *card.tags, *card.examples]
    for s in card.skills:
        values += [s.name, s.description, *s.tags, *s.examples]
    for t in card.tools:
        values += [t.name, t.description]
    return [v for v in values if v]


# ---- parsing ---------------------------------------------------------------------------------


class _Where:
    """Builds InputErrors that name the file, the line and the card."""

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


def _objects(obj: dict[str, Any], key: str, where: _Where) -> list[dict[str, Any]]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error(f"{key!r} must be a list of objects, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise where.error(f"{key}[{i}] must be an object, got {type(item).__name__}")
    return value


def _card_id(obj: dict[str, Any], where: _Where) -> str:
    raw = obj.get("id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)  # JSON integer ids are common; they name the card as their decimal form
    if raw is not None and not isinstance(raw, str):
        raise where.error(f"'id' must be a string or an integer, got {type(raw).__name__}")
    for candidate in (raw, _string(obj, "url", where), _string(obj, "name", where)):
        if candidate:
            return candidate
    raise where.error("no 'id', 'url' or 'name' to identify it")


def parse_card(obj: Any, path: str | os.PathLike[str], line: int | None = None, position: int = 1) -> AgentCard:
    """Validate one decoded card. `position` (1-based) names the card when it has no id."""
    label = f"#{position}"
    if isinstance(obj, dict):
        for key in ("id", "url", "name"):
            value = obj.get(key)
            if (isinstance(value, str) and value) or (isinstance(value, int) and not isinstance(value, bool)):
                label = repr(str(value))
                break
    where = _Where(Path(path), line, label)
    if not isinstance(obj, dict):
        raise where.error(f"must be a JSON object, got {type(obj).__name__}")
    card_id = _card_id(obj, where)
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
            )
        )
    tools = [
        Tool(
            name=_string(t, "name", where, f"tools[{i}].") or "",
            description=_string(t, "description", where, f"tools[{i}].") or "",
        )
        for i, t in enumerate(_objects(obj, "tools", where))
    ]
    return AgentCard(
        id=card_id,
        name=_string(obj, "name", where) or "",
        description=_string(obj, "description", where) or "",
        url=_string(obj, "url", where),
        skills=tuple(skills),
        tags=_strings(obj, "tags", where),
        examples=_strings(obj, "examples", where),
        tools=tuple(tools),
        source_path=str(path),
        source_line=line,
        source_position=position,
    )


def _iter_jsonl(path: Path) -> Iterator[AgentCard]:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(path, lineno, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(path, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
            yield parse_card(obj, path, lineno, lineno)


def _iter_json_file(path: Path) -> Iterator[AgentCard]:
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(path, None, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    items = obj if isinstance(obj, list) else [obj]
    for i, item in enumerate(items, 1):
        yield parse_card(item, path, None, i)


def iter_cards(path: str | os.PathLike[str]) -> Iterator[AgentCard]:
    """Cards from a JSONL file, a `.json` file, or a folder of `.json` files (sorted by name).

    Streams; does not check ids for uniqueness (`read_cards` and `unique_cards` do).
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() == ".json" and f.is_file())
        if not files:
            raise InputError(p, None, "no .json card files in this folder")
        for f in files:
            yield from _iter_json_file(f)
    elif p.is_file():
        yield from (_iter_json_file(p) if p.suffix.lower() == ".json" else _iter_jsonl(p))
    else:
        raise InputError(p, None, "no such file or folder")


def unique_cards(cards: Iterable[AgentCard]) -> Iterator[AgentCard]:
    """Pass cards through, failing on a repeated id (the error names both places)."""
    seen: dict[str, str] = {}
    for card in cards:
        first = seen.get(card.id)
        if first is not None:
            where = "" if card.source_line is not None else f" (card #{card.source_position})"
            raise InputError(
                card.source_path, card.source_line, f"duplicate card id {card.id!r}{where}; first at {first}"
            )
        seen[card.id] = card.source
        yield card


def read_cards(path: str | os.PathLike[str]) -> list[AgentCard]:
    """All cards of `path`, ids unique; an empty input is an error."""
    cards = list(unique_cards(iter_cards(path)))
    if not cards:
        raise InputError(path, None, "no cards")
    return cards


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
                f.write(json.dumps(row, ensure_ascii=False))
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
    """Write cards as JSONL cards (`read_cards` reads them back equal)."""
    return write_jsonl((c.to_dict() for c in cards), out)
