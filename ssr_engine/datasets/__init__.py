"""Real collections shipped inside the package, read in place from their xz-compressed files.

- `cranfield`: Cranfield-1400 (1,400 abstracts, 225 queries, graded qrels); `load_cranfield()`.
- `metatool`: MetaTool ToolE (MIT; 199 tools, 20,614 single-tool and 497 two-tool queries);
  `load_metatool()`.

Each dataset directory holds the original files byte for byte (`NAME.xz`), a `PROVENANCE.md`
(origin, terms, checksums) and, for MetaTool, its `LICENSE`. `read_text` checks every file
against the SHA-256 recorded in `CHECKSUMS`, so a damaged installation fails clearly instead of
giving other figures. A `directory` (for example `../shared/data/cranfield`) replaces the
bundled copy with the plain files `directory/NAME`, read as they are (not checked).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError

# SHA-256 of each uncompressed original file (the same figures as the PROVENANCE.md tables)
CHECKSUMS: dict[str, dict[str, str]] = {
    "cranfield": {
        "cran.all.1400": "fbb8935a93263ab6c9fadefb507fd7cd5e101e7fbeb31c12e6bff6dd501315e8",
        "cran.qry": "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f",
        "cranqrel": "a90f56082cd44db70bf2c21ebca39a1a34e37c82ccb5ddf1bcc64f18795234c7",
    },
    "metatool": {
        "plugin_des.json": "c446ade5acfb8e16c477124250665021e63b11bf6cb232db04fc9ba6bed0389a",
        "all_clean_data.csv": "cf2eb0474396677530931def51012da4e88f9f34f655332f04177b2054101baf",
        "multi_tool_query_golden.json": "ef37d10a8cb5b41435d6ea3ae29819afdb8d6db0852268830e5ee77259507f51",
    },
}
_ID = re.compile(r"\S+")


def bundled_file(dataset: str, name: str) -> Path:
    """Path of the compressed bundled copy of `name` (it may not exist in a broken install)."""
    return Path(str(resources.files(__name__) / dataset / f"{name}.xz"))


def read_bytes(dataset: str, name: str, directory: str | os.PathLike[str] | None = None) -> tuple[bytes, Path]:
    """The file's bytes and the path to name in messages: the bundled copy (checked against its
    recorded SHA-256) when `directory` is None, else `directory/name` as it is."""
    if directory is not None:
        path = Path(directory) / name
        try:
            return path.read_bytes(), path
        except FileNotFoundError:
            raise InputError(path, None, "no such file") from None
        except OSError as exc:
            raise InputError(path, None, f"cannot read: {exc.strerror}") from None
    path = bundled_file(dataset, name)
    try:
        raw = lzma.decompress(path.read_bytes())
    except FileNotFoundError:
        raise InputError(path, None, "bundled data file missing: reinstall ssr_engine") from None
    except lzma.LZMAError as exc:
        raise InputError(path, None, f"bundled data file is corrupt ({exc}): reinstall ssr_engine") from None
    expected = CHECKSUMS[dataset][name]
    if hashlib.sha256(raw).hexdigest() != expected:
        raise InputError(path, None, f"bundled data file does not match its SHA-256 {expected}: reinstall ssr_engine")
    return raw, path


def read_text(dataset: str, name: str, directory: str | os.PathLike[str] | None = None) -> tuple[str, Path]:
    """`read_bytes` decoded as UTF-8; a decoding error names the line."""
    raw, path = read_bytes(dataset, name, directory)
    try:
        return raw.decode("utf-8"), path
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(path, line, f"not valid UTF-8 ({exc.reason})") from None


def split_lines(text: str) -> list[str]:
    """Lines with LF, CRLF or CR endings, with or without a final newline."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def squash(text: str) -> str:
    """Whitespace runs (newlines and tabs included) as one space: safe inside a TSV field."""
    return " ".join(text.split())


def qrels_fields(path: str | os.PathLike[str], lineno: int, line: str) -> tuple[str, str, int]:
    """(qid, docid, relevance) of a TREC `qid 0 docid rel` or a `qid docid rel` line; an InputError naming
    path and line otherwise."""
    parts = line.split()
    if len(parts) == 4:
        qid, docid, grade = parts[0], parts[2], parts[3]
    elif len(parts) == 3:
        qid, docid, grade = parts
    else:
        raise InputError(path, lineno, f"expected 'qid 0 docid rel' (TREC) or 'qid docid rel', got {line!r}")
    try:
        return qid, docid, int(grade)
    except ValueError:
        raise InputError(path, lineno, f"relevance {grade!r} is not an integer") from None


def check_ids(kind: str, ids: list[str]) -> None:
    """Ids must be unique non-empty strings without whitespace (TSV and TREC fields)."""
    dup = [i for i, n in Counter(ids).items() if n > 1]
    if dup:
        raise InputError(kind + " ids", None, f"duplicate {kind} id {dup[0]!r}")
    bad = [i for i in ids if not _ID.fullmatch(i)]
    if bad:
        raise InputError(kind + " ids", None, f"{kind} id {bad[0]!r} is empty or contains whitespace")


def write_collection(out: str | os.PathLike[str], docs: list[tuple[str, str]] | None,
                     queries: list[tuple[str, str]], qrels: list[tuple[str, str, int]],
                     stats: dict[str, Any]) -> None:
    """`collection.tsv` (when docs is not None), `queries.tsv`, `qrels.tsv` (TREC) and `stats.json`
    in `out`, each written atomically (`atomic.write_text`), after the ids are checked."""
    out = Path(out)
    files: dict[str, str] = {}
    if docs is not None:
        check_ids("document", [d for d, _ in docs])
        files["collection.tsv"] = "".join(f"{d}\t{t}\n" for d, t in docs)
    check_ids("query", [q for q, _ in queries])
    files["queries.tsv"] = "".join(f"{q}\t{t}\n" for q, t in queries)
    files["qrels.tsv"] = "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels)
    files["stats.json"] = json.dumps(stats, indent=2) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        write_atomic(out / name, text)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` whole or not at all (`atomic.write_text`: readers never see half a file)."""
    from ..atomic import write_text

    write_text(path, text)
