"""Sharded indexes without Ray (`ssr_engine.distributed`, runners "inline" and "processes"): the layout,
the byte-range split, errors naming file and line, and search compared bit for bit with one index
over the same collection (ids, scores, matches, document numbers): in one process, and as the Ray
path computes it (each shard's `ShardWorker` arrays merged by `merge_shards`) without Ray.

(Over 400 lines on purpose: the layout, the split and the search tests share one set of builders and comparisons,
`random_docs`, `compare`, `same_answers`, `shard_answers`; split, the parts would import them from each other.)"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Iterable
from dataclasses import replace
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
from ssr_engine.distributed.layout import MANIFEST, add_ranks, open_ranks, read_manifest, write_manifest
from ssr_engine.distributed.worker import CollectionIds, ShardWorker, merge_shards
from ssr_engine.errors import InputError, SsrError
from ssr_engine.kernels.merge import merge_keyed
from ssr_engine.pieces import Helpers
from ssr_engine.query_terms import Utf8Queries
from ssr_engine.retrieval import BM25_B, BM25_K1, open_retriever

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
    same_answers(open_retriever(sharded, method), open_retriever(single, method))


def same_answers(many, one, queries: list[str] = QUERIES, ks: tuple = (1, 3, 10, None)) -> None:
    """A sharded searcher answers as one index: results at every k, pool sizes, explanations."""
    for k in ks:
        assert_identical(many.search_batch(queries, k), one.search_batch(queries, k))
    assert many.pool_sizes(queries).tolist() == one.pool_sizes(queries).tolist()
    top = one.search(queries[0], 5)
    for doc, d in zip(top.ids.tolist(), top.docs.tolist(), strict=True):
        assert many.explain(queries[0], doc) == one.explain(queries[0], doc)
        assert many.explain(queries[0], d) == one.explain(queries[0], d)


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
    assert verify_sharded(tmp_path / "s") == []  # (the weight table recomputed from the strings: equal)
    assert not [n for n in os.listdir(tmp_path / "s") if "-hashes-" in n]  # the builds' hashes: removed


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
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), shards=st.integers(1, 5),
       ids=st.sampled_from(["int", "string", "mixed"]))
def test_property_ties_across_shards(seed: int, n: int, shards: int, ids: str) -> None:
    """In this process and as the Ray path computes it (the actors' arrays merged by id rank)."""
    docs = random_docs(seed, n, ids)
    with tempfile.TemporaryDirectory() as tmp:
        build_index(docs, Path(tmp) / "one", quiet=True)
        build_sharded(docs, Path(tmp) / "s", shards, runner="inline", quiet=True)
        compare(Path(tmp) / "one", Path(tmp) / "s")
        assert read_manifest(Path(tmp) / "s").ranked
        one = open_retriever(Path(tmp) / "one")
        for k in (1, 3, 10, None):  # ten words: most results tie on (score, matches), across shards
            want = one.search_batch(QUERIES, k)
            for actors in (0, 1, 2):  # one shard an actor; all in one (each shard behind the bar of the
                # ones before); two groups
                assert_identical(shard_answers(Path(tmp) / "s", QUERIES, k, actors=actors), want)


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


@pytest.mark.parametrize("integer", [True, False])
def test_id_ranks_find_an_id_two_shards_hold(integer: bool) -> None:
    """`layout.id_ranks`: each document's place in the collection's id order, and an id held twice (found as
    neighbours in that order: "7" and "007" are one integer but two ids), or None."""
    import pyarrow as pa

    from ssr_engine.distributed.layout import id_ranks

    class Shard:  # what id_ranks reads of an index
        def __init__(self, ids: list[str]):
            self.n_docs, self.ids = len(ids), pa.array(ids, pa.string())

        def doc_id_array(self) -> pa.Array:
            return self.ids

    groups = [["30", "7", "12"], ["007", "5"], ["100", "2"]]
    every = [i for g in groups for i in g]
    want = sorted(range(len(every)), key=lambda j: (int(every[j]), every[j]) if integer else every[j])
    ranks, repeat = id_ranks([Shard(g) for g in groups], integer)  # type: ignore[list-item]
    assert repeat is None and np.concatenate(ranks).tolist() == [want.index(j) for j in range(len(every))]
    assert [r.shape[0] for r in ranks] == [3, 2, 2]
    for held in ("12", "007", "2"):
        _, repeat = id_ranks([Shard(g) for g in groups] + [Shard(["64", held])], integer)  # type: ignore[list-item]
        assert repeat == held


def test_a_hash_collision_across_shards_reseeds_every_shard(tmp_path: Path) -> None:
    """Two shards whose own signals hash apart but collide with each other's (a deliberately narrow hash): the
    weight table's reduction finds it (`layout.global_tables`), every shard is rebuilt with the next seed, and the
    sharded index answers as one index over the file."""
    from ssr_engine import ReferenceIndex
    from ssr_engine.format import open_index
    from ssr_engine.hashing import signal_hash

    # equal lines, each shard's words its own: the byte split puts the first half in shard 0
    docs = [(f"{i:03d}", f"a{i % 20:02d} a{(i * 7) % 20:02d}") for i in range(40)]
    docs += [(f"{i:03d}", f"b{i % 20:02d} b{(i * 7) % 20:02d}") for i in range(40, 80)]

    def signal_set(part: list[tuple[str, str]]) -> set[str]:
        return set(ReferenceIndex.from_texts([d for d, _ in part], [t for _, t in part]).df)

    halves = signal_set(docs[:40]), signal_set(docs[40:])
    union = sorted(halves[0] | halves[1])
    full = {seed: {x: signal_hash(x, seed, 64) for x in union} for seed in range(400)}

    def collides(signals: Iterable[str], seed: int, bits: int) -> bool:
        keys = [full[seed][x] & ((1 << bits) - 1) for x in signals]
        return len(set(keys)) < len(keys)

    # a narrow width and a first seed at which the halves collide with each other only, a later seed clean
    bits, first = next((b, x) for b in range(10, 20) for x in range(392) if collides(union, x, b)
                       and not any(collides(h, x, b) for h in halves)
                       and not all(collides(union, x + y, b) for y in range(8)))
    clean = next(first + y for y in range(8) if not collides(union, first + y, bits))
    path = write_tsv(tmp_path / "c.tsv", docs)
    build_index(path, tmp_path / "one", hash_bits=bits, quiet=True)
    build_sharded(path, tmp_path / "s", 2, runner="inline", hash_bits=bits, hash_seed=first, quiet=True)
    m = read_manifest(tmp_path / "s")
    assert m.build["hash_seed"] == clean and clean in m.build["reseeded"]
    for j, entry in enumerate(m.shards):  # the split the test assumes: shard j holds half j
        ix = open_index(tmp_path / "s" / entry.name)
        try:
            assert ix.ids_of(np.arange(ix.n_docs)).tolist() == [d for d, _ in docs[40 * j : 40 * (j + 1)]]
            assert ix.settings.hash.seed == clean
        finally:
            ix.close()
    queries = ["a01 a07", "b03", "a05 b05", "b00 b07 a14"]
    for k in (1, 5, None):
        assert_identical(open_local(tmp_path / "s").search_batch(queries, k),
                         open_retriever(tmp_path / "one").search_batch(queries, k))


def test_term_strings_compare_through_their_codes_as_strings(tmp_path: Path) -> None:
    """`kernels.strings.terms_equal` (the weight table's collision check) is string equality of the two shards'
    terms, for every pair of a sample: literal and pair terms, equal lengths, shared and own signals."""
    from ssr_engine.format import open_index
    from ssr_engine.kernels.strings import terms_equal

    path = write_tsv(tmp_path / "c.tsv", random_docs(31, 120, "int"))
    build_sharded(path, tmp_path / "s", 2, runner="inline", quiet=True)
    m = read_manifest(tmp_path / "s")
    a, b = (open_index(tmp_path / "s" / e.name) for e in m.shards)
    try:
        rng = np.random.default_rng(3)
        sa, sb = [a.signal(t) for t in range(a.n_terms)], [b.signal(t) for t in range(b.n_terms)]
        where = {x: j for j, x in enumerate(sb)}
        shared = [(i, where[x]) for i, x in enumerate(sa) if x in where]
        pairs = np.array(shared + list(zip(rng.integers(0, a.n_terms, 400).tolist(),
                                           rng.integers(0, b.n_terms, 400).tolist(), strict=True)), dtype=np.int64)
        got = terms_equal(a.signal_bytes.view(np.ndarray), a.signal_offsets.view(np.ndarray),
                          a.signal_codes.view(np.ndarray), a.string_bits, pairs[:, 0],
                          b.signal_bytes.view(np.ndarray), b.signal_offsets.view(np.ndarray),
                          b.signal_codes.view(np.ndarray), b.string_bits, pairs[:, 1])
        assert got.tolist() == [sa[i] == sb[j] for i, j in pairs.tolist()]
        assert len(shared) > 20 and not got[len(shared):].all()
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("bits", [64, 40])
def test_a_builds_term_hashes_are_its_terms_hashes(tmp_path: Path, bits: int) -> None:
    """`build_index(term_hashes=...)` writes the full hash of every term (literal and pair terms), in term order,
    as hashing each term's string gives it (`Index.hashes`); `layout.load_hashes` takes them for that index
    only."""
    from ssr_engine.distributed.layout import load_hashes
    from ssr_engine.errors import IndexFormatError
    from ssr_engine.format import open_index
    from ssr_engine.hashing import signal_hash

    path = write_tsv(tmp_path / "c.tsv", random_docs(11, 200, "int"))
    build_index(path, tmp_path / "one", hash_bits=bits, term_hashes=tmp_path / "h.npy", quiet=True)
    build_index(write_tsv(tmp_path / "d.tsv", random_docs(12, 150, "int")), tmp_path / "two", hash_bits=bits,
                term_hashes=tmp_path / "h2.npy", quiet=True)
    assert sorted(os.listdir(tmp_path / "one")) == sorted(os.listdir(tmp_path / "two"))  # nothing of it in the index
    ix, other = open_index(tmp_path / "one"), open_index(tmp_path / "two")
    try:
        written = np.load(tmp_path / "h.npy")
        assert written.dtype == np.uint64 and written.shape == (ix.n_terms,)
        assert np.array_equal(written, ix.hashes())
        assert [signal_hash(ix.signal(t), ix.settings.hash.seed, bits) for t in range(0, ix.n_terms, 7)] == \
            written[::7].tolist()
        assert any(" " in ix.signal(t) for t in range(ix.n_terms))  # pairs as well as words
        assert np.array_equal(load_hashes(tmp_path / "h.npy", ix), written)
        with pytest.raises(IndexFormatError, match="h2.npy"):
            load_hashes(tmp_path / "h2.npy", ix)
        flipped = written.copy()
        flipped[ix.n_terms // 2] ^= np.uint64(1 << (bits - 1))  # a bit the vocabulary's keys keep
        np.save(tmp_path / "h3.npy", flipped)
        with pytest.raises(IndexFormatError, match="not the hashes"):
            load_hashes(tmp_path / "h3.npy", ix)
    finally:
        ix.close()
        other.close()


def test_term_strings_of_different_shapes_compare_byte_by_byte() -> None:
    """A literal term against a pair with the same string, and pairs split at other places: `terms_equal`'s slow
    way (the same shapes compare part by part)."""
    from ssr_engine.kernels.packed import pack
    from ssr_engine.kernels.strings import string_bits, terms_equal

    words = ["ab", "c", "ab c", "a", "b c", "abc"]
    table = np.frombuffer("".join(words).encode(), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in words])]).astype(np.int64)
    bits = string_bits(len(words))
    lit = (1 << bits) - 1
    # terms: "ab c" literal, "ab" + "c", "a" + "b c", "abc" literal, "ab" literal
    entries = [(2, lit), (0, 1), (3, 4), (5, lit), (0, lit)]
    codes = pack(np.array([left | right << bits for left, right in entries], dtype=np.uint64), 2 * bits)
    strings = ["ab c", "ab c", "a b c", "abc", "ab"]
    pairs = np.array([(i, j) for i in range(5) for j in range(5)], dtype=np.int64)
    got = terms_equal(table, offsets, codes, bits, pairs[:, 0], table, offsets, codes, bits, pairs[:, 1])
    assert got.tolist() == [strings[i] == strings[j] for i, j in pairs.tolist()]


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


