"""`ssr agents build|add|remove|discover|ask|serve|generate|bench`: agent discovery over a registry of Agent Cards."""

from __future__ import annotations

import argparse
from typing import Any

from ..signals import DEFAULT_CAP  # the package face imports signals already: --help stays fast


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="agents_command", metavar="ACTION")
    sub.required = True

    b = sub.add_parser("build", help="index a registry of Agent Cards", description="Index A2A Agent Cards (v0.3, "
                       "v1.0) and MCP tools (tools/list responses) from a JSONL file, a .json file, or a folder of "
                       "them (.well-known/agent-card.json layouts included); the cards are stored verbatim.")
    _card_arguments(b, "a repeated card id")
    b.add_argument("--out", required=True, metavar="DIR", help="index directory to create")
    b.add_argument("--scoring", choices=("ssr", "bm25"), default="ssr", help="preselection method (default ssr)")
    b.add_argument("--stopwords", metavar="FILE", help="replacement stopword list, one word per line")
    b.add_argument("--cap", type=int, default=DEFAULT_CAP,
                   help=f"at most this many signals per card (default {DEFAULT_CAP})")
    b.add_argument("--force", action="store_true", help="replace an existing index at --out")
    b.set_defaults(_action=_build)

    ad = _on_registry(sub, "add", _add, "add or replace cards in a registry (live: no rebuild)",
                      "Add cards to a registry, replacing cards with the same id, in one commit of the live index "
                      "(a new segment; the old versions deleted); rankings are exactly those of a rebuild over "
                      "the live cards.")
    _card_arguments(ad, "a card id repeated within --cards")

    rm = _on_registry(sub, "remove", _remove, "remove cards from a registry by id (live: no rebuild)",
                      "Remove the cards whose ids are listed in --ids (one id per line, taken exactly as written: "
                      "spaces inside an id are part of it).")
    rm.add_argument("--ids", required=True, metavar="FILE", help="one card id per line")
    rm.add_argument("--missing-ok", action="store_true", help="ids that are not in the registry are not an error")

    sv = _on_registry(sub, "serve", _serve, "serve discovery over HTTP (JSON API + MCP) or MCP on stdio",
                      "An HTTP JSON API (POST /discover, GET/PUT/DELETE /cards/{id}, GET /health, OpenAPI docs at "
                      "/docs) and an MCP server at /mcp (streamable HTTP), or MCP on stdio with --stdio. Needs the "
                      "`serve` extra (fastapi, uvicorn, mcp).")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sv.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    sv.add_argument("--token", help="require `Authorization: Bearer TOKEN` for writes (PUT, DELETE); "
                    "default: $SSR_AGENTS_TOKEN if set")
    sv.add_argument("--read-only", action="store_true", help="refuse every write")
    sv.add_argument("--stdio", action="store_true", help="speak MCP on stdin/stdout instead of HTTP")
    sv.add_argument("--max-k", type=int, default=1000, help="largest pool a request may ask for (default 1000)")
    sv.add_argument("--max-body", type=int, default=1 << 20, help="largest request body in bytes (default 1 MiB)")

    d = _on_registry(sub, "discover", _discover, "the pool of candidate agents for a request",
                     "Print the pool: at most K cards for the request, best first.")
    _pool_args(d)
    d.add_argument("--json", action="store_true", help="one JSON object with the pool as a list of id, score, matches")
    d.add_argument("--explain", action="store_true", help="show the matched signals and their weights")

    a = _on_registry(sub, "ask", _ask, "discover, then let a provider pick one agent from the pool",
                     "Discover the pool, prompt a provider with it and report the outcome.")
    _pool_args(a)
    a.add_argument("--provider", choices=("openai", "first", "random"), default="openai")
    a.add_argument("--base-url", default="https://api.openai.com/v1", help="OpenAI-compatible endpoint")
    a.add_argument("--model", default="gpt-4o-mini")
    a.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    a.add_argument("--timeout", type=float, default=30.0, help="seconds per HTTP request (default 30)")
    a.add_argument("--retries", type=int, default=3, help="retries on 429/5xx/timeouts (default 3)")
    a.add_argument("--seed", type=int, default=0, help="seed of the random provider")
    a.add_argument("--show-prompt", action="store_true", help="print the prompt sent to the provider")

    g = sub.add_parser("generate", help="write a seeded synthetic registry and its queries",
                       description="Write cards.jsonl and queries.jsonl of an SSR-AgentBench-like registry.")
    g.add_argument("--out", required=True, metavar="DIR")
    g.add_argument("--cards", type=int, default=1000, help="number of cards (default 1000)")
    g.add_argument("--queries", type=int, default=250, help="number of queries with gold cards (default 250)")
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(_action=_generate)

    r = sub.add_parser("bench", help="the agent-discovery benchmark (MetaTool, synthetic registry, latency)",
                       description="Recall@K, MRR, orchestrator outcomes, input size (SSR vs BM25) and latency; "
                       "writes agents-bench.json and agents-bench.md.")
    r.add_argument("--out", required=True, metavar="DIR", help="where to write the report")
    r.add_argument("--metatool", metavar="DIR", help="MetaTool data (plugin_des.json, all_clean_data.csv); "
                   "default: the copy bundled with the package")
    r.add_argument("--no-metatool", action="store_true", help="skip MetaTool")
    r.add_argument("--quiet", action="store_true", help="no notices on stderr and no summary line")
    r.add_argument("--methods", default="ssr,bm25", help="preselection methods, comma-separated (default ssr,bm25)")
    r.add_argument("-k", "--ks", default="1,5,10,20", help="K values for Recall@K and MRR (default 1,5,10,20)")
    r.add_argument("--pool-k", type=int, default=20, help="pool size given to the orchestrator (default 20)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--synthetic-cards", type=int, default=1000, help="0 to skip the synthetic registry")
    r.add_argument("--synthetic-queries", type=int, default=250)
    r.add_argument("--latency-cards", type=int, default=100_000, help="0 to skip the latency run")
    r.add_argument("--latency-queries", type=int, default=1000)
    r.add_argument("--max-queries", type=int, help="use only the first N MetaTool queries")
    r.add_argument("--work", metavar="DIR", help="keep the indexes in this directory (default: a temporary one "
                   "under --out, removed at the end)")
    r.set_defaults(_action=_bench)


