"""The one retrieval interface: every method through `open_retriever`, with one k, thread and explain rule."""

from __future__ import annotations

import numpy as np
import pytest

from ssr_engine import build_index
from ssr_engine.errors import ArgumentError, SsrError
from ssr_engine.reference import ReferenceIndex
from ssr_engine.retrieval import METHODS, Retriever, SearchResult, max_threads, open_retriever
from ssr_engine.scoring import canonical_sum

TEXTS = ["alpha beta gamma", "alpha beta", "gamma delta", "beta", "alpha alpha delta", "", "epsilon"]
IDS = [str(10 + i) for i in range(len(TEXTS))]
QUERIES = ["alpha beta", "delta", "unknown", "", "beta gamma delta alpha"]


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("retrieval")
    tsv = tmp / "c.tsv"
    tsv.write_text("".join(f"{i}\t{t}\n" for i, t in zip(IDS, TEXTS, strict=True)), encoding="utf-8")
    ssr = build_index(tsv, tmp / "ssr", quiet=True, workers=1, store_text=True)
    bm25 = build_index(tsv, tmp / "bm25", scoring="bm25", quiet=True, workers=1, store_text=True)
    return {"ssr": ssr, "levels": ssr, "union": ssr, "maxscore": ssr, "exhaustive": ssr, "bm25": bm25}


def every_retriever(indexes) -> list[Retriever]:
    return [open_retriever(indexes[m], m) for m in METHODS] + [ReferenceIndex.from_texts(IDS, TEXTS)]


def test_every_method_is_a_retriever_with_one_result_type(indexes):
    for r in every_retriever(indexes):
        assert isinstance(r, Retriever)
        assert r.n_docs == len(TEXTS)
        results = r.search_batch(QUERIES, k=None)
        assert all(isinstance(x, SearchResult) for x in results)
        # pool sizes: candidates before the cut = the results of k=None
        assert r.pool_sizes(QUERIES).tolist() == [len(x) for x in results], r.method
        one = r.search(QUERIES[0], k=2)
        assert one.rows() == results[0].rows()[:2]
        assert len(r.search("unknown", 5)) == 0


def test_ssr_methods_and_the_reference_agree_bit_for_bit(indexes):
    ssr, lv, union, maxscore, exhaustive, _, ref = every_retriever(indexes)
    for q in QUERIES:
        for k in (None, 1, 2):
            want = ref.search(q, k)
            for r in (ssr, lv, union, maxscore, exhaustive):
                got = r.search(q, k)
                assert got.ids.tolist() == want.ids.tolist()
                assert got.scores.tobytes() == want.scores.tobytes()
                assert got.matches.tolist() == want.matches.tolist()


def test_one_k_rule_one_error(indexes):
    for r in every_retriever(indexes):
        for k in (0, -1, 2.5, True, "3"):
            with pytest.raises(ArgumentError, match="k must"):
                r.search("alpha", k)  # type: ignore[arg-type]
        assert len(r.search("alpha", np.int64(1))) == 1  # NumPy integers are integers


def test_one_thread_rule(indexes):
    for r in every_retriever(indexes):
        for threads in (0, -1, max_threads() + 1):
            with pytest.raises(ArgumentError, match="threads must be in"):
                r.search_batch(["alpha"], 3, threads=threads)
        assert r.search_batch(["alpha"], 3, threads=1)[0].rows() == r.search("alpha", 3).rows()


def test_errors_are_ssr_errors_and_value_errors():
    assert issubclass(ArgumentError, SsrError) and issubclass(ArgumentError, ValueError)


