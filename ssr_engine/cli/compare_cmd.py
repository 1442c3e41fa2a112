"""`ssr compare REPORT...`: evaluation reports side by side as a markdown table."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="REPORT", help="JSON reports written by `ssr evaluate --report`")
    p.add_argument("--output", "-o", metavar="FILE", help="write the table here instead of stdout")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..eval.evaluate import load_report, markdown_table

    table = markdown_table([load_report(p) for p in args.reports])
    if args.output:
        out = Path(args.output)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(table, encoding="utf-8")
        tmp.replace(out)
    else:
        print(table, end="")
    return 0
