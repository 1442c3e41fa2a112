"""`ssr demo`: each part, the report files against the printed tables, the cache rules, README."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from ssr_engine.cli import main
from ssr_engine.demo import report as rep
from ssr_engine.demo.workdir import LEDGER, WorkDir
from ssr_engine.errors import SsrError
from ssr_engine.eval.metrics import evaluate_run
from ssr_engine.eval.trec import read_qrels, read_queries, read_run


def run_demo_cli(capsys, *argv: str) -> tuple[str, str]:
    assert main(["demo", *argv, "--quiet"]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """Rows (as cell lists) of the markdown tables in `text` whose first cell is `first_cell`."""
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if re.match(rf"^\| {re.escape(first_cell)} \|", line)]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The two real-data parts at full size, run once through the CLI."""
    work = tmp_path_factory.mktemp("demo") / "w"
    out, err = io.StringIO(), io.StringIO()  # capsys is function-scoped: capture by hand
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["demo", "cranfield", "agents", "--workdir", str(work), "--quiet"]) == 0
    return work, out.getvalue(), err.getvalue()


def test_cranfield_report_matches_the_runs_and_the_printed_table(real):
    work, printed, _ = real
    report = json.loads((work / "report.json").read_text())
    c = report["cranfield"]
    assert set(c["methods"]) == {"ssr", "exhaustive", "bm25"}
    qrels = read_qrels(work / "cranfield" / "qrels.tsv")
    asked = list(read_queries(work / "cranfield" / "queries.tsv"))
    per_query = {}
    for method, row in c["methods"].items():
        run = read_run(row["run"])
        # the reported metrics are those of the run file as written, scored again here
        again = evaluate_run({q: r.docids for q, r in run.items()}, qrels, queries=asked)
        assert row["metrics"] == again.metrics
        per_query[method] = again.per_query
        printed_row = table_rows(printed, method)[0]
        assert printed_row[1:6] == [f"{row['metrics'][m]:.4f}" for m in rep.CRANFIELD_METRICS]
        # trec_eval on the written runs agrees (ir_measures is a dependency: the check always runs)
        assert row["trec_eval_max_abs_diff"] <= 1e-9 and printed_row[6] == "equal"
    # SSR against BM25, paired over the same judged queries
    tests = {(t["metric"], t["test"]): t for t in c["significance"]}
    assert {t["system"] for t in c["significance"]} == {"ssr"}
    for metric in ("nDCG@10", "MRR@10", "R@1000"):
        diffs = [per_query["ssr"][q][metric] - per_query["bm25"][q][metric] for q in per_query["bm25"]]
        for test in ("paired-t", "randomization"):
            t = tests[(metric, test)]
            assert t["queries"] == 225 and t["mean_difference"] == pytest.approx(sum(diffs) / len(diffs))
            assert t["better"] == sum(d > 0 for d in diffs) and 0 < t["p_value"] <= 1
    ndcg = tests[("nDCG@10", "paired-t")]
    assert table_rows(printed, "ssr")[0][7].startswith(f"{ndcg['mean_difference']:+.4f}, p = {ndcg['p_value']:.2g} (t)")
    assert table_rows(printed, "bm25")[0][7] == "baseline"
    assert c["methods"]["ssr"]["metrics"] == c["methods"]["exhaustive"]["metrics"]
    assert c["methods"]["bm25"]["trec_eval_max_abs_diff"] <= 1e-9
    assert c["inverted_equals_exhaustive"] == {"queries": 225, "identical": 225, "all": True}
    assert "225/225 queries identical" in printed
    md = (work / "report.md").read_text()
    assert rep.cranfield_quality_table(c) in md and rep.cranfield_quality_table(c) in printed


def test_agents_report_is_consistent(real):
    work, printed, _ = real
    a = json.loads((work / "report.json").read_text())["agents"]
    assert a["collection"] == {"tools": 199, "queries": 20614, "multi_tool_queries": 497,
                               "source": "bundled MetaTool ToolE (MIT)"}
    for method, r in a["methods"].items():
        recalls = [r["quality"][str(k)]["recall"] for k in a["ks"]]
        assert recalls == sorted(recalls) and 0.3 < recalls[-1] < 1
        o = r["outcomes"][a["provider"]]
        assert o["selected"] + o["retrieval_miss"] + o["empty_pool"] == 20614 and o["api_failure"] == 0
        assert o["correct"] == round(r["quality"]["1"]["recall"] * 20614)  # `first` picks entry 1
        assert o["selected"] == round(r["quality"]["20"]["recall"] * 20614)
        assert 80 < r["input_size"]["20"]["reduction_pct"] < 100
        row = table_rows(printed, method)[-1]
        assert row[1:5] == [f"{x:.4f}" for x in recalls]
    assert rep.agents_quality_table(a) in (work / "report.md").read_text()
    prompt = Path(a["prompt_example"]).read_text()
    assert "User request:" in prompt and prompt.count("\n") > 20


