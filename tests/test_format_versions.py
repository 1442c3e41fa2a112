"""Format versions: compact signal strings (format 4: literal table + bit-packed codes), int32
offsets (format 3), and indexes of versions 2 and 3 still opening and answering the same."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import write_tsv
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine import build_index, open_index, verify_index
from ssr_engine.arrays import offsets_dtype
from ssr_engine.errors import IndexFormatError
from ssr_engine.indexing import merge as merge_module
from ssr_engine.kernels.forward import width_for
from ssr_engine.kernels.lists import decode
from ssr_engine.kernels.packed import at, byte_width_for, gather, get, get32, n_words, n_words32, pack, pack32
from ssr_engine.kernels.strings import parts, string_bits
from ssr_engine.search import Searcher


@settings(max_examples=60, deadline=None)
@given(width=st.integers(1, 63), seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300))
def test_packed_values_read_back_at_every_width(width, seed, n):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**width, n, dtype=np.uint64) if width < 63 else \
        rng.integers(0, 2**63, n, dtype=np.uint64)
    values[: n // 3] = np.uint64(2**width - 1)  # all ones: the bits next to each value stay clean
    words = pack(values, width)
    assert words.shape[0] == n_words(n, width)
    assert [int(get(words, width, i)) for i in range(n)] == values.tolist()


@settings(max_examples=60, deadline=None)
@given(width=st.integers(1, 32), seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300), cut=st.integers(0, 10))
def test_packed_32_bit_words_read_back_and_join_in_pieces(width, seed, n, cut):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**width, n, dtype=np.uint64)
    values[: n // 3] = np.uint64(2**width - 1)  # all ones: the bits next to each value stay clean
    words = pack32(values, width)
    assert words.dtype == np.uint32 and words.shape[0] == n_words32(n, width)
    assert [int(get32(words, width, i)) for i in range(n)] == values.tolist()
    if width % 8 == 0:  # whole bytes: the same words read byte-wise, one load a value (format 6's postings)
        col = (words.view(np.uint8), width)
        assert gather(col, [0], [n]).tolist() == values.tolist() == [at(col, i) for i in range(n)]
    pieces: list[np.ndarray] = []  # the build's appender: pieces of any length join into the same words
    appender = merge_module.PackedAppender(pieces.append, width)
    for part in np.array_split(values.astype(np.uint32), cut + 1):
        appender.append(part)
    appender.close()
    assert np.concatenate(pieces).tolist() == words.tolist()


def _downgrade(out: Path, version: int) -> None:
    """Rewrite the index at `out` as format `version` (2 to 6) wrote it: every term's offset (below 7); below 6
    plain uint32 postings; below 5
    also plain uint32 forward rows; below 4 also every term's string in the table, no codes (version 2:
    int64 string offsets), uint64 hashes in the vocabulary, a doc_rank file; and commit it."""
    from ssr_engine.generations import IndexWriter, seal
    from ssr_engine.manifest import read_manifest, write_manifest

    ix = open_index(out)
    seg, n_docs = ix.path, ix.n_docs
    plain = gather(ix.forward, [0], [ix.forward_length]).astype(np.uint32)
    postings = gather(ix.postings, [0], [ix.postings_length]).astype(np.uint32)
    offsets, data = ix.strings_of(np.arange(ix.n_terms))
    hashes, rank = ix.hashes(), np.array(ix.doc_rank)  # read before the files under the maps are rewritten
    indptr = decode(ix.lists, ix.n_terms)
    np.save(seg / "postings_indptr.npy", indptr.astype(np.int64 if version == 2 else offsets_dtype(int(indptr[-1]))))
    for name in ("postings_long", "postings_rank"):
        (seg / f"{name}.npy").unlink()
    if version < 6:
        np.save(seg / "postings_docs.npy", postings)
    if version < 5:
        np.save(seg / "forward_terms.npy", plain)
    if version < 4:
        np.save(seg / "signal_offsets.npy", offsets.astype(np.int64 if version == 2 else np.int32))
        np.save(seg / "signal_bytes.npy", data)
        np.save(seg / "vocab.npy", hashes)
        np.save(seg / "doc_rank.npy", rank)
        (seg / "signal_codes.npy").unlink()
    ix.close()
    manifest = read_manifest(seg)
    if version < 4:
        manifest = replace(manifest, ids={k: v for k, v in manifest.ids.items() if k != "rank"})
    write_manifest(seg, manifest)
    body = json.loads((seg / "manifest.json").read_text())
    body.pop("checksum")
    body["format_version"] = version
    (seg / "manifest.json").write_text(seal(body))
    with IndexWriter(out, True) as writer:
        writer.commit([(seg, n_docs)])


def test_bigrams_are_pairs_of_unigram_strings(tmp_path, cranfield_docs):
    out = build_index(write_tsv(tmp_path / "c.tsv", cranfield_docs[:300]), tmp_path / "idx", quiet=True)
    ix = open_index(out)
    strings = ix.signal_table().column("signal").to_pylist()
    table = ix.signal_bytes.tobytes()
    literals = [table[a:b].decode() for a, b in zip(ix.signal_offsets[:-1], ix.signal_offsets[1:], strict=True)]
    unigrams = [s for s in strings if " " not in s]
    assert literals == unigrams  # the table holds the unigrams alone, in term order
    assert ix.string_bits == string_bits(len(unigrams)) and ix.signal_codes.shape[0] == n_words(
        ix.n_terms, 2 * ix.string_bits)
    for t, s in enumerate(strings):
        left, right = parts(ix.signal_codes, ix.string_bits, t)
        assert s == (literals[left] if right < 0 else f"{literals[left]} {literals[right]}")
    assert sum(" " in s for s in strings) > len(strings) // 4  # many terms are bigrams: the saving is real
    assert verify_index(out) == []


def test_unigram_only_indexes_have_no_codes(tmp_path):
    out = build_index(write_tsv(tmp_path / "c.tsv", [("1", "alpha beta gamma"), ("2", "beta delta")]), tmp_path / "i",
                      scoring="bm25", quiet=True)
    ix = open_index(out)
    assert ix.signal_codes.shape[0] == 0 and ix.string_bits == 0
    assert sorted(ix.signal(t) for t in range(ix.n_terms)) == ["alpha", "beta", "delta", "gamma"]


@pytest.fixture(scope="module")
def small(tmp_path_factory, cranfield_docs):
    tmp = tmp_path_factory.mktemp("codes")
    return build_index(write_tsv(tmp / "c.tsv", cranfield_docs[:200]), tmp / "idx", quiet=True)


def _edit_code(out: Path, copy_to: Path, t: int, left: int, right: int) -> Path:
    """A copy of the index at `out` whose term t has the code (left, right) (right -1: literal)."""
    import shutil

    shutil.copytree(out, copy_to)
    seg = open_index(copy_to).path
    codes = np.load(seg / "signal_codes.npy", mmap_mode="r+")
    bits = string_bits(open_index(copy_to).signal_offsets.shape[0] - 1)
    values = np.array([int(get(codes, 2 * bits, i)) for i in range(open_index(copy_to).n_terms)], dtype=np.uint64)
    values[t] = np.uint64(left | ((2**bits - 1 if right < 0 else right) << bits))
    codes[:] = pack(values, 2 * bits)
    codes.flush()
    return copy_to


def test_a_code_naming_no_string_is_an_error(small, tmp_path):
    ix = open_index(small)
    t = next(t for t in range(ix.n_terms) if " " in ix.signal(t))
    word = ix.signal(t)
    u = ix.signal_offsets.shape[0] - 1
    bad = _edit_code(small, tmp_path / "w", t, u + 1, 0)  # past the table
    for method in ("ssr", "exhaustive"):
        with pytest.raises(IndexFormatError, match="signal_codes.npy"):
            Searcher(bad, method=method).search(word, 10)
    with pytest.raises(IndexFormatError, match="signal_codes.npy"):
        open_index(bad).signal(t)
    assert any("signal_codes.npy" in p for p in verify_index(bad))


def test_a_code_naming_another_string_is_found_by_verify(small, tmp_path):
    ix = open_index(small)
    t = next(t for t in range(ix.n_terms) if " " in ix.signal(t))
    left, right = parts(ix.signal_codes, ix.string_bits, t)
    bad = _edit_code(small, tmp_path / "w", t, right, left)  # "b a" for "a b": sound, but not this term's string
    assert Searcher(bad).search(ix.signal(t), 10).rows() is not None  # no crash; the term is not found
    from ssr_engine.validate import check_index

    with pytest.raises(IndexFormatError, match="signal_codes.npy: the string of term .* does not hash"):
        check_index(open_index(bad), full=True)  # the structural tier alone (verify also finds the checksum)
    assert any("signal_codes.npy" in p for p in verify_index(bad))


def test_byte_flips_in_codes_never_crash(small, tmp_path):
    rnd = random.Random(5)
    queries = [open_index(small).signal(t) for t in range(0, open_index(small).n_terms, 97)]
    for i in range(6):
        import shutil

        w = tmp_path / f"f{i}"
        shutil.copytree(small, w)
        path = open_index(w).path / "signal_codes.npy"
        raw = bytearray(path.read_bytes())
        pos = rnd.randrange(128, len(raw))  # past the .npy header
        raw[pos] ^= 1 << rnd.randrange(8)
        path.write_bytes(bytes(raw))
        assert verify_index(w)
        try:
            Searcher(w).search_batch(queries, 10)
        except IndexFormatError:
            pass


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_indexes_of_older_versions_open_and_answer_the_same(tmp_path, cranfield_docs, monkeypatch, capsys, version):
    from ssr_engine import arrays
    from ssr_engine import format as fmt

    path = write_tsv(tmp_path / "cran.tsv", cranfield_docs[:300])
    new = open_index(build_index(path, tmp_path / "new", chunk_docs=100, quiet=True))
    for name in fmt.OFFSET_ARRAYS:
        assert getattr(new, name).dtype == np.int32, name
    assert json.loads((new.path / "manifest.json").read_text())["format_version"] == 7
    assert new.forward_width == width_for(new.n_terms) < 32
    assert new.forward_terms.shape[0] == n_words32(new.forward_length, new.forward_width)
    assert new.postings_width == 16 == byte_width_for(new.n_docs)  # 300 documents: 9 bits, two whole bytes
    assert isinstance(new.postings, tuple) and new.postings[0].dtype == np.uint8  # read by the byte column
    assert new.postings_docs.shape[0] == n_words32(new.postings_length, new.postings_width)
    assert fmt.offsets_dtype(2**31 - 1) == np.int32 and fmt.offsets_dtype(2**31) == np.int64
    if version == 2:  # int64 offsets throughout
        monkeypatch.setattr(arrays, "offsets_dtype", lambda last: np.dtype(np.int64))
    out = build_index(path, tmp_path / "old", chunk_docs=100, quiet=True)
    monkeypatch.undo()
    _downgrade(out, version)
    old = open_index(out)
    assert old.manifest.format_version == version and (old.postings_width == 0) == (version < 6)
    assert old.postings_long is None and old.postings_indptr.shape[0] == old.n_terms + 1
    assert old.df().tolist() == new.df().tolist() and (new.df() == 1).any()
    assert new.postings_indptr.shape[0] == int((new.df() != 1).sum()) + 1  # format 7: no offset for df 1
    assert gather(old.postings, [0], [old.postings_length]).tolist() == \
        gather(new.postings, [0], [new.postings_length]).tolist()
    assert (old.forward_width == 0) == (version < 5)
    if version < 5:
        assert old.forward_terms.tolist() == [t for d in range(new.n_docs) for t in new.forward_row(d).tolist()]
    assert [old.forward_row(d).tolist() for d in range(old.n_docs)] == \
        [new.forward_row(d).tolist() for d in range(new.n_docs)]
    if version < 4:
        assert old.string_bits == 0 and old.signal_offsets.shape[0] == old.n_terms + 1
    for name in (*fmt.OFFSET_ARRAYS, "doc_rank"):
        want = np.int64 if version == 2 and name in fmt.OFFSET_ARRAYS else getattr(new, name).dtype
        assert getattr(old, name).dtype == want
        if name != "postings_indptr" and (name != "signal_offsets" or version == 4):
            assert getattr(old, name).tolist() == getattr(new, name).tolist(), name
    if version < 4:
        assert old.vocab.dtype == np.uint64 and new.vocab.dtype == np.uint32
        assert old.vocab.tolist() == new.hashes().tolist() and new.keys_of(old.vocab).tolist() == new.vocab.tolist()
    assert verify_index(out) == []
    assert old.signal_table().equals(new.signal_table())
    queries = [t for _, t in cranfield_docs[300:320]]
    for method in ("ssr", "exhaustive"):
        a, b = Searcher(out).search_batch(queries, 10, method=method), \
            Searcher(new.root).search_batch(queries, 10, method=method)
        assert [r.rows() for r in a] == [r.rows() for r in b] and any(r.rows() for r in a)
    from ssr_engine.cli import main as cli_main

    capsys.readouterr()
    assert cli_main(["index-info", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format_version"] == version  # the index's own, not the code's


def test_a_live_index_of_plain_and_packed_segments_answers_as_one_index(tmp_path, cranfield_docs):
    """A format-4 base (plain forward rows and postings) plus a segment this code adds (packed), with
    deletions: every method answers as a fresh index of the same documents (the kernels take both forms);
    compacted, they are one segment of the current format, its postings the fresh build's."""
    from ssr_engine.live import LiveIndex, open_snapshot
    from ssr_engine.retrieval import open_retriever

    docs = cranfield_docs[:400]
    out = build_index(write_tsv(tmp_path / "a.tsv", docs[:300]), tmp_path / "live", chunk_docs=100, quiet=True)
    _downgrade(out, 4)
    live = LiveIndex(out)
    live.add(docs[300:])
    live.delete([docs[5][0], docs[310][0]])
    kept = [d for d in docs if d[0] not in (docs[5][0], docs[310][0])]
    fresh = build_index(write_tsv(tmp_path / "b.tsv", kept), tmp_path / "fresh", quiet=True)
    queries = [t for _, t in cranfield_docs[400:430]]

    def same_answers(methods, ks):
        for method in methods:
            for k in ks:
                a = open_retriever(out, method).search_batch(queries, k)
                b = open_retriever(fresh, method).search_batch(queries, k)
                assert [(r.ids.tolist(), r.scores.tolist(), r.matches.tolist()) for r in a] == \
                    [(r.ids.tolist(), r.scores.tolist(), r.matches.tolist()) for r in b] and any(len(r) for r in a)

    same_answers(("ssr", "levels", "exhaustive"), (1, 10, 1000))
    assert verify_index(out) == []
    live.compact()
    snap, want = open_snapshot(out), open_index(fresh)
    try:
        (got,) = snap.indexes
        assert got.manifest.format_version == 7 and got.postings_width == 16
        for name in ("postings_docs", "postings_long", "postings_rank", "postings_indptr"):
            assert np.array_equal(np.load(got.path / f"{name}.npy"), np.load(want.path / f"{name}.npy")), name
    finally:
        snap.close()
    same_answers(("ssr", "levels"), (10,))
    assert verify_index(out) == []


