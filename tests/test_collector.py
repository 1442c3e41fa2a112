"""`collector.freeze_once`: what is alive once a process's first searcher has opened leaves the garbage
collector's full passes (they walked ~135,000 objects of imported modules: 65 ms a pass), once a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssr_engine import indexing as build

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import gc, json, sys, weakref
from ssr_engine.retrieval import open_retriever
frozen0 = gc.get_freeze_count()
first = open_retriever(sys.argv[1], sys.argv[2])
frozen1 = gc.get_freeze_count()
young = len(gc.get_objects())  # what a full collection walks now
second = open_retriever(sys.argv[1], sys.argv[2])
frozen2 = gc.get_freeze_count()
gc.disable()  # frozen or not, a dropped searcher goes with its last reference (it holds no cycle)
gone = weakref.ref(first), weakref.ref(second)
del first, second
print(json.dumps({"before": frozen0, "first": frozen1, "young": young, "second": frozen2,
                  "dropped": [r() is None for r in gone]}))
"""


def run(index: Path, method: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(index), method], capture_output=True, text=True,
                         check=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("collector")
    (tmp / "c.tsv").write_text("".join(f"d{i}\talpha beta w{i % 7} w{i % 11}\n" for i in range(300)), encoding="utf-8")
    return {scoring: build.build_index(tmp / "c.tsv", tmp / scoring, quiet=True, scoring=scoring)
            for scoring in ("ssr", "bm25")}


@pytest.mark.parametrize(("scoring", "method"), [("ssr", "ssr"), ("bm25", "bm25")])
def test_the_first_searcher_freezes_what_is_alive_once(indexes, scoring, method):
    got = run(indexes[scoring], method)
    assert got["before"] == 0
    assert got["first"] > 20_000  # the imported modules' objects (~135,000 with every module an open imports)
    assert got["young"] < got["first"] // 10  # a full collection walks only what was made since
    assert got["second"] == got["first"]  # once a process
    assert got["dropped"] == [True, True]


def test_turned_off_by_the_environment(indexes):
    got = run(indexes["ssr"], "ssr", SSR_GC_FREEZE="0")
    assert got["first"] == got["second"] == 0
    assert got["young"] > 20_000
    assert got["dropped"] == [True, True]
