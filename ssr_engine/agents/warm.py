"""A live registry's warm-up: a process's first-request costs paid before it serves.

What a first request would pay: imports, compiled kernels loaded from Numba's cache (or compiled,
seconds, after an upgrade) for the exact array types it meets, the id tables of segments built by
`ssr agents build`. The writes are warmed on a mirror of the registry: its current segments
hard-linked (never written: every write makes new files) into a scratch folder beside it, so the
mirror's segments, id kinds and formats are the registry's own, and the write path (build, commit,
refresh, the search of several segments with deletions, a merge) meets the same types a first real
write will. The mirror is removed; the registry itself gets no commit.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from .cards import AgentCard

# the files of a segment that a mirror must not share: its hold lock (a shared inode would tie the
# mirror's readers and cleaner to the registry's)
_OWN = {"readers.lock"}


def warm_up(registry: Any, writes: bool = True) -> None:
    """One discovery on `registry`; with `writes`, its writer opened (no commit) and the write path
    run on a mirror: an add under an integer id and one under a text id, a replace, a delete of
    one of the registry's own cards, a merge, each followed by a discovery."""
    from ..generations import scratch_dir

    view = registry.view()
    # a query of words the registry holds (words it lacks return before any kernel runs)
    query = view.card_text(view.live_ids()[0][1]) if len(view) else "warm up"
    registry.discover(query, 1)
    if not writes:
        return
    registry.delete_many([])  # the writer and the segments' id tables, without a commit
    with scratch_dir(registry.path.parent, f".{registry.path.name}.warm-") as work:
        mirror = _mirror(registry, work / "reg")
        try:
            counted = _writes(mirror, query)
            # the id kinds the mirror counted for the registry's own segments (its new ones may share names)
            keys = {(ref.name, ref.deletes_sha256) for ref in view.snapshot.commit.segments}
            registry._integer.update({key: v for key, v in counted.items() if key in keys})
        finally:
            mirror.close()


def _mirror(registry: Any, path: Path) -> Any:
    """A `LiveRegistry` on a copy of `registry`'s current commit: segment files hard-linked (copied
    where the file system has no hard links), the card stores and id-kind caches shared."""
    from ..generations import OWNER
    from .live import LiveRegistry

    commit = registry.view().snapshot.commit
    path.mkdir()
    shutil.copyfile(registry.path / OWNER, path / OWNER)
    for ref in commit.segments:
        (path / ref.name).mkdir()
        for entry in os.scandir(registry.path / ref.name):
            if entry.name in _OWN:
                (path / ref.name / entry.name).touch()
            elif entry.is_file(follow_symlinks=False):
                try:
                    os.link(entry.path, path / ref.name / entry.name)
                except OSError:
                    shutil.copyfile(entry.path, path / ref.name / entry.name)
    shutil.copyfile(commit.path, path / commit.path.name)
    return LiveRegistry(path, max_segments=registry.max_segments, merge_at=registry.merge_at,
                        shared_caches=registry)


def _writes(reg: Any, query: str) -> dict[tuple[str, str | None], bool]:
    """The write steps on the mirror `reg`; returns every id kind it counted on the way."""
    view = reg.view()
    own = view.live_ids()[0][1] if len(view) else None
    # each step then a discovery, as a server's next request would run it
    steps: list[Any] = [
        lambda: reg.put_many([AgentCard(id="9" * 18, name="warm up", description=query[:200])]),
        lambda: reg.put_many([AgentCard(id="warm up", name="warm up", description="warm up the write path")]),
        lambda: reg.put_many([AgentCard(id="warm up", name="warm up again", description="warm up a replace")]),
        lambda: reg.delete_many([own] if own is not None else []),
        lambda: reg.merge_once() or reg._replace(reg.view(), list(range(1, len(reg.view().stores)))),
    ]
    counted: dict[tuple[str, str | None], bool] = {}
    for step in steps:
        step()
        counted.update(reg._integer)
        for with_texts in (False, True):
            reg.view().discover(query, 5, with_cards=not with_texts, with_texts=with_texts)
        reg.view().discover("warm up", 5)
    return counted
