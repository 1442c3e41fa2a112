"""Fault injection (issue 12): corrupt files, lying arrays, edited manifests, kill -9, races.

Every case must end in an error naming the file (exit status 2 from the CLI), never a crash
(a signal or a traceback), and `ssr verify` must catch every byte flip. The bigger campaign
(more seeds, every byte position class, counts for RESULTS.md) is benchmarks/fault_campaign.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from faults_common import QUERIES, assert_clean_error, copy, make_base, ssr, ssr_many

from ssr_engine import open_index, verify_index
from ssr_engine.errors import IndexFormatError, SsrError
from ssr_engine.generations import read_commit, seal
from ssr_engine.kernels.packed import gather, pack32
from ssr_engine.search import Searcher


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_base(tmp_path_factory)


def edit_array(index_dir: Path, name: str, fn) -> None:
    path = open_index(index_dir).path / f"{name}.npy"
    arr = np.load(path, mmap_mode="r+")
    fn(arr)
    arr.flush()
    del arr


def set_packed(index_dir: Path, name: str, edits: list[tuple[int, int]]) -> None:
    """Values of a packed column ("forward_terms" or "postings_docs") set: (position, value < 2**width)
    each, the others kept."""
    ix = open_index(index_dir)
    words, width = ix.forward if name == "forward_terms" else ix.postings
    n = ix.forward_length if name == "forward_terms" else ix.postings_length
    values = gather((np.array(words), width), [0], [n])
    ix.close()
    for pos, value in edits:
        assert 0 <= value < 2**width
        values[pos] = value
    edit_array(index_dir, name, lambda arr: arr.__setitem__(slice(None), pack32(values, width)))


def set_forward_term(index_dir: Path, pos: int, value: int) -> None:
    """Term `pos` of the packed forward rows set to `value` (< 2**width), the others kept."""
    set_packed(index_dir, "forward_terms", [(pos, value)])


def query_term(index_dir: Path) -> int:
    """The most frequent term of the first query (its postings are read by every method)."""
    s = Searcher(index_dir)
    qb = s.query_batch(QUERIES[:1])
    t = int(qb.terms[np.argmax(qb.df)])
    s.index.close()
    return t


# ---- lying arrays that pass the open-time checks: the kernels' guards -------------------------


@pytest.mark.parametrize("case", ["posting_is_n", "posting_huge", "postings_descending"])
def test_lying_postings_are_an_error_in_every_method(base, tmp_path, case):
    _, out, bm25 = base
    for src, methods in ((out, ("ssr",)), (bm25, ("bm25",))):
        w = copy(src, tmp_path / f"{src.name}-{case}")
        t = query_term(w) if src is out else None
        ix = open_index(w)
        if t is None:
            t = int(np.argmax(ix.df()))
        a, b = ix.span(t)
        n, width = ix.n_docs, ix.postings_width
        first, second = (int(x) for x in gather(ix.postings, [a], [2]))
        ix.close()
        assert n < 2**width  # else no packed posting could be >= N
        edits = {"posting_is_n": [(a + (b - a) // 2, n)], "posting_huge": [(b - 1, 2**width - 1)],
                 "postings_descending": [(a, second), (a + 1, first)]}[case]
        set_packed(w, "postings_docs", edits)
        from ssr_engine.retrieval import open_retriever

        for method in methods:
            r = open_retriever(w, method)
            words = " ".join(ix.signal(t) for _ in range(1)) if src is bm25 else QUERIES[0]
            with pytest.raises(IndexFormatError, match="postings_docs.npy"):
                r.search_batch([words], 10)
            with pytest.raises(IndexFormatError, match="postings_docs.npy"):
                r.pool_sizes([words])
        with pytest.raises(IndexFormatError, match="postings"):
            open_index(w, verify=True)
        assert verify_index(w)


def test_lying_forward_terms_are_an_error_in_the_scan(base, tmp_path):
    _, out, _ = base
    w = copy(out, tmp_path / "w")
    ix = open_index(w)
    a = int(ix.forward_indptr[0])
    assert int(ix.forward_indptr[1]) - a >= 2
    first = int(ix.forward_row(0)[0])
    ix.close()
    set_forward_term(w, a + 1, first)  # document 0's row no longer ascending
    with pytest.raises(IndexFormatError, match="forward_terms.npy"):
        Searcher(w, method="exhaustive").search_batch(QUERIES, 10)
    scan, verify = ssr_many(["search", "--index", str(w), "--method", "exhaustive", *QUERIES],
                            ["search", "--index", str(w), "--verify", *QUERIES])
    assert_clean_error(scan, "forward_terms.npy")
    assert_clean_error(verify, "checksum mismatch")


def test_a_forward_term_just_past_the_vocabulary_is_an_error_in_the_scan(base, tmp_path):
    """Term id V as the last of a row (found by the fault campaign: the scan's bitset has room up
    to the next multiple of 64, so only a comparison with V catches it)."""
    _, out, _ = base
    w = copy(out, tmp_path / "w")
    ix = open_index(w)
    v, last = ix.n_terms, int(ix.forward_indptr[2]) - 1
    ix.close()
    set_forward_term(w, last, v)  # V fits the width unless V is a power of two (the assert says so)
    with pytest.raises(IndexFormatError, match="forward_terms.npy"):
        Searcher(w, method="exhaustive").search_batch(QUERIES, 10)


@pytest.mark.parametrize("method,name", [("ssr", "postings_docs"), ("exhaustive", "forward_terms")])
def test_lying_segment_of_a_live_index_is_an_error(base, tmp_path, method, name):
    """Multi-segment search (`parts`) guards its kernel calls as a single index does."""
    from ssr_engine.live import LiveIndex
    from ssr_engine.retrieval import open_retriever

    _, out, _ = base
    w = copy(out, tmp_path / "w")
    LiveIndex(w).add([(f"new{i}", "w1 w2 w3 w5") for i in range(20)])
    LiveIndex(w).delete(["3"])
    seg = w / read_commit(w).segments[-1].name
    arr = np.load(seg / f"{name}.npy", mmap_mode="r+")
    arr[0] = 2**32 - 1  # (packed at 8 bits for its 20 documents) the segment's first posting (of term 0) = 255 >= N,
    # or (forward rows packed at 3 bits for its 7 terms) the first term of document 0 = 7 = V
    arr.flush()
    del arr
    r = open_retriever(w, method)
    queries = ["w1 w2 w3 w5"]  # every signal of the added segment: its term 0 included
    with pytest.raises(IndexFormatError, match=f"{name}.npy"):
        r.search_batch(queries, 10)
    assert verify_index(w)


# ---- structural edits: caught at open (O(N) arrays, O(V) arrays' ends) or by the first lookup ----


STRUCTURAL = {
    "postings_indptr+1e6": ("postings_indptr", lambda a: a.__setitem__(len(a) // 2, a[len(a) // 2] + 1_000_000)),
    "postings_indptr_end": ("postings_indptr", lambda a: a.__setitem__(-1, a[-1] - 1)),
    # format 7's directory (`kernels.lists`): checked whole at open (O(V / 64))
    "postings_long_flip": ("postings_long", lambda a: a.__setitem__(0, a[0] ^ 1)),
    "postings_rank_edit": ("postings_rank", lambda a: a.__setitem__(1, a[1] + 1)),
    # a high bit of the entry's own width (offsets are int32 or int64: format.offsets_dtype)
    "forward_indptr_flip": ("forward_indptr", lambda a: a.__setitem__(7, a[7] ^ (1 << (8 * a.dtype.itemsize - 2)))),
    "forward_indptr_start": ("forward_indptr", lambda a: a.__setitem__(0, 3)),
    "doc_rank_duplicate": ("doc_rank", lambda a: a.__setitem__(0, a[1])),
    "doc_rank_out_of_range": ("doc_rank", lambda a: a.__setitem__(10, len(a))),
    "vocab_unsorted": ("vocab", lambda a: a.__setitem__(0, a[-1])),  # format 4's 32-bit keys may repeat: a descent
    "signal_offsets_jump": ("signal_offsets", lambda a: a.__setitem__(3, 10**9)),
    "signal_offsets_end": ("signal_offsets", lambda a: a.__setitem__(-1, a[-1] + 1)),
}
# edits inside the O(V) arrays are found by the first lookup that reads them: the term queried
def _literal_term(ix, entry):
    """The term whose string is table entry `entry` alone (format 4: signal_offsets indexes literals)."""
    from ssr_engine.kernels.strings import parts

    return next(t for t in range(ix.n_terms) if parts(ix.signal_codes, ix.string_bits, t) == (entry, -1))


# the term each lookup case queries (given the intact index)
def _long_term(ix, r):
    """The term whose postings start at entry r of postings_indptr (format 7: the r-th term of df != 1)."""
    if ix.postings_long is None:
        return r
    bits = np.unpackbits(ix.postings_long.view(np.uint8), bitorder="little")[: ix.n_terms]
    return int(np.flatnonzero(bits)[r])


READ_BY_LOOKUP = {"postings_indptr+1e6": lambda ix: _long_term(ix, len(ix.postings_indptr) // 2),
                  "vocab_unsorted": lambda ix: 0,
                  "signal_offsets_jump": lambda ix: _literal_term(ix, 3)}


@pytest.fixture(scope="module")
def term_strings(base):
    ix = open_index(base[1])
    strings = [ix.signal(t) for t in range(ix.n_terms)]
    return {case: strings[pick(ix)] for case, pick in READ_BY_LOOKUP.items()}


@pytest.mark.parametrize("case", sorted(STRUCTURAL))
def test_structural_edits_are_refused(base, term_strings, tmp_path, case):
    _, out, _ = base
    name, fn = STRUCTURAL[case]
    w = copy(out, tmp_path / "w")
    edit_array(w, name, fn)
    if case in READ_BY_LOOKUP:
        query = term_strings[case]
        for method in ("ssr", "maxscore", "exhaustive"):
            with pytest.raises(IndexFormatError, match=f"{name}.npy"):
                Searcher(w, method=method).search(query, 10)
    else:
        with pytest.raises(IndexFormatError, match=f"{name}.npy"):
            open_index(w)
    with pytest.raises(IndexFormatError, match=f"{name}.npy"):
        open_index(w, verify=True)
    assert any(f"{name}.npy" in p for p in verify_index(w))


def test_structural_edits_exit_2_from_the_cli(base, term_strings, tmp_path):
    _, out, _ = base
    commands, names = [], []
    for case in ("postings_indptr+1e6", "forward_indptr_flip", "doc_rank_duplicate", "vocab_unsorted"):
        name, fn = STRUCTURAL[case]
        w = copy(out, tmp_path / case)
        edit_array(w, name, fn)
        query = term_strings[case] if case in READ_BY_LOOKUP else QUERIES[0]
        for extra in ((), ("--method", "exhaustive"), ("--explain",)):
            commands.append(["search", "--index", str(w), *extra, query])
        commands.append(["verify", str(w)])
        names += [name] * 4
    for proc, name in zip(ssr_many(*commands), names, strict=True):
        assert_clean_error(proc, f"{name}.npy")


def test_bm25_lookup_checks_the_terms_it_reads(base, tmp_path):
    _, _, bm25 = base
    w = copy(bm25, tmp_path / "w")
    ix = open_index(w)
    word, t = next((ix.signal(t), t) for t in range(ix.n_terms) if ix.signal(t) == "w1")
    entry = next(r for r in range(len(ix.postings_indptr) - 1) if _long_term(ix, r) == t) + 1  # its end
    ix.close()
    edit_array(w, "postings_indptr", lambda a: a.__setitem__(entry, a[-1] + 5))
    with pytest.raises(IndexFormatError, match="postings_indptr.npy"):
        from ssr_engine.retrieval import open_retriever

        open_retriever(w, "bm25").search(word, 10)
    assert_clean_error(ssr("search", "--index", str(w), "--method", "bm25", word), "postings_indptr.npy")


# ---- byte flips: verify catches every one, nothing crashes ----------------------------------------


def test_every_byte_flip_is_caught_by_verify_and_never_crashes(base, tmp_path):
    _, out, _ = base
    rnd = random.Random(12)
    seg = open_index(out).path
    targets = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and p.stat().st_size
                     and p.name != "write.lock")
    assert len(targets) >= 12  # owner, commit, manifest, 8 arrays, the doc id table
    for rel in targets:
        w = tmp_path / f"flip-{rel.name}"
        copy(out, w)
        path = w / rel
        raw = bytearray(path.read_bytes())
        pos = rnd.randrange(len(raw))
        raw[pos] ^= 1 << rnd.randrange(8)
        path.write_bytes(bytes(raw))
        assert verify_index(w), f"flip at {rel}:{pos} not caught"
        try:  # open and search may succeed (content flips keep every invariant) but never crash
            Searcher(w).search_batch(QUERIES, 10)
            Searcher(w, method="exhaustive").search_batch(QUERIES, 10)
        except SsrError:
            pass
        shutil.rmtree(w)
    assert seg.is_dir()


def test_a_garbled_npy_header_is_a_clear_error(base, tmp_path):
    """A '(' in a header's padding makes NumPy's header parser raise tokenize.TokenError (found by
    the fault campaign as a traceback)."""
    _, out, _ = base
    w = copy(out, tmp_path / "w")
    path = open_index(w).path / "doc_rank.npy"
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"}") + 5] = ord("(")  # inside the header's space padding
    path.write_bytes(bytes(raw))
    with pytest.raises(IndexFormatError, match="doc_rank.npy: corrupt array file"):
        open_index(w)
    assert verify_index(w)


def _garble_header(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"}") + 5] = ord("(")  # inside the header's space padding
    path.write_bytes(bytes(raw))


def _swap_two(path: Path) -> None:
    a = np.load(path)
    a[[0, -1]] = a[[-1, 0]]
    np.save(path, a)


# a live segment's id table (`live_files.IdTable`): a writer's open finds each corruption but the last (an id's
# bytes: the look-up compares them, so that id alone is missed), `ssr verify` every one by the manifest's checksums
ID_TABLE_FAULTS = {
    "garbled header": ("hash", _garble_header),
    "cut to half": ("offsets", lambda p: os.truncate(p, p.stat().st_size // 2)),
    "hashes out of order": ("hash", _swap_two),
    "doc repeated": ("doc", lambda p: np.save(p, np.concatenate([np.load(p)[:1], np.load(p)[:-1]]))),
    "an id's byte": ("bytes", lambda p: np.save(p, np.load(p) ^ np.uint8(1))),
}


@pytest.mark.parametrize("case", sorted(ID_TABLE_FAULTS))
def test_a_corrupt_live_id_table_is_an_error(base, tmp_path, case):
    from ssr_engine.live import LiveIndex

    _, out, _ = base
    w = copy(out, tmp_path / "w")
    LiveIndex(w, merge=False).add([(f"new{i}", "w1 w2") for i in range(40)])
    name, corrupt = ID_TABLE_FAULTS[case]
    seg = w / read_commit(w).segments[-1].name
    corrupt(seg / f"live-ids.{name}.npy")
    if case != "an id's byte":
        with pytest.raises(IndexFormatError, match=f"{seg}.*id table.*removing them all repairs"):
            LiveIndex(w).delete(["new3"])
    problems = verify_index(w)
    assert any(f"live-ids.{name}.npy" in p for p in problems), problems
    assert_clean_error(ssr("verify", str(w)), f"live-ids.{name}.npy")
    for p in seg.glob("live-ids.*.npy"):  # the repair the message names (verify then misses them in the manifest)
        p.unlink()
    assert LiveIndex(w).delete(["new3"])["deleted"] == 1


# ---- the manifest, settings included, under checksums ------------------------------------------


def reseal_manifest(index_dir: Path, change) -> None:
    """Edit the segment manifest and re-seal it and the commit point (an attacker who knows the scheme)."""
    commit = read_commit(index_dir)
    seg = index_dir / commit.segments[0].name / "manifest.json"
    body = json.loads(seg.read_text())
    body.pop("checksum")
    change(body)
    text = seal(body)
    seg.write_text(text)
    cpath = commit.path
    cbody = json.loads(cpath.read_text())
    cbody.pop("checksum")
    cbody["segments"][0]["manifest_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    cpath.write_text(seal(cbody))


def test_settings_edits_fail_the_manifest_checksum(base, tmp_path):
    _, out, _ = base
    edited = []
    for key, value in (("seed", 1), ("bits", 32)):
        w = copy(out, tmp_path / f"w-{key}")
        seg = open_index(w).path / "manifest.json"
        seg.write_text(seg.read_text().replace(f'"{key}": {64 if key == "bits" else 0}', f'"{key}": {value}'))
        with pytest.raises(IndexFormatError, match="manifest.json: differs from the checksum in the commit"):
            open_index(w)
        assert verify_index(w)
        edited.append(w)
    for proc in ssr_many(*(["search", "--index", str(w), QUERIES[0]] for w in edited)):
        assert_clean_error(proc, "manifest.json")


RESEALED = [
    (lambda m: m["counts"].__setitem__("documents", "many"), "documents must be a non-negative integer"),
    (lambda m: m["counts"].pop("terms"), "missing 'terms'"),
    (lambda m: m["counts"].__setitem__("postings", -1), "postings must be a non-negative integer"),
    (lambda m: m["counts"].__setitem__("documents", 2**70), "entries, expected"),
    (lambda m: m["signals"]["hash"].__setitem__("bits", 99), "bits must be in 1..64"),
    (lambda m: m["signals"].__setitem__("cap", "x"), "cap must be"),
    (lambda m: m.pop("signals"), "missing 'signals'"),
    (lambda m: m["files"].pop("vocab.npy"), "vocab.npy: not listed in the manifest"),
]


def test_resealed_manifest_with_bad_values_is_a_clear_error(base, tmp_path):
    _, out, _ = base
    edited = []
    for i, (change, match) in enumerate(RESEALED):
        w = copy(out, tmp_path / f"w{i}")
        reseal_manifest(w, change)
        with pytest.raises(IndexFormatError, match=match):
            open_index(w)
        edited.append(w)
    for proc in ssr_many(*(["index-info", str(w)] for w in edited)):
        assert_clean_error(proc, "manifest")
