"""When a live index merges its segments (`size_plan`) and how (`merge_once`).

Every segment costs every search a share (its vocabulary look-up, its lists' ends, its cursors, its
blocks: a 100K-document segment beside 855K added ~6 us to a ~20 us query at K=10, RESULTS), so an index
that takes many additions keeps few segments: after an add commits (`LiveIndex.add`, `ssr add`), the
newest segments are merged into one once together they hold as many live documents as the segment before
them (`size_plan`: sizes at least double towards the oldest, so at most ~log2(N / add) segments, and a
document is merged again about once per doubling), their lists and rows merged as `compact` merges them
(`live_compact.compact_segment`), in a scratch folder without the writer lock, then committed by
`LiveIndex.publish(replaces=...)` only if those segments are unchanged (`StaleCommit` otherwise: a merge
never undoes a write made meanwhile) in the place of the oldest of them, so segments added in id order
stay in id order. The big base segment is never merged with a small one (only once the later segments
hold as many documents).
Agent registries plan with the tiered `merge_plan` (a tier of `MERGE_AT` segments of about the same size
merged; fewer merges of their many small writes) and merge their own way (their segments carry card
stores; `agents.merges`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SsrError

if TYPE_CHECKING:
    import numpy as np

    from .live import LiveIndex
    from .live_search import Snapshot

MERGE_AT = 4  # a size tier holding this many segments is merged (`merge_plan`)
MAX_SEGMENTS = 8  # more than this: the smallest are merged now (each segment costs every search)
# `size_plan`: the newest segments merge once they hold RATIO times the live documents of the one before them.
# 1M as ten adds of 100K (5% deleted after each): 2 segments at the end and 2.7 documents written per document
# added, where the tiered plan (merge_plan) kept 4 segments for 1.8 (a 1M index of 4 segments answered K=10 at
# 0.43 of the compacted index's q/s, of 2 at 0.7-0.8; RESULTS)
RATIO = 1.0


def size_plan(live: Sequence[int], ratio: float = RATIO, max_segments: int = MAX_SEGMENTS) -> list[int]:
    """Which segments to merge, by their live document counts in commit order (positions; [] for none).

    The longest run of the newest segments whose first holds at most `ratio` times the live documents of
    those after it: merged, it is at least as big as they were together, so sizes double towards the
    oldest. Past `max_segments` (sizes out of that order after deletions): `merge_plan`'s cap.
    """
    plan: list[int] = []
    after = 0
    for j in range(len(live) - 1, 0, -1):
        after += int(live[j])
        if int(live[j - 1]) <= ratio * after:
            plan = list(range(j - 1, len(live)))
    return plan or merge_plan(live, len(live) + 1, max_segments)


def merge_plan(live: Sequence[int], merge_at: int = MERGE_AT, max_segments: int = MAX_SEGMENTS) -> list[int]:
    """Which segments to merge, by their live document counts (positions; [] for none).

    Tiered: a segment's tier is the number of decimal digits of its live count, and the lowest tier
    holding `merge_at` segments is merged with every smaller segment, so a document is re-added about
    once per tier (not once per write) and a merge stays about the size of its tier. More than
    `max_segments` segments (searches slow down with each): the smallest are merged down to the cap.
    """
    tier = [len(str(max(int(n), 1))) for n in live]
    for t in sorted(set(tier)):
        if tier.count(t) >= merge_at:
            return [s for s in range(len(live)) if tier[s] <= t]
    if len(live) > max_segments:
        by_size = sorted(range(len(live)), key=lambda s: (live[s], -s))
        return sorted(by_size[: len(live) - max_segments + 1])
    return []


def merge_once(index: LiveIndex, plan_of: Callable[[list[int]], list[int]] = size_plan) -> dict[str, Any] | None:
    """One merge of the plan (`plan_of` the live counts in commit order: `size_plan`, or another) of
    `index`'s newest commit, or None when there is nothing to merge (or its segments carry extra files,
    which only their owner can carry: an agent registry merges itself).

    Returns {"merged" (segment names), "documents", "segment", "generation", "seconds"}. Raises
    `live.StaleCommit` when a planned segment changed meanwhile (nothing written).
    """
    from .generations import read_commit
    from .live import Prepared
    from .live_compact import compact_segment
    from .live_search import Snapshot, open_snapshot
    from .live_segments import ScratchStaging
    from .locks import scratch_dir

    started = time.time()
    commit = read_commit(index.root)  # the commit point alone first: most writes leave nothing to merge
    if commit is None or len(plan_of([ref.documents for ref in commit.segments])) < 2:
        return None
    snap = open_snapshot(index.root)
    try:
        plan = plan_of([ref.documents for ref in snap.commit.segments])
        if len(plan) < 2 or any(snap.indexes[s].manifest.extra_files for s in plan) or \
                not sum(snap.commit.segments[s].documents for s in plan):
            return None
        if len({snap.indexes[s].manifest.doc_store is not None for s in plan}) > 1:
            return None  # some store their texts, some not: as `compact`, not ours to mix
        refs = [snap.commit.segments[s] for s in plan]
        part = Snapshot(snap.root, replace(snap.commit, segments=tuple(refs)), [snap.indexes[s] for s in plan],
                        [snap.deletions[s] for s in plan], [])
        with scratch_dir(index.root.parent, f".{index.root.name}.build-") as folder:
            staged, manifest = compact_segment(ScratchStaging(folder), part, index.chunk_docs, index.workers,
                                               index.quiet)
            report = index.publish(Prepared(staged, manifest, "merge"),
                                   replaces={ref.name: ref.deletes_sha256 for ref in refs})
    finally:
        snap.close()
    return {"merged": [ref.name for ref in refs], "documents": report["added"], "segment": report["segment"],
            "generation": report["generation"], "seconds": round(time.time() - started, 3)}


def absorbing(root: Path, snap: Snapshot, replaces: dict[str, str | None],
              hits: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """A write absorbing small segments (`LiveIndex.publish(replaces=..., upsert=True)`, an agent registry's
    write): its new segment holds the live documents of the segments `replaces` besides its own, so no merge of
    them runs beside later writes. `hits` (the live documents with the new segment's ids, per segment position)
    less those inside `replaces`: the deletions to make elsewhere. `replaces` must be as the caller read them
    (else `StaleCommit`), and each of their live documents must have its id in the new segment (absorbed, or
    replaced by its newer version), else an error and nothing written."""
    from .live import _replacing

    inside = {s for s, ref in enumerate(snap.commit.segments) if ref.name in replaces}
    live = sum(snap.commit.segments[s].documents for s in inside)
    _replacing(root, snap, replaces, live)  # raises StaleCommit when one changed since it was read
    covered = sum(len(d) for s, d in hits.items() if s in inside)
    if covered != live:
        raise SsrError(f"{root}: the new segment holds {covered} of the {live} live documents of the segments it "
                       "absorbs; nothing written")
    return {s: d for s, d in hits.items() if s not in inside}
