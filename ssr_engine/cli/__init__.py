"""The `ssr` command. Each subcommand lives in its own module; the parser imports them all, so they
import only argparse and light leaves at top level, and their work (NumPy, Numba, PyArrow) inside `run()`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# name -> (module, one-line help). Modules import only argparse at top level; the work
# (and NumPy, Numba, PyArrow) is imported inside their run().
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "the main job on bundled real data: Cranfield, MetaTool agent discovery, scale"),
    "signals": ("signals_cmd", "print the signals of texts"),
    "build-index": ("build_index_cmd", "build an index from a TSV or JSONL collection"),
    "index-info": ("index_info_cmd", "show an index's counts, files and settings"),
    "add": ("add_cmd", "add documents to an index without a rebuild (--upsert replaces)"),
    "delete": ("delete_cmd", "delete documents from an index by id"),
    "compact": ("compact_cmd", "merge an index's segments into one, dropping deleted documents"),
    "verify": ("verify_cmd", "check every file of an index against its manifest checksums"),
    "search": ("search_cmd", "search an index: a TREC run or JSON lines of the top k per query"),
    "agents": ("agents_cmd", "agent discovery: build a card registry, discover pools, benchmark"),
    "evaluate": ("evaluate_cmd", "evaluate a method on queries and qrels: TREC run and JSON report"),
    "compare": ("compare_cmd", "evaluation reports side by side as a markdown table"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ssr", description="SSR, the Structural Signal Retriever.")
    parser.add_argument("--version", action="version", version="ssr_engine " + _version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        mod = importlib.import_module(f".{module}", __name__)
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def chunk_arguments(p: argparse.ArgumentParser) -> None:
    """--chunk-docs and --workers: what a command that inverts documents (build-index, add, compact) takes."""
    from ..inputs import CHUNK_DOCS

    p.add_argument("--chunk-docs", type=int, default=CHUNK_DOCS,
                   help=f"documents per in-memory chunk: sets the memory, not the collection (default {CHUNK_DOCS})")
    p.add_argument("--workers", type=int, default=None, help="parallel inversion threads (default: all cores)")


def print_report(report: dict, as_json: bool, line: str) -> None:
    """A write command's report (add, delete, compact): JSON on stdout with --json, else `line` and
    the report's seconds (a registry's compaction has none) for a person on stderr (stdout stays free
    for pipes)."""
    if as_json:
        import json

        print(json.dumps(report))
    else:
        print(line + (f", {report['seconds']} s" if "seconds" in report else ""), file=sys.stderr)


def _version() -> str:
    from .. import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from ..errors import SsrError
    from ..jit import COMMANDS, announce_compile  # commands that call Numba kernels: told when they compile

    if args.command in COMMANDS:
        announce_compile(COMMANDS[args.command], quiet=bool(getattr(args, "quiet", False)))
    try:
        return int(args._module.run(args) or 0)
    except SsrError as exc:
        print(f"ssr {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"ssr {args.command}: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The `ssr` program (console script and `python -m ssr_engine`): `main`, then `exit_process`."""
    exit_process(main())


def exit_process(code: int) -> None:
    """End the process with `code` once its output is flushed, skipping the interpreter's teardown.

    Why: native thread pools left running by libraries (Arrow's Parquet reader threads, Numba's
    OpenMP team) are destroyed during teardown, and now and then that aborts a process whose work
    is done ("terminate called without an active exception", exit 134; apache/arrow#34314; seen
    in about one in a few hundred of our CLI runs). Every file the command writes is complete and
    synced before `main` returns, so the teardown has nothing left to do but a Ray instance this
    process started, which is shut down first.
    """
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        ray.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`ssr search ... | head`) or stream: nothing more to say
            pass
    os._exit(code)
