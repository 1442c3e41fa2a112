"""When and how a live registry merges its segments: the tiered plan, and the background merger.

A registry that takes many small writes gathers many small segments, and every search pays for
each. `merge_plan` (the live indexes' tiered plan, `live_merges`) says which to merge; `LiveRegistry.merge_once`
does it (their live cards added again as one segment, on top of the commit they were read from).
A `Merger` runs merges after writes: at once (a library or CLI write), or in a background thread
once writes have paused (a server), so that a write's own commit and its visibility never wait
for a merge it caused. Small merges do not run at all while writes go on: a write absorbs the small
segments the plan names (`absorbable`: its own segment holds their cards too, one build of a few
more cards and one commit, `LiveIndex.publish(replaces=..., upsert=True)`); a background merge
of a few dozen one-card segments ran beside about every other write of a busy server.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import SsrError
from ..live_merges import MAX_SEGMENTS, MERGE_AT, merge_plan

__all__ = ["ABSORB", "MAX_SEGMENTS", "MERGE_AT", "MERGE_QUIET", "Merger", "absorbable", "merge_plan"]

# a write absorbs the segments the plan names when they hold at most this many live cards: its own segment
# holds them too (one build of a few more cards, one commit), so no merge of them runs beside later writes
ABSORB = 100
MERGE_QUIET = 0.2  # seconds without a write before a background merge starts
MERGE_NICE = 10  # the background merge thread's nice value (Linux)


def absorbable(registry: Any, cards: list[Any]) -> tuple[dict[str, str | None], list[Any], int] | None:
    """What a write of `cards` to `registry` (a `LiveRegistry`) absorbs: the segments the merge plan names, the
    write's own new segment counted, when they hold at most `ABSORB` live cards, as {segment: deletion file
    sha}, their live cards but those `cards` replace, and how many those are. None: nothing to absorb."""
    with registry._lock:  # a card store's parsed-card cache is not shared between threads
        view = registry.view()
        refs = view.snapshot.commit.segments
        plan = [s for s in merge_plan([ref.documents for ref in refs] + [len(cards)], registry.merge_at,
                                      registry.max_segments) if s < len(refs)]
        if not plan or sum(refs[s].documents for s in plan) > ABSORB:
            return None
        written = {c.id for c in cards}
        live = view.live_ids(plan)
        kept = [view.stores[s].get(cid) for s, cid in live if cid not in written]
        return {refs[s].name: refs[s].deletes_sha256 for s in plan}, kept, len(live) - len(kept)


class Merger:
    """Merges after writes for one `LiveRegistry`: inline, or (`background`) in a thread started by
    a write that leaves a plan, once writes pause for `quiet` seconds (at once past the registry's
    `max_segments`); the thread ends when nothing is left to merge. A merge builds its segment
    without the registry's lock and commits only if its segments are unchanged, so a write never
    waits for a merge's build (at most for its commit), and the merge thread runs at a lower CPU
    priority (`MERGE_NICE`)."""

    def __init__(self, registry: Any, background: bool, quiet: float):
        self.registry, self.background, self.quiet = registry, background, quiet
        self._thread: threading.Thread | None = None
        self._running = self.closing = False
        self._last_write = 0.0
        self._writes = 0  # writes under way (`writing`)
        self._count = threading.Lock()
        self.started = self.ended = 0  # background merges begun and finished: a write tells whether one overlapped it

    def overlap(self) -> tuple[int, int]:
        """A mark to pass to `overlapped` after a write."""
        return self.started, self.ended

    def overlapped(self, mark: tuple[int, int]) -> bool:
        """Whether a background merge ran at some time since `mark` (`overlap`) was taken."""
        return mark[1] < mark[0] or self.started > mark[0] or self.ended > mark[1]

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around a write (its build and commit): a background merge then commits after it."""
        with self._count:
            self._writes += 1
        try:
            yield
        finally:
            with self._count:
                self._writes -= 1

    def yield_to_writes(self, most: float = 0.5) -> None:
        """A background merge about to commit waits (at most `most` s) while writes are under way, so that
        their commits, and their visibility, never wait behind the merge's."""
        deadline = time.monotonic() + most
        while self.background and self._writes and time.monotonic() < deadline:
            time.sleep(0.002)

    def after_write(self) -> None:
        """Called by a write, under the registry's lock."""
        self._last_write = time.monotonic()
        if not self.background:
            while self.registry.merge_once():
                pass
        elif not self._running and self.registry._plan():
            self._running = True
            self._thread = threading.Thread(target=self._loop, name="ssr-registry-merge", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        reg = self.registry
        try:  # Linux: a thread's own nice value; the writes' threads keep the cores first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MERGE_NICE)
        except (AttributeError, OSError):
            pass
        try:
            while not self.closing:
                with reg._lock:
                    if not reg._plan():
                        return
                    wait = self._last_write + self.quiet - time.monotonic()
                    due = wait <= 0 or len(reg.view().stores) > reg.max_segments
                if due:  # outside the lock: the merge builds while writes go on (`LiveRegistry.merge_once`)
                    self.started += 1
                    try:
                        wait = 0.0 if reg.merge_once() else self.quiet
                    finally:
                        self.ended += 1
                time.sleep(max(wait, 0.0))
        except SsrError as exc:  # another writer busy, disk full...: the next write tries again
            print(f"ssr: registry merge postponed: {exc}", file=sys.stderr)
        finally:
            with reg._lock:
                self._running = False

    def wait(self) -> None:
        """Wait for the background thread to finish (tests, shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join()
