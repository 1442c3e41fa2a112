"""`ssr evaluate` and `ssr compare` end to end on a small generated collection."""

from __future__ import annotations

import json
import random
from pathlib import Path

import ir_measures
import pytest
from conftest import IR_NAMES

from ssr_engine import build_index
from ssr_engine.cli import main
from ssr_engine.eval.evaluate import markdown_table, percentiles, run_evaluation
from ssr_engine.eval.metrics import METRICS, evaluate_run
from ssr_engine.eval.trec import read_qrels, read_run


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """~400 passages, 30 queries (one matches nothing, one has no qrels), graded qrels, both indexes."""
    root = tmp_path_factory.mktemp("evaluate")
    rng = random.Random(7)
    words = [f"{a}{b}" for a in "bcdfghklmnprst" for b in ("ar", "el", "ion", "ust", "ox")]
    texts = [rng.choices(words[: 20 + pid % 50], k=rng.randint(3, 25)) for pid in range(400)]
    with open(root / "collection.tsv", "w", encoding="utf-8") as f:
        for pid, text in enumerate(texts):
            f.write(f"{pid * 3 + 1}\t{' '.join(text)}\n")
    queries, qrels = {}, []
    for q in range(30):
        queries[str(100 + q)] = " ".join(rng.sample(words[:40], rng.randint(1, 4)))
    queries["200"] = "the and of"  # stopwords only: no signals, an empty result
    queries["201"] = words[0]  # run, but without judgements
    for qid in list(queries)[:-1]:
        # judge a few documents sharing a query word (mostly found) and a few random ones
        sharing = [p for p in range(400) if set(queries[qid].split()) & set(texts[p])]
        for pid in set(rng.sample(sharing, min(len(sharing), 3)) + rng.sample(range(400), rng.randint(1, 5))):
            qrels.append(f"{qid} 0 {pid * 3 + 1} {rng.choice([0, 1, 1, 2, 3])}")
    qrels.append("999 0 1 1")  # judged but not asked
    (root / "queries.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in queries.items()), encoding="utf-8")
    (root / "qrels.txt").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    build_index(root / "collection.tsv", root / "ssr", quiet=True, workers=1)
    build_index(root / "collection.tsv", root / "bm25", scoring="bm25", quiet=True, workers=1)
    return root


def evaluate_cli(data: Path, method: str, index: str, *extra: str) -> tuple[int, dict, Path]:
    run, report = data / f"{method}-{index}.run", data / f"{method}-{index}.json"
    code = main(["evaluate", "--index", str(data / index), "--queries", str(data / "queries.tsv"),
                 "--qrels", str(data / "qrels.txt"), "--method", method, "-k", "50", "--run", str(run),
                 "--report", str(report), "--threads", "2", "--latency-queries", "10", *extra])
    return code, (json.loads(report.read_text()) if code == 0 else {}), run


@pytest.mark.parametrize("method,index", [("ssr", "ssr"), ("exhaustive", "ssr"), ("bm25", "bm25")])
def test_report_matches_trec_eval_on_the_written_run(data, method, index, capsys):
    code, report, run_path = evaluate_cli(data, method, index)
    assert code == 0
    out = capsys.readouterr().out
    assert "MRR@10" in out and "q/s" in out
    assert set(report["metrics"]) == set(METRICS)
    q = report["queries"]
    assert (q["total"], q["judged"], q["without_qrels"], q["qrels_not_run"]) == (32, 31, 1, 1)
    assert q["without_qrels_ids"] == ["201"] and q["qrels_not_run_ids"] == ["999"]
    assert "200" in q["empty_results_ids"]
    assert report["pool"]["p50"] <= report["pool"]["p95"] <= report["pool"]["max"]
    assert report["latency_ms"]["queries"] == 10 and report["throughput_qps"] > 0
    assert report["index"]["scoring"] == index and report["method"] == method
    if method == "bm25":
        assert report["method_settings"]["k1"] == 0.9 and report["method_settings"]["b"] == 0.4

    run = read_run(run_path)
    assert all(len(r.docids) <= 50 for r in run.values())
    qrels = read_qrels(data / "qrels.txt")
    asked = [line.split("\t")[0] for line in (data / "queries.tsv").read_text().splitlines()]
    # the report's metrics are those of the run file as read back
    again = evaluate_run({qid: r.docids for qid, r in run.items()}, qrels, queries=asked)
    assert again.metrics == report["metrics"]
    # ... and trec_eval's (through ir_measures) on the file exactly as written, empty queries adding 0:
    # ir_measures re-sorts by score then docno, so this holds only because the written scores keep our order
    judged_asked = [x for x in asked if x in qrels]
    theirs = {(m.query_id, str(m.measure)): m.value
              for m in ir_measures.iter_calc(list(IR_NAMES.values()), qrels, ir_measures.read_trec_run(str(run_path)))}
    for name, measure in IR_NAMES.items():
        for qid in judged_asked:
            assert report["per_query"][name][qid] == pytest.approx(theirs.get((qid, str(measure)), 0.0), abs=1e-9)
        total = sum(theirs.get((q, str(measure)), 0.0) for q in judged_asked)
        assert report["metrics"][name] == pytest.approx(total / len(judged_asked), abs=1e-9)
    assert report["metrics"]["R@1000"] > 0.2  # a real retrieval, not all zeros


def test_exhaustive_and_inverted_runs_are_identical(data):
    _, ssr, run_a = evaluate_cli(data, "ssr", "ssr", "--tag", "A")
    _, exh, run_b = evaluate_cli(data, "exhaustive", "ssr", "--tag", "A")
    assert run_a.read_bytes() == run_b.read_bytes()
    assert ssr["metrics"] == exh["metrics"] and ssr["pool"]["mean"] == exh["pool"]["mean"]


def test_pool_sizes_are_the_candidate_counts(data):
    report = run_evaluation(data / "ssr", data / "queries.tsv", data / "qrels.txt", "ssr", None,
                            latency_queries=0)
    full = run_evaluation(data / "ssr", data / "queries.tsv", data / "qrels.txt", "ssr", 1, latency_queries=0)
    # with k=all every candidate is returned: the pool statistics do not depend on k
    assert report["pool"] == full["pool"] and report["pool"]["max"] <= 400
    assert report["latency_ms"]["queries"] == 0


def test_compare_table(data, capsys):
    for method, index in [("ssr", "ssr"), ("bm25", "bm25")]:
        assert evaluate_cli(data, method, index)[0] == 0
    capsys.readouterr()
    assert main(["compare", str(data / "ssr-ssr.json"), str(data / "bm25-bm25.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| method | index | judged | MRR@10 |") and lines[4] == ""
    assert "Paired tests against ssr" in lines[5]
    assert lines[2].startswith("| ssr | ssr | 31 |") and lines[3].startswith("| bm25 | bm25 | 31 |")
    report = json.loads((data / "bm25-bm25.json").read_text())
    assert f"{report['metrics']['nDCG@10']:.4f}" in lines[3]


def test_markdown_table_labels_tags():
    r = {"method": "bm25", "tag": "porter", "metrics": dict.fromkeys(METRICS, 0.5), "throughput_qps": 10.0}
    assert "| bm25 (porter) | ? | ? | 0.5000 |" in markdown_table([r])


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--method", "bm25"], "--scoring bm25"),  # no term frequencies in an ssr index
        (["--method", "ssr", "--index-name", "bm25"], "needs an index built with --scoring ssr"),
        (["-k", "0"], "k must be >= 1"),
        (["--method", "nope"], "invalid choice"),
        (["--k1", "1.2"], "bm25 only"),
    ],
)
def test_errors_exit_2(data, argv, fragment, capsys):
    index = "ssr"
    if "--index-name" in argv:
        index = argv[argv.index("--index-name") + 1]
        argv = [a for a in argv if a not in ("--index-name", index)]
    cmd = ["evaluate", "--index", str(data / index), "--queries", str(data / "queries.tsv"),
           "--qrels", str(data / "qrels.txt"), "--run", str(data / "err.run"), *argv]
    try:
        code = main(cmd)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    assert code == 2
    assert fragment in capsys.readouterr().err
    assert not (data / "err.run").exists()


def test_bad_qrels_line_named(data, tmp_path, capsys):
    bad = tmp_path / "qrels"
    bad.write_text("100 0 1 1\n100 0 4 high\n")
    code = main(["evaluate", "--index", str(data / "ssr"), "--queries", str(data / "queries.tsv"),
                 "--qrels", str(bad), "--run", str(tmp_path / "r")])
    assert code == 2
    assert f"{bad}:2: relevance 'high'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    code = main(["evaluate", "--index", str(data / "ssr"), "--queries", str(data / "queries.tsv"),
                 "--qrels", str(bad), "--skip-bad-lines", "--report", str(tmp_path / "rep.json"),
                 "--latency-queries", "0"])
    assert code == 0
    assert json.loads((tmp_path / "rep.json").read_text())["skipped_lines"]["qrels"] == 1


def test_compare_rejects_non_reports(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"metrics": {}}')
    assert main(["compare", str(bad)]) == 2
    assert "not an `ssr evaluate` report" in capsys.readouterr().err


def test_percentiles():
    assert percentiles([1.0, 2.0, 3.0, 4.0], (50,)) == {"p50": 2.5}
    assert percentiles([], (50, 95)) == {"p50": 0.0, "p95": 0.0}
