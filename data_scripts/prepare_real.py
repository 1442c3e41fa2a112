"""Convert the real collections in ../shared/data to collection.tsv, queries.tsv, qrels.tsv (TREC).

    python data_scripts/prepare_real.py cranfield --out DIR [--source ../shared/data]
    python data_scripts/prepare_real.py metatool --out DIR
    python data_scripts/prepare_real.py msmarco-dev-small --out DIR

Outputs have the shapes `make_collection.py` writes: `collection.tsv` (`id<TAB>text`),
`queries.tsv` (`qid<TAB>query`), `qrels.tsv` (`qid 0 docid grade`, higher grade = more
relevant) and `stats.json` (counts; every input line is accounted for). Texts have their
whitespace (newlines, tabs) collapsed to single spaces.

Cranfield (cran.all.1400, cran.qry, cranqrel):
- documents keep their .I ids; text = title (.T) + " " + abstract (.W, which itself starts
  with the title, as in the file). Three records (240, 576, 578) repeat a field marker inside
  the abstract; the marker lines are dropped and their text kept in the abstract. Records
  471 and 995 have no text and are kept (empty passages; stats.json lists them).
- queries are numbered by position 1..225, which is what cranqrel uses (the .I numbers of
  cran.qry run 001..365 with gaps); stats.json maps position -> .I number.
- relevance codes (Cleverdon: 1 = complete answer ... 4 = minimum interest; -1 appears once
  per query) become TREC grades: 1->4, 2->3, 3->2, 4->1, -1->0 (judged, not relevant). All
  1,837 lines are written. CRLF or LF endings and a missing final newline are all accepted.
MetaTool (plugin_des.json, all_clean_data.csv):
- documents are the 199 tools (id = tool name, text = description); `cards.jsonl` has the
  same tools as A2A-like cards {"id", "name", "description"}.
- queries are the 20,614 CSV rows, numbered by position 1..20614 (texts repeat, so they
  cannot be ids); each row's qrel is its gold tool with grade 1.
MS MARCO dev-small (queries.dev.small.tsv, qrels.dev.small.trec or .tsv):
- queries.tsv and qrels.tsv only (6,980 queries, 7,437 qrels); the passage collection is not
  in ../shared/data (see download_msmarco.py).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "data"

CRANFIELD_GRADES = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}
_ID = re.compile(r"\S+")


class PrepareError(Exception):
    """Bad input: the message names the file (and line)."""

    def __init__(self, path: object, line: int | None, message: str):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


def squash(text: str) -> str:
    return " ".join(text.split())


def read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PrepareError(path, None, "no such file") from None
    except OSError as exc:
        raise PrepareError(path, None, f"cannot read: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PrepareError(path, line, f"not valid UTF-8 ({exc.reason})") from None


def split_lines(text: str) -> list[str]:
    """Lines with LF, CRLF or CR endings, with or without a final newline."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def write_outputs(out: Path, docs: list[tuple[str, str]] | None, queries: list[tuple[str, str]],
                  qrels: list[tuple[str, str, int]], stats: dict) -> None:
    """Write the files atomically (each via a .tmp name), checking ids first."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    if docs is not None:
        _check_ids("document", [d for d, _ in docs])
        files["collection.tsv"] = "".join(f"{d}\t{t}\n" for d, t in docs)
    _check_ids("query", [q for q, _ in queries])
    files["queries.tsv"] = "".join(f"{q}\t{t}\n" for q, t in queries)
    files["qrels.tsv"] = "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels)
    files["stats.json"] = json.dumps(stats, indent=2) + "\n"
    for name, text in files.items():
        tmp = out / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out / name)


def _check_ids(kind: str, ids: list[str]) -> None:
    dup = [i for i, n in Counter(ids).items() if n > 1]
    if dup:
        raise PrepareError(kind + " ids", None, f"duplicate {kind} id {dup[0]!r}")
    bad = [i for i in ids if not _ID.fullmatch(i)]
    if bad:
        raise PrepareError(kind + " ids", None, f"{kind} id {bad[0]!r} is empty or contains whitespace")


# ----------------------------------------------------------------------------- Cranfield


def parse_cran_docs(path: Path) -> tuple[list[tuple[str, str]], dict]:
    """.I/.T/.A/.B/.W records -> (id, title + abstract); notes repeated markers and empty texts."""
    docs: list[tuple[str, str]] = []
    repeated: list[str] = []
    cur: str | None = None
    fields: dict[str, list[str]] = {}
    field = None
    seen_markers: set[str] = set()

    def close() -> None:
        if cur is None:
            return
        title = squash(" ".join(fields.get("T", [])))
        abstract = squash(" ".join(fields.get("W", [])))
        docs.append((cur, squash(f"{title} {abstract}")))

    for lineno, line in enumerate(split_lines(read_text(path)), start=1):
        if line.startswith(".I"):
            close()
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise PrepareError(path, lineno, f"expected '.I <number>', got {line!r}")
            cur, fields, field, seen_markers = str(int(parts[1])), {}, None, set()
            continue
        marker = re.fullmatch(r"\.([TABW])\s*", line)
        if marker:
            if cur is None:
                raise PrepareError(path, lineno, "field marker before the first .I record")
            m = marker.group(1)
            if m in seen_markers or "W" in seen_markers:
                # A marker inside the abstract (records 240, 576, 578): the text stays in the abstract.
                if cur not in repeated:
                    repeated.append(cur)
                field = "W"
            else:
                field = m
            seen_markers.add(m)
            continue
        if cur is None:
            if line.strip():
                raise PrepareError(path, lineno, "text before the first .I record")
            continue
        if field is not None:
            fields.setdefault(field, []).append(line)
    close()
    if not docs:
        raise PrepareError(path, None, "no .I records")
    notes = {"records_with_repeated_markers": repeated, "empty_documents": [d for d, t in docs if not t]}
    return docs, notes


def parse_cran_queries(path: Path) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Queries numbered by position (1..n); returns them and the map position -> .I number."""
    queries: list[tuple[str, str]] = []
    original: dict[str, str] = {}
    text: list[str] = []
    cur: str | None = None
    for lineno, line in enumerate(split_lines(read_text(path)), start=1):
        if line.startswith(".I"):
            if cur is not None:
                queries.append((str(len(queries) + 1), squash(" ".join(text))))
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise PrepareError(path, lineno, f"expected '.I <number>', got {line!r}")
            cur, text = parts[1], []
            original[str(len(queries) + 1)] = cur
        elif re.fullmatch(r"\.W\s*", line):
            continue
        elif cur is None:
            if line.strip():
                raise PrepareError(path, lineno, "text before the first .I record")
        else:
            text.append(line)
    if cur is not None:
        queries.append((str(len(queries) + 1), squash(" ".join(text))))
    if not queries:
        raise PrepareError(path, None, "no .I records")
    return queries, original


