"""ARCHITECTURE.md's layer table against the package: every module is in exactly one layer, and no module
imports (at the top or inside a function) from a layer above its own."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ssr_engine"
FACE = {"__init__", "__main__"}  # the package's face (`import ssr_engine`, `python -m ssr_engine`): layer 4


def layer_table() -> dict[int, list[str]]:
    """{layer: room patterns} from the table's rows `| N name | rooms | rule |` (`kernels/`, `live*`, `search`)."""
    rows = {}
    for line in (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*(\d)\s+\w+\s*\|([^|]*)\|", line)
        if m:
            rows[int(m.group(1))] = [r.rstrip("/") for r in re.findall(r"`([^`]+)`", m.group(2))]
    return rows


def rooms() -> list[str]:
    """The package's top-level modules and sub-packages."""
    return sorted({p.stem for p in PACKAGE.glob("*.py")} - FACE | {p.name for p in PACKAGE.iterdir()
                                                                    if (p / "__init__.py").exists()})


ROOMS = set(rooms())


def layer_of() -> dict[str, int]:
    table = layer_table()
    found: dict[str, list[int]] = {}
    for room in rooms():
        found[room] = [n for n, patterns in table.items() if any(fnmatch.fnmatchcase(room, p) for p in patterns)]
    missing = [r for r, ns in found.items() if len(ns) != 1]
    assert not missing, f"rooms in no layer or in several of ARCHITECTURE.md's table: {missing}"
    return {r: ns[0] for r, ns in found.items()} | dict.fromkeys(FACE, 4)


def test_the_table_has_five_layers_and_names_only_rooms_that_exist():
    table = layer_table()
    assert sorted(table) == [0, 1, 2, 3, 4]
    for n, patterns in table.items():
        for p in patterns:
            assert any(fnmatch.fnmatchcase(r, p) for r in rooms()), f"layer {n} names {p!r}: no such module"


def imported_rooms(path: Path) -> list[tuple[int, str]]:
    """(line, room) of every package-internal import in one module, lazy ones included."""
    here = path.relative_to(PACKAGE).parent.parts
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("ssr_engine.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if not (node.module or "").startswith("ssr_engine"):
                    continue
                parts = node.module.split(".")[1:]
            else:
                parts = list(here[: len(here) - node.level + 1]) + (node.module.split(".") if node.module else [])
            if parts:
                out.append((node.lineno, parts[0]))
            else:  # `from . import x`: a room, or a name of the package's face (`__init__`)
                out += [(node.lineno, a.name if a.name in ROOMS else "__init__") for a in node.names]
    return out


def test_no_module_imports_from_a_layer_above_its_own():
    layers = layer_of()
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        room = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for line, other in imported_rooms(path):
            if other in layers and layers[other] > layers[room]:
                upward.append(f"{path.relative_to(ROOT)}:{line} (layer {layers[room]}) imports {other} "
                              f"(layer {layers[other]})")
    assert not upward, "\n".join(upward)


def test_the_import_walk_sees_relative_and_lazy_imports():
    # the check above is only as good as this walk: a lazy relative import two levels up is found
    assert "retrieval" in {room for _, room in imported_rooms(PACKAGE / "eval" / "evaluate.py")}  # `from ..retrieval`
    lazy = imported_rooms(PACKAGE / "agents" / "discovery.py")
    assert any(room == "retrieval" for _, room in lazy)  # imported inside a function there
    assert ("__init__" in {room for _, room in imported_rooms(PACKAGE / "cli" / "__init__.py")})  # `from .. import
    # __version__`: the package's face


def test_uses_and_face_call_no_kernel():
    # layers 3 and 4 reach the engines through their searchers and builders, never a Numba kernel
    layers = layer_of()
    direct = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
              if layers[path.relative_to(PACKAGE).parts[0].removesuffix(".py")] >= 3
              for line, room in imported_rooms(path) if room == "kernels"]
    assert not direct, direct


def named_in_architecture() -> set[str]:
    """Every word inside a backtick span of ARCHITECTURE.md (`kernels/merge.merge_two` gives kernels, merge,
    merge_two)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    return {w for span in re.findall(r"`([^`]+)`", text) for w in re.split(r"[^A-Za-z0-9_]+", span) if w}


def test_every_module_is_named_in_architecture_and_every_kernel_has_its_row():
    # a newcomer finds a room from ARCHITECTURE.md only if the room is there: a new module must be named
    named = named_in_architecture()
    modules = [p.relative_to(PACKAGE) for p in sorted(PACKAGE.rglob("*.py")) if p.stem not in FACE]
    assert len(modules) > 100
    missing = [str(m) for m in modules if m.stem not in named]
    assert not missing, f"modules ARCHITECTURE.md never names: {missing}"
    rows = set(re.findall(r"^\| `kernels/(\w+)` \|", (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"), re.M))
    kernels = {m.stem for m in modules if m.parts[0] == "kernels"}
    assert kernels == rows, f"kernel modules without a row: {kernels - rows}; rows without a module: {rows - kernels}"


def top_level_imports(path: Path) -> set[str]:
    """Dotted names of the package's modules that `path` imports when it is first imported: statements in its
    body (not inside a function, nor under `if TYPE_CHECKING`), relative ones resolved; `from . import x`
    names module x when x.py or x/ exists."""
    name = ".".join(("ssr_engine", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    out = set()
    body = ast.parse(path.read_text(encoding="utf-8")).body
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try, ast.With)) else [node]:
            if isinstance(sub, ast.Import):
                out |= {a.name for a in sub.names if a.name.startswith("ssr_engine")}
            elif isinstance(sub, ast.ImportFrom):
                if sub.level == 0:
                    base = sub.module or ""
                else:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - sub.level + 1] + ([sub.module] if sub.module else []))
                if not base.startswith("ssr_engine"):
                    continue
                out.add(base)
                for a in sub.names:
                    target = PACKAGE.parent.joinpath(*f"{base}.{a.name}".split("."))
                    if target.with_suffix(".py").exists() or (target / "__init__.py").exists():
                        out.add(f"{base}.{a.name}")
    return out


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle of `graph` found by a depth-first walk (each as the modules along it, the first repeated)."""
    cycles, state = [], {}  # state: 1 on the walk's path, 2 done

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return cycles


def test_no_import_cycle_between_modules_so_each_imports_alone():
    # a cycle of imports made at import time works only from some entry points: kernels.prune -> levels ->
    # long -> prune failed when a test file imported prune first (`pytest tests/test_probe.py` alone).
    # A package's __init__ is left out: importing a module imports its package first, which is no cycle.
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.stem == "__init__":
            continue
        name = ".".join(("ssr_engine", *path.relative_to(PACKAGE).with_suffix("").parts))
        graph[name] = {m for m in top_level_imports(path) if not (PACKAGE.parent.joinpath(*m.split("."))
                                                                  / "__init__.py").exists()}
    assert "ssr_engine.kernels.levels" in graph["ssr_engine.kernels.probe"]  # the walk sees `from . import x`
    assert "ssr_engine.kernels.packed" in graph["ssr_engine.kernels.long"]  # and `from .x import y`
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)