def test_readme_shows_the_figures_the_demo_prints(real):
    """README's opening tables are the demo's own output (regenerate them from report.md when they change)."""
    work, printed, _ = real
    readme = (ROOT / "README.md").read_text()
    report = json.loads((work / "report.json").read_text())
    assert rep.cranfield_quality_table(report["cranfield"]) in readme
    assert rep.agents_quality_table(report["agents"]) in readme


def test_second_run_reuses_and_gives_the_same_figures(real, capsys):
    work, _, _ = real
    first = json.loads((work / "report.json").read_text())["cranfield"]
    _, err = run_demo_cli(capsys, "cranfield", "--workdir", str(work))
    assert "reusing the ssr index" in err and "building" not in err
    again = json.loads((work / "report.json").read_text())["cranfield"]
    assert {m: r["metrics"] for m, r in again["methods"].items()} == {m: r["metrics"] for m, r in
                                                                      first["methods"].items()}


def test_small_scale_and_agent_subset(tmp_path, capsys):
    work = tmp_path / "w"
    printed, err = run_demo_cli(capsys, "scale", "agents", "--passages", "3000", "--queries", "40",
                                "--agent-queries", "300", "--workdir", str(work))
    report = json.loads((work / "report.json").read_text())
    assert report["parts"] == ["scale", "agents"] and "cranfield" not in report
    s = report["scale"]
    assert s["collection"]["passages"] == 3000 and s["index"]["documents"] == 3000
    assert s["inverted_equals_exhaustive"]["identical"] == 40 and s["inverted_equals_exhaustive"]["all"]
    assert [r["k"] for r in s["search"]] == [10, 100, 1000]
    assert s["build"]["peak_rss_bytes"] > 10 * 2**20 and s["build"]["seconds"] > 0
    for r in s["search"]:
        assert table_rows(printed, str(r["k"]))[0][1] == f"{r['queries_per_second']:,.0f}"
    assert "40/40 queries identical" in printed
    assert report["agents"]["collection"]["queries"] == 300
    md = (work / "report.md").read_text()
    assert rep.scale_table(s) in md and rep.agents_quality_table(report["agents"]) in md
    if report["figures"]:
        for f in report["figures"]:
            assert Path(f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f in printed
    else:
        assert "matplotlib is not installed" in md
    # again: the collection and the index are reused, and their build figures with them
    printed2, err2 = run_demo_cli(capsys, "scale", "--passages", "3000", "--queries", "40", "--workdir", str(work))
    s2 = json.loads((work / "report.json").read_text())["scale"]
    assert "reusing the generated collection" in err2 and s2["build"]["reused"]
    assert s2["build"]["seconds"] == s["build"]["seconds"]
    # a different size is a new collection: the old one (the demo's) is replaced
    run_demo_cli(capsys, "scale", "--passages", "2000", "--queries", "20", "--workdir", str(work))
    assert json.loads((work / "report.json").read_text())["scale"]["index"]["documents"] == 2000


def test_figures_need_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    written, note = rep.figures({"agents": {}}, tmp_path)
    assert written == [] and "matplotlib is not installed" in note


def test_workdir_never_touches_what_it_did_not_write(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("user data")
    with pytest.raises(SsrError, match="not created by `ssr demo`"):
        WorkDir(mine)
    assert (mine / "notes.txt").read_text() == "user data" and not (mine / LEDGER).exists()

    work = WorkDir(tmp_path / "w")
    (work.path / "keep.txt").write_text("user data")
    out = work.file("step-output")
    with pytest.raises(SsrError, match="not written by `ssr demo`"):
        work.claim("s", [work.file("keep.txt")])
    work.claim("s", [out])
    out.write_text("v1")
    work.done("s", {"v": 1}, [out])
    assert work.fresh("s", {"v": 1}) and not work.fresh("s", {"v": 2})
    again = WorkDir(work.path)  # the ledger is read back
    assert again.fresh("s", {"v": 1})
    again.claim("s", [out])  # redoing the step removes what it wrote, and only that
    assert not out.exists() and (work.path / "keep.txt").read_text() == "user data"
    assert not again.fresh("s", {"v": 1})
    with pytest.raises(SsrError, match="outside"):
        again.claim("t", [tmp_path / "elsewhere"])


def test_bad_ledger_and_bad_part(tmp_path, capsys):
    w = tmp_path / "w"
    w.mkdir()
    (w / LEDGER).write_text("{not json")
    with pytest.raises(SsrError, match="unreadable demo ledger"):
        WorkDir(w)
    assert main(["demo", "nonsense", "--workdir", str(tmp_path / "x")]) == 2
    assert "unknown demo part nonsense" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
