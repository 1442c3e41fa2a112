"""The agent-discovery benchmark: retrieval quality, outcomes, input size and latency.

For a registry with gold-labelled queries (MetaTool, or the synthetic registry) and each
preselection method (SSR, BM25) with the same K, prompt and parser:

- Recall@K and MRR@K for each K (one gold card per query, so Recall@K is the hit rate and
  MRR@K the mean of 1/rank of the gold card within the top K, 0 when it is absent);
- outcome counts of the orchestrator with the offline providers at the pool size `pool_k`
  (and how many selections were the gold card);
- input size: the prompt with the full registry against the prompt with the pool, in
  characters and estimated tokens (ceil(chars / 4)), summed over the queries; the reduction
  is 1 - pool / full of those sums, in percent.

Latency: `discover(query, k)` (search plus loading the pool's cards) over a generated
registry of 100,000 cards, one query at a time, p50/p99.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..datagen.cards import Query, iter_registry, make_queries
from ..eval.stats import percentiles
from .cards import AgentCard
from .discovery import Registry, build_registry
from .orchestrator import STATUSES, PromptBuilder, estimate_tokens, orchestrate, outcome_counts
from .providers import OFFLINE, make_provider

DEFAULT_KS = (1, 5, 10, 20)


# ---- data ------------------------------------------------------------------------------------


def load_metatool(directory: str | os.PathLike[str] | None = None,
                  max_queries: int | None = None) -> tuple[list[AgentCard], list[Query]]:
    """MetaTool's 199 tools as cards (name and description) and its single-tool queries with
    the tool as gold card (ids mt1, mt2, ...): the copy bundled with the package, or the
    original files (plugin_des.json, all_clean_data.csv) in `directory`."""
    from ..datasets.metatool import load_metatool as load

    data = load(directory, max_queries=max_queries, multi=False)
    source = str(Path(data.stats["source"]) / "plugin_des.json")
    cards = [AgentCard(id=name, name=name, description=text, source_path=source) for name, text in data.tools]
    queries = [Query(f"mt{qid}", text, gold) for (qid, text), gold in zip(data.queries, data.gold, strict=True)]
    return cards, queries


# ---- one registry ----------------------------------------------------------------------------


def _open_registry(cards: Sequence[AgentCard], method: str, workdir: Path | None, name: str) -> Registry:
    """A registry over `cards` with the method's preselection: a disk index, or (method
    "reference") the in-memory pure-Python SSR scorer."""
    if method == "reference":
        return Registry.from_cards(cards)
    if workdir is None:
        raise ValueError("a work directory is needed to build disk indexes")
    out = workdir / f"{name}-{method}"
    build_registry(cards, out, scoring=method, force=True, quiet=True)
    return Registry.open(out)


def evaluate(
    cards: Sequence[AgentCard],
    queries: Sequence[Query],
    registry: Registry,
    ks: Sequence[int] = DEFAULT_KS,
    pool_k: int = 20,
    providers: Sequence[str] = OFFLINE,
    seed: int = 0,
) -> dict[str, Any]:
    """Quality, outcomes and input size of one method on one registry (see the module doc)."""
    kmax = max(*ks, pool_k)
    texts = [q.text for q in queries]
    t0 = time.perf_counter()
    ranked = registry.discover_batch(texts, kmax, with_cards=False)
    search_s = time.perf_counter() - t0
    ranks = [(p.ids.index(q.gold) + 1 if q.gold in p.ids else None) for q, p in zip(queries, ranked, strict=True)]
    n = len(queries)
    quality = {}
    for k in sorted({*ks, pool_k}):
        hits = [r for r in ranks if r is not None and r <= k]
        quality[str(k)] = {"recall": len(hits) / n, "mrr": sum(1.0 / r for r in hits) / n}

    prompts = PromptBuilder()
    by_id = {c.id: c for c in cards}
    full_listing = prompts.listing(cards)
    full = [len(prompts.prompt(t, cards, full_listing)) for t in texts]
    sizes = {}
    for k in sorted({*ks, pool_k}):
        pool = [len(prompts.prompt(t, [by_id[i] for i in p.ids[:k]])) for t, p in zip(texts, ranked, strict=True)]
        sizes[str(k)] = {
            "full_chars": sum(full),
            "pool_chars": sum(pool),
            "full_tokens": sum(estimate_tokens(c) for c in full),
            "pool_tokens": sum(estimate_tokens(c) for c in pool),
            "reduction_pct": 100.0 * (1.0 - sum(pool) / sum(full)) if full else 0.0,
            "mean_pool_size": sum(min(k, len(p)) for p in ranked) / n,
        }

    outcomes = {}
    for name in providers:
        provider = make_provider(name, seed=seed)
        results = [
            orchestrate(q.text, [by_id[i] for i in p.ids[:pool_k]], provider, gold=q.gold, prompts=prompts)
            for q, p in zip(queries, ranked, strict=True)
        ]
        counts: dict[str, Any] = dict(outcome_counts(results))
        counts["correct"] = sum(o.correct for o in results)
        counts["accuracy"] = counts["correct"] / n
        outcomes[name] = counts
    return {
        "queries": n,
        "cards": len(cards),
        "empty_pools": sum(1 for p in ranked if len(p) == 0),
        "quality": quality,
        "input_size": sizes,
        "pool_k": pool_k,
        "outcomes": outcomes,
        "search_seconds": search_s,
    }


def bench_registry(
    name: str,
    cards: Sequence[AgentCard],
    queries: Sequence[Query],
    methods: Sequence[str],
    workdir: Path | None,
    **options: Any,
) -> dict[str, Any]:
    """`evaluate` for each preselection method on the same cards and queries."""
    report: dict[str, Any] = {"name": name, "cards": len(cards), "queries": len(queries), "methods": {}}
    for method in methods:
        t0 = time.perf_counter()
        registry = _open_registry(cards, method, workdir, name)
        build_s = time.perf_counter() - t0
        result = evaluate(cards, queries, registry, **options)
        result["build_seconds"] = build_s
        report["methods"][method] = result
    return report


def bench_latency(
    n_cards: int, n_queries: int, workdir: Path, *, k: int = 20, seed: int = 0, method: str = "ssr"
) -> dict[str, Any]:
    """Build a generated registry of n_cards (streamed) and time `discover` one query at a time."""
    out = workdir / f"latency-{n_cards}-{method}"
    t0 = time.perf_counter()
    build_registry(iter_registry(n_cards, seed), out, scoring=method, force=True, quiet=True)
    build_s = time.perf_counter() - t0
    registry = Registry.open(out)
    queries = make_queries(n_cards, n_queries, seed)
    registry.discover(queries[0].text, k)  # warm-up: kernel compilation, first page faults
    times = []
    hits = 0
    for q in queries:
        t = time.perf_counter()
        pool = registry.discover(q.text, k)
        times.append(time.perf_counter() - t)
        hits += q.gold in pool.ids
    t = time.perf_counter()
    registry.discover_batch([q.text for q in queries], k, with_cards=False)
    batch_s = time.perf_counter() - t
    ms = sorted(x * 1000 for x in times)
    pct = percentiles(ms, (50, 99))
    return {
        "cards": n_cards,
        "queries": n_queries,
        "k": k,
        "method": method,
        "build_seconds": build_s,
        "p50_ms": pct["p50"],
        "p99_ms": pct["p99"],
        "mean_ms": statistics.fmean(ms),
        "max_ms": ms[-1],
        "batch_queries_per_second": n_queries / batch_s if batch_s > 0 else None,
        f"recall_at_{k}": hits / n_queries,
    }


# ---- the whole report ------------------------------------------------------------------------


def run_bench(
    out_dir: str | os.PathLike[str],
    *,
    metatool: str | os.PathLike[str] | None = None,
    use_metatool: bool | None = None,
    methods: Sequence[str] = ("ssr", "bm25"),
    ks: Sequence[int] = DEFAULT_KS,
    pool_k: int = 20,
    seed: int = 0,
    synthetic_cards: int = 1000,
    synthetic_queries: int = 250,
    latency_cards: int = 100_000,
    latency_queries: int = 1000,
    max_queries: int | None = None,
    workdir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and write `agents-bench.json` and `agents-bench.md` into out_dir.

    MetaTool is read from `metatool` (a directory of the original files), or from the copy bundled
    with the package when `use_metatool` is True and no directory is given; it is skipped when
    `use_metatool` is False, or None without a directory."""
    use_metatool = metatool is not None if use_metatool is None else use_metatool
    from contextlib import nullcontext

    from ..atomic import write_text
    from ..generations import scratch_dir

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if workdir:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    # without a workdir the indexes go to a private scratch folder inside out_dir (removed at the
    # end, or by the next run if this one is killed); nothing already in out_dir is touched
    with nullcontext(Path(workdir)) if workdir else scratch_dir(out, ".agents-bench-") as work:
        report = _run(work, metatool, use_metatool, synthetic_cards, synthetic_queries, latency_cards, latency_queries,
                      max_queries, methods, ks, pool_k, seed)
    write_text(out / "agents-bench.json", json.dumps(report, indent=2) + "\n")
    write_text(out / "agents-bench.md", markdown(report))
    return report