def test_vocabulary_keys_that_repeat_are_told_apart_by_their_strings(tmp_path, cranfield_docs, monkeypatch):
    """Format 4 keeps 32 bits of each hash; here only 10, so most keys repeat: the look-up walks
    every entry with the query's key and compares strings, and answers as the full hashes do."""
    from ssr_engine import hashing
    from ssr_engine.bm25 import BM25Searcher

    path = write_tsv(tmp_path / "c.tsv", cranfield_docs[:300])
    full = open_index(build_index(path, tmp_path / "full", quiet=True))
    queries = [t for _, t in cranfield_docs[300:330]] + [full.signal(t) for t in range(0, full.n_terms, 211)]
    want = {m: [r.rows() for r in Searcher(full.root).search_batch(queries, 10, method=m)]
            for m in ("ssr", "exhaustive")}
    bm_want = [r.rows() for r in BM25Searcher(build_index(path, tmp_path / "bm_full", scoring="bm25", quiet=True))
               .search_batch(queries[:30], 10)]
    # keys of 10 bits: the build (merge), keys_of and the searchers' query kernel all take the shift from here
    monkeypatch.setattr(hashing, "vocab_key_shift", lambda bits: 54)
    out = build_index(path, tmp_path / "narrow", quiet=True)
    ix = open_index(out)
    assert np.unique(ix.vocab).shape[0] <= 1024 < ix.n_terms
    assert verify_index(out) == []
    for method in ("ssr", "exhaustive"):
        got = [r.rows() for r in Searcher(out).search_batch(queries, 10, method=method)]
        assert got == want[method] and any(got)
    assert all(ix.term_of(ix.signal(t)) == t for t in range(0, ix.n_terms, 37))
    assert ix.term_of("no such signal") == -1
    bm = build_index(path, tmp_path / "bm", scoring="bm25", quiet=True)
    assert [r.rows() for r in BM25Searcher(bm).search_batch(queries[:30], 10)] == bm_want


