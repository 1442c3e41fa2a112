"""SSRRetriever as a PyTerrier transformer, offline (no Java: Terrier's jars would need a download)."""

from __future__ import annotations

import json

import pytest
from conftest import load_data_script

pt = pytest.importorskip("pyterrier", reason="python-terrier (optional extra 'pyterrier') is not installed")
pd = pytest.importorskip("pandas", reason="pandas (with python-terrier) is not installed")

from ssr_engine import build_index, open_retriever  # noqa: E402
from ssr_engine.cli import main  # noqa: E402
from ssr_engine.pyterrier import SSRRetriever  # noqa: E402


@pytest.fixture(scope="module")
def cran(tmp_path_factory):
    root = tmp_path_factory.mktemp("pt")
    assert load_data_script("prepare_real").main(["cranfield", "--out", str(root)]) == 0
    build_index(root / "collection.tsv", root / "idx-ssr", quiet=True, workers=1, store_text=True)
    build_index(root / "collection.tsv", root / "idx-bm25", scoring="bm25", quiet=True, workers=1)
    topics = pd.read_csv(root / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str, quoting=3)
    qrels = pd.read_csv(root / "qrels.tsv", sep=" ", names=["qid", "iter", "docno", "label"],
                        dtype={"qid": str, "docno": str, "label": int})
    return root, topics, qrels


def test_results_are_the_searchers(cran):
    root, topics, _ = cran
    res = SSRRetriever(root / "idx-ssr", k=50)(topics)
    assert list(res.columns[:5]) == ["qid", "query", "docno", "score", "rank"]
    searcher = open_retriever(root / "idx-ssr")
    for qid, text in topics.head(40).itertuples(index=False):
        hits = searcher.search(text, 50)
        got = res[res.qid == qid]
        assert got.docno.tolist() == hits.ids.tolist()
        assert got.ssr_score.tolist() == hits.scores.tolist()  # the true scores
        assert got["rank"].tolist() == list(range(len(hits.ids)))
        assert (got.score.diff().dropna() < 0).all()  # strictly decreasing: ties cannot reorder


def test_experiment_equals_ssr_evaluate(cran):
    root, topics, qrels = cran
    reports = {}
    for method, index in (("ssr", "idx-ssr"), ("bm25", "idx-bm25")):
        reports[method] = root / f"{method}.json"
        assert main(["evaluate", "--index", str(root / index), "--queries", str(root / "queries.tsv"),
                     "--qrels", str(root / "qrels.tsv"), "--method", method, "--report", str(reports[method]),
                     "--latency-queries", "0", "--quiet"]) == 0
    systems = [SSRRetriever(root / "idx-ssr"), SSRRetriever(root / "idx-bm25")]
    from ir_measures import RR, R, nDCG

    table = pt.Experiment(systems, topics, qrels, eval_metrics=[RR @ 10, nDCG @ 10, R @ 10, R @ 1000],
                          names=["ssr", "bm25"], perquery=True)
    for method in ("ssr", "bm25"):
        ours = json.loads(reports[method].read_text())["per_query"]
        for (qid, measure), value in table[table.name == method].set_index(["qid", "measure"])["value"].items():
            name = "MRR@10" if measure == "RR@10" else measure
            assert abs(ours[name][qid] - value) <= 1e-9, (method, measure, qid)


def test_cutoff_text_and_exact_scores(cran):
    root, topics, _ = cran
    pipeline = SSRRetriever(root / "idx-ssr", text=True) % 3
    res = pipeline(topics.head(5))
    assert res.groupby("qid").size().max() == 3
    searcher = open_retriever(root / "idx-ssr")
    assert all(row.text == searcher.doc(row.docno) for row in res.itertuples())
    exact = SSRRetriever(root / "idx-ssr", k=10, scores="exact")(topics.head(5))
    assert (exact.score == exact.ssr_score).all()
    with pytest.raises(Exception, match="store-text"):
        SSRRetriever(root / "idx-bm25", text=True)


def test_needs_no_java(cran):
    root, topics, _ = cran
    SSRRetriever(root / "idx-bm25", k=5)(topics.head(3))
    assert not pt.java.started()
