"""The first-run notice: "compiling kernels" exactly when Numba's cache holds nothing of a kernel module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import io, numpy as np
from ssr_engine import jit
from ssr_engine.hashing import hash_spans
before = jit.cold_modules(("ssr_engine.hashing", "ssr_engine.kernels.ssr"))
out = io.StringIO()
printed = jit.announce_compile(("ssr_engine.hashing",), stream=out)
again = jit.announce_compile(("ssr_engine.hashing",), stream=out)  # once per process
data = np.frombuffer(b"alpha beta", dtype=np.uint8)
hash_spans(data, np.array([0, 5, 10], dtype=np.int64), np.uint64(0), np.uint64((1 << 64) - 1))
after = jit.cold_modules(("ssr_engine.hashing", "ssr_engine.kernels.ssr"))
print(before, printed, again, repr(out.getvalue()), after)
"""


def run(cache_dir: Path) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True,
                          timeout=600).stdout.strip()


def test_notice_on_a_cold_cache_only(tmp_path):
    first = run(tmp_path)
    # an empty cache: both modules cold, the notice printed once; compiling hashing warms it
    assert first == ("['ssr_engine.hashing', 'ssr_engine.kernels.ssr'] True False "
                     "'ssr: compiling kernels (first run only, ~30 s)\\n' ['ssr_engine.kernels.ssr']")
    # a new process over the same cache: hashing is cached now, no notice for it
    assert run(tmp_path).startswith("['ssr_engine.kernels.ssr'] False False '' ")


def test_a_module_announced_but_never_compiled_is_not_announced_again(tmp_path):
    """kernels.merge stays uncompiled after one-run builds, kernels.bm25 on SSR indexes: once told, a
    cold module does not repeat the notice on every command."""
    script = ("import io, sys; from ssr_engine import jit; out = io.StringIO(); "
              "print(jit.announce_compile(('ssr_engine.kernels.merge',), stream=out), "
              "jit.cold_modules(('ssr_engine.kernels.merge',)))")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True,
                           timeout=600).stdout.strip() for _ in range(2)]
    assert runs == ["True []", "False []"]
    assert list(tmp_path.rglob("merge.ssr-announced")) and not list(tmp_path.rglob("*.nbi"))


def _kernels_imported(room: str) -> set[str]:
    """The kernel modules a room of the package imports (any level of its code: lazy imports too)."""
    import ast

    import ssr_engine

    path = Path(ssr_engine.__file__).parent.joinpath(*room.split(".")).with_suffix(".py")
    package = room.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ["ssr_engine", *package[: len(package) - (node.level - 1)]]
            name = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if name == "ssr_engine.kernels":
                out |= {f"{name}.{a.name}" for a in node.names}
            elif name.startswith("ssr_engine.kernels."):
                out.add(name)
    return out


def test_the_commands_of_live_and_sharded_indexes_list_the_kernels_their_rooms_import():
    """`jit.COMMANDS` names each command's kernel modules (the first-run notice checks those alone): a kernel a
    live index's change or search, or a sharded index's search, starts importing must be listed for its commands
    (the first delete of an 8.8M index compiled three kernels silently before they were)."""
    from ssr_engine.jit import COMMANDS

    rooms = {"delete": ("live_files", "parts", "parts_tables"), "add": ("live_files", "parts_tables"),
             "compact": ("live_compact", "parts"),
             "search": ("parts_search", "parts_tables", "parts", "distributed.worker", "answer"),
             "build-index": ("distributed.build",)}
    for command, names in rooms.items():
        for room in names:
            missing = _kernels_imported(room) - set(COMMANDS[command])
            assert not missing, f"{command}: {room} imports {sorted(missing)}"
    assert COMMANDS["evaluate"] == COMMANDS["search"]
