"""One process-wide lock around `ast.parse`, on the CPython releases whose parser races on threads.

CPython before 3.11.8, and 3.12.0-3.12.1, keep the AST constructor's recursion counter in state that
every thread shares (python/cpython#106905; fixed by #113035 in 3.11.8 and 3.12.2). When the garbage
collector runs a finaliser in the middle of one thread's `ast.parse`, the GIL can pass to another
thread that parses too, and the first raises SystemError "AST constructor recursion depth mismatch".
Numba parses source while it compiles some kernels (array expressions), and so do tracebacks (3.11's
carets), `inspect` and pytest: a server warming up beside a registry's merge thread hit it. Numba
already compiles one function at a time (its global compiler lock), so serialising its compilation
cannot help; serialising every `ast.parse` does. `install()`, run when `ssr_engine` is imported,
replaces `ast.parse` by a wrapper that holds one re-entrant lock (a finaliser that parses on the same
thread must not deadlock), on those releases only; elsewhere it does nothing.

Why a lock and not `requires-python >= 3.11.8`: the interpreters our users start from are on the
affected side - this team's machine runs CPython 3.11.7 (pyenv) and its system Python is Debian 12's
3.11.2, and Ubuntu 22.04 LTS ships 3.10.12 - so a requirement would refuse to install where the engine
works. The lock costs an uncontended acquire per parse (parsing is rare after the kernels compile). When
3.11.8 is the oldest Python we support, this module and its call in `ssr_engine/__init__.py` go.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from typing import Any

_LOCK = threading.RLock()


def affected(version: tuple[int, ...] = tuple(sys.version_info[:3]), implementation: str = sys.implementation.name
             ) -> bool:
    """Whether this CPython's `ast.parse` can race between threads (the releases named above)."""
    return implementation == "cpython" and (version < (3, 11, 8) or (3, 12) <= version < (3, 12, 2))


def install() -> bool:
    """Serialise `ast.parse` process-wide where `affected()`; True if it is (now or already) guarded."""
    if not affected():
        return False
    if getattr(ast.parse, "_ssr_locked", False):
        return True
    unguarded = ast.parse

    @functools.wraps(unguarded)
    def parse(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return unguarded(*args, **kwargs)

    parse._ssr_locked = True  # type: ignore[attr-defined]
    ast.parse = parse
    return True