def _on_registry(sub: Any, name: str, action: Any, summary: str, description: str) -> argparse.ArgumentParser:
    """The parser of an action on an existing registry: its --index and the function it runs."""
    p = sub.add_parser(name, help=summary, description=description)
    p.add_argument("--index", required=True, metavar="DIR", help="registry built by `ssr agents build`")
    p.set_defaults(_action=action)
    return p


def _pool_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", type=int, default=20, help="pool size K (default 20)")
    p.add_argument("query", metavar="QUERY")


def run(args: argparse.Namespace) -> int:
    return int(args._action(args))


def _build(args: argparse.Namespace) -> int:
    from ..agents.discovery import build_registry
    from ..stopwords import load_stopwords

    options = {"cap": args.cap}
    if args.stopwords:
        options["stopwords"] = load_stopwords(args.stopwords)
    out = build_registry(args.cards, args.out, scoring=args.scoring, force=args.force, quiet=False,
                         on_duplicate=args.on_duplicate, **options)
    print(f"agent registry written to {out}")
    return 0


def _pool(args: argparse.Namespace) -> tuple[Any, Any]:
    """The registry of --index and the pool of the query (`discover` and `ask` start alike)."""
    from ..agents.live import open_registry
    from ..retrieval import check_k

    check_k(args.k)
    registry = open_registry(args.index)
    return registry, registry.discover(args.query, args.k)


def _discover(args: argparse.Namespace) -> int:
    import json

    registry, pool = _pool(args)
    if args.json:
        out = pool.as_dict()
        if args.explain:
            for entry in out["pool"]:
                entry["signals"] = [{"signal": s, "weight": w} for s, w in registry.explain(args.query, entry["id"])]
        print(json.dumps(out, ensure_ascii=False))
        return 0
    if not len(pool):
        print("empty pool: no card shares a signal with the query")
        return 0
    for rank, (card, score, matches) in enumerate(zip(pool.cards, pool.scores, pool.matches, strict=True), 1):
        print(f"{rank}\t{card.id}\t{score:.6f}\t{matches}\t{card.name}")
        if args.explain:
            for s, w in registry.explain(args.query, card.id):
                print(f"\t\t{w:.6f}\t{s}")
    return 0