def parse_cran_qrels(path: Path, n_queries: int, doc_ids: set[str]) -> tuple[list[tuple[str, str, int]], dict]:
    qrels: list[tuple[str, str, int]] = []
    codes: Counter[int] = Counter()
    lines = split_lines(read_text(path))
    blank = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            blank += 1
            continue
        parts = line.split()
        if len(parts) != 3:
            raise PrepareError(path, lineno, f"expected 'query doc code', got {line!r}")
        try:
            q, d, code = (int(p) for p in parts)
        except ValueError:
            raise PrepareError(path, lineno, f"non-integer field in {line!r}") from None
        if code not in CRANFIELD_GRADES:
            raise PrepareError(path, lineno, f"unknown relevance code {code} (expected 1-4 or -1)")
        if not 1 <= q <= n_queries:
            raise PrepareError(path, lineno, f"query number {q} is outside 1..{n_queries}")
        if str(d) not in doc_ids:
            raise PrepareError(path, lineno, f"document {d} is not in the collection")
        codes[code] += 1
        qrels.append((str(q), str(d), CRANFIELD_GRADES[code]))
    stats = {"lines": len(qrels), "blank_lines": blank, "codes": {str(k): codes[k] for k in sorted(codes)},
             "grade_map": {str(k): v for k, v in CRANFIELD_GRADES.items()},
             "grades": {str(g): n for g, n in sorted(Counter(g for _, _, g in qrels).items())}}
    return qrels, stats


def prepare_cranfield(source: Path, out: Path) -> dict:
    src = source / "cranfield"
    docs, notes = parse_cran_docs(src / "cran.all.1400")
    queries, original = parse_cran_queries(src / "cran.qry")
    qrels, qstats = parse_cran_qrels(src / "cranqrel", len(queries), {d for d, _ in docs})
    stats = {"dataset": "cranfield", "source": str(src), "documents": len(docs), "queries": len(queries),
             "qrels": len(qrels), "judged_queries": len({q for q, _, _ in qrels}), **notes,
             "qrel_lines": qstats, "query_position_to_qry_id": original}
    write_outputs(out, docs, queries, qrels, stats)
    return stats


# ----------------------------------------------------------------------------- MetaTool


