"""BM25: scores agree with bm25s (method "lucene", the same tokens); exact order and top-k."""

from __future__ import annotations

import dataclasses
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ssr_engine import stemming
from ssr_engine.bm25 import BM25Searcher, lucene_idf
from ssr_engine.errors import ArgumentError, SsrError
from ssr_engine.format import Counts, HashSettings, Index, Manifest, SignalSettings
from ssr_engine.hashing import signal_hash
from ssr_engine.ids import id_order
from ssr_engine.stemming import bm25_tokens, stem_tokens
from ssr_engine.stopwords import STOPWORDS_V1


def make_index(ids: list[str], doc_tokens: list[list[str]], stopwords=STOPWORDS_V1, stem=False, seed=0) -> Index:
    """An in-memory BM25 index with the contract's arrays, built the simple way (the oracle build)."""
    terms = sorted({t for toks in doc_tokens for t in toks}, key=lambda t: signal_hash(t, seed))
    hashes = np.array([signal_hash(t, seed) for t in terms], dtype=np.uint64)
    assert len(set(hashes.tolist())) == len(terms)
    tid = {t: i for i, t in enumerate(terms)}
    postings: list[list[tuple[int, int]]] = [[] for _ in terms]
    fwd_indptr, fwd_terms = [0], []
    for d, toks in enumerate(doc_tokens):
        counts = Counter(tid[t] for t in toks)
        for t in sorted(counts):
            postings[t].append((d, counts[t]))
            fwd_terms.append(t)
        fwd_indptr.append(len(fwd_terms))
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in postings], out=indptr[1:])
    rank = np.empty(len(ids), dtype=np.uint32)
    rank[id_order(ids)] = np.arange(len(ids), dtype=np.uint32)
    encoded = [t.encode() for t in terms]
    offsets = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    manifest = Manifest(
        scoring="bm25",
        counts=Counts(len(ids), len(terms), int(indptr[-1])),
        signals=SignalSettings("test", "", tuple(sorted(stopwords)), None, False, stem,
                               HashSettings("fnv1a64-fmix64", seed, 64)),
    )
    return Index(
        path=Path("<memory>"), manifest=manifest, vocab=hashes, postings_indptr=indptr,
        postings_docs=np.array([d for p in postings for d, _ in p], dtype=np.uint32),
        forward_indptr=np.array(fwd_indptr, dtype=np.int64), forward_terms=np.array(fwd_terms, dtype=np.uint32),
        doc_rank=rank, signal_offsets=offsets, signal_bytes=np.frombuffer(b"".join(encoded), dtype=np.uint8),
        postings_tf=np.array([tf for p in postings for _, tf in p], dtype=np.uint32),
        doc_lengths=np.array([len(t) for t in doc_tokens], dtype=np.uint32), _doc_ids=list(ids),
    )


def read_only(index: Index) -> Index:
    for name in ("vocab", "postings_indptr", "postings_docs", "postings_tf", "doc_lengths", "doc_rank"):
        getattr(index, name).setflags(write=False)
    return index


def oracle(doc_tokens, ids, query_tokens, k1=0.9, b=0.4, k=None):
    """Pure Python BM25 with the same float operations in the same (canonical) order."""
    n = len(doc_tokens)
    avgdl = sum(map(len, doc_tokens)) / n if any(doc_tokens) else 1.0
    index_terms = {t for toks in doc_tokens for t in toks}
    df = Counter(t for toks in doc_tokens for t in set(toks))
    qc = Counter(t for t in query_tokens if t in index_terms)
    # the canonical order: ascending weight (idf * query frequency), ties by token; never the term ids
    order = sorted(qc, key=lambda t: (qc[t] * lucene_idf(n, df[t]), t))
    rank = {d: r for r, d in enumerate(id_order(ids))}
    out = []
    for d, toks in enumerate(doc_tokens):
        counts = Counter(toks)
        s, m = 0.0, 0
        for t in order:
            if counts[t]:
                norm = k1 * ((1.0 - b) + b * float(len(toks)) / avgdl)
                s += qc[t] * lucene_idf(n, df[t]) * (counts[t] / (norm + counts[t]))
                m += 1
        if m:
            out.append((s, rank[d], d, m))
    out.sort(key=lambda e: (-e[0], -e[3], e[1]))  # the full order: score, matches, id
    return out[:k] if k else out