def test_a_garbled_weight_table_header_is_an_error_at_open(tmp_path: Path) -> None:
    """A '(' in a header's padding makes NumPy's parser raise tokenize.TokenError, not ValueError."""
    path = write_tsv(tmp_path / "c.tsv", random_docs(14, 80))
    out = tmp_path / "s"
    build_sharded(path, out, 2, runner="inline", quiet=True)
    w = out / read_manifest(out).shards[0].weights
    raw = bytearray(w.read_bytes())
    raw[raw.index(b"}") + 5] = ord("(")  # inside the header's space padding
    w.write_bytes(bytes(raw))
    with pytest.raises(SsrError, match="corrupt weight table"):
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


# ------------------------------------------------- the actors' arrays and the driver's merge (no Ray)


def shard_answers(root: Path, queries: list[str], k: int | None, method: str = "ssr", actors: int = 0,
                  threads: int = 1, merge_threads: int = 1) -> list:
    """What the Ray path answers: each actor's `ShardWorker.search` (`actors` consecutive groups of
    shards; 0: one shard each) merged by `merge_shards` (in pieces on `merge_threads` threads)."""
    m = read_manifest(root)
    groups = np.array_split(np.arange(len(m.shards)), min(actors or len(m.shards), len(m.shards)))
    workers = [ShardWorker(str(root), g.tolist(), m.generation, method, threads, BM25_K1, BM25_B) for g in groups]
    of = {i: ix for w in workers for i, ix in zip(w.shards, w.indexes, strict=True)}
    ids = CollectionIds(of.__getitem__, np.cumsum([0] + [s.documents for s in m.shards]))
    try:
        sent = Utf8Queries.of(queries)  # as the driver sends them
        lists = [w.search(sent, k, ranks=len(workers) > 1) for w in workers]
        helpers = Helpers(merge_threads, "test-merge")
        return merge_shards(lists, len(queries), k, m.integer, ids, helpers, merge_threads)
    finally:
        for w in workers:
            w.close()


