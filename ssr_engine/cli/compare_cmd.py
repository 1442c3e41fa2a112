"""`ssr compare REPORT...`: evaluation reports side by side, with paired tests against the first."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT",
                   help="JSON reports written by `ssr evaluate --report`; the first is the baseline of the tests")
    p.add_argument("--measures", nargs="+", metavar="M",
                   help="measures to show and test (default: those every report has)")
    p.add_argument("--tests", default="paired-t,wilcoxon,randomization", metavar="T,T",
                   help="paired tests against the first report: any of paired-t, wilcoxon, randomization, "
                        "or 'none' (default: all three; Holm-Bonferroni across systems)")
    p.add_argument("--resamples", type=int, default=10_000, metavar="N",
                   help="randomization test resamples (default 10000)")
    p.add_argument("--seed", type=int, default=42, help="randomization test seed (default 42)")
    p.add_argument("--json", action="store_true", help='print {"rows": [...], "tests": [...]} instead of markdown')
    p.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")


def _labels(reports: list[dict], paths: list[str]) -> list[str]:
    """The method (with its tag) per report; the file name added where two would read the same."""
    from pathlib import Path

    from ..eval.evaluate import _label

    base = [_label(r) for r in reports]
    return [b if base.count(b) == 1 else f"{b} [{Path(p).name}]" for b, p in zip(base, paths, strict=True)]


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from ..errors import SsrError
    from ..eval.compare import TESTS, paired_tests, tests_table
    from ..eval.evaluate import common_measures, load_report, markdown_table

    reports = [load_report(p) for p in args.reports]
    names = _labels(reports, args.reports)
    measures = list(args.measures) if args.measures else common_measures(reports)
    for m in measures:
        lacking = [p for p, r in zip(args.reports, reports, strict=True) if m not in r["metrics"]]
        if lacking:
            raise SsrError(f"measure {m!r} is not in {', '.join(lacking)} (compute it with "
                           f"`ssr evaluate --measures ... {m}`; ir_measures names such as AP, P@5, Judged@10 work)")
    tests = [] if args.tests.strip() == "none" else [t.strip() for t in args.tests.split(",") if t.strip()]
    unknown = [t for t in tests if t not in TESTS]
    if unknown:
        raise SsrError(f"unknown test(s) {', '.join(unknown)}; expected {', '.join(TESTS)} or none")
    if args.resamples < 1:
        raise SsrError(f"--resamples must be >= 1, got {args.resamples}")
    results: list[dict] = []
    if tests and len(reports) > 1:
        lacking = [p for p, r in zip(args.reports, reports, strict=True)
                   if not all(m in (r.get("per_query") or {}) for m in measures)]
        if lacking:
            raise SsrError(f"no per-query values in {', '.join(lacking)} (re-run `ssr evaluate`), "
                           "or pass --tests none")
        try:
            results = paired_tests([r["per_query"] for r in reports], names, measures, tests,
                                   args.resamples, args.seed)
        except ValueError as exc:
            raise SsrError(str(exc)) from None

    if args.json:
        rows = []
        for name, path, r in zip(names, args.reports, reports, strict=True):
            rows.append({
                "system": name, "report": str(path), "method": r["method"], "tag": r.get("tag"),
                "index": r.get("index", {}).get("path"), "judged": r.get("queries", {}).get("judged"),
                "metrics": {m: r["metrics"][m] for m in measures},
                "throughput_qps": r.get("throughput_qps"), "latency_ms": r.get("latency_ms"),
                "pool_mean": r.get("pool", {}).get("mean"),
            })
        text = json.dumps({"rows": rows, "tests": results}, indent=2) + "\n"
    else:
        text = markdown_table(reports, measures)
        if results:
            text += f"\nPaired tests against {names[0]} (Holm-Bonferroni across systems; * p < 0.05 after it):\n\n"
            text += tests_table(results)
    if args.output:
        from ..atomic import write_text

        write_text(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0
