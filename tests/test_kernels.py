"""Kernels against the pure-Python reference, on CSR arrays built here from the reference's signal sets."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssr_engine.ids import id_order
from ssr_engine.kernels import indexing, spans, topk
from ssr_engine.kernels import ssr as kernels
from ssr_engine.kernels.forward import width_for
from ssr_engine.kernels.packed import PLAIN, byte_width_for, pack32
from ssr_engine.reference import ReferenceIndex

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]


class Arrays:
    """The index arrays of a ReferenceIndex: inverted CSR, forward CSR, doc_rank."""

    def __init__(self, ref: ReferenceIndex):
        self.ref = ref
        vocab = sorted(set().union(*ref.doc_signals)) if ref.doc_signals else []
        # shuffle term ids so that id order is unrelated to string and weight order
        rng = np.random.default_rng(len(vocab))
        perm = rng.permutation(len(vocab))
        self.term = {s: int(perm[i]) for i, s in enumerate(vocab)}
        self.strings = {t: s for s, t in self.term.items()}
        v, n = len(vocab), ref.n_docs
        fwd = [sorted(self.term[s] for s in sigs) for sigs in ref.doc_signals]
        self.fwd_indptr = np.zeros(n + 1, dtype=np.int64)
        self.fwd_indptr[1:] = np.cumsum([len(f) for f in fwd])
        # the rows packed as format 5 writes them (`kernels.forward`); the kernels read them as `fwd`
        self.fwd_width = width_for(v)
        self.fwd_terms = pack32(np.array([t for f in fwd for t in f], dtype=np.uint32), self.fwd_width)
        post: list[list[int]] = [[] for _ in range(v)]
        for d, f in enumerate(fwd):
            for t in f:
                post[t].append(d)
        self.indptr = np.zeros(v + 1, dtype=np.int64)
        self.indptr[1:] = np.cumsum([len(p) for p in post])
        self.docs = np.array([d for p in post for d in p], dtype=np.uint32)
        self.doc_rank = np.zeros(n, dtype=np.uint32)
        for r, i in enumerate(id_order(ref.ids)):
            self.doc_rank[i] = r
        self.n_terms = v

    @property
    def fwd(self) -> tuple[np.ndarray, int]:
        return self.fwd_terms, self.fwd_width

    postings_layout = "bytes"  # how `postings` gives `docs` to the kernels

    @property
    def postings(self) -> np.ndarray | tuple[np.ndarray, int]:
        """The postings column the kernels take (`kernels.packed`), as `postings_layout` says: "bytes",
        packed as format 6 writes them (at `byte_width_for(N)` bits, or wider when a test wrote a value >= N
        into `docs`; the plain array where that is 32 bits); "bits", at `width_for` bits (`get32`); "plain"
        (formats 2-5)."""
        top = max(self.ref.n_docs - 1, int(self.docs.max(initial=0)))
        width = byte_width_for(top + 1) if self.postings_layout == "bytes" else width_for(top + 1)
        if self.postings_layout == "plain" or width == PLAIN or width == 32:
            return self.docs
        words = pack32(self.docs, width)
        return (words.view(np.uint8), width) if self.postings_layout == "bytes" else (words, width)

    def readonly(self) -> None:
        for a in (self.fwd_indptr, self.fwd_terms, self.indptr, self.docs, self.doc_rank):
            a.setflags(write=False)

    def batch(self, queries: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat query batch: known terms of each query in ascending weight order."""
        offsets, terms, weights = [0], [], []
        for q in queries:
            known = [(self.ref.weight(s), self.term[s]) for s in self.ref.query_signals(q) if s in self.term]
            known.sort()
            terms += [t for _, t in known]
            weights += [w for w, _ in known]
            offsets.append(len(terms))
        return np.array(offsets, dtype=np.int64), np.array(terms, dtype=np.int64), np.array(weights)

    def search(self, queries, k, method="ssr", **kw):
        off, terms, weights = self.batch(queries)
        if method == "ssr":
            return kernels.search_batch(self.indptr, self.postings, self.doc_rank, self.ref.n_docs, off, terms, weights,
                                        k, **kw)
        return kernels.exhaustive_batch(self.fwd_indptr, self.fwd, self.doc_rank, self.n_terms, off, terms,
                                        weights, k, **kw)


def expected(ref: ReferenceIndex, query: str, k):
    hits = ref.search(query, k)
    return hits.ids.tolist(), hits.scores.tolist(), hits.matches.tolist()


