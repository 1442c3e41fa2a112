"""The demo's report: tables (printed and in report.md), report.json and PNG figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..atomic import atomic_write, write_text

CRANFIELD_METRICS = ("MRR@10", "R@10", "R@100", "R@1000", "nDCG@10")


def _table(header: list[str], rows: list[list[str]]) -> str:
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"
    return "\n".join(["| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


SIGNIFICANCE_MEASURE = "nDCG@10"


def _versus_bm25(section: dict[str, Any], method: str) -> str:
    """Mean nDCG@10 difference to BM25 and the paired tests' p-values (seeded: deterministic)."""
    rows = [r for r in section.get("significance", []) if r["system"] == method and r["metric"] == SIGNIFICANCE_MEASURE]
    if not rows:
        return "-"
    p = {r["test"]: r["p_value"] for r in rows}
    fmt = {t: "n/a" if v is None else f"{v:.2g}" for t, v in p.items()}
    return (f"{rows[0]['mean_difference']:+.4f}, p = {fmt.get('paired-t', 'n/a')} (t), "
            f"{fmt.get('randomization', 'n/a')} (perm.)")


def cranfield_quality_table(section: dict[str, Any]) -> str:
    """Effectiveness, one row per method (deterministic: README shows this table verbatim)."""
    header = ["method", *CRANFIELD_METRICS, "trec_eval", f"vs BM25 ({SIGNIFICANCE_MEASURE})"]
    rows = []
    for method, r in section["methods"].items():
        diff = r["trec_eval_max_abs_diff"]
        trec = "not checked" if diff is None else ("equal" if diff <= 1e-9 else f"differs by {diff:.4f}")
        if method == "bm25":
            versus = "baseline"
        elif method == "exhaustive":
            versus = "as ssr (the same run)" if section["inverted_equals_exhaustive"]["all"] else "not tested"
        else:
            versus = _versus_bm25(section, method)
        rows.append([method, *(f"{r['metrics'][m]:.4f}" for m in CRANFIELD_METRICS), trec, versus])
    return _table(header, rows)


def cranfield_speed_table(section: dict[str, Any]) -> str:
    header = ["method", "q/s", "threads", "p50 ms (1 thread)", "mean pool"]
    rows = [[m, f"{r['throughput_qps']:.0f}", str(r["threads"]), f"{r['latency_ms']['p50']:.2f}",
             f"{r['pool_mean']:.1f}"] for m, r in section["methods"].items()]
    return _table(header, rows)


def agents_quality_table(section: dict[str, Any]) -> str:
    """Discovery quality, one row per method (deterministic: README shows this table verbatim)."""
    ks = [str(k) for k in section["ks"]]
    pk = str(section["pool_k"])
    header = ["method", *(f"R@{k}" for k in ks), *(f"MRR@{k}" for k in ks), f"both tools@{pk}",
              f"input saved@{pk}", f"outcomes@{pk} ({section['provider']})"]
    rows = []
    for method, r in section["methods"].items():
        o = r["outcomes"][section["provider"]]
        rows.append([method, *(f"{r['quality'][k]['recall']:.4f}" for k in ks),
                     *(f"{r['quality'][k]['mrr']:.4f}" for k in ks),
                     f"{r['multi_tool']['all_gold_in_top_k'][pk]:.4f}",
                     f"{r['input_size'][pk]['reduction_pct']:.1f}%",
                     f"{o['selected']:,} selected ({o['correct']:,} right), {o['retrieval_miss']:,} misses, "
                     f"{o['empty_pool']:,} empty"])
    return _table(header, rows)


def scale_table(section: dict[str, Any]) -> str:
    header = ["K", f"q/s ({section['threads']} threads)", "p50 ms (1 thread)", "p99 ms (1 thread)"]
    rows = [[str(r["k"]), f"{r['queries_per_second']:,.0f}", f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}"]
            for r in section["search"]]
    return _table(header, rows)


def _gib(n: int | None) -> str:
    return "not measured" if n is None else f"{n / 2**30:.2f} GiB"


