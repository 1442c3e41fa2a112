"""Results (the JSON `run.py` writes) to markdown: the main table, SSR's throughput ratios, answers' agreement."""

from __future__ import annotations

MIB = 1 << 20
OTHER_LOAD_NOTE = 0.2  # cores used by other processes during a step, above which the row says so


def throughput(serve: dict | None, threads: int, k: int) -> float | None:
    """q/s of a serve report at (threads, K), or None when that configuration was not measured."""
    for row in (serve or {}).get("throughput", []):
        if row["threads"] == threads and row["k"] == k:
            return float(row["qps"])
    return None


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "–" if x is None else format(x, fmt)


def _latency(serve: dict | None, k: int) -> str:
    lat = (serve or {}).get("latency", {}).get(str(k))
    if not lat:
        return "–"
    return f"{lat['p50_ms']:.2f} / {lat['p95_ms']:.2f} / {lat['p99_ms']:.2f}"


def engine_error(e: dict) -> str | None:
    """The first error of an engine's row (build, then serve), one line, or None."""
    for stage in ("build", "serve"):
        err = (e.get(stage) or {}).get("error")
        if err:
            return f"{stage} failed: {' '.join(str(err).split())[:300]}"
    return e.get("error")


def main_table(results: dict) -> str:
    """One row per engine: build, size, throughput, latency, memory, warm-up; errors in the row."""
    ks = results["settings"]["k"]
    threads = results["settings"]["threads"]
    corpus = results["collection"]["bytes"]
    head = ["engine", "build s", "build peak RSS MiB", "index MiB (× corpus)"]
    head += [f"q/s K={k} {t}t" for k in ks for t in threads]
    head += [f"latency ms p50/p95/p99 K={k}" for k in ks]
    head += ["serving RssAnon MiB", "warm-up s", "notes"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in results["engines"]:
        build, serve = e.get("build") or {}, e.get("serve") or {}
        notes = []
        if build.get("shared_with"):
            build_s = build_rss = f"(= {build['shared_with']})"
        else:
            build_s = _num(build.get("wall_seconds"), ",.1f")
            build_rss = _num(build.get("peak_rss_mib"))
        size = e.get("index_bytes")
        size_s = "–" if size is None else f"{size / MIB:,.0f} ({size / corpus:.2f}×)"
        row = [e["name"], build_s, build_rss, size_s]
        row += [_num(throughput(serve, t, k), ",.1f") for k in ks for t in threads]
        row += [_latency(serve, k) for k in ks]
        row += [_num(serve.get("serving_rss_anon_mib")), _num(serve.get("warmup_seconds"), ".2f")]
        batch = results["collection"].get("served_queries", results["collection"]["queries"])
        if serve.get("n_queries") and serve["n_queries"] != batch:
            notes.append(f"batches of the first {serve['n_queries']:,} queries")
        lat_n = {v.get("queries") for v in serve.get("latency", {}).values()}
        if lat_n and lat_n != {min(results["settings"]["latency_queries"], serve.get("n_queries") or 0)}:
            notes.append(f"latency over {', '.join(f'{n:,}' for n in sorted(lat_n))} queries")
        pps = {(r["threads"], r["k"]): r["postings_per_s_per_core"] for r in serve.get("throughput", [])
               if "postings_per_s_per_core" in r}
        if serve.get("compile_seconds") is not None:
            notes.append(f"a first process of the warm-up's queries took {serve['compile_seconds']:.1f} s (Numba "
                         "compiles there, or loads its cache)")
        if pps:
            notes.append("kernel M postings/s/core: " + ", ".join(
                f"K={k} {t}t {v / 1e6:,.0f}" for (t, k), v in sorted(pps.items(), key=lambda x: (x[0][1], x[0][0]))))
        busy = {stage: (e.get(stage) or {}).get("other_cpu_cores") or 0.0 for stage in ("build", "serve")}
        if max(busy.values()) >= OTHER_LOAD_NOTE:
            notes.append("other jobs used " + ", ".join(f"{v:.1f} cores during {k}" for k, v in busy.items()
                                                        if v >= OTHER_LOAD_NOTE))
        if e.get("carried_over"):
            notes.append(f"measured by the run of {e['carried_over']}")
        err = engine_error(e)
        if err:
            notes.append(err.replace("|", "/"))
        row.append("; ".join(notes))
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def ratios(results: dict, ours: str = "ssr") -> list[dict]:
    """Our `ours` mode's q/s divided by each other engine's, per (threads, K); None where either is missing."""
    by = {e["name"]: e.get("serve") for e in results["engines"]}
    rows = []
    for e in results["engines"]:
        if e["name"] == ours:
            continue
        row: dict = {"engine": e["name"]}
        for k in results["settings"]["k"]:
            for t in results["settings"]["threads"]:
                a, b = throughput(by.get(ours), t, k), throughput(e.get("serve"), t, k)
                row[f"K={k} {t}t"] = a / b if a and b else None
        rows.append(row)
    return rows


def ratio_table(results: dict, ours: str = "ssr") -> str:
    rows = ratios(results, ours)
    if not rows:
        return ""
    cols = [c for c in rows[0] if c != "engine"]
    out = [f"| {ours} q/s ÷ engine q/s | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for r in rows:
        out.append(f"| {r['engine']} | " + " | ".join("–" if r[c] is None else f"{r[c]:.2f}×" for c in cols) + " |")
    return "\n".join(out)


def agreement(results: dict, reference: str = "bm25") -> dict[str, float]:
    """Mean overlap of each engine's top-10 with `reference`'s (over the sampled queries)."""
    by = {e["name"]: (e.get("serve") or {}).get("top10_sample") for e in results["engines"]}
    ref = by.get(reference)
    out: dict[str, float] = {}
    if not ref:
        return out
    for name, top in by.items():
        if name == reference or not top:
            continue
        pairs = [(set(a), set(b)) for a, b in zip(ref, top, strict=False) if a or b]
        if pairs:
            out[name] = sum(len(a & b) / max(len(a), len(b)) for a, b in pairs) / len(pairs)
    return out


def markdown(results: dict) -> str:
    """The whole report of one run."""
    c, s, m = results["collection"], results["settings"], results["machine"]
    rounds = f", the median of {s['repeat']} rounds" if s.get("repeat", 1) > 1 else ""
    lines = [f"### {c['passages']:,} passages, {c['queries']:,} {results['queries_kind']} queries",
             "",
             f"Date {results['date']}; machine: {m.get('Model name', '?')}, {m.get('cores')} cores, "
             f"{m.get('ram_gib', '?')} GiB RAM. Collection `{c['path']}` ({c['bytes'] / MIB:,.0f} MiB). "
             f"Threads: {', '.join(map(str, s['threads']))}; throughput: one batch call of "
             f"{c.get('served_queries', c['queries']):,} queries per configuration"
             f"{' (the queries cycled)' if c.get('served_queries', c['queries']) > c['queries'] else ''}{rounds}; "
             f"latency: single-query calls on 1 thread over the first {s['latency_queries']:,} queries."
             + (f" While serving, {s['busy_neighbours']} other process(es) spun on a core each (`--busy`)."
                if s.get("busy_neighbours") else ""),
             "",
             main_table(results),
             ""]
    rt = ratio_table(results)
    if rt:
        lines += ["SSR throughput relative to each engine (above 1: SSR is faster):", "", rt, ""]
    agree = agreement(results)
    if agree:
        lines.append("Top-10 overlap with our BM25 (same tokens; sampled queries): " +
                     ", ".join(f"{k} {v:.3f}" for k, v in sorted(agree.items())) + ".")
        lines.append("")
    return "\n".join(lines)