def check(arrays: Arrays, queries, k, method="ssr", **kw):
    off, docs, scores, matches = arrays.search(queries, k, method, **kw)
    assert off.shape == (len(queries) + 1,)
    for i, q in enumerate(queries):
        a, b = off[i], off[i + 1]
        ids = [arrays.ref.ids[d] for d in docs[a:b]]
        exp_ids, exp_scores, exp_matches = expected(arrays.ref, q, k)
        assert ids == exp_ids, q
        # bit for bit: compare the float64 bit patterns
        assert scores[a:b].view(np.uint64).tolist() == np.array(exp_scores, dtype=np.float64).view(np.uint64).tolist()
        assert matches[a:b].tolist() == exp_matches


text_st = st.lists(st.sampled_from(WORDS + ["the", "x", "Alpha"]), min_size=0, max_size=12).map(" ".join)


@st.composite
def corpus_st(draw):
    base = draw(st.lists(text_st, min_size=1, max_size=25))
    # duplicates force ties on score and matches: the id decides
    dups = draw(st.lists(st.integers(0, len(base) - 1), max_size=10))
    texts = base + [base[i] for i in dups]
    if draw(st.booleans()):
        ids = [str(x) for x in draw(st.lists(st.integers(-50, 10_000), min_size=len(texts), max_size=len(texts),
                                             unique=True))]
    else:
        ids = draw(st.lists(st.text("abc019", min_size=1, max_size=4), min_size=len(texts), max_size=len(texts),
                            unique=True))
    cap = draw(st.sampled_from([3, 64]))
    return ReferenceIndex.from_texts(ids, texts, cap=cap)


k_st = st.one_of(st.none(), st.integers(1, 40))
queries_st = st.lists(st.one_of(text_st, st.sampled_from(["", "the of", "omega psi", "alpha omega"])), min_size=1,
                      max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus_st(), queries_st, k_st, st.sampled_from([1, 3, 1 << 16]))
def test_inverted_matches_reference(ref, queries, k, block):
    check(Arrays(ref), queries, k, block=block)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus_st(), queries_st, k_st)
def test_exhaustive_matches_reference(ref, queries, k):
    check(Arrays(ref), queries, k, method="exhaustive")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus_st(), queries_st, k_st, st.integers(1, 5))
def test_exhaustive_equals_inverted_bit_for_bit(ref, queries, k, chunks):
    arrays = Arrays(ref)
    inv = arrays.search(queries, k, n_chunks=chunks)
    exh = arrays.search(queries, k, method="exhaustive", n_chunks=chunks)
    for a, b in zip(inv, exh, strict=True):
        assert a.dtype == b.dtype
        assert a.tobytes() == b.tobytes()


def random_ref(n_docs=400, seed=0, dup_every=7):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(60)]
    texts = []
    for d in range(n_docs):
        if d % dup_every == 0 and texts:
            texts.append(texts[rng.integers(len(texts))])
        else:
            texts.append(" ".join(rng.choice(vocab, size=rng.integers(0, 15), p=None)))
    ids = [str(x) for x in rng.permutation(n_docs * 3)[:n_docs]]
    return ReferenceIndex.from_texts(ids, texts), vocab, rng


def test_k_edges_and_empty_results():
    ref, vocab, rng = random_ref()
    arrays = Arrays(ref)
    queries = ["w1 w2 w3", "w5", "", "the and of", "unseen words only", "w7 unseen", "w1 w2 w3 w4 w5 w6 w7 w8"]
    for k in (1, 2, 10, 10_000, None):
        check(arrays, queries, k)
        check(arrays, queries, k, method="exhaustive")
    off, docs, scores, matches = arrays.search(["", "unseen", "the"], 10)
    assert off.tolist() == [0, 0, 0, 0] and len(docs) == len(scores) == len(matches) == 0
    # k larger than the candidate pool: exactly the candidates, no padding
    off, docs, scores, _ = arrays.search(["w5"], 10_000)
    assert len(docs) == len(expected(ref, "w5", None)[0]) < ref.n_docs
    assert (scores > 0).all()


def test_empty_batch_and_empty_index():
    ref, _, _ = random_ref(50)
    arrays = Arrays(ref)
    off, docs, _, _ = arrays.search([], 10)
    assert off.tolist() == [0] and len(docs) == 0
    off, docs, _, _ = arrays.search([], 10, method="exhaustive")
    assert off.tolist() == [0] and len(docs) == 0
    empty = Arrays(ReferenceIndex.from_texts(["a", "b"], ["", "the"]))
    assert empty.search(["alpha"], None)[0].tolist() == [0, 0]
    assert empty.search(["alpha"], None, method="exhaustive")[0].tolist() == [0, 0]


