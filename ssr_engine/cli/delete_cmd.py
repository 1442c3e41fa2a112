"""`ssr delete --index DIR --ids FILE`: delete documents by id (one per line) without a rebuild."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="the index to delete from")
    p.add_argument("--ids", required=True, metavar="FILE", help="document ids, one per line (- for stdin)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (unknown ids included)")


def read_ids(path: str) -> list[str]:
    """Ids of a file, one per line (a trailing CR is dropped; blank lines are skipped)."""
    import sys

    from ..errors import InputError

    raw = sys.stdin.buffer.read() if path == "-" else _read(path)
    ids = []
    for n, line in enumerate(raw.split(b"\n"), 1):
        line = line[:-1] if line.endswith(b"\r") else line
        if not line.strip():
            continue
        try:
            ids.append(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(path, n, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    return ids


def _read(path: str) -> bytes:
    from ..errors import InputError

    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InputError(path, None, f"cannot read ({exc.strerror})") from exc


def run(args: argparse.Namespace) -> int:
    import sys

    from ..live import LiveIndex
    from . import print_report

    report = LiveIndex(args.index).delete(read_ids(args.ids))
    print_report(report, args.json, f"deleted {report['deleted']} documents from {args.index}, "
                 f"generation {report['generation']}")
    if report["unknown"]:
        shown = ", ".join(repr(i) for i in report["unknown_ids"][:10])
        more = f" and {report['unknown'] - 10} more" if report["unknown"] > 10 else ""
        print(f"ssr delete: {report['unknown']} ids not in the index (nothing deleted for them): {shown}{more}",
              file=sys.stderr)
    if report["repeated"]:
        print(f"ssr delete: {report['repeated']} ids repeated in {args.ids} (counted once)", file=sys.stderr)
    return 0
