"""A small file's build keeps its runs in memory (`runs.MemoryRuns`) and writes the same index files,
byte for byte, as the build through run files on disk."""

from __future__ import annotations

import json
import random

import pytest

from ssr_engine import build_index, open_index
from ssr_engine.indexing import builder
from ssr_engine.manifest import MANIFEST

WORDS = ["alpha", "beta", "gamma", "delta", "the", "of", "and", "x", "7", "42", "Zürich", "naïve", "日本"]


def _collection(path, n=150, seed=3):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            text = " ".join(rng.choice(WORDS) + ("" if rng.random() < 0.7 else str(rng.randrange(40)))
                            for _ in range(rng.randrange(0, 14)))  # some documents empty
            f.write(json.dumps({"id": f"doc {i}" if i % 3 else str(i), "text": text}) + "\n")
    return path


def _built(monkeypatch, path, out, in_memory, **options):
    """The segment's files (name -> bytes) and manifest of a build with runs in memory or on disk."""
    made = []

    class Counted(builder.MemoryRuns):
        def __init__(self):
            super().__init__()
            made.append(self)

    monkeypatch.setattr(builder, "MemoryRuns", Counted)
    monkeypatch.setattr(builder, "RUNS_IN_MEMORY", 1 << 20 if in_memory else -1)
    build_index(path, out, fmt="jsonl-any-id", quiet=True, workers=1, **options)
    assert bool(made) == in_memory
    segment = open_index(out).path
    files = {p.name: p.read_bytes() for p in segment.iterdir() if p.is_file() and p.name != MANIFEST}
    return files, json.loads((segment / MANIFEST).read_text())


@pytest.mark.parametrize("options", [{"scoring": "ssr"}, {"scoring": "ssr", "chunk_docs": 40}, {"scoring": "bm25"},
                                     {"scoring": "ssr", "hash_bits": 16, "chunk_docs": 40}])
def test_runs_in_memory_write_the_same_files(tmp_path, monkeypatch, options):
    # 60 documents of seed 2 at 16 bits: signal hash collisions under three seeds, the fourth clean
    path = _collection(tmp_path / "docs.jsonl", *((60, 2) if "hash_bits" in options else ()))
    memory, m_manifest = _built(monkeypatch, path, tmp_path / "memory", True, **options)
    disk, d_manifest = _built(monkeypatch, path, tmp_path / "disk", False, **options)
    assert sorted(memory) == sorted(disk)
    assert [n for n in memory if memory[n] != disk[n]] == []
    for key in ("counts", "signals", "files", "ids"):
        assert m_manifest[key] == d_manifest[key]
    if "hash_bits" in options:  # each collision retried with the next seed, in memory as on disk
        assert m_manifest["signals"]["hash"]["collisions"]
    assert not list(tmp_path.glob("memory/**/runs"))


def test_a_large_or_compressed_file_keeps_its_runs_on_disk(tmp_path):
    import gzip

    path = _collection(tmp_path / "docs.jsonl", n=20)
    assert builder._small_file(path)
    zipped = tmp_path / "docs.jsonl.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    assert not builder._small_file(zipped)  # its text may be any size
    assert not builder._small_file(tmp_path)  # a folder
    assert not builder._small_file(tmp_path / "missing.jsonl")
    assert not builder._small_file([("a", "text")])
    big = tmp_path / "big.jsonl"
    big.write_text(path.read_text() * (builder.RUNS_IN_MEMORY // path.stat().st_size + 1))
    assert not builder._small_file(big)
