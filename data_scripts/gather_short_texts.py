"""Gather a corpus of real short texts from what this machine has offline.

Sources (each optional; at least one must give text):
- package summaries from registry listings in TSV form with a header line, e.g. PyPI's
  (`name, version, month, rank, summary`) and npm's (`name, version, downloads, summary`):
  `--listing FILE:COLUMN` (COLUMN: 0-based index of the text column), repeatable;
- Debian package descriptions, from `apt-cache dumpavail` (`--debian`).

Texts are real (written by package authors), short (a line or two) and varied, which is
the shape of an agent or tool registry and of the held-out short-text corpora the search
goals are checked on. Ids are consecutive integers from 0 (so ids compare as integers, as in
MS MARCO). Empty texts are skipped; duplicates are kept, as in real collections.

    python data_scripts/gather_short_texts.py --out /tmp/ssr-data/real-short \\
        --listing /work/.library/env/packages/pypi.tsv:4 \\
        --listing /work/.library/env/packages/npm.tsv:3 --debian \\
        --queries ../shared/data/msmarco-dev-small/queries.dev.small.tsv

Writes OUT/collection.tsv, OUT/queries.tsv (a copy of --queries, when given), OUT/stats.json.
OUT must not exist (or be empty): nothing of the user's is overwritten.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def _clean(text: str) -> str:
    return " ".join(text.split())


def listing_texts(path: Path, column: int) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        next(f, None)  # header line
        for line in f:
            cells = line.rstrip("\n").split("\t")
            if column < len(cells):
                text = _clean(cells[column])
                if text:
                    yield text


def debian_texts() -> Iterator[str]:
    out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    desc: list[str] = []
    for line in out.splitlines() + [""]:
        if line.startswith("Description:"):
            desc = [line[len("Description:"):]]
        elif desc and line.startswith(" "):
            desc.append(line.strip() if line.strip() != "." else "")
        elif desc:
            text = _clean(" ".join(desc))
            if text:
                yield text
            desc = []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--listing", action="append", default=[], metavar="FILE:COLUMN")
    ap.add_argument("--debian", action="store_true", help="add Debian package descriptions (apt-cache dumpavail)")
    ap.add_argument("--queries", type=Path, help="queries TSV to copy beside the collection")
    args = ap.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        print(f"{args.out}: exists and is not empty; choose another --out", file=sys.stderr)
        return 2
    sources: list[tuple[str, Iterator[str]]] = []
    digests = {}
    for spec in args.listing:
        path, _, col = spec.rpartition(":")
        if not path or not col.isdigit() or not Path(path).is_file():
            print(f"--listing {spec}: expected an existing FILE:COLUMN", file=sys.stderr)
            return 2
        digests[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        sources.append((Path(path).name, listing_texts(Path(path), int(col))))
    if args.debian:
        sources.append(("debian", debian_texts()))
    if not sources:
        print("no source given (--listing, --debian)", file=sys.stderr)
        return 2
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / ".collection.tsv.partial"
    counts: dict[str, int] = {}
    words = 0
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for name, texts in sources:
            for text in texts:
                f.write(f"{n}\t{text}\n")
                n += 1
                words += text.count(" ") + 1
                counts[name] = counts.get(name, 0) + 1
    os.replace(tmp, args.out / "collection.tsv")
    if args.queries:
        shutil.copyfile(args.queries, args.out / "queries.tsv")
    stats = {
        "documents": n,
        "per_source": counts,
        "mean_words": round(words / max(n, 1), 2),
        "collection_bytes": (args.out / "collection.tsv").stat().st_size,
        "inputs_sha256": digests,
        "seconds": round(time.time() - t0, 1),
    }
    (args.out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