def test_doc_rank_is_no_file_when_the_rows_are_in_id_order(tmp_path):
    ordered = build_index(write_tsv(tmp_path / "a.tsv", [("1", "alpha beta"), ("2", "beta"), ("10", "gamma")]),
                          tmp_path / "a", quiet=True)
    shuffled = build_index(write_tsv(tmp_path / "b.tsv", [("10", "alpha beta"), ("2", "beta"), ("1", "gamma")]),
                           tmp_path / "b", quiet=True)
    a, b = open_index(ordered), open_index(shuffled)
    assert not (a.path / "doc_rank.npy").exists() and a.manifest.ids["rank"] == "identity"
    assert a.doc_rank.tolist() == [0, 1, 2]
    assert (b.path / "doc_rank.npy").is_file() and "rank" not in b.manifest.ids and b.doc_rank.tolist() == [2, 1, 0]
    assert Searcher(ordered).search("beta", 10).rows()[0][0] == "1"
    assert verify_index(ordered) == [] and verify_index(shuffled) == []


def test_a_manifest_body_is_its_file_and_reads_back_as_it_was(tmp_path):
    """`Manifest.to_dict` (the stopword and collision lists copied apart from asdict's deep copy) gives the
    written body, word lists as lists, and reads back equal; changing the body leaves the manifest alone."""
    from ssr_engine.manifest import Manifest

    out = tmp_path / "idx"
    build_index(write_tsv(tmp_path / "c.tsv", [("1", "the alpha beta"), ("2", "beta of gamma")]), out, quiet=True)
    m = open_index(out).manifest
    seg = next(p for p in out.iterdir() if p.name.startswith("seg-"))
    body = {k: v for k, v in json.loads((seg / "manifest.json").read_text()).items() if k not in ("format", "checksum")}
    d = m.to_dict()
    assert d == body and isinstance(d["signals"]["stopwords"], list) and "the" in d["signals"]["stopwords"]
    assert Manifest.from_dict(d) == m
    d["signals"]["stopwords"].append("zzz")
    d["counts"]["documents"] = 99
    assert "zzz" not in m.signals.stopwords and m.counts.documents == 2