def _run(work: Path, metatool: Any, use_metatool: bool, synthetic_cards: int, synthetic_queries: int,
         latency_cards: int, latency_queries: int, max_queries: int | None, methods: Any, ks: Any, pool_k: int,
         seed: int) -> dict[str, Any]:
    options = {"ks": tuple(ks), "pool_k": pool_k, "seed": seed}
    report: dict[str, Any] = {
        "settings": {
            "ks": list(ks), "pool_k": pool_k, "seed": seed, "methods": list(methods), "providers": list(OFFLINE),
            "token_estimate": "ceil(chars / 4)",
        },
        "registries": [],
    }
    if use_metatool:
        cards, queries = load_metatool(metatool, max_queries)
        report["registries"].append(bench_registry("metatool", cards, queries, methods, work, **options))
    if synthetic_cards > 0 and synthetic_queries > 0:
        cards = list(iter_registry(synthetic_cards, seed))
        queries = make_queries(synthetic_cards, synthetic_queries, seed)
        name = f"synthetic-{synthetic_cards}"
        report["registries"].append(bench_registry(name, cards, queries, methods, work, **options))
    if latency_cards > 0:
        report["latency"] = bench_latency(latency_cards, latency_queries, work, k=pool_k, seed=seed)
    return report


def markdown(report: dict[str, Any]) -> str:
    """A markdown summary of a `run_bench` report."""
    lines = ["# Agent discovery benchmark", ""]
    s = report["settings"]
    lines.append(f"K in {s['ks']}; orchestrator pool K = {s['pool_k']}; offline providers {', '.join(s['providers'])} "
                 f"(random seeded {s['seed']}); tokens estimated as {s['token_estimate']}.")
    for reg in report["registries"]:
        lines += ["", f"## {reg['name']}: {reg['cards']:,} cards, {reg['queries']:,} queries", ""]
        methods = list(reg["methods"])
        ks = list(next(iter(reg["methods"].values()))["quality"])
        lines.append("| method | " + " | ".join(f"R@{k}" for k in ks) + " | " + " | ".join(f"MRR@{k}" for k in ks)
                     + " | empty pools |")
        lines.append("|---" * (2 * len(ks) + 2) + "|")
        for m in methods:
            r = reg["methods"][m]
            lines.append(f"| {m} | " + " | ".join(f"{r['quality'][k]['recall']:.4f}" for k in ks) + " | "
                         + " | ".join(f"{r['quality'][k]['mrr']:.4f}" for k in ks) + f" | {r['empty_pools']} |")
        lines += ["", "Input size, summed over the queries (full registry vs pool):", ""]
        lines.append("| method | K | mean pool | full chars | pool chars | full tokens | pool tokens | reduction |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for m in methods:
            for k, z in reg["methods"][m]["input_size"].items():
                lines.append(f"| {m} | {k} | {z['mean_pool_size']:.2f} | {z['full_chars']:,} | {z['pool_chars']:,} | "
                             f"{z['full_tokens']:,} | {z['pool_tokens']:,} | {z['reduction_pct']:.2f}% |")
        pk = next(iter(reg["methods"].values()))["pool_k"]
        lines += ["", f"Outcomes at K = {pk}:", ""]
        lines.append("| method | provider | " + " | ".join(STATUSES) + " | correct | accuracy |")
        lines.append("|---" * (len(STATUSES) + 4) + "|")
        for m in methods:
            for p, c in reg["methods"][m]["outcomes"].items():
                lines.append(f"| {m} | {p} | " + " | ".join(str(c[st]) for st in STATUSES)
                             + f" | {c['correct']} | {c['accuracy']:.4f} |")
    lat = report.get("latency")
    if lat:
        lines += ["", f"## Discovery latency: {lat['cards']:,} generated cards, {lat['queries']:,} queries, "
                  f"K = {lat['k']} ({lat['method']})", ""]
        lines.append(f"p50 {lat['p50_ms']:.3f} ms, p99 {lat['p99_ms']:.3f} ms, mean {lat['mean_ms']:.3f} ms, "
                     f"max {lat['max_ms']:.3f} ms (one query at a time, cards loaded); batch "
                     f"{lat['batch_queries_per_second']:.0f} queries/s; build {lat['build_seconds']:.1f} s; "
                     f"Recall@{lat['k']} {lat['recall_at_' + str(lat['k'])]:.4f}.")
    return "\n".join(lines) + "\n"

