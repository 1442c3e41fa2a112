"""Ownership, the writer lock, commit points and segments of an index directory.

(Over 400 lines on purpose: the owner marker, commit points, the writer and the cleaner state
one set of rules - what belongs to the engine, what is current, what may be removed and when -
and a rule read in one place cannot drift from its twin. The locks themselves are in `locks`.)

An index directory (format version 2) holds:

    ssr-index.json    owner marker: magic, format version, own checksum. Only a directory holding a
                      valid marker is ever written to or cleaned by the engine.
    write.lock        the writer lock: `fcntl.flock(LOCK_EX | LOCK_NB)`; the kernel releases it
                      when the process dies, so a stale lock cannot exist (no PID files, no kill).
    commit-N.json     commit point N (as Lucene's segments_N): the segments of generation N, each
                      with the sha256 of its manifest; checksummed, written to a temporary name,
                      fsynced and renamed. Readers take the highest N.
    seg-M/            an immutable segment: manifest.json (checksummed, settings included), the
                      arrays and tables it lists, and readers.lock.
    .staging-*/       a segment being written; .trash-*/ a segment being removed.

Readers hold a shared flock on `seg-M/readers.lock` of every segment they opened, for their
whole life. A writer, after committing, removes the segments no commit references only when it
can take that lock exclusively (so never under a reader), renaming each to `.trash-*` first so
that a half-removed segment never looks like one. (On Linux an unlinked memory-mapped file stays
readable anyway; the lock keeps the scheme sound where it is not, and keeps lazily read files.)
A crash at any point leaves the last commit and its segments intact; the next writer, holding
the lock, removes what dead writers left: staging and trash folders, temporary files,
unreferenced segments and older commits. Nothing else in the directory is ever touched.

The API for segment-level writers (live indexes): `IndexWriter` (ownership, lock, staging,
`commit(segments)`), `read_commit`, `open_commit` (a reader's snapshot, locks held),
`SegmentRef` (name, documents, manifest sha256, deletion bitmap file or None).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import TMP_MARK, fsync_dir, os_error, sha256_file, tmp_name, write_text
from .errors import IndexFormatError, SsrError

# scratch_dir and clean_scratch are re-exported: agents/ import them from here (their old home)
from .locks import LOCK, READERS, SegmentHold, WriterLock, clean_scratch, scratch_dir  # noqa: F401

MAGIC = "ssr-index"
LAYOUT_VERSION = 2
OWNER = "ssr-index.json"
SEGMENT_MANIFEST = "manifest.json"
_COMMIT = re.compile(r"^commit-([0-9]{1,18})\.json$")
_SEGMENT = re.compile(r"^seg-([0-9]{1,18})$")
_DELETES = re.compile(r"^deletes-[0-9]{1,18}\.npz$")  # a segment's deletion file (live indexes)
_STAGING = ".staging-"
_SYNC_THREADS = 8  # fsyncs of a new segment's files run at once (`sync_segments`)
_TRASH = ".trash-"
# the flat layout of format version 1 (every file at the top): recognised to refuse it with the
# rebuild command, and replaced by --force only when nothing else is in the folder
V1_FILES = frozenset(
    ["manifest.json", "manifest.json.tmp", "signals.parquet", "doc_ids.parquet", "agent_cards.parquet"]
    + [f"{n}.npy" for n in ("vocab", "postings_indptr", "postings_docs", "forward_indptr", "forward_terms",
                            "doc_rank", "signal_offsets", "signal_bytes", "postings_tf", "doc_lengths")]
)


# ---- checksummed JSON ------------------------------------------------------------------------


def _digest(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def seal(body: dict[str, Any]) -> str:
    """JSON text of `body` plus "checksum", the sha256 of its canonical form."""
    body = {k: v for k, v in body.items() if k != "checksum"}
    return json.dumps({**body, "checksum": _digest(body)}, indent=2, sort_keys=True) + "\n"


def unseal(path: Path, text: bytes | str) -> dict[str, Any]:
    """The body of a sealed JSON file; `IndexFormatError` when it does not parse or its checksum fails."""
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise IndexFormatError(f"{path}: corrupt ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("checksum"), str):
        raise IndexFormatError(f"{path}: corrupt (no checksum)")
    body = {k: v for k, v in data.items() if k != "checksum"}
    if _digest(body) != data["checksum"]:
        raise IndexFormatError(f"{path}: checksum mismatch (the file was edited or is corrupt)")
    return body


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise IndexFormatError(f"{path}: unreadable ({exc.strerror})") from exc


# ---- ownership -------------------------------------------------------------------------------


def read_owner(root: Path) -> dict[str, Any] | None:
    """The owner marker's body, None when absent; `IndexFormatError` when corrupt or foreign."""
    path = root / OWNER
    if not path.is_file():
        return None
    body = unseal(path, _read_bytes(path))
    if body.get("magic") != MAGIC:
        raise IndexFormatError(f"{path}: not an ssr index marker")
    if body.get("format_version") != LAYOUT_VERSION:
        raise IndexFormatError(
            f"{path}: index layout version {body.get('format_version')!r}, this ssr_engine reads {LAYOUT_VERSION}; "
            f"rebuild it (ssr build-index ... --out {root} --force)"
        )
    return body