def prepare_metatool(source: Path, out: Path) -> dict:
    src = source / "metatool"
    des_path = src / "plugin_des.json"
    try:
        tools = json.loads(read_text(des_path))
    except json.JSONDecodeError as exc:
        raise PrepareError(des_path, exc.lineno, f"invalid JSON ({exc.msg})") from None
    if not isinstance(tools, dict) or not tools:
        raise PrepareError(des_path, None, "expected a non-empty JSON object {tool name: description}")
    docs = []
    for name, desc in tools.items():
        if not isinstance(desc, str):
            raise PrepareError(des_path, None, f"description of {name!r} is not a string")
        docs.append((name, squash(desc)))
    csv_path = src / "all_clean_data.csv"
    reader = csv.reader(io.StringIO(read_text(csv_path), newline=""))
    header = next(reader, None)
    if header is None or [h.strip().lower() for h in header[:2]] != ["query", "tool"]:
        raise PrepareError(csv_path, 1, f"expected header 'Query,Tool', got {header!r}")
    queries: list[tuple[str, str]] = []
    qrels: list[tuple[str, str, int]] = []
    for row in reader:
        line = reader.line_num
        if len(row) != 2:
            raise PrepareError(csv_path, line, f"expected 2 fields (query, tool), got {len(row)}")
        text, tool = squash(row[0]), row[1].strip()
        if tool not in tools:
            raise PrepareError(csv_path, line, f"tool {tool!r} is not in {des_path.name}")
        if not text:
            raise PrepareError(csv_path, line, "empty query")
        qid = str(len(queries) + 1)
        queries.append((qid, text))
        qrels.append((qid, tool, 1))
    stats = {"dataset": "metatool", "source": str(src), "documents": len(docs), "queries": len(queries),
             "qrels": len(qrels), "distinct_query_texts": len({t for _, t in queries}),
             "tools_with_queries": len({d for _, d, _ in qrels})}
    write_outputs(out, docs, queries, qrels, stats)
    cards = "".join(json.dumps({"id": n, "name": n, "description": d}) + "\n" for n, d in docs)
    tmp = out / "cards.jsonl.tmp"
    tmp.write_text(cards, encoding="utf-8")
    os.replace(tmp, out / "cards.jsonl")
    return stats


# ----------------------------------------------------------------------------- MS MARCO


def read_queries_tsv(path: Path) -> list[tuple[str, str]]:
    queries = []
    for lineno, line in enumerate(split_lines(read_text(path)), start=1):
        if not line.strip():
            continue
        parts = line.split("\t", 1)
        if len(parts) != 2 or not _ID.fullmatch(parts[0].strip()):
            raise PrepareError(path, lineno, "expected qid<TAB>query")
        queries.append((parts[0].strip(), squash(parts[1])))
    if not queries:
        raise PrepareError(path, None, "no queries")
    return queries


def read_qrels(path: Path) -> list[tuple[str, str, int]]:
    """TREC (`qid 0 docid rel`, space or tab separated) or 3-column `qid docid rel`."""
    qrels = []
    for lineno, line in enumerate(split_lines(read_text(path)), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) == 4:
            q, d, g = parts[0], parts[2], parts[3]
        elif len(parts) == 3:
            q, d, g = parts
        else:
            raise PrepareError(path, lineno, f"expected 'qid 0 docid rel', got {line!r}")
        try:
            qrels.append((q, d, int(g)))
        except ValueError:
            raise PrepareError(path, lineno, f"relevance {g!r} is not an integer") from None
    if not qrels:
        raise PrepareError(path, None, "no qrels")
    return qrels


def prepare_msmarco_dev_small(source: Path, out: Path) -> dict:
    src = source / "msmarco-dev-small"
    queries = read_queries_tsv(src / "queries.dev.small.tsv")
    qrels_path = src / "qrels.dev.small.trec"
    if not qrels_path.exists():
        qrels_path = src / "qrels.dev.small.tsv"
    qrels = read_qrels(qrels_path)
    known = {q for q, _ in queries}
    for q, _, _ in qrels:
        if q not in known:
            raise PrepareError(qrels_path, None, f"query id {q!r} is not in queries.dev.small.tsv")
    stats = {"dataset": "msmarco-dev-small", "source": str(src), "queries": len(queries), "qrels": len(qrels),
             "judged_queries": len({q for q, _, _ in qrels}), "collection": "not included (see download_msmarco.py)"}
    write_outputs(out, None, queries, qrels, stats)
    return stats


PREPARERS = {
    "cranfield": prepare_cranfield,
    "metatool": prepare_metatool,
    "msmarco-dev-small": prepare_msmarco_dev_small,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="prepare_real.py", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", choices=sorted(PREPARERS))
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--source", default=str(DEFAULT_SOURCE), help=f"data directory (default {DEFAULT_SOURCE})")
    args = p.parse_args(argv)
    try:
        stats = PREPARERS[args.dataset](Path(args.source), Path(args.out))
    except PrepareError as exc:
        print(f"prepare_real.py: error: {exc}", file=sys.stderr)
        return 2
    counts = {k: stats[k] for k in ("documents", "queries", "qrels") if k in stats}
    print(f"{args.dataset}: " + ", ".join(f"{v:,} {k}" for k, v in counts.items()) + f" -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
