"""Sharded indexes without Ray (`ssr_engine.distributed`, runners "inline" and "processes"): the layout,
the byte-range split, errors naming file and line, and search compared bit for bit with one index
over the same collection (ids, scores, matches, document numbers)."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_identical, write_tsv
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine import build_index
from ssr_engine.cli import main
from ssr_engine.corpus import ByteRange, read_collection
from ssr_engine.distributed import build_sharded, is_sharded, open_local, verify_sharded
from ssr_engine.distributed.build import split_ranges
from ssr_engine.distributed.layout import MANIFEST, read_manifest
from ssr_engine.errors import InputError, SsrError
from ssr_engine.retrieval import open_retriever

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
QUERIES = ["alpha beta", "gamma", "delta epsilon zeta", "kappa alpha kappa", "theta iota eta beta", "nothing here"]


def random_docs(seed: int, n: int, ids: str = "int") -> list[tuple[str, str]]:
    rng = random.Random(seed)
    # a ten-word vocabulary: many documents tie, across shards too, so the id order decides ranks
    order = rng.sample(range(n * 3), n)
    out = []
    for i, o in enumerate(order):
        doc_id = str(o) if ids == "int" or (ids == "mixed" and i < n - 1) else f"d{o}"
        out.append((doc_id, " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))))
    return out


def compare(single: Path, sharded: Path, method: str = "ssr") -> None:
    one, many = open_retriever(single, method), open_retriever(sharded, method)
    for k in (1, 3, 10, None):
        assert_identical(many.search_batch(QUERIES, k), one.search_batch(QUERIES, k))
    assert many.pool_sizes(QUERIES).tolist() == one.pool_sizes(QUERIES).tolist()
    top = one.search(QUERIES[0], 5)
    for doc, d in zip(top.ids.tolist(), top.docs.tolist(), strict=True):
        assert many.explain(QUERIES[0], doc) == one.explain(QUERIES[0], doc)
        assert many.explain(QUERIES[0], d) == one.explain(QUERIES[0], d)


# ----------------------------------------------------------------------------- the split


def test_split_ranges_cut_on_line_starts_and_cover_the_file(tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(1, 200))
    data = path.read_bytes()
    for shards in (1, 2, 3, 7, 64, 500):
        ranges = split_ranges(path, shards)
        assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
        assert all(a < z for a, z in ranges) and len(ranges) <= min(shards, 200)
        for (_, z), (a, _) in zip(ranges, ranges[1:], strict=False):
            assert z == a and data[a - 1 : a] == b"\n"
        ids = [i for a, z in ranges for c in read_collection(ByteRange(path, a, z), "tsv", 17) for i in c.ids]
        assert ids == [line.split("\t")[0] for line in data.decode().splitlines()]


def test_a_file_without_final_newline_keeps_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("1\talpha beta\n2\tgamma\n3\talpha gamma", encoding="utf-8")
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    build_index(path, tmp_path / "one", quiet=True)
    compare(tmp_path / "one", tmp_path / "s")


# -------------------------------------------------------------------------------- search


@pytest.mark.parametrize("ids", ["int", "string", "mixed"])
def test_sharded_equals_one_index(tmp_path: Path, ids: str) -> None:
    docs = random_docs(7, 300, ids)
    path = write_tsv(tmp_path / "c.tsv", docs)
    build_index(path, tmp_path / "one", quiet=True)
    build_sharded(path, tmp_path / "s", 4, runner="inline", quiet=True)
    m = read_manifest(tmp_path / "s")
    assert len(m.shards) == 4 and m.documents == 300 and m.integer == (ids == "int")
    compare(tmp_path / "one", tmp_path / "s")
    compare(tmp_path / "one", tmp_path / "s", "exhaustive")
    assert verify_sharded(tmp_path / "s") == []


def test_bm25_sharded_equals_one_index(tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(3, 250))
    build_index(path, tmp_path / "one", scoring="bm25", quiet=True)
    build_sharded(path, tmp_path / "s", 3, runner="inline", scoring="bm25", quiet=True)
    assert read_manifest(tmp_path / "s").tokens > 0
    compare(tmp_path / "one", tmp_path / "s", "bm25")


def test_jsonl_with_header_free_lines_and_stored_text(tmp_path: Path) -> None:
    docs = random_docs(5, 60)
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "title": t.split()[0], "text": t}) + "\n" for i, t in docs),
                    encoding="utf-8")
    build_index(path, tmp_path / "one", quiet=True, store_text=True)
    build_sharded(path, tmp_path / "s", 4, runner="inline", quiet=True, store_text=True)
    compare(tmp_path / "one", tmp_path / "s")
    one, many = open_retriever(tmp_path / "one"), open_retriever(tmp_path / "s")
    assert [many.doc(d) for d in range(60)] == [one.doc(d) for d in range(60)]


def test_header_is_skipped_in_the_first_shard_only(tmp_path: Path) -> None:
    docs = random_docs(9, 40)
    path = tmp_path / "c.tsv"
    path.write_text("id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in docs), encoding="utf-8")
    build_index(path, tmp_path / "one", header=True, quiet=True)
    build_sharded(path, tmp_path / "s", 4, runner="inline", header=True, quiet=True)
    compare(tmp_path / "one", tmp_path / "s")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), shards=st.integers(1, 5),
       ids=st.sampled_from(["int", "string", "mixed"]))
def test_property_ties_across_shards(seed: int, n: int, shards: int, ids: str) -> None:
    docs = random_docs(seed, n, ids)
    with tempfile.TemporaryDirectory() as tmp:
        build_index(docs, Path(tmp) / "one", quiet=True)
        build_sharded(docs, Path(tmp) / "s", shards, runner="inline", quiet=True)
        compare(Path(tmp) / "one", Path(tmp) / "s")


# ---------------------------------------------------------------------------- bad input


def test_duplicate_id_across_shards_names_file_and_both_lines(tmp_path: Path) -> None:
    docs = random_docs(2, 100)
    docs[80] = (docs[10][0], "alpha")
    path = write_tsv(tmp_path / "c.tsv", docs)
    with pytest.raises(InputError) as exc:
        build_sharded(path, tmp_path / "s", 4, runner="inline", quiet=True)
    assert exc.value.path == str(path) and exc.value.line == 81
    assert "first at line 11" in str(exc.value)
    assert not (tmp_path / "s").exists()  # created by the build, removed with what it wrote


def test_bad_line_in_a_later_shard_names_its_line_in_the_file(tmp_path: Path) -> None:
    docs = random_docs(4, 100)
    path = write_tsv(tmp_path / "c.tsv", docs)
    lines = path.read_text().splitlines()
    lines[90] = "no tab on this line"
    path.write_text("\n".join(lines) + "\n")
    (tmp_path / "s").mkdir()
    with pytest.raises(InputError) as exc:
        build_sharded(path, tmp_path / "s", 4, runner="inline", quiet=True)
    assert exc.value.line == 91 and "no tab" in str(exc.value)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["write.lock"]


def test_processes_runner_and_its_errors(tmp_path: Path) -> None:
    docs = random_docs(6, 120)
    path = write_tsv(tmp_path / "c.tsv", docs)
    build_index(path, tmp_path / "one", quiet=True)
    build_sharded(path, tmp_path / "s", 2, runner="processes", quiet=True)
    compare(tmp_path / "one", tmp_path / "s")
    lines = path.read_text().splitlines()
    lines[100] = "no tab on this line"
    bad = tmp_path / "bad.tsv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as exc:
        build_sharded(bad, tmp_path / "s2", 2, runner="processes", quiet=True)
    assert exc.value.line == 101


def test_refuses_foreign_directories_and_replaces_only_with_force(tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(8, 50))
    foreign = tmp_path / "f"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(SsrError, match="refusing"):
        build_sharded(path, foreign, 2, runner="inline", quiet=True)
    assert (foreign / "notes.txt").read_text() == "mine" and len(list(foreign.iterdir())) == 1
    out = tmp_path / "s"
    build_sharded(path, out, 2, runner="inline", quiet=True)
    with pytest.raises(SsrError, match="--force"):
        build_sharded(path, out, 3, runner="inline", quiet=True)
    build_sharded(path, out, 3, runner="inline", quiet=True, force=True)
    m = read_manifest(out)
    assert m.generation == 2 and len(m.shards) == 3
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("g1-")) == []  # the old generation went
    assert verify_sharded(out) == []


def test_compressed_input_is_refused(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "c.tsv.gz"
    path.write_bytes(gzip.compress(b"1\talpha\n"))
    with pytest.raises(InputError, match="uncompressed"):
        build_sharded(path, tmp_path / "s", 2, runner="inline", quiet=True)


# --------------------------------------------------------------------------- corruption


def test_verify_and_open_catch_a_corrupt_weight_table_and_manifest(tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(11, 80))
    out = tmp_path / "s"
    build_sharded(path, out, 2, runner="inline", quiet=True)
    m = read_manifest(out)
    w = out / m.shards[1].weights
    table = np.load(w)
    table[0] += 1
    np.save(w, table)  # same size, other df: only the checksum and the recomputation see it
    problems = verify_sharded(out)
    assert any("checksum mismatch" in p for p in problems)
    assert main(["verify", str(out)]) == 2
    text = (out / MANIFEST).read_text()
    (out / MANIFEST).write_text(text.replace('"documents": 80', '"documents": 81'))
    with pytest.raises(SsrError, match="checksum"):
        open_retriever(out)


def test_a_truncated_weight_table_is_an_error_at_open(tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(12, 80))
    out = tmp_path / "s"
    build_sharded(path, out, 2, runner="inline", quiet=True)
    w = out / read_manifest(out).shards[0].weights
    np.save(w, np.load(w)[:-1])
    with pytest.raises(SsrError, match="int64"):
        open_local(out)


# ---------------------------------------------------------------------------------- CLI


def test_cli_build_search_evaluate_verify(tmp_path: Path, capsys) -> None:
    docs = random_docs(13, 150)
    path = write_tsv(tmp_path / "c.tsv", docs)
    queries = tmp_path / "q.tsv"
    queries.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(QUERIES)))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(f"q0\t0\t{docs[0][0]}\t1\n")
    assert main(["build-index", "--collection", str(path), "--out", str(tmp_path / "one"), "--quiet"]) == 0
    assert main(["build-index", "--collection", str(path), "--out", str(tmp_path / "s"), "--shards", "3",
                 "--no-ray", "--quiet"]) == 0
    assert is_sharded(tmp_path / "s")
    assert main(["verify", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    runs = {}
    for name in ("one", "s"):
        assert main(["search", "--index", str(tmp_path / name), "--queries", str(queries), "-k", "20",
                     "--run-scores", "exact", "--quiet", "--verify"]) == 0
        runs[name] = capsys.readouterr().out
    assert runs["s"] == runs["one"] and runs["s"]
    for name in ("one", "s"):
        assert main(["evaluate", "--index", str(tmp_path / name), "--queries", str(queries), "--qrels", str(qrels),
                     "--run", str(tmp_path / f"{name}.run"), "--quiet", "--latency-queries", "0"]) == 0
    assert (tmp_path / "s.run").read_text() == (tmp_path / "one.run").read_text()
