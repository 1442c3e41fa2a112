"""The benchmark harness's own code: engine lists, process-tree measurement, tables, a tiny real run.

Timings are not asserted (they depend on the machine); what the harness records and how it
reports it is.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from harness import engines, measure, tables  # noqa: E402


def _load_run():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", BENCH / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------- engine lists


def test_parse_list_all_none_and_order():
    assert engines.parse_list("all", engines.PEERS, "peer") == ["bm25s", "pisa", "tantivy"]
    assert engines.parse_list("none", engines.PEERS, "peer") == []
    assert engines.parse_list(" Tantivy,bm25s,tantivy ", engines.PEERS, "peer") == ["tantivy", "bm25s"]


def test_parse_list_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown peer 'lucene'"):
        engines.parse_list("bm25s,lucene", engines.PEERS, "peer")


def test_exhaustive_shares_the_ssr_index(tmp_path):
    assert engines.index_dir("exhaustive", tmp_path) == engines.index_dir("ssr", tmp_path) == tmp_path / "ssr"
    assert engines.build_command("exhaustive", tmp_path / "c.tsv", tmp_path / "x", tmp_path / "j") is None
    bm25 = engines.build_command("bm25", tmp_path / "c.tsv", tmp_path / "x", tmp_path / "j")
    assert bm25 is not None and bm25[-2:] == ["--scoring", "bm25"] and "build-index" in bm25


def test_missing_module_names_the_module(monkeypatch):
    monkeypatch.setitem(engines.PEER_MODULES, "pisa", "no_such_module_for_the_harness")
    assert "no_such_module_for_the_harness" in engines.missing_module("pisa")
    assert engines.missing_module("ssr") is None


# ---------------------------------------------------------------------------- measurement


def test_busy_neighbours_spin_while_the_block_runs_and_are_gone_after():
    import psutil  # in the test extra: never skipped
    me = psutil.Process()
    with measure.busy_neighbours(2):
        kids = [p for p in me.children() if "while True" in " ".join(p.cmdline())]
        assert len(kids) == 2
        t0 = sum(p.cpu_times().user for p in kids)
        time.sleep(1.0)
        assert sum(p.cpu_times().user for p in kids) - t0 > 0.05  # they spin (a loaded machine shares the cores)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in kids)
    with measure.busy_neighbours(0):
        assert not [p for p in me.children() if "while True" in " ".join(p.cmdline())]


def test_run_tracked_sees_a_childs_memory_and_its_log(tmp_path):
    # the parent starts a child that holds ~120 MiB: the tree's peak must include the child
    child = "import time; b = bytearray(120 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.8)"
    code = f"import subprocess, sys; print('started'); subprocess.run([sys.executable, '-c', {child!r}])"
    run = measure.run_tracked([sys.executable, "-c", code], tmp_path / "log.txt", interval=0.05)
    assert run["returncode"] == 0 and run["killed"] is None
    assert run["peak_rss_mib"] > 120
    assert run["log_tail"] == "started"
    assert run["cpu_seconds"] > 0 and run["other_cpu_cores"] >= 0


def test_run_tracked_kills_a_tree_over_the_memory_limit(tmp_path):
    code = "import time; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(30)"
    run = measure.run_tracked([sys.executable, "-c", code], tmp_path / "log.txt", interval=0.05,
                              limit_bytes=100 << 20)
    assert run["killed"] and "limit" in run["killed"]
    assert run["wall_seconds"] < 20


def test_seconds_per_call_repeats_until_min_seconds():
    calls = []
    per_call, n = measure.seconds_per_call(lambda: (calls.append(1), time.sleep(0.01)), min_seconds=0.1)
    assert n == len(calls) and 5 <= n <= 11  # 0.1 s of 10 ms calls, however slow the sleeps
    assert 0.01 <= per_call <= 0.1 / (n - 1)
    # min_seconds 0: exactly one call
    assert measure.seconds_per_call(lambda: calls.append(1))[1] == 1


def test_repeated_alternates_configs_in_rounds_and_counts_calls():
    order: list[str] = []
    counts: dict[tuple, list[int]] = {}
    out = measure.repeated([("a",), ("b",)], lambda c: (order.append(c), time.sleep(0.004)), repeat=2,
                           min_seconds=0.02, calls=counts)
    assert set(out) == set(counts) == {("a",), ("b",)}
    assert all(len(v) == 2 for v in out.values()) and all(len(v) == 2 for v in counts.values())
    # round 1 runs a's calls then b's, round 2 again: the configurations alternate between rounds
    runs = [c for i, c in enumerate(order) if i == 0 or order[i - 1] != c]
    assert runs == ["a", "b", "a", "b"]
    assert sum(sum(v) for v in counts.values()) == len(order)
    assert all(0.004 <= s <= 0.02 for v in out.values() for s in v)


def test_dir_bytes_counts_nested_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"0" * 1000)
    (tmp_path / "y.bin").write_bytes(b"0" * 24)
    assert measure.dir_bytes(tmp_path) == 1024
    assert measure.dir_bytes(tmp_path / "y.bin") == 24


# ---------------------------------------------------------------------------- tables


def _results() -> dict:
    def serve(q10, q1000, top=None):
        rows = [{"threads": t, "k": k, "qps": q * t, "seconds": 1.0} for t in (1, 2) for k, q in ((10, q10),
                                                                                              (1000, q1000))]
        lat = {"10": {"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "queries": 50},
               "1000": {"p50_ms": 4.0, "p95_ms": 5.0, "p99_ms": 6.5, "queries": 50}}
        return {"throughput": rows, "latency": lat, "serving_rss_anon_mib": 12.0, "warmup_seconds": 0.5,
                "n_queries": 100, "top10_sample": top}

    return {
        "date": "2026-01-01 00:00 UTC", "queries_kind": "generated",
        "machine": {"Model name": "CPU", "cores": 2, "ram_gib": 8},
        "collection": {"path": "c.tsv", "passages": 1000, "queries": 100, "bytes": 1 << 20},
        "settings": {"k": [10, 1000], "threads": [1, 2], "latency_queries": 50},
        "engines": [
            {"name": "ssr", "build": {"wall_seconds": 2.0, "peak_rss_mib": 300.0}, "index_bytes": 3 << 20,
             "serve": serve(400.0, 100.0)},
            {"name": "exhaustive", "build": {"shared_with": "ssr"}, "index_bytes": 3 << 20,
             "serve": serve(40.0, 50.0) | {"n_queries": 60}},
            {"name": "bm25", "build": {"wall_seconds": 1.0, "peak_rss_mib": 200.0}, "index_bytes": 1 << 20,
             "serve": serve(200.0, 100.0, top=[["1", "2"], ["3"]])},
            {"name": "bm25s", "build": {"wall_seconds": 1.5, "peak_rss_mib": 150.0}, "index_bytes": 1 << 19,
             "serve": serve(100.0, 25.0, top=[["2", "1"], ["4"]])},
            {"name": "pisa", "build": {"wall_seconds": 9.0, "peak_rss_mib": 99.0, "error": "killed: | over limit",
                                       "other_cpu_cores": 0.75}},
            {"name": "tantivy", "error": "python module 'tantivy' not installed"},
        ],
    }


def test_ratios_divide_ssr_throughput_by_each_engine():
    rows = {r["engine"]: r for r in tables.ratios(_results())}
    assert rows["bm25s"]["K=10 1t"] == pytest.approx(4.0)
    assert rows["bm25s"]["K=1000 2t"] == pytest.approx(4.0)
    assert rows["exhaustive"]["K=10 2t"] == pytest.approx(10.0)
    assert rows["pisa"]["K=10 1t"] is None and "ssr" not in rows


def test_main_table_keeps_failed_rows_with_their_error():
    md = tables.main_table(_results())
    lines = md.splitlines()
    assert len(lines) == 2 + 6  # header, rule, one row per engine
    assert all(line.count("|") == lines[0].count("|") for line in lines)  # "|" inside an error is escaped
    pisa = next(line for line in lines if line.startswith("| pisa "))
    assert "build failed: killed: / over limit" in pisa and "other jobs used 0.8 cores during build" in pisa
    tantivy = next(line for line in lines if line.startswith("| tantivy "))
    assert "not installed" in tantivy
    exhaustive = next(line for line in lines if line.startswith("| exhaustive "))
    assert "(= ssr)" in exhaustive and "batches of the first 60 queries" in exhaustive
    ssr = next(line for line in lines if line.startswith("| ssr "))
    assert "| 400.0 | 800.0 | 100.0 | 200.0 |" in ssr and "1.00 / 2.00 / 3.00" in ssr and "3 (3.00×)" in ssr


def test_agreement_is_top10_overlap_with_our_bm25():
    assert tables.agreement(_results()) == {"bm25s": pytest.approx((1.0 + 0.0) / 2)}


def test_markdown_has_heading_machine_and_ratio_table():
    md = tables.markdown(_results())
    assert md.startswith("### 1,000 passages, 100 generated queries")
    assert "CPU, 2 cores, 8 GiB RAM" in md
    assert "| ssr q/s ÷ engine q/s | K=10 1t | K=10 2t | K=1000 1t | K=1000 2t |" in md


# ---------------------------------------------------------------------------- a tiny real run


def test_tiny_run_end_to_end(tmp_path, monkeypatch):
    """2,000 generated passages; our ssr and bm25 modes, tantivy if installed, a peer that is missing."""
    peers = ["pisa"]
    try:
        import tantivy  # noqa: F401

        peers.append("tantivy")
    except ImportError:
        pass
    # a peer whose module is absent must keep its row, with the reason
    monkeypatch.setitem(engines.PEER_MODULES, "pisa", "no_such_module_for_the_harness")
    run = _load_run()
    out, data = tmp_path / "out", tmp_path / "data"
    argv = ["--scale", "2000", "--ours", "ssr,bm25", "--peers", ",".join(peers), "--data", str(data),
            "--out", str(out), "--latency-queries", "20", "--max-queries", "100", "--min-batch", "250",
            "--k", "10", "100", "--min-seconds", "0.05"]
    assert run.main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["collection"]["passages"] == 2000 and results["collection"]["generated"]
    # the 100 queries, cycled to 300 (>= 250) with fresh ids, originals first
    served = Path(results["collection"]["served_path"]).read_text().splitlines()
    assert results["collection"]["served_queries"] == len(served) == 300
    assert served[0].split("\t")[0] + "~2" == served[100].split("\t")[0]
    assert served[0].split("\t")[1] == served[200].split("\t")[1]
    by = {e["name"]: e for e in results["engines"]}
    assert list(by) == ["ssr", "bm25", *peers]
    assert "no_such_module_for_the_harness" in by["pisa"]["error"] and "serve" not in by["pisa"]
    for name in ["ssr", "bm25", *peers[1:]]:
        e = by[name]
        assert e["build"]["returncode"] == 0 and e["build"]["peak_rss_mib"] > 0 and e["index_bytes"] > 0
        s = e["serve"]
        assert "error" not in s, s
        assert {(r["threads"], r["k"]) for r in s["throughput"]} == {(t, k) for t in results["settings"]["threads"]
                                                                    for k in (10, 100)}
        assert s["n_queries"] == 300 and all(r["qps"] > 0 for r in s["throughput"])
        # each round called the batch back to back for >= 0.05 s: seconds per call times calls covers it
        for r in s["throughput"]:
            assert len(r["calls_each"]) == len(r["seconds_each"]) == 1 and r["calls_each"][0] >= 1
            assert r["seconds_each"][0] * r["calls_each"][0] >= 0.05
        assert set(s["latency"]) == {"10", "100"} and s["latency"]["10"]["queries"] == 20
        assert s["warmup_seconds"] >= 0 and s["rss_anon_mib"]["baseline"] > 0
    assert any("postings_per_s_per_core" in r for r in by["ssr"]["serve"]["throughput"])
    assert by["ssr"]["serve"]["compile_seconds"] > 0  # the first process that fills Numba's cache ran
    md = (out / "results.md").read_text()
    assert "| pisa |" in md and "| ssr |" in md
    pngs = {p.name for p in out.glob("*.png")}
    if pngs:  # matplotlib (the bench extra) present
        assert pngs == {"throughput_vs_k.png", "latency.png", "build_time.png", "peak_rss.png", "index_size.png"}
    if "tantivy" in by:  # same tokens, different k1/b: answers overlap our BM25's, and are not identical
        assert 0.3 < tables.agreement(results)["tantivy"] <= 1.0

    # reuse: --skip-build keeps the indexes and their build figures, --report-only redoes the tables
    (out / "results.md").unlink()
    assert run.main([*argv, "--skip-build", "--ours", "ssr", "--peers", "none"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert [e["name"] for e in again["engines"]] == list(by)  # rows not re-run are carried over, in order
    assert [e["name"] for e in again["engines"] if e.get("carried_over")] == list(by)[1:]
    assert again["engines"][0]["build"]["reused"] is True
    assert again["engines"][0]["build"]["wall_seconds"] == by["ssr"]["build"]["wall_seconds"]
    (out / "results.md").unlink()
    assert run.main(["--out", str(out), "--report-only"]) == 0
    assert (out / "results.md").read_text().startswith("### 2,000 passages")


def test_reused_collection_must_match_scale_and_query_kind(tmp_path):
    run = _load_run()
    data = tmp_path / "data"
    data.mkdir()
    (data / "collection.tsv").write_text("0\thello world\n")
    (data / "stats.json").write_text(json.dumps({"passages": 1, "queries": 1}))
    with pytest.raises(SystemExit, match="holds 1 passages, but --scale is 2"):
        run.main(["--scale", "2", "--data", str(data), "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="has generated queries, but --queries is dev-small"):
        run.main(["--scale", "1", "--queries", "dev-small", "--data", str(data), "--out", str(tmp_path / "o")])


def test_real_collection_runs_with_its_own_queries(tmp_path):
    """A collection gathered by data_scripts/gather_short_texts.py is served with its queries.tsv."""
    import subprocess
    import sys

    listing = tmp_path / "listing.tsv"
    words = ["fast json parser", "http client library", "image resize tool", "json schema validator",
             "terminal colors", "http server framework", "pdf text extraction", "yaml parser for python"]
    listing.write_text("name\tsummary\n" + "".join(f"p{i}\t{words[i % len(words)]} {i}\n" for i in range(300)))
    queries = tmp_path / "q.tsv"
    queries.write_text("1\tjson parser\n2\thttp server\n3\tpdf text\n")
    data = tmp_path / "real"
    gather = Path(__file__).resolve().parents[1] / "data_scripts" / "gather_short_texts.py"
    subprocess.run([sys.executable, str(gather), "--out", str(data), "--listing", f"{listing}:1",
                    "--queries", str(queries)], check=True, capture_output=True)
    run = _load_run()
    out = tmp_path / "out"
    argv = ["--scale", "300", "--queries", "real", "--data", str(data), "--out", str(out), "--ours", "ssr",
            "--peers", "none", "--latency-queries", "3", "--min-batch", "30", "--k", "10", "--threads", "1"]
    assert run.main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["collection"]["passages"] == 300 and results["collection"]["queries"] == 3
    assert results["collection"]["qrels_path"] is None and results["queries_kind"] == "real"
    ssr = results["engines"][0]
    assert ssr["name"] == "ssr" and "error" not in ssr["serve"], ssr
    with pytest.raises(SystemExit, match="holds 300 documents, but --scale is 301"):
        run.main([*argv[:1], "301", *argv[2:]])
    with pytest.raises(SystemExit, match="needs --data"):
        run.main(["--scale", "300", "--queries", "real", "--out", str(out)])


def test_bench_swing_reports_each_workloads_spread_and_correlation(tmp_path):
    import importlib.util

    from ssr_engine import build_index

    (tmp_path / "c.tsv").write_text("".join(f"{i}\tword{i % 7} other{i % 3} shared\n" for i in range(200)))
    (tmp_path / "q.tsv").write_text("1\tword1 shared\n2\tother2\n3\tnothing here\n")
    build_index(tmp_path / "c.tsv", tmp_path / "idx", quiet=True, workers=1)
    spec = importlib.util.spec_from_file_location("bench_swing", BENCH / "bench_swing.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "swing.json"
    assert module.main(["--index", str(tmp_path / "idx"), "--queries", str(tmp_path / "q.tsv"), "--windows", "3",
                        "--seconds", "0.02", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report["workloads"]) == ["batch", "l3", "ram", "alu"]
    assert report["queries"] == 3 and report["windows"] == 3
    for w in report["workloads"].values():
        assert w["median_per_s"] > 0 and w["spread"] >= 1.0 and -1.0 <= w["corr_with_batch"] <= 1.0 + 1e-9
    assert report["workloads"]["batch"]["corr_with_batch"] == pytest.approx(1.0)