def test_an_actor_of_several_threads_takes_pieces_of_the_batch(tmp_path: Path, monkeypatch) -> None:
    """Two threads, 300 queries: the queries' terms prepared in one share a thread, the group's search in guided
    pieces of each share on both threads, in query order; the driver's merge in pieces of at most 97 rows on two
    threads, one actor or three."""
    from ssr_engine.distributed import worker

    monkeypatch.setattr(worker, "_MERGE_ROWS", 97)
    monkeypatch.setattr(worker, "_THREADED_ROWS", 0)  # (the threads take the ids and results at any size)
    path = write_tsv(tmp_path / "c.tsv", random_docs(23, 400, "int"))
    build_index(path, tmp_path / "one", quiet=True)
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    rng = random.Random(5)
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(300)]
    one = open_retriever(tmp_path / "one")
    pieces: list[int] = []
    shares: list[int] = []
    searched, prepare = worker.ShardWorker._search_prepared, worker.ShardWorker.prepare
    monkeypatch.setattr(worker.ShardWorker, "_search_prepared",
                        lambda self, t, a, b, k: pieces.append(b - a) or searched(self, t, a, b, k))
    monkeypatch.setattr(worker.ShardWorker, "prepare", lambda self, qs: shares.append(len(qs)) or prepare(self, qs))
    for k in (1, 7, 1000):
        want = one.search_batch(queries, k)
        pieces.clear()
        shares.clear()
        assert_identical(shard_answers(tmp_path / "s", queries, k, actors=1, threads=2, merge_threads=2), want)
        # two shares prepared, searched in guided pieces (big first, small last) covering each once
        assert shares == [150, 150] and len(pieces) > 4 and sum(pieces) == 300 and max(pieces) > min(pieces), pieces
        pieces.clear()
        shares.clear()
        assert_identical(open_local(tmp_path / "s").search_batch(queries, k, threads=2), want)  # in process: alike
        assert shares == [150, 150] and len(pieces) > 4 and sum(pieces) == 300, pieces
        assert_identical(shard_answers(tmp_path / "s", queries, k, actors=3, merge_threads=2), want)


