"""The agent benchmark: MetaTool subset (the copy bundled with the package), synthetic registry, report files."""

from __future__ import annotations

import json

import pytest

from ssr_engine.agents.bench import bench_registry, load_metatool, markdown
from ssr_engine.agents.orchestrator import STATUSES
from ssr_engine.cli import main
from ssr_engine.datagen.cards import iter_registry, make_card, make_queries


def _check_consistent(result: dict, n: int) -> None:
    q = result["quality"]
    recalls = [q[k]["recall"] for k in q]
    assert recalls == sorted(recalls) and all(0 <= r <= 1 for r in recalls)
    pool_k = result["pool_k"]
    for name, c in result["outcomes"].items():
        assert sum(c[s] for s in STATUSES) == n, name
        assert c["empty_pool"] == result["empty_pools"]
        assert c["api_failure"] == 0 and c["invalid_index"] == 0  # offline providers always answer in range
        # the gold card is in the pool exactly when the outcome is not empty_pool/retrieval_miss
        assert c["selected"] == round(q[str(pool_k)]["recall"] * n)
    assert result["outcomes"]["oracle"]["correct"] == round(q[str(pool_k)]["recall"] * n)
    assert result["outcomes"]["first"]["correct"] == round(q["1"]["recall"] * n)
    size = result["input_size"][str(pool_k)]
    assert 0 < size["pool_chars"] < size["full_chars"]
    assert size["reduction_pct"] == pytest.approx(100 * (1 - size["pool_chars"] / size["full_chars"]))


def test_metatool_loads_all_tools_and_queries():
    cards, queries = load_metatool()
    assert len(cards) == 199 and len(queries) == 20_614
    ids = {c.id for c in cards}
    assert all(q.gold in ids for q in queries)
    assert queries[0].text == "Can I find academic research papers on this topic?"
    assert queries[0].gold == "ResearchHelper"


def test_metatool_subset_disk_ssr_equals_reference_and_bm25_runs(tmp_path):
    cards, queries = load_metatool()
    subset = queries[::50]  # 413 queries spread over all tools
    report = bench_registry("metatool", cards, subset, ("ssr", "reference", "bm25"), tmp_path,
                            ks=(1, 5, 10, 20), pool_k=20)
    ssr, ref, bm25 = (report["methods"][m] for m in ("ssr", "reference", "bm25"))
    assert ssr["quality"] == ref["quality"]  # the disk index ranks exactly like the oracle
    assert ssr["outcomes"] == ref["outcomes"] and ssr["input_size"] == ref["input_size"]
    for r in (ssr, bm25):
        _check_consistent(r, len(subset))
    assert ssr["quality"]["20"]["recall"] > 0.5  # MetaTool tools are found by their descriptions
    assert "| ssr | first |" in markdown({"settings": {"ks": [1, 5, 10, 20], "pool_k": 20, "seed": 0,
                                                       "providers": ["first"], "token_estimate": "x"},
                                          "registries": [report]})


def test_synthetic_registry_is_seeded_and_unique():
    a = list(iter_registry(200, seed=5))
    assert a == list(iter_registry(200, seed=5))
    assert a != list(iter_registry(200, seed=6))
    assert len({c.id for c in a}) == 200
    assert make_card(5, 150) == a[150]  # card i depends on (seed, i) only: registries nest
    assert len({c.tags[0] for c in a}) >= 10  # many domains
    assert all(c.skills and all(s.tags and s.examples for s in c.skills) for c in a)
    qs = make_queries(200, 50, seed=5)
    assert qs == make_queries(200, 50, seed=5)
    assert len({q.gold for q in qs}) == 50 and all(q.gold in {c.id for c in a} for q in qs)


def test_bench_cli_writes_json_and_markdown(tmp_path, capsys):
    out = tmp_path / "report"
    argv = ["agents", "bench", "--out", str(out), "--synthetic-cards", "150", "--synthetic-queries", "40",
            "--latency-cards", "300", "--latency-queries", "20", "--methods", "ssr,bm25", "--ks", "1,5",
            "--no-metatool"]
    assert main(argv) == 0
    report = json.loads((out / "agents-bench.json").read_text())
    [reg] = report["registries"]
    assert reg["name"] == "synthetic-150" and set(reg["methods"]) == {"ssr", "bm25"}
    for r in reg["methods"].values():
        _check_consistent(r, 40)
    lat = report["latency"]
    assert lat["cards"] == 300 and 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]
    md = (out / "agents-bench.md").read_text()
    assert "## synthetic-150" in md and "Discovery latency" in md
    assert not (out / "indexes").exists()  # temporary indexes removed
    assert main(["agents", "bench", "--out", str(out), "--methods", "ssr,lucene"]) == 2
    assert "unknown method" in capsys.readouterr().err


def test_bench_cli_defaults_to_the_bundled_metatool_and_quiet_prints_nothing(tmp_path, capsys):
    out = tmp_path / "report"
    argv = ["agents", "bench", "--out", str(out), "--synthetic-cards", "0", "--latency-cards", "0",
            "--methods", "ssr", "--max-queries", "60", "--quiet"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    [reg] = json.loads((out / "agents-bench.json").read_text())["registries"]
    assert reg["name"] == "metatool" and reg["cards"] == 199 and reg["queries"] == 60
    _check_consistent(reg["methods"]["ssr"], 60)
    assert main(argv[:-1] + ["--no-metatool", "--metatool", str(tmp_path)]) == 2
    assert "--metatool and --no-metatool" in capsys.readouterr().err


def test_serve_bench_without_wrk_exits_2_before_building(tmp_path):
    """benchmarks/bench_agents_serve.py needs wrk for two phases: said at once, exit 2, nothing built."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_agents_serve.py"
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    work = tmp_path / "work"
    r = subprocess.run([sys.executable, str(script), "--work", str(work)], capture_output=True, text=True,
                       env={**os.environ, "PATH": str(empty_path)}, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "wrk" in r.stderr and "--skip latency,throughput" in r.stderr
    assert not work.exists()