def bm25s_scores(doc_tokens, queries_tokens, k1=0.9, b=0.4):
    import bm25s  # a test-only peer in the test extra: never skipped

    model = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
    model.index([list(t) for t in doc_tokens], show_progress=False)
    out = []
    for qt in queries_tokens:
        known = [t for t in qt if t in model.vocab_dict]
        out.append(model.get_scores(known) if known else np.zeros(len(doc_tokens)))
    return out


def assert_matches_bm25s(searcher, ids, doc_tokens, queries_tokens, texts):
    reference = bm25s_scores(doc_tokens, queries_tokens, searcher.k1, searcher.b)
    results = searcher.search_batch(texts, k=None)
    compared = 0
    for ref, res in zip(reference, results, strict=True):
        positive = set(np.flatnonzero(ref > 0).tolist())
        assert set(res.docs.tolist()) == positive  # the candidates are exactly the scored documents
        got = res.scores
        want = ref[res.docs]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=0)
        # ranking: score desc, matched terms desc, then id order
        keys = [(-s, -m, int(searcher.index.doc_rank[d])) for s, m, d in zip(got, res.matches, res.docs, strict=True)]
        assert keys == sorted(keys)
        assert res.ids.tolist() == [ids[d] for d in res.docs]
        compared += len(got)
    return compared


def random_corpus(seed, n_docs=300, vocab=80):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    weights = [1 / (i + 1) for i in range(vocab)]  # Zipf-like: a few very common terms
    docs = [rng.choices(words, weights, k=rng.choice([0, 1, 3, 10, 40])) for _ in range(n_docs)]
    ids = rng.sample(range(10 * n_docs), n_docs)
    queries = [rng.choices(words + ["unknown"], k=rng.randint(0, 6)) for _ in range(60)]
    queries += [["w1", "w1", "w5"], ["w5"], [], ["w0"]]
    return [str(i) for i in ids], docs, queries


@pytest.mark.parametrize("seed,k1,b", [(1, 0.9, 0.4), (2, 1.2, 0.75), (3, 0.0, 0.0), (4, 2.0, 1.0)])
def test_random_corpora_agree_with_bm25s_and_oracle(seed, k1, b):
    ids, docs, queries = random_corpus(seed)
    searcher = BM25Searcher(read_only(make_index(ids, docs)), k1=k1, b=b)
    texts = [" ".join(q) for q in queries]
    assert assert_matches_bm25s(searcher, ids, docs, queries, texts) > 1000
    for k in (1, 7, None):
        for q, res in zip(queries, searcher.search_batch(texts, k=k, threads=2), strict=True):
            want = oracle(docs, ids, q, k1, b, k)
            assert res.docs.tolist() == [d for _, _, d, _ in want]
            assert res.scores.tolist() == [s for s, _, _, _ in want]  # bit-identical, same operations
            assert res.matches.tolist() == [m for _, _, _, m in want]


def test_score_bits_do_not_depend_on_the_hash_seed():
    """Term ids follow the seed (a live segment reseeded after a collision); the summation order must not."""
    ids, docs, queries = random_corpus(5)
    texts = [" ".join(q) for q in queries]
    a, b = (BM25Searcher(make_index(ids, docs, seed=seed)) for seed in (0, 11))
    assert a.index.vocab.tolist() != b.index.vocab.tolist()
    for x, y in zip(a.search_batch(texts, k=None), b.search_batch(texts, k=None), strict=True):
        assert x.scores.tobytes() == y.scores.tobytes() and x.ids.tolist() == y.ids.tolist()


def test_repeated_query_tokens_count_each_time():
    ids, docs = ["1", "2", "3"], [["aa", "bb"], ["aa"], ["cc"]]
    s = BM25Searcher(make_index(ids, docs))
    once, twice = s.search("aa bb", k=None), s.search("aa aa bb", k=None)
    assert once.ids.tolist() == ["1", "2"]
    single = s.search("aa", k=None)
    assert twice.ids[0] == "1" and single.ids.tolist() == ["2", "1"]  # the shorter document ranks first on "aa"
    assert twice.scores[0] == pytest.approx(once.scores[0] + single.scores[1])


