"""Part 2: agent discovery on MetaTool (bundled): Recall@K and MRR of SSR and BM25, the
orchestrator's input saved at K = 20, outcome counts with an offline provider."""

from __future__ import annotations

from typing import Any

from ..datasets import CHECKSUMS
from .steps import Say, index_key, index_ready
from .workdir import WorkDir

KS = (1, 5, 10, 20)
POOL_K = 20
PROVIDER = "first"  # offline: always picks pool entry 1, so its accuracy is Recall@1 (an honest floor)


def run_agents(work: WorkDir, say: Say, *, max_queries: int | None = None) -> dict[str, Any]:
    """The report section `agents`; `max_queries` keeps that many evenly spaced queries (default: all)."""
    from ..agents.bench import evaluate, load_metatool
    from ..agents.discovery import Registry, build_registry
    from ..agents.orchestrator import PromptBuilder
    from ..datasets.metatool import load_metatool as load_dataset

    cards, queries = load_metatool()
    if max_queries is not None and max_queries < len(queries):
        # evenly spaced: the file is grouped by tool, so its first N queries would cover few tools
        stride = len(queries) / max_queries
        queries = [queries[int(i * stride)] for i in range(max_queries)]
    multi = load_dataset().multi
    say(f"MetaTool: {len(cards)} tools, {len(queries):,} single-tool and {len(multi)} two-tool queries")
    methods: dict[str, Any] = {}
    for method in ("ssr", "bm25"):
        step = f"metatool-registry-{method}"
        out = work.file(step)
        key = index_key({"dataset": "metatool", "sha256": CHECKSUMS["metatool"]}, method)
        if index_ready(work, step, key):
            say(f"reusing the {method} registry {out}")
        else:
            work.claim(step, [out])
            say(f"building the {method} registry {out}")
            build_registry(cards, out, scoring=method, quiet=True)
            work.done(step, key, [out])
        registry = Registry.open(out)
        say(f"MetaTool: discovery with {method}, K = {', '.join(map(str, KS))}")
        result = evaluate(cards, queries, registry, ks=KS, pool_k=POOL_K, providers=(PROVIDER,))
        pools = registry.discover_batch([text for text, _ in multi], max(KS), with_cards=False)
        result["multi_tool"] = {
            "queries": len(multi),
            "all_gold_in_top_k": {str(k): sum(all(t in p.ids[:k] for t in gold) for (_, gold), p
                                              in zip(multi, pools, strict=True)) / max(1, len(multi))
                                  for k in KS},
        }
        methods[method] = result
    # what the orchestrator reads for one query: the whole registry, or SSR's pool of 20
    registry = Registry.open(work.file("metatool-registry-ssr"))
    example = queries[0]
    pool = registry.discover(example.text, POOL_K)
    prompts = PromptBuilder()
    path = work.file("metatool-prompt-example.txt")
    work.claim("metatool-prompt-example", [path])
    path.write_text(f"# query: {example.text}\n# gold tool: {example.gold}\n# pool (SSR, K = {POOL_K}): "
                    f"{len(pool)} of {len(cards)} tools\n\n" + prompts.prompt(example.text, pool.cards) + "\n",
                    encoding="utf-8")
    work.done("metatool-prompt-example", {}, [path])
    return {
        "collection": {"tools": len(cards), "queries": len(queries), "multi_tool_queries": len(multi),
                       "source": "bundled MetaTool ToolE (MIT)"},
        "ks": list(KS),
        "pool_k": POOL_K,
        "provider": PROVIDER,
        "methods": methods,
        "prompt_example": str(path),
    }