def test_one_explain_order(indexes):
    for r in every_retriever(indexes):
        for q in QUERIES:
            for doc_id, score, matches in r.search(q, None).rows():
                pairs = r.explain(q, doc_id)
                assert len(pairs) == matches
                assert pairs == sorted(pairs, key=lambda p: (p[1], p[0]))  # ascending weight, ties by signal
                if r.method == "bm25":
                    assert sum(w for _, w in pairs) == pytest.approx(score, rel=1e-12)
                else:
                    assert canonical_sum([w for _, w in pairs]) == score  # bit for bit
        assert r.explain("epsilon", IDS[0]) == []
        with pytest.raises(SsrError, match="no document"):
            r.explain("alpha", "no-such-id")


def test_explain_by_internal_id_equals_by_external_id(indexes):
    for r in every_retriever(indexes):
        res = r.search("alpha beta", None)
        for d, doc_id in zip(res.docs.tolist(), res.ids.tolist(), strict=True):
            assert r.explain("alpha beta", d) == r.explain("alpha beta", doc_id)


def test_open_retriever_refuses_the_wrong_index_and_method(indexes):
    with pytest.raises(ArgumentError, match="unknown method"):
        open_retriever(indexes["ssr"], "bm42")
    with pytest.raises(SsrError, match="--scoring ssr"):
        open_retriever(indexes["bm25"], "ssr")
    with pytest.raises(SsrError, match="--scoring bm25"):
        open_retriever(indexes["ssr"], "bm25")
    with pytest.raises(ArgumentError, match="bm25 only"):
        open_retriever(indexes["ssr"], "ssr", k1=1.2)
    with pytest.raises(ArgumentError, match="k1"):
        open_retriever(indexes["bm25"], "bm25", b=1.5)


def test_one_doc_rule(indexes):
    for r in every_retriever(indexes):
        for d, (doc_id, text) in enumerate(zip(IDS, TEXTS, strict=True)):
            assert r.doc(doc_id) == text == r.doc(d), r.method
        with pytest.raises(SsrError, match="no document"):
            r.doc("no-such-id")


def test_batch_results_are_views_of_the_flat_columns_sliced_once():
    import pickle
    import threading

    from ssr_engine.retrieval import split_results

    n = 5000
    rng = np.random.default_rng(3)
    ids = np.array([f"d{i}" for i in range(n)])
    docs, scores = np.arange(n, dtype=np.int64), rng.random(n)
    matches = rng.integers(1, 9, n).astype(np.int32)
    offsets = np.array([0, 0, 3, 3, 4000, n], dtype=np.int64)
    results = split_results(offsets, ids, docs, scores, matches)
    assert [len(r) for r in results] == [0, 3, 0, 3997, 1000]
    for r, a, b in zip(results, offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        assert r.ids.tolist() == ids[a:b].tolist() and r.docs.tolist() == docs[a:b].tolist()
        assert r.scores.tobytes() == scores[a:b].tobytes() and r.matches.tolist() == matches[a:b].tolist()
        assert r.ids is r.ids and np.shares_memory(r.scores, scores) or b == a  # sliced once, no copy
        assert r.rows() == list(zip(ids[a:b].tolist(), scores[a:b].tolist(), matches[a:b].tolist(), strict=True))
    # a pickled result (Ray sends them) carries its own rows, not the batch's columns
    fresh = split_results(offsets, ids, docs, scores, matches)
    one = pickle.loads(pickle.dumps(fresh[1]))
    assert one.ids.tolist() == ["d0", "d1", "d2"] and one.scores.tobytes() == scores[:3].tobytes()
    assert len(pickle.dumps(fresh[1])) < 2000 < len(pickle.dumps(fresh[3]))
    # readers on several threads at once all see the same rows (one slot swapped whole)
    for _ in range(20):
        shared = split_results(offsets, ids, docs, scores, matches)[3]
        seen: list[list[int]] = []
        threads = [threading.Thread(target=lambda r=shared, out=seen: out.append(r.docs[:5].tolist()))
                   for _ in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert seen == [[3, 4, 5, 6, 7]] * 4
    assert "SearchResult(ids=array(['d0', 'd1', 'd2']" in repr(results[1])
