"""The error every user-facing failure raises: a message naming the file and line."""

from __future__ import annotations


class SsrError(Exception):
    """Bad input or a bad index. The CLI prints the message and exits with status 2."""

    exit_code = 2


class InputError(SsrError):
    """Malformed input data; `path` and `line` say where (line is 1-based, or None)."""

    def __init__(self, path: object, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # pickled whole across processes (a sharded build's workers)
        return (type(self), (self.path, self.line, self.reason))


class IndexFormatError(SsrError):
    """An index that is missing, of another format version, truncated or corrupt."""


class ArgumentError(SsrError, ValueError):
    """A bad call argument (k, threads, method, BM25 parameters): the same error from every searcher.

    Also a ValueError, so callers that catch the builtin for bad arguments keep working.
    """