def test_ties_by_id_order_and_threads_agree():
    # equal texts, equal scores: integer ids order numerically ("9" before "10")
    ids = ["10", "9", "100", "11"]
    docs = [["aa", "bb"]] * 4
    s = BM25Searcher(make_index(ids, docs))
    assert s.search("aa", k=3).ids.tolist() == ["9", "10", "11"]
    texts = [f"aa {w}" for w in ("bb", "zz", "")] * 5
    one, two = s.run_kernel(texts, 2, threads=1), s.run_kernel(texts, 2, threads=2)
    for a, b in zip(one, two, strict=True):
        assert np.array_equal(a, b)
    assert one[4].tolist() == [4] * 15
    assert s.pool_sizes(texts).tolist() == [4] * 15


def test_workspace_reused_across_calls_gives_fresh_results():
    rng = np.random.default_rng(3)
    vocab = [f"t{i}" for i in range(30)]
    ids = [str(i) for i in range(200)]
    docs = [list(rng.choice(vocab, size=int(rng.integers(1, 12)))) for _ in ids]
    queries = [" ".join(rng.choice(vocab, size=3)) for _ in range(40)]
    kept = BM25Searcher(make_index(ids, docs))  # one searcher, its accumulators reused call after call
    for start in range(0, 40, 7):
        batch = queries[start : start + 7]
        fresh = BM25Searcher(make_index(ids, docs))
        for threads in (1, 2):
            a, b = kept.run_kernel(batch, 5, threads=threads), fresh.run_kernel(batch, 5, threads=threads)
            for x, y in zip(a, b, strict=True):
                assert np.array_equal(x, y)
    assert not kept._workspace[0].any() and not kept._workspace[1].any()  # left zeroed


def test_empty_queries_and_no_matches():
    s = BM25Searcher(make_index(["a", "b"], [["xx"], []]))
    queries = ["", "the of", "yy", "xx"]
    offsets, *_, pool = s.run_kernel(queries, k=5)
    assert offsets.tolist() == [0, 0, 0, 0, 1]
    assert pool.tolist() == [0, 0, 0, 1] == s.pool_sizes(queries).tolist()
    assert [len(r) for r in s.search_batch(queries, 5)] == [0, 0, 0, 1]
    with pytest.raises(ArgumentError):
        s.search("xx", k=0)


def test_hash_hit_with_another_string_is_not_a_match():
    index = make_index(["1"], [["aa"]])
    s = BM25Searcher(index)
    # put a foreign token's hash in the vocabulary slot: the string check must refuse it
    index.vocab = np.array([signal_hash("zz", 0)], dtype=np.uint64)
    assert s.term_id("zz") == -1


def test_ssr_index_is_refused():
    index = make_index(["1"], [["aa"]])
    index.manifest = dataclasses.replace(index.manifest, scoring="ssr")
    index.postings_tf = None
    with pytest.raises(SsrError, match="--scoring bm25"):
        BM25Searcher(index)


@pytest.mark.parametrize("n_docs,df", [(10, 1), (10, 10), (7, 3), (1000, 999), (1, 1)])
def test_idf_agrees_with_bm25s(n_docs, df):
    # the outside tool's idf, read back from a score: with b = 0 and tf = 1 a document scores
    # idf * 1 / (1 + k1), so idf = score * (1 + k1)
    docs = [["aa", "zz"] if d < df else ["zz"] for d in range(n_docs)]
    (scores,) = bm25s_scores(docs, [["aa"]], k1=0.9, b=0.0)
    assert lucene_idf(n_docs, df) == pytest.approx(float(scores[0]) * 1.9, rel=1e-12)
    assert lucene_idf(n_docs, df) > 0


# ------------------------------------------------------------------------------ stemming