def _write_owner(root: Path) -> None:
    write_text(root / OWNER, seal({"magic": MAGIC, "format_version": LAYOUT_VERSION,
                                   "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))


def flat_v1_manifest(root: Path) -> dict[str, Any] | None:
    """The manifest of a format-1 (flat) index at `root`, or None when `root` is not one."""
    path = root / "manifest.json"
    if (root / OWNER).exists() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("format") == MAGIC and data.get("format_version") == 1:
        return data
    return None


def v1_error(root: Path, manifest: dict[str, Any]) -> IndexFormatError:
    source = manifest.get("input", {}).get("path") if isinstance(manifest.get("input"), dict) else None
    scoring = manifest.get("scoring", "ssr")
    cmd = f"ssr build-index --collection {source or 'COLLECTION'} --out {root} --force"
    if scoring != "ssr":
        cmd += f" --scoring {scoring}"
    return IndexFormatError(
        f"{root}: an index of format version 1 (flat layout); this ssr_engine reads version {LAYOUT_VERSION} "
        f"(generations and commit points). Rebuild it: {cmd}"
    )


# ---- commit points ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentRef:
    """One segment of a commit: its folder name, live documents, the sha256 of its manifest and
    the file name of its deletion bitmap inside the segment (None: no deletions)."""

    name: str
    documents: int
    manifest_sha256: str
    deletes: str | None = None
    deletes_sha256: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "documents": self.documents, "manifest_sha256": self.manifest_sha256,
                "deletes": self.deletes, "deletes_sha256": self.deletes_sha256}


@dataclass(frozen=True)
class Commit:
    """Commit point N: the segments that make generation N of the index at `root`."""

    root: Path
    generation: int
    segments: tuple[SegmentRef, ...]
    created: str

    @property
    def path(self) -> Path:
        return self.root / f"commit-{self.generation}.json"


def _numbered(root: Path, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        names = os.listdir(root)
    except OSError as exc:
        raise IndexFormatError(f"{root}: unreadable ({exc.strerror})") from exc
    return sorted((int(m.group(1)), name) for name in names if (m := pattern.match(name)))


def _parse_commit(root: Path, generation: int, body: dict[str, Any]) -> Commit:
    path = root / f"commit-{generation}.json"
    try:
        if body["magic"] != "ssr-commit" or body["generation"] != generation:
            raise ValueError("not a commit point of this name")
        segments = []
        for s in body["segments"]:
            name, docs, sha, deletes = s["name"], s["documents"], s["manifest_sha256"], s.get("deletes")
            deletes_sha = s.get("deletes_sha256")
            if not (isinstance(name, str) and _SEGMENT.match(name) and type(docs) is int and docs >= 0
                    and isinstance(sha, str) and (deletes is None or isinstance(deletes, str))
                    and (deletes is None) == (deletes_sha is None)
                    and (deletes_sha is None or isinstance(deletes_sha, str))):
                raise ValueError(f"bad segment entry {s!r}")
            if deletes is not None and not _DELETES.match(deletes):
                raise ValueError(f"bad deletion file name {deletes!r}")
            segments.append(SegmentRef(name, docs, sha, deletes, deletes_sha))
        return Commit(root, generation, tuple(segments), str(body.get("created", "")))
    except (KeyError, TypeError, ValueError) as exc:
        raise IndexFormatError(f"{path}: corrupt commit point ({exc})") from exc


def read_commit(root: str | os.PathLike[str], attempts: int = 20) -> Commit | None:
    """The newest commit point of `root` (None when nothing was ever committed).

    Commit files appear only whole (temporary name, fsync, rename), so the highest N is the
    current generation; if it fails its checksum, that is corruption and an error, never a
    silent fall-back to older data. One gone between the listing and its read was replaced by a
    newer one (a writer removes older commits after committing): the folder is listed again.
    """
    root = Path(root)
    for _ in range(attempts):
        found = _numbered(root, _COMMIT)
        if not found:
            return None
        generation, name = found[-1]
        try:
            raw = _read_bytes(root / name)
        except IndexFormatError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                continue  # a writer committed a newer one and removed this one since the listing: list again
            raise
        return _parse_commit(root, generation, unseal(root / name, raw))
    raise IndexFormatError(f"{root}: commit points keep changing while reading them (a writer is busy); try again")


def open_commit(root: str | os.PathLike[str], attempts: int = 20) -> tuple[Commit, list[SegmentHold]]:
    """A reader's snapshot: the newest commit and a shared hold on each of its segments."""
    root = Path(root)
    for _ in range(attempts):
        commit = read_commit(root)
        if commit is None:
            raise IndexFormatError(f"{root}: no committed generation (the first build is running or was "
                                   f"interrupted; build again with: ssr build-index ... --out {root})")
        holds: list[SegmentHold] = []
        try:
            for seg in commit.segments:
                holds.append(SegmentHold(root / seg.name))
        except FileNotFoundError:
            for h in holds:
                h.close()
            continue  # a writer committed and removed this generation meanwhile: read the new one
        return commit, holds
    raise IndexFormatError(f"{root}: segments keep disappearing while opening (a writer is busy); try again")


# ---- the writer ------------------------------------------------------------------------------


class IndexWriter:
    """The one way the engine writes an index directory: ownership check, lock, staging, commit.

        with IndexWriter(out, force) as w:
            seg = w.staging()          # an empty folder inside `out`, with readers.lock
            ...write the segment's files and manifest into seg...
            w.commit([(seg, n_docs)])  # renamed to seg-M, then commit-N.json, then old ones removed

    `out` must be absent, an empty folder, an index of this layout (replaced only with `force`,
    or when it has no commit yet: an interrupted first build), or a format-1 index holding only
    its own files (with `force`). Anything else is refused, `force` or not, and nothing is touched.
    A failed build removes what it made; a build that created `out` removes `out` too.
    """

    def __init__(self, out: str | os.PathLike[str], force: bool = False, append: bool = False):
        self.root = Path(out).absolute()
        self.force = force
        self.append = append  # change an existing index (live indexes): it must exist and have a commit
        self.lock = WriterLock(self.root)
        self.committed: Commit | None = None
        self._created = False  # we made the folder
        self._claimed = False  # we wrote the owner marker (a new folder, an empty one, a v1 index)
        self._v1 = False
        self._staged: list[Path] = []

    def __enter__(self) -> IndexWriter:
        try:
            self._open()
        except BaseException:
            self.lock.release()
            if self._created and not self._claimed:
                try:
                    self.root.rmdir()  # the folder this build made, still empty
                except OSError:
                    pass
            raise
        return self

    def _open(self) -> None:
        root = self.root
        if not root.exists() and not root.is_symlink():
            try:
                root.parent.mkdir(parents=True, exist_ok=True)
                root.mkdir()
                self._created = True
            except FileExistsError:
                pass  # appeared meanwhile: judged below like any existing folder
            except OSError as exc:
                raise os_error(root, exc, "create the index folder") from exc
        if not root.is_dir():
            raise SsrError(f"{root}: exists and is not a directory; refusing to replace it, even with --force")
        names = set(os.listdir(root))
        owner = None
        if OWNER in names:
            try:
                owner = read_owner(root)
            except IndexFormatError as exc:
                raise SsrError(f"{exc}; not touching {root} (remove it yourself if it is an old index)") from exc
        elif flat_v1_manifest(root) is not None:
            others = sorted(names - V1_FILES)
            if others:
                raise SsrError(f"{root}: a format-1 index with other files in it ({', '.join(others[:5])}); "
                               "refusing to replace it, even with --force")
            if not self.force:
                raise SsrError(f"{root}: already exists (a format-1 index; use --force to replace it)")
            self._v1 = True
        elif _not_claiming(names):
            raise SsrError(f"{root}: exists and is not an ssr index; refusing to replace it, even with --force")
        self.lock.acquire()
        if self.append:
            if owner is None or not isinstance(_current_or_corrupt(root), Commit):
                raise SsrError(f"{root}: not an ssr index with a sound commit point; nothing changed")
        elif owner is not None:
            current = _current_or_corrupt(root)
            if current is not False and not self.force:
                raise SsrError(f"{root}: already exists (use --force to replace it)")
        else:
            if self._v1 is False and _not_claiming(set(os.listdir(root))):  # something appeared: not ours
                raise SsrError(f"{root}: changed while the build started; refusing to write into it")
            _write_owner(root)
            self._claimed = True
        clean(root, self.lock)

    def staging(self) -> Path:
        """A new, empty segment folder (not visible to readers until `commit`)."""
        assert self.lock.held, "IndexWriter used outside its with block"
        path = self.root / f"{_STAGING}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            (path / READERS).touch()
        except OSError as exc:
            raise os_error(path, exc, "create a segment folder") from exc
        self._staged.append(path)
        return path

    def adopt(self, folder: Path) -> Path:
        """Move a segment folder built elsewhere on the same file system (`LiveIndex.prepare`) in as staged."""
        assert self.lock.held, "IndexWriter used outside its with block"
        path = self.root / f"{_STAGING}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            os.rename(folder, path)
        except OSError as exc:
            raise os_error(path, exc, "move the new segment in (is the scratch folder on another file system?)") \
                from exc
        self._staged.append(path)
        return path

    def discard(self, staged: Path) -> None:
        """Remove a staged folder this writer made (a build that starts over)."""
        self._staged.remove(staged)
        shutil.rmtree(staged, ignore_errors=True)

    def commit(self, segments: list[tuple[Path, int]], deletes: list[str | None] | None = None,
               deletes_sha256: list[str | None] | None = None) -> Commit:
        """Publish `segments` (staged folders, or existing `seg-M` folders to keep) as the next generation.

        Each entry is (folder, live documents); `deletes` names each one's deletion file, if any (a new one
        may be written plainly: it is synced here). The commit point is written to a temporary name, staged
        folders are renamed to `seg-M`, everything new is fsynced in one batch, then the commit point is
        renamed into place and the index folder fsynced; then older commits and unreferenced segments go.
        """
        if not self.lock.held:
            raise SsrError(f"{self.root}: the writer lock was lost (the folder was moved or replaced); "
                           "nothing committed")
        taken = [n for n, _ in _numbered(self.root, _SEGMENT)]
        current = read_commit(self.root) if _numbered(self.root, _COMMIT) else None
        next_seg = max(taken + [int(s.name[4:]) for s in (current.segments if current else ())], default=0) + 1
        refs, renames, new_files, new_dirs = [], [], [], []
        had = {s.name: s.deletes for s in current.segments} if current else {}
        for i, (folder, docs) in enumerate(segments):
            final = folder
            if folder.name.startswith(_STAGING):
                final = self.root / f"seg-{next_seg}"
                next_seg += 1
                renames.append((folder, final))
            elif deletes and (name := deletes[i]) is not None and had.get(folder.name) != name:
                new_files.append(folder / name)  # a new deletion file, written plainly (`live_files`)
                new_dirs.append(folder)
            sha = sha256_file(folder / SEGMENT_MANIFEST)
            refs.append(SegmentRef(final.name, int(docs), sha, deletes[i] if deletes else None,
                                   deletes_sha256[i] if deletes_sha256 else None))
        generation = (current.generation if current else 0) + 1
        created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        body = {"magic": "ssr-commit", "format_version": LAYOUT_VERSION, "generation": generation,
                "segments": [r.as_dict() for r in refs], "created": created}
        point = self.root / f"commit-{generation}.json"
        tmp = tmp_name(point)
        try:
            tmp.write_text(seal(body), encoding="utf-8", newline="\n")
            for folder, final in renames:
                os.rename(folder, final)
                self._staged.remove(folder)
            # ONE round of fsyncs, on threads (a journaling file system commits them together; rounds one after
            # another each waited for a journal commit, under load 15-50 ms apiece): the new segments' files and
            # folders, new deletion files and their folders, the commit point's bytes and the index folder (the
            # renames) reach the disk before the rename below names them (a power cut must not leave a commit
            # point naming data the disk never got); then the rename and the index folder, before `clean`
            # drops the older commit point
            sync_segments([final for _, final in renames], [*new_files, tmp], new_dirs + [self.root] * bool(renames))
            os.replace(tmp, point)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise os_error(point, exc, "write the commit point") from exc
        except BaseException:  # a failed sync (`sync_segments`' SsrError), an interrupt: nothing named
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(self.root)
        self.committed = Commit(self.root, generation, tuple(refs), created)
        if self._v1:
            for name in V1_FILES:
                (self.root / name).unlink(missing_ok=True)
            self._v1 = False
        clean(self.root, self.lock)
        return self.committed

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is not None:
                for path in self._staged:
                    shutil.rmtree(path, ignore_errors=True)
                if self._claimed and self.committed is None:
                    # nothing was ever committed here: remove exactly what this build made
                    for path in self.root.glob("seg-*"):
                        shutil.rmtree(path, ignore_errors=True)
                    (self.root / OWNER).unlink(missing_ok=True)
                    (self.root / LOCK).unlink(missing_ok=True)
                    if self._created:
                        try:
                            self.root.rmdir()  # only if empty: whatever someone else put there stays
                        except OSError:
                            pass
        finally:
            self.lock.release()


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_POOL: list[Any] = [None, None]  # (the process id, the fsync threads): kept, a thread start under load costs ms
_POOL_LOCK = threading.Lock()


def _sync_pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if _POOL[0] != os.getpid():  # none yet, or a forked child: its parent's threads are not here
            _POOL[:] = [os.getpid(), ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix="ssr-fsync")]
        return _POOL[1]


def fsync_files(files: Sequence[str], dirs: Sequence[str] = ()) -> None:
    """fsync these files and folders, many at once: a journaling file system commits them together (15 small
    files: 5-40 ms on threads against 60-100 ms one after the other, this machine under load). Raises OSError
    for a file; a folder is synced as `atomic.fsync_dir` does (some file systems refuse a folder's fsync)."""
    jobs = [(_fsync_file, f) for f in files] + [(fsync_dir, d) for d in dirs]
    if len(jobs) == 1:
        jobs[0][0](jobs[0][1])
    elif jobs:
        list(_sync_pool().map(lambda job: job[0](job[1]), jobs))


def sync_segments(folders: list[Path], files: Sequence[Path] = (), dirs: Sequence[Path] = ()) -> None:
    """fsync every file of these segment folders, the folders themselves, and `files` and `dirs`, all at
    once (`fsync_files`: one journal commit)."""
    paths, folders_ = [os.fspath(p) for p in files], [os.fspath(d) for d in dirs]
    for folder in folders:
        for top, _, names in os.walk(folder):
            folders_.append(top)
            paths += [os.path.join(top, n) for n in names]
    try:
        fsync_files(paths, folders_)
    except OSError as exc:
        raise os_error(exc.filename or (paths + folders_)[0], exc, "sync the new data to disk") from exc


def _not_claiming(names: set[str]) -> set[str]:
    """Names beyond those of a writer claiming a new folder (its lock, its marker being written)."""
    return {n for n in names if n != LOCK and not n.startswith(f".{OWNER}{TMP_MARK}")}


def _current_or_corrupt(root: Path) -> Commit | None | bool:
    """The current commit; None if the commit point is corrupt; False if there is none."""
    if not _numbered(root, _COMMIT):
        return False
    try:
        return read_commit(root)
    except IndexFormatError:
        return None


def clean(root: Path, lock: WriterLock) -> list[str]:
    """Remove what dead or finished writers left (the caller holds the writer lock); returns the names.

    Kept: the newest commit and its segments, segments a reader holds, and every name that is not
    of the engine's own kinds.
    """
    if not lock.held:
        raise SsrError(f"{root}: cleaning needs the writer lock")
    removed: list[str] = []
    commits = _numbered(root, _COMMIT)
    try:
        current = read_commit(root) if commits else None
    except IndexFormatError:
        return removed  # a corrupt commit point: keep everything, the writer replaces it
    keep = {s.name for s in current.segments} if current else set()
    for _, name in commits[:-1]:
        (root / name).unlink(missing_ok=True)
        removed.append(name)
    for name in sorted(os.listdir(root)):
        path = root / name
        if name.startswith((_STAGING, _TRASH)) or (name.startswith(".") and TMP_MARK in name):
            _remove(path)
            removed.append(name)
        elif _SEGMENT.match(name) and name not in keep and path.is_dir():
            if _remove_segment(path):
                removed.append(name)
    return removed


def _remove(path: Path) -> None:
    if path.name.startswith(_TRASH) and path.is_dir() and not path.is_symlink():
        _dispose(path)
    elif path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@dataclass
class _Remover:
    """The background removal of `.trash-*` folders (`remove_in_background`), of one process."""

    pid: int | None = None  # the process that turned it on (a forked child removes inline)
    thread: ThreadPoolExecutor | None = None
    pending: list[Future[Any]] = field(default_factory=list)  # removals queued, not known done


_REMOVER = _Remover()
_REMOVER_NICE = 10  # the removal thread's nice value (Linux), as a registry's background merge


def remove_in_background(on: bool = True) -> None:
    """From now on (`on`) this process removes the `.trash-*` folders `clean` makes (segments no commit
    needs, renamed under the writer lock) on a thread of its own at a lower CPU priority, not in the writer
    that cleans: a server's write never waits for the removal of the segments a merge replaced. A folder
    left at exit is still `.trash-*`: the next writer's `clean` removes it. `on=False`: inline again,
    after the queued removals are done."""
    global _REMOVER
    with _POOL_LOCK:
        running = _REMOVER.thread if _REMOVER.pid == os.getpid() else None
        if on and running is None:
            _REMOVER = _Remover(os.getpid(), ThreadPoolExecutor(1, "ssr-remove", initializer=_lower_priority))
        elif not on:
            _REMOVER = _Remover()
    if not on and running is not None:
        running.shutdown(wait=True)


def removals_done() -> None:
    """Wait for the background removals queued so far (`remove_in_background`; tests, shutdown)."""
    with _POOL_LOCK:
        pending = list(_REMOVER.pending) if _REMOVER.pid == os.getpid() else []
    for f in pending:
        f.result()


def _lower_priority() -> None:
    try:  # Linux: a thread's own nice value
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _REMOVER_NICE)
    except (AttributeError, OSError):
        pass


def _dispose(trash: Path) -> None:
    """Remove a `.trash-*` folder: now, or queued for the background thread (`remove_in_background`)."""
    with _POOL_LOCK:
        if _REMOVER.pid == os.getpid() and _REMOVER.thread is not None:
            _REMOVER.pending = [f for f in _REMOVER.pending if not f.done()]
            _REMOVER.pending.append(_REMOVER.thread.submit(shutil.rmtree, trash, ignore_errors=True))
            return
    shutil.rmtree(trash, ignore_errors=True)


def _remove_segment(path: Path) -> bool:
    """Remove an unreferenced segment unless a reader holds it (then the next writer tries again)."""
    try:
        fd = os.open(path / READERS, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = None  # a segment without readers.lock cannot be held by a reader
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
        trash = path.with_name(f"{_TRASH}{path.name}-{secrets.token_hex(4)}")
        os.rename(path, trash)  # readers waiting on the lock now find the segment gone and retry
    finally:
        if fd is not None:
            os.close(fd)
    _dispose(trash)
    return True
