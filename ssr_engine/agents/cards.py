"""Agent Cards and MCP tools as they are published: one decoded card validated (`parse_card`), its
capability text (`capability_values`), its document form. Files, folders and `tools/list` answers
are read in `sources`.

A card is an A2A AgentCard, v0.3 (top-level `url`) or v1.0 (`supportedInterfaces[].url`), any
fields; or an MCP tool (`name`, `title`, `description`, `inputSchema`, ...).

Indexed (capability text only): `name`, `title`, `description`, card-level `tags` and
`examples`, each skill's `name`, `description`, `tags`, `examples`, each tool's `name`,
`title`, `description`, the property names and descriptions of an `inputSchema`
(nested properties included), and an MCP server's `packages` and `remotes` (server.json: each
package's identifier, each remote's url, and the names and descriptions of their environment
variables, arguments and headers; `Package`). An A2A card's URLs, versions, provider and security
fields are never indexed. The card itself is kept verbatim (`AgentCard.raw`) and returned as published.

A card's id: an explicit `"id"` (string, or an integer read as its decimal form), else its
endpoint URL (v1.0: the first `supportedInterfaces[].url`; v0.3: `url`), else `name`. Any
non-empty string is an id, spaces and Unicode included. Every error names the user's file
and the line where the card starts.
"""

from __future__ import annotations

import json
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

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
class Package:
    """One way to reach an MCP server (server.json `packages[]` or `remotes[]`): a package's identifier in
    its registry (`@scope/name` on npm, a PyPI name, an image) or a remote's url, and the names and
    descriptions of what it takes (environment variables, arguments, headers)."""

    identifier: str
    settings: tuple[Param, ...] = ()


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
    packages: tuple[Package, ...] = ()
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
        if self.packages:  # remotes too: read back alike (an identifier and its settings)
            out["packages"] = [{"identifier": k.identifier, "environmentVariables": [
                {"name": p.name, "description": p.description} for p in k.settings]} for k in self.packages]
        return out

    def published(self) -> str:
        """The card's JSON text as stored (verbatim when it was read from a file)."""
        if self.raw is not None:
            return self.raw
        return json_text(self.to_dict())


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
    for k in card.packages:
        values.append(k.identifier)
        for p in k.settings:
            values += [p.name, p.description]
    return [v for v in values if v]


# ---- parsing ---------------------------------------------------------------------------------


class Where:
    """Builds InputErrors that name the user's file, the line where the card starts, and the card."""

    def __init__(self, path: Path, line: int | None, label: str):
        self.path, self.line, self.label = path, line, label

    def error(self, message: str) -> InputError:
        return InputError(self.path, self.line, f"card {self.label}: {message}")


def _string(obj: dict[str, Any], key: str, where: Where, ctx: str = "") -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise where.error(f"{ctx}{key!r} must be a string, got {type(value).__name__}")
    return value


def _strings(obj: dict[str, Any], key: str, where: Where, ctx: str = "") -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"{ctx}{key!r} must be a list of strings, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise where.error(f"{ctx}{key}[{i}] must be a string, got {type(item).__name__}")
    return tuple(value)


def _objects(obj: dict[str, Any], key: str, where: Where, ctx: str = "") -> list[dict[str, Any]]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error(f"{ctx}{key!r} must be a list of objects, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise where.error(f"{ctx}{key}[{i}] must be an object, got {type(item).__name__}")
    return value


def valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _endpoint(obj: dict[str, Any], where: Where) -> str | None:
    """v1.0: the first supportedInterfaces[].url; v0.3: url."""
    for i, iface in enumerate(_objects(obj, "supportedInterfaces", where)):
        url = _string(iface, "url", where, f"supportedInterfaces[{i}].")
        if url:
            return url
    return _string(obj, "url", where)


def _card_id(obj: dict[str, Any], endpoint: str | None, where: Where) -> str:
    raw = obj.get("id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)  # JSON integer ids are common; they name the card as their decimal form
    if raw is not None and not isinstance(raw, str):
        raise where.error(f"'id' must be a string or an integer, got {type(raw).__name__}")
    for candidate in (raw, endpoint, _string(obj, "name", where)):
        if candidate:
            if not valid_unicode(candidate):
                raise where.error(f"id {candidate!r} is not valid Unicode (a lone surrogate escape)")
            return candidate
    raise where.error("no 'id', endpoint url or 'name' to identify it")


def _params(schema: Any, where: Where, ctx: str) -> tuple[Param, ...]:
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


# server.json's lists of what a package or remote takes, in the registry's camelCase (2025-09 on) and
# snake_case (2025-07) spellings
_SETTINGS = ("environmentVariables", "environment_variables", "packageArguments", "package_arguments",
             "runtimeArguments", "runtime_arguments", "headers")


def _packages(obj: dict[str, Any]) -> tuple[Package, ...]:
    """An MCP server's `packages` and `remotes` (server.json, every published spelling). Read leniently:
    a value of another shape is skipped, never refused (these fields were stored unread before)."""
    out = []
    for key, ident in (("packages", ("identifier", "name")), ("remotes", ("url",))):
        items = obj.get(key)
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict):
                continue
            identifier = next((v for k in ident if isinstance(v := item.get(k), str) and v), "")
            settings = []
            for name in _SETTINGS:
                listed = item.get(name)
                for s in listed if isinstance(listed, list) else ():
                    if isinstance(s, dict):
                        texts = (s.get("name") or s.get("valueHint") or s.get("value_hint"), s.get("description"))
                        label, desc = (t if isinstance(t, str) else "" for t in texts)
                        if label or desc:
                            settings.append(Param(label, desc))
            if identifier or settings:
                out.append(Package(identifier, tuple(settings)))
    return tuple(out)


def _title(obj: dict[str, Any], where: Where, ctx: str = "") -> str:
    # MCP puts a display name in `title` (2025-06-18) or, earlier, in annotations.title
    title = _string(obj, "title", where, ctx)
    if title is None and isinstance(obj.get("annotations"), dict):
        value = obj["annotations"].get("title")
        title = value if isinstance(value, str) else None
    return title or ""


def json_text(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    # a lone surrogate (valid JSON escape, invalid Unicode) cannot be stored as UTF-8: keep it escaped
    return text if valid_unicode(text) else json.dumps(obj, ensure_ascii=True)


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
    where = Where(Path(path), line, label)
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
        packages=_packages(obj),
        kind="tool" if is_tool else "agent",
        raw=raw if raw is not None else json_text(obj),
        source_path=str(path),
        source_line=line,
        source_position=position,
    )


def clean_text(text: str) -> str:
    """Text safe to put on one prompt line: whitespace runs (newlines included) become one space,
    and control and format characters (C0/C1 controls, bidi overrides, zero-width) are dropped."""
    kept = "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf") or c.isspace())
    return " ".join(kept.split())


def card_document(card: AgentCard) -> dict[str, Any]:
    """The build's JSONL document form of a card: its id and its capability values."""
    return {"id": card.id, "fields": capability_values(card)}