def test_stemming():
    assert stem_tokens(["running", "caresses", "ponies", "generalization"]) == ["run", "caress", "poni", "gener"]
    assert bm25_tokens("The Running of the PONIES", STOPWORDS_V1, stem=True) == ["run", "poni"]
    assert bm25_tokens("The Running", STOPWORDS_V1) == ["running"]
    assert stem_tokens([]) == []


def test_stemming_without_pystemmer_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "Stemmer", None)
    monkeypatch.setattr(stemming, "_local", type(stemming._local)())
    with pytest.raises(SsrError, match="PyStemmer"):
        stem_tokens(["running"])


# ------------------------------------------------------------------------------ Cranfield


@pytest.mark.parametrize("stem", [False, True])
def test_cranfield_agrees_with_bm25s(stem, cranfield):
    docs, queries = cranfield.docs, cranfield.queries
    assert len(docs) == 1400 and len(queries) == 225
    ids = [i for i, _ in docs]
    doc_tokens = [bm25_tokens(t, STOPWORDS_V1, stem) for _, t in docs]
    query_tokens = [bm25_tokens(t, STOPWORDS_V1, stem) for _, t in queries]
    searcher = BM25Searcher(read_only(make_index(ids, doc_tokens, stem=stem)))
    compared = assert_matches_bm25s(searcher, ids, doc_tokens, query_tokens, [t for _, t in queries])
    assert compared > 100_000


# ------------------------------------------------------------------- through build_index


def built_searcher(tmp_path: Path, ids: list[str], texts: list[str], stem: bool = False) -> BM25Searcher:
    from ssr_engine import build_index
    from ssr_engine.format import open_index

    collection = tmp_path / "collection.tsv"
    collection.write_text("".join(f"{i}\t{' '.join(t.split())}\n" for i, t in zip(ids, texts, strict=True)),
                          encoding="utf-8")
    out = build_index(collection, tmp_path / "index", scoring="bm25", stem=stem, quiet=True, workers=1)
    return BM25Searcher(open_index(out))


def test_cranfield_built_index_agrees_with_bm25s_and_the_in_memory_index(tmp_path, cranfield):
    docs = cranfield.docs
    queries = [t for _, t in cranfield.queries]
    ids = [i for i, _ in docs]
    searcher = built_searcher(tmp_path, ids, [t for _, t in docs])
    assert searcher.index.manifest.signals.stem is False
    doc_tokens = [bm25_tokens(t, STOPWORDS_V1) for _, t in docs]
    assert searcher.index.doc_lengths.tolist() == [len(t) for t in doc_tokens]
    query_tokens = [bm25_tokens(t, STOPWORDS_V1) for t in queries]
    assert assert_matches_bm25s(searcher, ids, doc_tokens, query_tokens, queries) > 100_000
    # the disk index and the simple in-memory build give bit-identical rankings
    memory = BM25Searcher(make_index(ids, doc_tokens, seed=int(searcher.seed)))
    a, b = searcher.run_kernel(queries, 100), memory.run_kernel(queries, 100)
    for name, x, y in zip(("offsets", "docs", "scores", "matches", "pool"), a, b, strict=True):
        assert np.array_equal(x, y), name


def test_stemmed_built_index_agrees_with_bm25s(tmp_path):
    rng = random.Random(5)
    words = ["running", "runs", "runner", "connection", "connected", "connects", "generalization", "general",
             "ponies", "pony", "caresses", "cats", "cat", "relational", "relate", "the", "of"]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 12))) for _ in range(120)]
    ids = [f"doc-{i}" for i in range(120)]
    searcher = built_searcher(tmp_path, ids, texts, stem=True)
    assert searcher.stem
    queries = [" ".join(rng.choices(words, k=rng.randint(1, 4))) for _ in range(40)]
    doc_tokens = [bm25_tokens(t, STOPWORDS_V1, stem=True) for t in texts]
    query_tokens = [bm25_tokens(t, STOPWORDS_V1, stem=True) for t in queries]
    assert assert_matches_bm25s(searcher, ids, doc_tokens, query_tokens, queries) > 500
    assert searcher.search("running", k=None).ids.tolist() == searcher.search("runs", k=None).ids.tolist()