def test_readonly_and_memory_mapped_arrays(tmp_path):
    ref, vocab, rng = random_ref(300, seed=3)
    queries = [" ".join(rng.choice(vocab, size=rng.integers(1, 6))) for _ in range(30)]
    arrays = Arrays(ref)
    for name in ("indptr", "docs", "doc_rank", "fwd_indptr", "fwd_terms"):
        np.save(tmp_path / f"{name}.npy", getattr(arrays, name))
        setattr(arrays, name, np.load(tmp_path / f"{name}.npy", mmap_mode="r"))
        assert not getattr(arrays, name).flags.writeable
    arrays.postings_layout = "plain"  # the mapped docs as they are
    for k in (1, 10, None):
        check(arrays, queries, k)
        check(arrays, queries, k, method="exhaustive")
    arrays = Arrays(ref)
    arrays.readonly()
    arrays.postings_layout = "plain"
    check(arrays, queries, 5)


def test_one_and_two_threads_identical():
    ref, vocab, rng = random_ref(2000, seed=5, dup_every=3)
    queries = [" ".join(rng.choice(vocab, size=rng.integers(0, 8))) for _ in range(64)]
    arrays = Arrays(ref)
    before = numba.get_num_threads()
    results = {}
    try:
        for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(threads)
            for method in ("ssr", "exhaustive"):
                for block in (64, 1 << 16):
                    if method == "exhaustive" and block != 64:
                        continue
                    kw = {"block": block} if method == "ssr" else {}
                    results[threads, method, block] = [a.tobytes() for a in arrays.search(queries, 20, method, **kw)]
    finally:
        numba.set_num_threads(before)
    values = list(results.values())
    assert all(v == values[0] for v in values)
    check(arrays, queries[:10], 20)


def test_exhaustive_rejects_inconsistent_weights():
    with pytest.raises(ValueError, match="different weights"):
        kernels.query_term_table(np.array([0, 1, 2]), np.array([3, 3]), np.array([1.0, 2.0]), 10)


def test_spans_equal():
    a = np.frombuffer(b"alphabetagamma", dtype=np.uint8)
    a_off = np.array([0, 5, 9, 14])
    b = np.frombuffer(b"betaalphagammb", dtype=np.uint8)
    b_off = np.array([0, 4, 9, 14])
    out = spans.spans_equal(a, a_off, np.array([0, 1, 2, 0]), b, b_off, np.array([1, 0, 2, 0]))
    assert out.tolist() == [True, True, False, False]


def test_span_equal_sees_a_difference_at_every_byte():
    """Spans of 0-40 bytes (one masked word, words with an overlapping last one), at the array's end or not:
    one byte changed anywhere makes them differ."""
    base = np.random.default_rng(1).integers(0, 256, 40).astype(np.uint8)
    for n in range(41):
        for changed in [None, *range(n)]:
            other = base[:n].copy()
            if changed is not None:
                other[changed] ^= 1 << (changed % 8)
            data = np.concatenate([base[:n], other, base[:n]])  # the last span ends the array
            offsets = np.array([0, n, 2 * n, 3 * n])
            out = spans.spans_equal(data, offsets, np.array([0, 2, 0]), data, offsets, np.array([1, 1, 2]))
            assert out.tolist() == [changed is None, changed is None, True], (n, changed)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=20), min_size=1, max_size=12))
def test_span_helpers_agree_with_python_bytes(words):
    data = np.frombuffer(b"".join(words) or b"\0", dtype=np.uint8)
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in words], out=offsets[1:])
    n = len(words)
    pairs = np.array([(i, j) for i in range(n) for j in range(n)], dtype=np.int64)
    eq = spans.spans_equal(data, offsets, pairs[:, 0], data, offsets, pairs[:, 1])
    assert eq.tolist() == [words[i] == words[j] for i, j in pairs.tolist()]
    for i, j in pairs.tolist():
        want = (words[i] > words[j]) - (words[i] < words[j])
        assert _compare(data, offsets, i, j) == want
    picks = np.array(list(reversed(range(n))), dtype=np.int64)
    g_off, g_data = spans.gather_spans(data, offsets, picks)
    assert [g_data[g_off[i]:g_off[i + 1]].tobytes() for i in range(n)] == [words[p] for p in picks]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([b"", b"a", b"ab", b"ba", b"abc"])), min_size=1,
                max_size=30))
def test_term_strings_keeps_first_occurrences_and_finds_the_first_collision(signals):
    """Signals (hash label, string) in signal order: each term (label) gets its first occurrence's string,
    and the first later signal whose string differs from its term's is reported (a collision), else -1."""
    labels = sorted({t for t, _ in signals})
    local = np.array([labels.index(t) for t, _ in signals], dtype=np.uint32)
    rep = np.array([next(s for s, (t, _) in enumerate(signals) if t == label) for label in labels], dtype=np.int64)
    words = [w for _, w in signals]
    data = np.frombuffer(b"".join(words) or b"\0", dtype=np.uint8)
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in words], out=offsets[1:])
    str_off, str_bytes, first = indexing.term_strings(data, offsets, local, rep)
    want = next((s for s, (t, w) in enumerate(signals) if w != words[rep[labels.index(t)]]), -1)
    assert first == want
    if want < 0:
        assert [str_bytes[str_off[g]:str_off[g + 1]].tobytes() for g in range(len(labels))] == \
            [words[r] for r in rep]


