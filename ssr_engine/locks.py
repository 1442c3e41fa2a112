"""File locks of an index directory and of work folders: `fcntl.flock`, released by the kernel
when the holder dies, so no lock is ever stale and no PID is ever checked.

`WriterLock` (`write.lock`, exclusive, never waited for) admits one writer per index;
`SegmentHold` (`seg-M/readers.lock`, shared) keeps a reader's segment from removal for its life;
`scratch_dir` gives work folders that a later run removes when their owner has died. The life
cycle they protect (commits, segments, cleaning) is in `generations`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .atomic import os_error
from .errors import SsrError

LOCK = "write.lock"
READERS = "readers.lock"
SCRATCH_LOCK = "ssr-scratch.lock"


def same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino) and own.st_nlink > 0


class WriterLock:
    """The exclusive writer lock of an index directory (`write.lock`, flock, never waited for)."""

    def __init__(self, root: Path):
        self.root = root
        self.path = root / LOCK
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None and same_file(self._fd, self.path)

    def acquire(self) -> WriterLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise os_error(self.path, exc, "take the writer lock") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise SsrError(f"{self.root}: another process is writing this index (it holds {self.path}); "
                               "try again when it has finished") from exc
            raise os_error(self.path, exc, "take the writer lock") from exc
        if not same_file(fd, self.path):  # removed or replaced between open and flock
            os.close(fd)
            raise SsrError(f"{self.root}: changed while taking the writer lock; try again")
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class SegmentHold:
    """A reader's shared lock on one segment (`readers.lock`), held until `close` or collection."""

    def __init__(self, segment: Path):
        self.segment = segment
        path = segment / READERS
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # FileNotFoundError: removed; the caller retries
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a cleaner renames the segment away
            if not same_file(fd, path):
                raise FileNotFoundError(errno.ENOENT, "segment removed while opening", str(segment))
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd

    # kept on the class: a hold collected at interpreter exit may outlive the module's `os` global
    _close_fd = staticmethod(os.close)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            self._close_fd(fd)

    def __del__(self) -> None:
        self.close()


_NEW = ".new"  # a scratch folder being made: `_NEW + prefix + random`, renamed when locked
_NEW_AGE = 600.0  # seconds: such a folder older than this was left by a dead process


@contextmanager
def scratch_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A private work folder `parent/{prefix}{random}` removed on exit, and by the next user of
    `prefix` if this process dies: it holds a flock on its `ssr-scratch.lock` while alive, and
    `clean_scratch` removes only folders of the prefix whose lock it can take."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(parent, exc, "create a folder") from exc
    clean_scratch(parent, prefix)
    token = secrets.token_hex(6)
    path = parent / f"{prefix}{token}"
    # made under another name and renamed once locked: a cleaner (another thread or process) never
    # sees a folder of the prefix whose lock is not taken yet
    new = parent / f"{_NEW}{prefix}{token}"
    try:
        new.mkdir()
        fd = os.open(new / SCRATCH_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise os_error(new, exc, "create a work folder") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(new, path)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(new, ignore_errors=True)
        os.close(fd)


def clean_scratch(parent: Path, prefix: str) -> None:
    """Remove scratch folders of `prefix` in `parent` whose owner is gone (their lock is free)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith((prefix, f"{_NEW}{prefix}"))]
    except OSError:
        return
    for name in names:
        path = parent / name
        if name.startswith(_NEW):  # a process died between making and naming it; never one being made now
            try:
                if time.time() - path.stat().st_mtime < _NEW_AGE:
                    continue
            except OSError:
                continue
        try:
            fd = os.open(path / SCRATCH_LOCK, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # no lock file: not a scratch folder of ours
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # alive
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)