def _ask(args: argparse.Namespace) -> int:
    from ..agents.orchestrator import build_prompt, orchestrate
    from ..agents.providers import make_provider

    registry, pool = _pool(args)
    http = {}
    if args.provider == "openai":
        http = {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
                "timeout": args.timeout, "max_retries": args.retries}
    provider = make_provider(args.provider, seed=args.seed, **http)
    if args.show_prompt and len(pool):
        print(build_prompt(args.query, pool.cards))
        print("---")
    outcome = orchestrate(args.query, pool.cards, provider)
    print(f"outcome: {outcome.status} (pool of {outcome.pool_size})")
    if outcome.card_id is not None:
        card = registry.card(outcome.card_id)
        print(f"selected {outcome.index}: {card.id}\t{card.name}")
    if outcome.error:
        print(f"error: {outcome.error}")
    if outcome.status == "invalid_index":
        print(f"answer: {outcome.answer!r}")
    return 0 if outcome.status == "selected" else 1


def _card_arguments(parser: argparse.ArgumentParser, repeated: str) -> None:
    """--cards and --on-duplicate, as `build` and `add` take them."""
    parser.add_argument("--cards", required=True, metavar="PATH", help="JSONL file, .json file or folder of card files")
    parser.add_argument("--on-duplicate", choices=("error", "keep-last"), default="error",
                        help=f"{repeated} is an error (default) or the last card wins")


def _add(args: argparse.Namespace) -> int:
    from ..agents.live import open_registry
    from ..agents.sources import read_cards

    registry = open_registry(args.index)
    cards = read_cards(args.cards, args.on_duplicate)
    report = registry.put_many(cards)
    print(f"{report['added']} cards added, {report['replaced']} replaced; the registry holds {len(registry)} cards "
          f"(generation {report['version']})")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from ..agents.live import open_registry
    from ..errors import InputError

    try:
        raw = open(args.ids, "rb").read()
    except OSError as exc:
        raise InputError(args.ids, None, f"cannot read ({exc.strerror})") from exc
    ids: list[str] = []
    lines: dict[str, int] = {}
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        try:
            text = line.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as exc:
            raise InputError(args.ids, lineno, f"not UTF-8 ({exc.reason})") from exc
        if lineno == 1:
            text = text.removeprefix("\ufeff")
        if text.strip():
            ids.append(text)
            lines.setdefault(text, lineno)
    registry = open_registry(args.index)
    if not args.missing_ok:
        absent = [i for i in ids if i not in registry]
        if absent:
            raise InputError(args.ids, lines[absent[0]], f"no card {absent[0]!r} in {args.index} "
                             f"({len(absent)} ids absent; --missing-ok to skip them); nothing removed")
    report = registry.delete_many(ids)
    print(f"{report['deleted']} cards removed; the registry holds {len(registry)} cards "
          f"(generation {report['version']})")
    return 0


def _serve(args: argparse.Namespace) -> int:
    import os

    from ..agents.server import serve

    token = args.token if args.token is not None else os.environ.get("SSR_AGENTS_TOKEN") or None
    return serve(args.index, host=args.host, port=args.port, token=token, stdio=args.stdio,
                 read_only=args.read_only, max_k=args.max_k, max_body=args.max_body)


def _generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..agents.sources import write_cards, write_jsonl
    from ..datagen.cards import iter_registry, make_queries

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = write_cards(iter_registry(args.cards, args.seed), out / "cards.jsonl")
    queries = make_queries(args.cards, args.queries, args.seed)
    write_jsonl(({"id": q.id, "query": q.text, "gold": q.gold} for q in queries), out / "queries.jsonl")
    print(f"{n} cards -> {out / 'cards.jsonl'}, {len(queries)} queries -> {out / 'queries.jsonl'}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from ..agents.bench import run_bench
    from ..errors import SsrError

    try:
        ks = tuple(int(k) for k in args.ks.split(","))
    except ValueError as exc:
        raise SsrError(f"--ks: expected comma-separated integers, got {args.ks!r}") from exc
    if min(ks) < 1 or args.pool_k < 1:
        raise SsrError("K values must be >= 1")
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    unknown = set(methods) - {"ssr", "bm25", "reference"}
    if unknown:
        raise SsrError(f"unknown method(s) {', '.join(sorted(unknown))} (choose from ssr, bm25, reference)")
    if args.no_metatool and args.metatool:
        raise SsrError("--metatool and --no-metatool: give one of them")
    run_bench(
        args.out, metatool=args.metatool, use_metatool=not args.no_metatool, methods=methods, ks=ks,
        pool_k=args.pool_k, seed=args.seed,
        synthetic_cards=args.synthetic_cards, synthetic_queries=args.synthetic_queries,
        latency_cards=args.latency_cards, latency_queries=args.latency_queries, max_queries=args.max_queries,
        workdir=args.work,
    )
    if not args.quiet:
        print(f"report: {args.out}/agents-bench.json, {args.out}/agents-bench.md")
    return 0