def markdown(report: dict[str, Any]) -> str:
    """report.md: every table, the checks, where the files are, the machine."""
    out = ["# ssr demo", ""]
    m = report["machine"]
    out.append(f"{m['processor']}, {m['cpus']} CPUs, {m['system']}, Python {m['python']}, numba {m['numba']}; "
               f"{report['date']}; {report['seconds']:.0f} s in all.")
    c = report.get("cranfield")
    if c:
        eq = c["inverted_equals_exhaustive"]
        out += ["", "## 1. Cranfield-1400 (bundled: 1,400 abstracts, 225 queries, graded qrels), K = 1000", "",
                cranfield_quality_table(c), cranfield_speed_table(c),
                f"Inverted index == exhaustive scan: {eq['identical']}/{eq['queries']} queries identical "
                "(ids and scores, bit for bit). trec_eval: the measures of pytrec_eval (through ir_measures) on the "
                "run files as written, averaged over the judged queries. Runs and per-method reports: "
                + ", ".join(f"`{Path(r['run']).name}`" for r in c["methods"].values()) + "."]
        if c.get("significance"):
            from ..eval.compare import tests_table

            out += ["", "Paired tests of SSR against BM25 over the 225 judged queries (`ssr_engine.eval.compare`: "
                    "scipy's paired t-test and a randomization test, 10,000 resamples, seed 42; * = p < 0.05):", "",
                    tests_table(c["significance"])]
    a = report.get("agents")
    if a:
        col = a["collection"]
        out += ["", f"## 2. Agent discovery on MetaTool (bundled, MIT: {col['tools']} tools, {col['queries']:,} "
                f"queries, {col['multi_tool_queries']} two-tool queries)", "", agents_quality_table(a),
                f"R@K: the gold tool is among the first K; MRR@K: mean of 1/rank of the gold tool within K. "
                f"both tools@{a['pool_k']}: two-tool queries with both gold tools in the pool. input saved: "
                f"1 - (prompt with the pool) / (prompt with all {col['tools']} tools), in characters summed over the "
                f"queries. Outcomes with the offline provider `{a['provider']}` (it picks pool entry 1). The prompt "
                f"for one query is in `{Path(a['prompt_example']).name}`."]
    s = report.get("scale")
    if s:
        b, eq, col = s["build"], s["inverted_equals_exhaustive"], s["collection"]
        built = "recorded when it was built on " + str(b.get("built")) if b.get("reused") else "measured in this run"
        out += ["", f"## 3. Scale: {col['passages']:,} generated MS MARCO-shaped passages, {col['queries']:,} "
                "generated queries", "",
                f"Build: {b['seconds']:.1f} s, peak memory {_gib(b.get('peak_rss_bytes'))} (RSS of the build "
                f"process; {built}); index {s['index']['bytes'] / 1e6:.0f} MB, {s['index']['terms']:,} signals, "
                f"{s['index']['postings']:,} postings.", "", scale_table(s),
                f"q/s: all queries in one batch, best of 3. Inverted index == exhaustive scan at K = {eq['k']}: "
                f"{eq['identical']}/{eq['queries']} queries identical (ids, scores and matched-signal counts); the "
                f"exhaustive scan ran at {eq['exhaustive_queries_per_second']:,.0f} q/s."]
    if report.get("figures"):
        out += ["", "Figures: " + ", ".join(f"`{Path(f).name}`" for f in report["figures"]) + "."]
    elif report.get("figures_note"):
        out += ["", report["figures_note"]]
    return "\n".join(out) + "\n"


def figures(report: dict[str, Any], directory: Path) -> tuple[list[str], str | None]:
    """PNG figures when matplotlib is installed (the `bench` extra): paths written, or a note why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "No figures: matplotlib is not installed (pip install 'ssr_engine[bench]')."
    written = []
    a = report.get("agents")
    if a:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for method, r in a["methods"].items():
            ks = [int(k) for k in a["ks"]]
            ax.plot(ks, [r["quality"][str(k)]["recall"] for k in ks], marker="o", label=method)
        ax.set_xlabel("K (pool size)")
        ax.set_ylabel("Recall@K (gold tool in the pool)")
        ax.set_title(f"MetaTool: {a['collection']['queries']:,} queries, {a['collection']['tools']} tools")
        ax.set_xticks([int(k) for k in a["ks"]])
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend()
        written.append(_save(fig, directory / "agents-recall.png"))
        plt.close(fig)
    s = report.get("scale")
    if s:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        ks = [r["k"] for r in s["search"]]
        ax.plot(ks, [r["queries_per_second"] for r in s["search"]], marker="o", label=f"q/s ({s['threads']} threads)")
        ax.set_xscale("log")
        ax.set_xlabel("K")
        ax.set_ylabel("queries per second")
        ax.set_ylim(bottom=0)
        ax.set_title(f"SSR on {s['collection']['passages']:,} generated passages")
        ax.grid(alpha=0.3)
        ax.legend()
        written.append(_save(fig, directory / "scale-qps.png"))
        plt.close(fig)
    return written, None


def _save(fig: Any, path: Path) -> str:
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110, bbox_inches="tight")
    return str(path)


def write_json(path: Path, report: dict[str, Any]) -> None:
    write_text(path, json.dumps(report, indent=2) + "\n")