def test_an_actors_rows_are_narrow_and_ranked_only_for_a_merge(tmp_path: Path) -> None:
    """What an actor sends: matches in one byte, id ranks only when asked for (several actors), the same rows
    either way; the driver's results hold int64 documents and int32 matches, equal to one index's."""
    path = write_tsv(tmp_path / "c.tsv", random_docs(29, 300, "int"))
    build_index(path, tmp_path / "one", quiet=True)
    build_sharded(path, tmp_path / "s", 2, runner="inline", quiet=True)
    m = read_manifest(tmp_path / "s")
    queries = np.array(QUERIES, dtype=str)
    w = ShardWorker(str(tmp_path / "s"), [0, 1], m.generation, "ssr", 1, BM25_K1, BM25_B)
    try:
        ranked, bare = w.search(queries, 10), w.search(queries, 10, ranks=False)
    finally:
        w.close()
    assert len(ranked) == len(bare) == 1  # one thread: one piece
    (ranked,), (bare,) = ranked, bare
    assert ranked[3].dtype == np.uint8 and ranked[4].dtype == np.uint32 and ranked[4].shape == ranked[1].shape
    assert bare[4].shape == (0,) and ranked[1].shape[0] > 0
    for a, b in zip(ranked[:4], bare[:4], strict=True):
        assert a.tobytes() == b.tobytes()
    got = shard_answers(tmp_path / "s", QUERIES, 10, actors=1)
    assert all(r.docs.dtype == np.int64 and r.matches.dtype == np.int32 for r in got)
    assert_identical(got, open_retriever(tmp_path / "one").search_batch(QUERIES, 10))


