"""Say so before Numba compiles the kernels (the first run sits ~30 s otherwise, silently).

A kernel module is *cold* when Numba's cache directory holds no index file (`*.nbi`) of it:
nothing of it was ever compiled and cached there, so its first call compiles. Checking costs a
directory listing per module (the modules are imported, nothing is compiled). Announcing leaves a
marker (`NAME.ssr-announced`) beside the cache of each cold module: a module that a workflow never
compiles (`kernels.merge` for one-run builds, `kernels.bm25` on SSR indexes) would otherwise stay cold
and repeat the notice on every command.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TextIO

NOTICE = "compiling kernels (first run only, ~30 s)"

# the kernel modules each kind of command calls
BUILD = ("ssr_engine.kernels.text", "ssr_engine.kernels.indexing", "ssr_engine.kernels.merge", "ssr_engine.hashing",
         "ssr_engine.kernels.fnv")
SEARCH = ("ssr_engine.kernels.ssr", "ssr_engine.kernels.levels", "ssr_engine.kernels.probe", "ssr_engine.kernels.bm25",
          "ssr_engine.kernels.text", "ssr_engine.hashing", "ssr_engine.kernels.fnv", "ssr_engine.kernels.query",
          "ssr_engine.kernels.answer")
# a live index's changes and searches (`live_files`, `live_compact`, `parts`, `parts_search`, `parts_tables`:
# tests/test_jit.py checks these rooms' kernel imports are listed)
LIVE = tuple(f"ssr_engine.kernels.{m}" for m in ("live", "part_terms", "id_lookup", "indexing", "compact", "spans",
                                                 "packed", "forward", "merge", "id_table", "candidates", "levels",
                                                 "probe", "ssr"))
# a sharded index's build (the global weights) and search (`distributed.worker`)
SHARDS = tuple(f"ssr_engine.kernels.{m}" for m in ("shards", "merge", "live", "id_table", "candidates", "query",
                                                   "part_terms", "small", "terms"))
VERIFY = tuple(f"ssr_engine.kernels.{m}" for m in ("validate", "strings", "lists"))
# the `ssr` subcommands that call kernels, and which
COMMANDS = {"build-index": BUILD + SHARDS, "search": SEARCH + LIVE + SHARDS, "evaluate": SEARCH + LIVE + SHARDS,
            "add": BUILD + LIVE, "delete": LIVE, "compact": BUILD + LIVE, "verify": VERIFY,
            "signals": ("ssr_engine.kernels.text",), "agents": BUILD + SEARCH + LIVE, "demo": BUILD + SEARCH}
MARKER = "ssr-announced"

_announced = False


def cold_modules(modules: tuple[str, ...]) -> list[str]:
    """The modules among `modules` of which Numba's cache holds nothing yet (and not announced)."""
    return [name for name, _ in _cold(modules)]


def _cold(modules: tuple[str, ...]) -> list[tuple[str, Path]]:
    """(module, marker path) of each cold module."""
    cold = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        cache_dir = None
        for obj in vars(module).values():
            cache = getattr(obj, "_cache", None)
            path = getattr(cache, "_cache_path", None)
            if path is not None and getattr(obj, "__module__", None) == name:
                cache_dir = Path(path)
                break
        if cache_dir is None:
            continue
        stem = Path(module.__file__ or name).stem
        marker = cache_dir / f"{stem}.{MARKER}"
        if not cache_dir.is_dir() or not (marker.exists() or any(cache_dir.glob(f"{stem}.*.nbi"))):
            cold.append((name, marker))
    return cold


def announce_compile(modules: tuple[str, ...] = BUILD + SEARCH, quiet: bool = False,
                     stream: TextIO | None = None) -> bool:
    """Print NOTICE (once per process, to stderr) when a kernel module is cold, and mark the cold
    modules announced; True if printed."""
    global _announced
    cold = [] if quiet or _announced else _cold(modules)
    if not cold:
        return False
    _announced = True
    print(f"ssr: {NOTICE}", file=stream or sys.stderr, flush=True)
    for _, marker in cold:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:  # a read-only cache: the notice is then shown again next time, nothing worse
            pass
    return True
