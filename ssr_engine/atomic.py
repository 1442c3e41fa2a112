"""`atomic_write`: a file appears complete under its name, or not at all.

Written to a temporary name beside the target (same directory, so the final `os.replace` is a
rename within one file system), flushed and fsynced, renamed over the target, and the directory
fsynced so the rename itself survives a power cut. On an exception the temporary file is
removed and the target is untouched. Every file the package writes for a user goes through here
(files inside an index's commit protocol are synced by the commit that names them instead:
`generations.IndexWriter.commit`, `live_files.write_deletes`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .errors import SsrError

TMP_MARK = ".tmp-"  # temporary names: ".{name}.tmp-{pid}-{random}"


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a rename or creation inside `directory` durable (a no-op where directories can't be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")


def os_error(path: object, exc: OSError, doing: str = "write") -> SsrError:
    """A user-facing error for a failed write: read-only place, disk full, missing folder."""
    reason = {
        errno.ENOSPC: "no space left on the device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "read-only file system",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOENT: "no such file or directory",
        errno.EFBIG: "file too large (a file size limit, or the file system's)",
    }.get(exc.errno or 0, exc.strerror or f"{exc} (disk full, or a file size limit?)")
    return SsrError(f"{path}: cannot {doing}: {reason}")


@contextmanager
def os_errors(target: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an OSError (read-only place, disk full, file too large) into an `SsrError` naming the file."""
    try:
        yield
    except OSError as exc:
        where = exc.filename if exc.filename else target
        doing = "write" if str(where).startswith(str(target)) else "read or write"
        raise os_error(where, exc, doing) from exc


@contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8", newline: str | None = "\n"
) -> Iterator[IO[Any]]:
    """Open a temporary file for writing; on a clean exit it replaces `path` atomically.

    `mode` is "w" (text, UTF-8, "\\n" line ends) or "wb". An OSError (read-only place, disk full)
    becomes an `SsrError` naming the file, and nothing is left behind.
    """
    path = Path(path)
    tmp = tmp_name(path)
    binary = "b" in mode
    try:
        f: IO[Any] = open(tmp, mode) if binary else open(tmp, mode, encoding=encoding, newline=newline)
    except OSError as exc:
        raise os_error(path, exc) from exc
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise os_error(path, exc) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write a whole text file atomically."""
    with atomic_write(path) as f:
        f.write(text)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a whole binary file atomically."""
    with atomic_write(path, "wb") as f:
        f.write(data)


def sha256_file(path: Path, block: int = 1 << 22) -> str:
    """The sha256 of a file's bytes, read in blocks (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()