def test_any_shard_order_gives_the_one_index_answers(tmp_path: Path, monkeypatch) -> None:
    """A group's shards searched in every order for every query (each behind the bar of those before it) answer
    as one index, ties across shards included, as does each query's own order (most of its postings first)."""
    from itertools import permutations

    from ssr_engine.distributed import worker

    path = write_tsv(tmp_path / "c.tsv", random_docs(31, 240, "mixed"))
    build_index(path, tmp_path / "one", quiet=True)
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    one = open_retriever(tmp_path / "one")
    monkeypatch.setattr(worker, "_ACROSS", False)  # every query shard by shard, in the order given
    for order in [()] + list(permutations(range(3))):
        monkeypatch.setattr(worker, "_FIXED_ORDER", np.array(order, dtype=np.int64))
        for k in (1, 3, 10):
            assert_identical(shard_answers(tmp_path / "s", QUERIES, k, actors=1), one.search_batch(QUERIES, k))


def test_a_group_prepares_the_queries_once_as_each_part_would(tmp_path: Path) -> None:
    """`ShardWorker.terms` (the signals made once, each shard's look-up and the collection's weights: one
    GIL-free call, or the same steps from Python) gives every shard the terms and weight bits of
    `PartsSearcher.query_terms`, the Python path, in the same order; a signal no shard holds and an empty
    query give no terms."""
    path = write_tsv(tmp_path / "c.tsv", random_docs(29, 300, "mixed"))
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    m = read_manifest(tmp_path / "s")
    w = ShardWorker(str(tmp_path / "s"), [0, 1, 2], m.generation, "ssr", 1, BM25_K1, BM25_B)
    queries = QUERIES + ["alpha alpha-beta \u00e9ta", "", "zzz unknown"]
    try:
        want = w.searcher.query_terms(queries)[2]
        assert w._group_args is not None  # one build: one key rule and array types, one GIL-free call
        for group_args in (w._group_args, None):  # ... and the same steps shard by shard from Python
            w._group_args = group_args
            got = w.terms(queries)
            for j, ((offsets, terms, weights, df), (want_o, want_t, want_w, _)) in enumerate(zip(got, want,
                                                                                                 strict=True)):
                assert offsets.tolist() == want_o.tolist() and terms.tolist() == want_t.tolist()
                assert weights.view(np.int64).tolist() == want_w.view(np.int64).tolist()
                assert df.tolist() == w.indexes[j].df()[terms].tolist()  # its own
                assert offsets[-3] == offsets[-1]  # the last two queries know nothing
    finally:
        w.close()


def without_ranks(root: Path) -> None:
    """Make `root` look like a sharded index built before id ranks existed."""
    m = read_manifest(root)
    for e in m.shards:
        (root / str(e.ranks)).unlink()
    write_manifest(root, replace(m, shards=tuple(replace(e, ranks=None, ranks_sha256=None) for e in m.shards)))