@numba.njit
def _compare_kernel(data, offsets, i, j):
    a, b = offsets[i], offsets[j]
    return spans.span_compare(data, a, offsets[i + 1] - a, data, b, offsets[j + 1] - b)


def _compare(data, offsets, i, j):
    return int(_compare_kernel(data, offsets, i, j))


@numba.njit
def _top_k(scores, matches, keys, cap):
    hs, hm, hk = topk.heap_arrays(cap)
    size = 0
    for i in range(scores.shape[0]):
        if not topk.rejects(hs, hm, 0, size, cap, scores[i], matches[i]):
            size = topk.heap_push(hs, hm, hk, 0, size, cap, scores[i], matches[i], keys[i])
    topk.deheap_sort(hs, hm, hk, 0, size)
    return topk.compact(np.array([0, cap], dtype=np.int64), np.array([size], dtype=np.int64), hs, hm, hk)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0]), st.integers(1, 3)), max_size=60),
       st.integers(0, 70), st.randoms(use_true_random=False))
def test_topk_heap_keeps_the_full_order(entries, cap, rnd):
    # few distinct scores and counts: ties are the rule, as with binary signals
    n = len(entries)
    docs = list(range(n))
    ranks = list(range(n))
    rnd.shuffle(ranks)
    scores = np.array([s for s, _ in entries], dtype=np.float64)
    matches = np.array([m for _, m in entries], dtype=np.int32)
    keys = np.array([(ranks[d] << 32) | d for d in docs], dtype=np.int64)
    offsets, got_docs, got_scores, got_matches = _top_k(scores, matches, keys, cap)
    want = sorted(docs, key=lambda d: (-scores[d], -matches[d], ranks[d]))[:cap]
    assert offsets.tolist() == [0, len(want)]
    assert got_docs.tolist() == want
    assert got_scores.tolist() == [scores[d] for d in want]
    assert got_matches.tolist() == [matches[d] for d in want]


def test_kernel_modules_import_only_kernels():
    import ast
    from pathlib import Path

    import ssr_engine.kernels

    folder = Path(ssr_engine.kernels.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                # numba's own modules too (`numba.experimental.structref`: `kernels.answer.Held`)
                ok = (node.module or "").split(".")[0] in ("__future__", "numba", "numpy") if node.level == 0 \
                    else node.level == 1
                assert ok, f"{path.name} imports {'.' * node.level}{node.module}"
            elif isinstance(node, ast.Import):
                assert all(a.name in ("numba", "numpy") for a in node.names), f"{path.name}: {ast.dump(node)}"


def test_id_gather_serial_and_parallel_match_numpy():
    # the serial path (single queries: no thread wake-up) and the parallel one gather the same rows
    from ssr_engine.kernels import id_table

    rng = np.random.default_rng(5)
    for width in (1, 7, 8, 9, 20):  # the unrolled copy of ids up to 8 characters, and the loop beyond
        table = rng.integers(48, 123, size=(1000, width), dtype=np.uint8)
        for n in (0, 10, id_table.PARALLEL_FROM + 3):
            docs = rng.integers(0, 1000, size=n).astype(np.int64)
            got = id_table.gather_ids_ucs4(table, docs)
            assert got.shape == (n, width) and got.dtype == np.uint32
            assert np.array_equal(got, table[docs].astype(np.uint32))


def test_fixed_width_ids_match_the_strings():
    # the one-pass table of `ids.fixed_width_ids`: every id back as it was (ragged lengths, a sliced
    # Arrow array whose offsets do not start at 0), zero padding after each; None for non-ASCII ids
    import pyarrow as pa

    from ssr_engine.ids import fixed_width_ids

    rng = np.random.default_rng(11)
    ids = ["".join(chr(c) for c in rng.integers(48, 123, size=rng.integers(0, 12))) for _ in range(2000)]
    for arr in (pa.array(ids), pa.array(ids).slice(37, 1500)):
        table = fixed_width_ids(arr)
        expect = arr.to_pylist()
        width = max(map(len, expect))
        assert table.shape == (len(expect), width) and table.dtype == np.uint8
        assert [bytes(row).rstrip(b"\0").decode() for row in table] == expect
        assert all(not row[len(s):].any() for row, s in zip(table, expect, strict=True))
    assert fixed_width_ids(pa.array(["abc", "caf\u00e9"])) is None
