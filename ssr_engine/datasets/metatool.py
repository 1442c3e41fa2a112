"""MetaTool ToolE from its original files (plugin_des.json, all_clean_data.csv,
multi_tool_query_golden.json).

- Tools: the 199 entries of plugin_des.json (id = tool name, text = description).
- Single-tool queries: the 20,614 rows of all_clean_data.csv (columns Query, Tool), numbered by
  position 1..20614 (texts repeat, so they cannot be ids); the row's tool is the gold tool.
- Two-tool queries: the 497 entries of multi_tool_query_golden.json ({"query", "tool": [..]}).
Texts have their whitespace runs collapsed to one space (signals and BM25 tokens are unchanged).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import read_text, squash, write_atomic, write_collection


@dataclass(frozen=True)
class MetaTool:
    """tools: (name, description); queries: (position, text) with gold[i] the tool of queries[i];
    multi: (text, gold tools) of the multi-tool queries (empty when not loaded)."""

    tools: list[tuple[str, str]]
    queries: list[tuple[str, str]]
    gold: list[str]
    multi: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


def parse_tools(text: str, path: Path) -> list[tuple[str, str]]:
    try:
        tools = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"invalid JSON ({exc.msg})") from None
    if not isinstance(tools, dict) or not tools:
        raise InputError(path, None, "expected a non-empty JSON object {tool name: description}")
    out = []
    for name, desc in tools.items():
        if not isinstance(desc, str):
            raise InputError(path, None, f"description of {name!r} is not a string")
        out.append((name, squash(desc)))
    return out


def parse_queries(text: str, path: Path, known: set[str], tools_file: str,
                  max_queries: int | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None or [h.strip().lower() for h in header[:2]] != ["query", "tool"]:
        raise InputError(path, 1, f"expected header 'Query,Tool', got {header!r}")
    queries: list[tuple[str, str]] = []
    gold: list[str] = []
    for row in reader:
        if max_queries is not None and len(queries) >= max_queries:
            break
        line = reader.line_num
        if len(row) != 2:
            raise InputError(path, line, f"expected 2 fields (query, tool), got {len(row)}")
        query, tool = squash(row[0]), row[1].strip()
        if tool not in known:
            raise InputError(path, line, f"tool {tool!r} is not in {tools_file}")
        if not query:
            raise InputError(path, line, "empty query")
        queries.append((str(len(queries) + 1), query))
        gold.append(tool)
    return queries, gold


def parse_multi(text: str, path: Path, known: set[str], tools_file: str) -> list[tuple[str, tuple[str, ...]]]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"invalid JSON ({exc.msg})") from None
    if not isinstance(items, list):
        raise InputError(path, None, "expected a JSON list of {\"query\", \"tool\": [...]}")
    out = []
    for i, item in enumerate(items):
        if not (isinstance(item, dict) and isinstance(item.get("query"), str) and isinstance(item.get("tool"), list)):
            raise InputError(path, None, f"entry {i}: expected {{\"query\": str, \"tool\": [str, ...]}}")
        unknown = [t for t in item["tool"] if t not in known]
        if unknown:
            raise InputError(path, None, f"entry {i}: tool {unknown[0]!r} is not in {tools_file}")
        out.append((squash(item["query"]), tuple(item["tool"])))
    return out


def load_metatool(directory: str | os.PathLike[str] | None = None, *, max_queries: int | None = None,
                  multi: bool = True) -> MetaTool:
    """MetaTool from the bundled copy (default) or the original files in `directory`;
    `multi=False` skips the two-tool queries (a directory may not have them)."""
    text, des_path = read_text("metatool", "plugin_des.json", directory)
    tools = parse_tools(text, des_path)
    known = {name for name, _ in tools}
    text, csv_path = read_text("metatool", "all_clean_data.csv", directory)
    queries, gold = parse_queries(text, csv_path, known, des_path.name, max_queries)
    pairs: list[tuple[str, tuple[str, ...]]] = []
    if multi:
        text, multi_path = read_text("metatool", "multi_tool_query_golden.json", directory)
        pairs = parse_multi(text, multi_path, known, des_path.name)
    stats = {"dataset": "metatool", "source": str(des_path.parent), "documents": len(tools),
             "queries": len(queries), "qrels": len(queries), "distinct_query_texts": len({t for _, t in queries}),
             "tools_with_queries": len(set(gold)), "multi_tool_queries": len(pairs)}
    return MetaTool(tools, queries, gold, pairs, stats)


def write_metatool(out: str | os.PathLike[str], directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """collection.tsv (the tools), queries.tsv, qrels.tsv (grade 1), stats.json and cards.jsonl
    ({"id", "name", "description"} per tool) in `out`; returns the stats."""
    m = load_metatool(directory, multi=False)
    qrels = [(qid, tool, 1) for (qid, _), tool in zip(m.queries, m.gold, strict=True)]
    write_collection(out, m.tools, m.queries, qrels, m.stats)
    cards = "".join(json.dumps({"id": n, "name": n, "description": d}) + "\n" for n, d in m.tools)
    write_atomic(Path(out) / "cards.jsonl", cards)
    return m.stats