@pytest.mark.parametrize("method", ["levels", "exhaustive"])
def test_shard_lists_of_other_methods_and_of_an_index_without_ranks(tmp_path: Path, method: str, monkeypatch) -> None:
    from ssr_engine.distributed import worker

    monkeypatch.setattr(worker, "_MERGE_ROWS", 5)  # the driver's merge in pieces of a few rows
    docs = random_docs(17, 300, "mixed")
    if method == "exhaustive":  # a non-ASCII id: no fixed-width id tables, the driver reads shard by shard
        docs[150] = (f"\u00e9{docs[150][0]}", docs[150][1])
    path = write_tsv(tmp_path / "c.tsv", docs)
    build_index(path, tmp_path / "one", quiet=True)
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    one = open_retriever(tmp_path / "one")
    for k in (1, 10, None):
        assert_identical(shard_answers(tmp_path / "s", QUERIES, k, method), one.search_batch(QUERIES, k))
        assert_identical(shard_answers(tmp_path / "s", QUERIES, k, method, 2), one.search_batch(QUERIES, k))
    without_ranks(tmp_path / "s")  # the driver then merges with parts.merge_results (ids read on ties)
    assert not read_manifest(tmp_path / "s").ranked and verify_sharded(tmp_path / "s") == []
    for k in (1, 10, None):
        for actors in (0, 2):
            for m in ({method, "ssr"}):  # ssr without ranks: the group's `PartsSearcher`
                assert_identical(shard_answers(tmp_path / "s", QUERIES, k, m, actors, merge_threads=2),
                                 one.search_batch(QUERIES, k))


def test_add_ranks_to_an_older_index_and_verify_checks_them(tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(19, 200, "int"))
    build_index(path, tmp_path / "one", quiet=True)
    out = tmp_path / "s"
    build_sharded(path, out, 4, runner="inline", quiet=True)
    want = [np.asarray(r).copy() for r in (open_ranks(out, read_manifest(out), i) for i in range(4))]
    without_ranks(out)
    assert add_ranks(out) and not add_ranks(out)  # the second call finds them
    m = read_manifest(out)
    assert m.ranked and verify_sharded(out) == []
    assert all(np.array_equal(open_ranks(out, m, i), want[i]) for i in range(4))
    # together the slices are the single index's doc_rank
    assert np.array_equal(np.concatenate(want), np.asarray(open_retriever(tmp_path / "one").index.doc_rank))
    assert_identical(shard_answers(out, QUERIES, 10), open_retriever(tmp_path / "one").search_batch(QUERIES, 10))
    r = out / str(m.shards[1].ranks)
    table = np.load(r)
    table[[0, 1]] = table[[1, 0]]
    np.save(r, table)  # same size, two ranks swapped: the checksum and the recomputation see it
    assert any("checksum mismatch" in p for p in verify_sharded(out))
    np.save(r, table[:-1])
    with pytest.raises(SsrError, match="uint32"):
        ShardWorker(str(out), 1, m.generation, "ssr", 1, BM25_K1, BM25_B)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_merge_keyed_is_a_sort_by_the_full_key(data) -> None:
    """Lists in key order, few distinct scores and matches (ties decided by rank): the merge equals a sort."""
    nq, n_parts = data.draw(st.integers(0, 5)), data.draw(st.integers(1, 4))
    k = data.draw(st.integers(0, 6))
    sizes = [[data.draw(st.integers(0, 8)) for _ in range(n_parts)] for _ in range(nq)]
    n = sum(map(sum, sizes))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    scores = rng.integers(0, 3, n).astype(np.float64) / 2
    matches = rng.integers(1, 3, n).astype(np.int32)
    ranks = rng.permutation(n).astype(np.uint32)
    starts, ends, a = np.zeros((nq, n_parts), np.int64), np.zeros((nq, n_parts), np.int64), 0
    for q in range(nq):
        for s in range(n_parts):
            z = a + sizes[q][s]
            order = np.lexsort((ranks[a:z], -matches[a:z], -scores[a:z])) + a
            scores[a:z], matches[a:z], ranks[a:z] = scores[order], matches[order], ranks[order]
            starts[q, s], ends[q, s], a = a, z, z
    offsets, rows = merge_keyed(starts, ends, scores, matches, ranks, k)
    for q in range(nq):
        mine = np.concatenate([np.arange(starts[q, s], ends[q, s]) for s in range(n_parts)]).astype(np.int64)
        want = mine[np.lexsort((ranks[mine], -matches[mine], -scores[mine]))][: k or None]
        assert rows[offsets[q] : offsets[q + 1]].tolist() == want.tolist()
