"""The merge policy of live indexes (`live_merges`): adds keep the segment count bounded by merging
segments of about the same size, never the big base with a small one, and rank as a fresh build."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import write_tsv
from test_live import assert_same_as_fresh, text

from ssr_engine import build_index
from ssr_engine.cli import main as cli
from ssr_engine.generations import read_commit
from ssr_engine.live import LiveIndex, StaleCommit
from ssr_engine.live_merges import merge_once, merge_plan, size_plan


def grown(tmp: Path, adds: int, merge: bool, seed: int = 0) -> tuple[Path, dict[str, str], list[dict]]:
    """A 300-document index and `adds` additions of 20 documents (with a few deletions and an update)."""
    rng = random.Random(seed)
    live = {str(i): text(rng) for i in range(300)}
    index = build_index(write_tsv(tmp / "c.tsv", live.items()), tmp / "idx", quiet=True)
    writer = LiveIndex(index, merge=merge)
    reports = []
    for a in range(adds):
        docs = [(str(1000 + 20 * a + i), text(rng)) for i in range(20)]
        if a == 2:
            docs.append(("5", text(rng)))  # an update of a base document
        reports.append(writer.add(docs, upsert=True))
        live.update(docs)
        gone = rng.sample(sorted(live), 3)
        writer.delete(gone)
        for i in gone:
            live.pop(i)
    return index, live, reports


def test_adds_merge_the_newest_segments_once_they_match_the_one_before(tmp_path):
    index, live, reports = grown(tmp_path, 8, merge=True)
    base = read_commit(index).segments[0]
    merges = [m for r in reports for m in r["merges"]]
    assert merges and all(base.name not in m["merged"] for m in merges)  # 300 documents never met 20 x 8
    assert all(len(m["merged"]) >= 2 for m in merges)
    live_counts = [ref.documents for ref in read_commit(index).segments]
    assert size_plan(live_counts) == []  # nothing left to merge: each segment holds more than all after it
    assert all(a > sum(live_counts[i + 1:]) for i, a in enumerate(live_counts[:-1]))
    assert len(live_counts) <= 4
    assert_same_as_fresh(index, live, tmp_path, "ssr", "merged")


def test_size_plan_merges_the_newest_run_and_caps_the_count():
    assert size_plan([100_000, 1]) == []
    assert size_plan([100_000, 1, 1]) == [1, 2]
    # the longest run of the newest segments whose first is matched by those after it
    assert size_plan([100_000, 40_000, 20_000, 20_000]) == [1, 2, 3]
    assert size_plan([8_800_000, 1000]) == []  # a first add beside a big base: nothing to merge
    assert size_plan([500, 400, 100]) == [0, 1, 2]  # deletions shrank the older one: merged with the newer
    assert size_plan([7, 13], ratio=0.5) == []  # the older one merges once the newer hold twice as many
    assert size_plan([7, 14], ratio=0.5) == [0, 1]
    doubling = [2**i for i in range(12, 0, -1)]  # each more than all after it: past the cap, the smallest
    assert size_plan(doubling) == [7, 8, 9, 10, 11]


def test_no_merge_keeps_every_segment(tmp_path):
    index, live, reports = grown(tmp_path, 5, merge=False)
    assert all(r["merges"] == [] for r in reports)
    assert len(read_commit(index).segments) == 6
    assert_same_as_fresh(index, live, tmp_path, "ssr", "unmerged")
    # an explicit merge later follows the same plan: the five added segments into one
    done = LiveIndex(index).merge()
    assert len(done) == 1 and len(done[0]["merged"]) == 5
    assert len(read_commit(index).segments) == 2
    assert_same_as_fresh(index, live, tmp_path, "ssr", "merged-later")


def test_a_merge_never_undoes_a_write_made_meanwhile(tmp_path, monkeypatch):
    index, live, _ = grown(tmp_path, 4, merge=False)
    writer = LiveIndex(index)
    real_publish = LiveIndex.publish
    victims = [i for i in sorted(live, key=int) if int(i) >= 1000][:2]  # in the added segments

    def publish_after_a_delete(self, prepared, **kw):
        # a segment the merge read changes under it
        assert LiveIndex(index, merge=False).delete([victims[0]])["deleted"] == 1
        live.pop(victims.pop(0))
        return real_publish(self, prepared, **kw)

    monkeypatch.setattr(LiveIndex, "publish", publish_after_a_delete)
    before = read_commit(index).generation
    with pytest.raises(StaleCommit):
        merge_once(writer)
    done = writer.merge()
    assert len(done) == 1 and "changed since it was read" in done[0]["postponed"]
    monkeypatch.setattr(LiveIndex, "publish", real_publish)
    assert read_commit(index).generation == before + 2  # the two deletes; no merge committed
    assert_same_as_fresh(index, live, tmp_path, "ssr", "stale")
    assert len(writer.merge()) == 1  # nothing in the way now
    assert len(read_commit(index).segments) == 2
    assert_same_as_fresh(index, live, tmp_path, "ssr", "after")


def test_cli_add_merges_unless_told_not_to(tmp_path, capsys):
    index, _, _ = grown(tmp_path, 3, merge=False)
    for n, flags in enumerate((["--no-merge"], [])):
        tsv = write_tsv(tmp_path / f"add{n}.tsv", [(f"x{n}-{i}", "alpha beta") for i in range(20)])
        assert cli(["add", "--index", str(index), "--collection", str(tsv), "--quiet", *flags]) == 0
    err = capsys.readouterr().err
    assert err.count("merged ") == 1 and "into seg-" in err
    assert len(read_commit(index).segments) == 2  # base + the five added segments merged into one


def test_a_merged_segment_takes_the_place_of_the_first_it_replaces(tmp_path):
    """Segments added in id order stay in id order through a merge, so collection numbers ascend with ids
    (the kernels' monotone shortcuts): here four small adds are merged (the tiered plan) while a bigger,
    later add stays."""
    from ssr_engine import parts_tables
    from ssr_engine.live_search import LiveSearcher

    rng = random.Random(3)
    live = {str(i): text(rng) for i in range(300)}
    index = build_index(write_tsv(tmp_path / "c.tsv", live.items()), tmp_path / "idx", quiet=True)
    writer = LiveIndex(index, merge=False)
    for a in range(4):
        docs = [(str(1000 + 20 * a + i), text(rng)) for i in range(20)]
        writer.add(docs)
        live.update(docs)
    big = [(str(5000 + i), text(rng)) for i in range(200)]  # the tier of the base: left alone
    writer.add(big)
    live.update(big)
    gone = rng.sample(sorted(live), 12)
    writer.delete(gone)
    for i in gone:
        live.pop(i)
    before = [ref.name for ref in read_commit(index).segments]
    done = [merge_once(writer, merge_plan)]  # the tiered plan (agent registries'): not the newest run here
    assert done[0] is not None and done[0]["merged"] == before[1:5]
    after = [ref.name for ref in read_commit(index).segments]
    assert after == [before[0], done[0]["segment"], before[5]]
    searcher = LiveSearcher(index)
    assert parts_tables.parts_arrays(searcher._searcher, "ssr")[6]  # ids ascend with collection numbers
    searcher.close()
    assert_same_as_fresh(index, live, tmp_path, "ssr", "merged")
