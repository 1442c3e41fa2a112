"""Write a real collection as collection.tsv, queries.tsv, qrels.tsv (TREC) and stats.json.

    python data_scripts/prepare_real.py cranfield --out DIR            # the copy bundled with the package
    python data_scripts/prepare_real.py metatool --out DIR             # (also writes cards.jsonl)
    python data_scripts/prepare_real.py msmarco-dev-small --out DIR    # from --source (not bundled)

Outputs have the shapes `make_collection.py` writes: `collection.tsv` (`id<TAB>text`),
`queries.tsv` (`qid<TAB>query`), `qrels.tsv` (`qid 0 docid grade`, higher grade = more
relevant) and `stats.json` (counts; every input line is accounted for). Texts have their
whitespace (newlines, tabs) collapsed to single spaces.

Cranfield and MetaTool are read by `ssr_engine.datasets` (their conventions are documented
there: Cranfield queries numbered by position 1..225 as cranqrel does, Cleverdon's codes as
grades 1->4, 2->3, 3->2, 4->1, -1->0; MetaTool's 20,614 queries numbered by position with the
gold tool as a grade-1 qrel) from the copy bundled with the package, or from `--source DIR`
holding `cranfield/` or `metatool/` with the original files.
MS MARCO dev-small (queries.dev.small.tsv, qrels.dev.small.trec or .tsv) is not bundled (its
terms are for non-commercial research): `--source` (default ../shared/data beside the checkout)
must hold `msmarco-dev-small/`; queries.tsv and qrels.tsv only (6,980 queries, 7,437 qrels);
the passage collection is not in ../shared/data (see download_msmarco.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ssr_engine.datasets import qrels_fields, read_text, split_lines, squash, write_collection
from ssr_engine.datasets.cranfield import GRADES as CRANFIELD_GRADES
from ssr_engine.datasets.cranfield import write_cranfield
from ssr_engine.datasets.metatool import write_metatool
from ssr_engine.errors import InputError

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "data"
__all__ = ["CRANFIELD_GRADES", "main", "prepare_cranfield", "prepare_metatool", "prepare_msmarco_dev_small"]


def prepare_cranfield(source: Path | None, out: Path) -> dict:
    return write_cranfield(out, None if source is None else source / "cranfield")


def prepare_metatool(source: Path | None, out: Path) -> dict:
    return write_metatool(out, None if source is None else source / "metatool")


# ----------------------------------------------------------------------------- MS MARCO


MSMARCO = "msmarco-dev-small"


def read_queries_tsv(source: Path, name: str) -> list[tuple[str, str]]:
    text, path = read_text(MSMARCO, name, source / MSMARCO)
    queries = []
    for lineno, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        parts = line.split("\t", 1)
        if len(parts) != 2 or not parts[0].strip() or len(parts[0].split()) != 1:
            raise InputError(path, lineno, "expected qid<TAB>query")
        queries.append((parts[0].strip(), squash(parts[1])))
    if not queries:
        raise InputError(path, None, "no queries")
    return queries


def read_qrels(source: Path, name: str) -> list[tuple[str, str, int]]:
    """TREC (`qid 0 docid rel`, space or tab separated) or 3-column `qid docid rel`."""
    text, path = read_text(MSMARCO, name, source / MSMARCO)
    qrels = []
    for lineno, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        qrels.append(qrels_fields(path, lineno, line))
    if not qrels:
        raise InputError(path, None, "no qrels")
    return qrels


def prepare_msmarco_dev_small(source: Path | None, out: Path) -> dict:
    source = DEFAULT_SOURCE if source is None else source
    queries = read_queries_tsv(source, "queries.dev.small.tsv")
    name = "qrels.dev.small.trec"
    if not (source / MSMARCO / name).exists():
        name = "qrels.dev.small.tsv"
    qrels = read_qrels(source, name)
    known = {q for q, _ in queries}
    for q, _, _ in qrels:
        if q not in known:
            raise InputError(source / MSMARCO / name, None, f"query id {q!r} is not in queries.dev.small.tsv")
    stats = {"dataset": MSMARCO, "source": str(source / MSMARCO), "queries": len(queries), "qrels": len(qrels),
             "judged_queries": len({q for q, _, _ in qrels}), "collection": "not included (see download_msmarco.py)"}
    write_collection(out, None, queries, qrels, stats)
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
    p.add_argument("--source", default=None, metavar="DIR",
                   help="directory holding DATASET/ with the original files (default: the copy bundled with the "
                        f"package; for msmarco-dev-small {DEFAULT_SOURCE})")
    args = p.parse_args(argv)
    try:
        stats = PREPARERS[args.dataset](None if args.source is None else Path(args.source), Path(args.out))
    except InputError as exc:
        print(f"prepare_real.py: error: {exc}", file=sys.stderr)
        return 2
    counts = {k: stats[k] for k in ("documents", "queries", "qrels") if k in stats}
    print(f"{args.dataset}: " + ", ".join(f"{v:,} {k}" for k, v in counts.items()) + f" -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
