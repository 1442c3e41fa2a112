"""The disk index (DESIGN.md section 3): contents equal the reference; format and failure modes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import write_tsv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssr_engine import ReferenceIndex, build_index, card_signals, open_index, verify_index
from ssr_engine.cli import main as cli_main
from ssr_engine.errors import IndexFormatError, InputError, SsrError
from ssr_engine.hashing import signal_hash
from ssr_engine.indexing import merge as merge_module
from ssr_engine.kernels.packed import gather

WORDS = ["alpha", "beta", "gamma", "delta", "the", "of", "and", "x", "y", "epsilon", "zeta", "eta", "7", "42"]


def index_contents(index) -> dict[str, list[int]]:
    """signal -> posting list (internal doc ids), read back from the CSR arrays."""
    docs = gather(index.postings, [0], [index.postings_length])
    return {index.signal(t): docs[slice(*index.span(t))].tolist() for t in range(index.n_terms)}


def assert_matches_reference(index, ref: ReferenceIndex) -> None:
    assert index.n_docs == ref.n_docs
    contents = index_contents(index)
    assert set(contents) == set(ref.df)
    for s, docs in contents.items():
        assert docs == [d for d in range(ref.n_docs) if s in ref.doc_signals[d]], s
    assert np.all(np.diff(index.vocab.astype(np.float64)) >= 0) or index.n_terms <= 1  # 32-bit keys may repeat
    hashes = index.hashes()
    assert np.all(hashes[1:] > hashes[:-1])
    seed, bits = index.settings.hash.seed, index.settings.hash.bits
    assert [signal_hash(index.signal(t), seed, bits) for t in range(index.n_terms)] == hashes.tolist()
    assert index.keys_of(hashes).tolist() == index.vocab.tolist()
    strings = [index.signal(t) for t in range(index.n_terms)]
    for d in range(ref.n_docs):
        terms = index.forward_row(d).tolist()
        assert terms == sorted(terms)
        assert {strings[t] for t in terms} == ref.doc_signals[d]
    assert index.doc_ids() == ref.ids
    assert verify_index(index.root) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join), min_size=1, max_size=60),
    chunk=st.integers(1, 25),
    cap=st.sampled_from([3, 8, 64]),
)
def test_random_corpora_equal_the_reference(tmp_path_factory, docs, chunk, cap):
    tmp = tmp_path_factory.mktemp("rand")
    ids = [str(i) for i in range(len(docs))]
    path = write_tsv(tmp / "c.tsv", list(zip(ids, docs, strict=True)))
    old = merge_module.BUCKET_ENTRIES
    merge_module.BUCKET_ENTRIES = 7  # many buckets even on tiny inputs
    try:
        out = build_index(path, tmp / "idx", cap=cap, chunk_docs=chunk, workers=2, quiet=True)
    finally:
        merge_module.BUCKET_ENTRIES = old
    assert_matches_reference(open_index(out), ReferenceIndex.from_texts(ids, docs, cap=cap))


def test_cranfield_index_equals_reference(tmp_path, cranfield_docs):
    path = write_tsv(tmp_path / "cran.tsv", cranfield_docs)
    out = build_index(path, tmp_path / "idx", chunk_docs=300, quiet=True)
    index = open_index(out)
    ids = [d for d, _ in cranfield_docs]
    assert_matches_reference(index, ReferenceIndex.from_texts(ids, [t for _, t in cranfield_docs]))
    assert index.manifest.counts.documents == 1400
    assert index.manifest.ids["integer"] is True


def test_signal_strings_are_stored_once_and_shown_as_a_table(tmp_path, cranfield_docs):
    path = write_tsv(tmp_path / "cran.tsv", cranfield_docs[:200])
    index = open_index(build_index(path, tmp_path / "idx", quiet=True))
    assert not list(index.path.glob("signals.parquet"))  # the strings live in signal_bytes only
    table = index.signal_table()
    assert table.num_rows == index.n_terms
    assert table.column("hash").to_numpy().tolist() == index.hashes().tolist()
    strings = table.column("signal").to_pylist()
    assert strings == [index.signal(t) for t in range(index.n_terms)]
    settings = index.settings
    assert all(signal_hash(s, settings.hash.seed, settings.hash.bits) == h
               for s, h in zip(strings[:500], index.hashes()[:500].tolist(), strict=True))


def test_signal_table_refuses_lying_offsets(tmp_path, cranfield_docs):
    out = build_index(write_tsv(tmp_path / "cran.tsv", cranfield_docs[:50]), tmp_path / "idx", quiet=True)
    path = open_index(out).path / "signal_offsets.npy"
    offsets = np.load(path, mmap_mode="r+")
    offsets[len(offsets) // 2] = offsets[-1] + 10**9  # open checks only the ends of this array
    offsets.flush()
    del offsets
    with pytest.raises(IndexFormatError, match="signal_offsets"):
        open_index(out).signal_table()


def test_tsv_and_jsonl_give_the_same_index(tmp_path):
    docs = [("d3", "Solar wind and the magnetosphere"), ("d1", "Wind tunnels"), ("d2", "")]
    tsv = write_tsv(tmp_path / "c.tsv", docs)
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs), encoding="utf-8")
    a = open_index(build_index(tsv, tmp_path / "a", quiet=True))
    b = open_index(build_index(jsonl, tmp_path / "b", quiet=True))
    for name in ("vocab", "postings_indptr", "postings_long", "postings_rank", "postings_docs", "forward_indptr",
                 "forward_terms", "doc_rank",
                 "signal_offsets", "signal_bytes"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.doc_ids() == b.doc_ids() == ["d3", "d1", "d2"]
    assert a.doc_rank.tolist() == [2, 0, 1]
    assert a.manifest.ids["integer"] is False


def test_jsonl_fields_are_card_signals(tmp_path):
    cards = [("c1", ["Weather forecast", "forecast api", "weather"]), ("c2", ["stock prices"])]
    path = tmp_path / "cards.jsonl"
    path.write_text("".join(json.dumps({"id": i, "fields": f}) + "\n" for i, f in cards), encoding="utf-8")
    index = open_index(build_index(path, tmp_path / "idx", cap=4, quiet=True))
    ref = ReferenceIndex([i for i, _ in cards], [card_signals(f, cap=4) for _, f in cards], cap=4)
    assert_matches_reference(index, ref)
    assert "api weather" not in index_contents(index)  # bigrams never span values


def test_integer_ids_are_ranked_as_integers(tmp_path):
    path = write_tsv(tmp_path / "c.tsv", [("10", "a b"), ("9", "c d"), ("100", "e f"), ("-1", "g h")])
    index = open_index(build_index(path, tmp_path / "idx", quiet=True))
    assert index.doc_rank.tolist() == [2, 1, 3, 0]


def test_bm25_index_has_term_frequencies_and_lengths(tmp_path):
    path = write_tsv(tmp_path / "c.tsv", [("1", "dog dog cat the"), ("2", "cat bird")])
    index = open_index(build_index(path, tmp_path / "idx", scoring="bm25", quiet=True))
    assert index.scoring == "bm25"
    tf = {}
    docs = gather(index.postings, [0], [index.postings_length])
    for t in range(index.n_terms):
        for j in range(*index.span(t)):
            tf[(index.signal(t), int(docs[j]))] = int(index.postings_tf[j])
    assert tf == {("dog", 0): 2, ("cat", 0): 1, ("cat", 1): 1, ("bird", 1): 1}
    assert index.doc_lengths.tolist() == [3, 2]


# -- bad input: message with file and line, exit status 2, no index written ---------------------------

BAD_INPUTS = {
    "no tab": (b"1\tfine\n2 no tab here\n", 2, "no tab"),
    "empty id": (b"1\tfine\n\tempty id\n", 2, "empty id"),
    "non-utf8": (b"1\tfine\n2\tbad \xff byte\n", 2, "UTF-8"),
    "duplicate": (b"1\tfine\n2\tok\n1\tagain\n", 3, "duplicate document id '1' \\(first at line 1\\)"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_fails_with_file_and_line(tmp_path, case, capsys):
    raw, line, message = BAD_INPUTS[case]
    path = tmp_path / "c.tsv"
    path.write_bytes(raw)
    with pytest.raises(InputError, match=rf"c\.tsv:{line}: .*{message}"):
        build_index(path, tmp_path / "idx", quiet=True)
    assert cli_main(["build-index", "--collection", str(path), "--out", str(tmp_path / "idx"), "--quiet"]) == 2
    assert f"c.tsv:{line}" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv"]  # nothing written, no temp left


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_skip_bad_lines_counts_and_lists_them(tmp_path, case):
    raw, line, _ = BAD_INPUTS[case]
    path = tmp_path / "c.tsv"
    path.write_bytes(raw)
    index = open_index(build_index(path, tmp_path / "idx", skip_bad_lines=True, quiet=True))
    assert index.manifest.input["lines_skipped"] == 1
    assert index.manifest.input["skipped"][0]["line"] == line
    assert index.n_docs == raw.count(b"\n") - 1


def test_empty_collection_is_an_error(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="empty collection"):
        build_index(path, tmp_path / "idx", quiet=True)
    assert not (tmp_path / "idx").exists()


def test_bad_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "ok"}\n{"id": "b", "text": 5}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.jsonl:2: "):
        build_index(path, tmp_path / "idx", quiet=True)


def test_crlf_and_missing_final_newline(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_bytes(b"1\talpha beta\r\n2\tgamma")
    index = open_index(build_index(path, tmp_path / "idx", quiet=True))
    assert set(index_contents(index)) == {"alpha", "beta", "alpha beta", "gamma"}


# -- existing targets, format checks ------------------------------------------------------------------

def test_existing_index_needs_force_and_foreign_dirs_are_never_replaced(tmp_path):
    path = write_tsv(tmp_path / "c.tsv", [("1", "alpha")])
    out = build_index(path, tmp_path / "idx", quiet=True)
    with pytest.raises(SsrError, match="already exists"):
        build_index(path, out, quiet=True)
    build_index(path, out, force=True, quiet=True)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(SsrError, match="not an ssr index"):
        build_index(path, foreign, force=True, quiet=True)
    assert (foreign / "thesis.tex").read_text() == "precious"


def test_open_rejects_missing_truncated_corrupt_and_other_versions(tmp_path):
    path = write_tsv(tmp_path / "c.tsv", [("1", "alpha beta"), ("2", "beta gamma")])
    out = build_index(path, tmp_path / "idx", quiet=True)
    with pytest.raises(IndexFormatError, match="missing"):
        open_index(tmp_path / "nowhere")
    seg = open_index(out).path
    docs = seg / "postings_docs.npy"
    raw = docs.read_bytes()
    docs.write_bytes(raw[:-4])
    with pytest.raises(IndexFormatError, match="postings_docs.npy: .*truncated"):
        open_index(out)
    docs.write_bytes(raw[:-1] + bytes([raw[-1] ^ 0xFF]))
    open_index(out)  # same size: open is cheap and does not hash
    assert any("checksum mismatch" in p for p in verify_index(out))
    assert cli_main(["verify", str(out)]) == 2
    docs.write_bytes(raw)
    assert cli_main(["verify", str(out)]) == 0
    manifest = json.loads((seg / "manifest.json").read_text())
    manifest["format_version"] = 99
    (seg / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="checksum"):  # the commit point holds the manifest's sha256
        open_index(out)
    (seg / "manifest.json").write_text("{not json")
    with pytest.raises(IndexFormatError, match="checksum"):
        open_index(out)


def test_index_info_reports_counts_and_sizes(tmp_path, capsys):
    path = write_tsv(tmp_path / "c.tsv", [("1", "alpha beta"), ("2", "beta gamma")])
    out = build_index(path, tmp_path / "idx", quiet=True)
    assert cli_main(["index-info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"] == {"documents": 2, "terms": 5, "postings": 6, "empty_documents": 0}
    assert info["files"]["postings_docs.npy"] == (out / info["segment"] / "postings_docs.npy").stat().st_size
    assert cli_main(["index-info", str(out)]) == 0
    assert "postings     6" in capsys.readouterr().out


# -- hash collisions ---------------------------------------------------------------------------------

def test_collisions_are_detected_and_the_build_reseeds(tmp_path):
    words = [f"w{i}" for i in range(40)]
    docs = [" ".join(words[i : i + 3]) for i in range(0, 38)]
    ids = [str(i) for i in range(len(docs))]
    signal_set = set(ReferenceIndex.from_texts(ids, docs).df)

    def collides(seed: int, bits: int) -> bool:
        return len({signal_hash(s, seed, bits) for s in signal_set}) < len(signal_set)

    # a deliberately weak hash: the first width at which seed 0 collides but a later seed does not
    bits = next(b for b in range(8, 30) if collides(0, b) and not all(collides(s, b) for s in range(8)))
    first_clean = next(s for s in range(8) if not collides(s, bits))
    path = write_tsv(tmp_path / "c.tsv", list(zip(ids, docs, strict=True)))
    index = open_index(build_index(path, tmp_path / "idx", hash_bits=bits, chunk_docs=7, quiet=True))
    h = index.settings.hash
    assert h.seed == first_clean and len(h.collisions) == first_clean
    assert all(len(set(c["collision"])) == 2 for c in h.collisions)  # two distinct signals named
    assert_matches_reference(index, ReferenceIndex.from_texts(ids, docs))


def test_unavoidable_collisions_fail_clearly(tmp_path):
    docs = [(str(i), f"tok{i} other{i}") for i in range(40)]
    path = write_tsv(tmp_path / "c.tsv", docs)
    with pytest.raises(SsrError, match="collisions under 8 seeds"):
        build_index(path, tmp_path / "idx", hash_bits=4, quiet=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv"]


# -- interrupted builds -------------------------------------------------------------------------------

def _big_collection(path: Path, n: int) -> Path:
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(20000)])
    with open(path, "w") as f:
        for i in range(n):
            f.write(f"{i}\t{' '.join(vocab[rng.integers(0, 20000, 40)])}\n")
    return path


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_build_leaves_nothing_that_opens(tmp_path, how):
    path = _big_collection(tmp_path / "c.tsv", 60000)
    out = tmp_path / "idx"
    cmd = [sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(path), "--out", str(out),
           "--chunk-docs", "500", "--workers", "1", "--quiet"]
    # SIGINT at its default in the child: a shell's background job (`pytest ... &`) runs with SIGINT
    # ignored, which children inherit, and Python then never installs its Ctrl-C handler
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while time.time() < deadline and not list(out.glob(".staging-*/runs/run00001.local.npy")):
        time.sleep(0.05)
    assert proc.poll() is None, "build finished before it could be interrupted"
    proc.send_signal(how)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    with pytest.raises(IndexFormatError):
        open_index(out)
    if how == signal.SIGINT:
        assert not out.exists()  # the first build made the folder; it removes it on the way out
    else:
        # a killed process cannot clean up: its marker and staging folder stay; the next build
        # (no --force needed: nothing was ever committed) removes them
        assert len(list(out.glob(".staging-*"))) == 1
    build_index(path, out, quiet=True, chunk_docs=20000)
    assert open_index(out).n_docs == 60000
    assert list(out.glob(".staging-*")) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv", "idx"]


def test_duplicate_ids_are_found_across_many_chunks(tmp_path):
    """The seen ids are kept as merged runs (`DocIdTable`): a repeat of an id from any earlier chunk, far back
    or just before, is an error naming both lines, or a skipped line; the others are kept."""
    rows = [(f"d{i}", f"word{i} text") for i in range(60)]
    rows[41] = ("d3", "again")  # line 42 repeats line 4 (chunks of 2: ~20 chunks apart)
    rows[58] = ("d56", "again")  # line 59 repeats line 57 (the chunk before)
    path = write_tsv(tmp_path / "c.tsv", rows)
    with pytest.raises(InputError, match=r"c\.tsv:42: duplicate document id 'd3' \(first at line 4\)"):
        build_index(path, tmp_path / "idx", chunk_docs=2, quiet=True)
    index = open_index(build_index(path, tmp_path / "idx", chunk_docs=2, skip_bad_lines=True, quiet=True))
    assert [s["line"] for s in index.manifest.input["skipped"]] == [42, 59]
    assert sorted(index.doc_id_array().to_pylist()) == sorted({i for i, _ in rows})
