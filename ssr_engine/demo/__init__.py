"""`ssr demo`: the main job on real data bundled with the package, no download.

Three parts, each runnable alone:

1. `cranfield`: Cranfield-1400; SSR, the exhaustive scan (the check) and BM25 evaluated at K =
   1000, the metrics compared with trec_eval's on the written runs.
2. `agents`: MetaTool ToolE; agent discovery with SSR and BM25, Recall@K and MRR at K = 1, 5, 10,
   20, the orchestrator's input saved at K = 20 and outcome counts with an offline provider.
3. `scale`: a generated MS MARCO-shaped collection (200,000 passages by default): build time and
   peak memory, q/s and p50 latency against K, inverted == exhaustive on every query.

`run_demo` writes `report.md`, `report.json` and (with matplotlib) PNG figures into the work
directory, whose cache rules are in `workdir`.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import SsrError
from .workdir import WorkDir

PARTS = ("cranfield", "agents", "scale")
REPORT_FILES = ("report.md", "report.json")
FIGURE_FILES = ("agents-recall.png", "scale-qps.png")


def run_demo(
    workdir: str | os.PathLike[str] = "ssr-demo",
    parts: Sequence[str] = PARTS,
    *,
    passages: int = 200_000,
    queries: int = 1000,
    seed: int = 1,
    agent_queries: int | None = None,
    quiet: bool = False,
    say: Callable[[str], None] | None = None,
    show: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the chosen parts, print their tables through `show`, write the report; returns it.

    `agent_queries` keeps that many evenly spaced MetaTool queries (default: all 20,614); `say` gets progress
    messages (default: stderr).
    """
    from ..eval.evaluate import _machine
    from . import report as rep

    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise SsrError(f"unknown demo part {unknown[0] if unknown else '(none)'}; expected some of {', '.join(PARTS)}")
    if say is None:
        def say(message: str) -> None:
            print(f"[ssr demo] {message}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    work = WorkDir(workdir)
    report: dict[str, Any] = {"parts": list(parts), "workdir": str(work.path.absolute()),
                              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                              "machine": _machine()}
    ordered = [p for p in PARTS if p in parts]
    for part in ordered:
        t0 = time.perf_counter()
        if part == "cranfield":
            from .cranfield import run_cranfield

            section = run_cranfield(work, say, quiet=quiet)
            text = ("Cranfield-1400 (bundled): 1,400 abstracts, 225 queries, K = 1000\n"
                    + rep.cranfield_quality_table(section) + rep.cranfield_speed_table(section)
                    + _equal_line(section["inverted_equals_exhaustive"]))
        elif part == "agents":
            from .agents import run_agents

            section = run_agents(work, say, max_queries=agent_queries)
            col = section["collection"]
            text = (f"Agent discovery on MetaTool (bundled, MIT): {col['tools']} tools, {col['queries']:,} queries\n"
                    + rep.agents_quality_table(section))
        else:
            from .scale import run_scale

            section = run_scale(work, say, passages=passages, queries=queries, seed=seed, quiet=quiet)
            b, col = section["build"], section["collection"]
            text = (f"Scale: {col['passages']:,} generated passages, {col['queries']:,} queries; build "
                    f"{b['seconds']:.1f} s, peak {rep._gib(b.get('peak_rss_bytes'))}"
                    + (" (reused)" if b.get("reused") else "") + "\n"
                    + rep.scale_table(section) + _equal_line(section["inverted_equals_exhaustive"]))
        section["seconds"] = time.perf_counter() - t0
        report[part] = section
        show(text)

    report["seconds"] = time.perf_counter() - started
    paths = [work.file(n) for n in REPORT_FILES]
    figure_paths = [work.file(n) for n in FIGURE_FILES]
    work.claim("report", paths + figure_paths)
    report["figures"], note = rep.figures(report, work.path)
    if note:
        report["figures_note"] = note
    (work.file("report.md")).write_text(rep.markdown(report), encoding="utf-8")
    rep.write_json(work.file("report.json"), report)
    work.done("report", {}, paths + [Path(f) for f in report["figures"]])
    written = [str(p) for p in paths] + report["figures"]
    show(f"Report: {', '.join(written)}" + (f"\n{note}" if note else ""))
    say(f"done in {report['seconds']:.0f} s")
    return report


def _equal_line(eq: dict[str, Any]) -> str:
    k = f" at K = {eq['k']}" if "k" in eq else ""
    return f"inverted index == exhaustive scan{k}: {eq['identical']}/{eq['queries']} queries identical\n"
