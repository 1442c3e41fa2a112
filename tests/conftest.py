"""Shared fixtures: paths to ../shared/data and small collections written on the fly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("SSR_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def read_cranfield_docs(path: Path) -> list[tuple[str, str]]:
    """(id, title + abstract) from cran.all.1400's .I/.T/.A/.B/.W records."""
    docs: list[tuple[str, str]] = []
    doc_id, field, parts = None, None, {"T": [], "W": []}
    for line in path.read_text(encoding="utf-8", errors="strict").splitlines():
        if line.startswith(".I "):
            if doc_id is not None:
                docs.append((doc_id, " ".join(parts["T"] + parts["W"])))
            doc_id, field, parts = line[3:].strip(), None, {"T": [], "W": []}
        elif line[:2] in (".T", ".A", ".B", ".W") and line.strip() == line[:2]:
            field = line[1]
        elif field in parts:
            parts[field].append(line.strip())
    if doc_id is not None:
        docs.append((doc_id, " ".join(parts["T"] + parts["W"])))
    return docs


@pytest.fixture(scope="session")
def cranfield_docs() -> list[tuple[str, str]]:
    path = SHARED_DATA / "cranfield" / "cran.all.1400"
    if not path.is_file():
        pytest.skip(f"Cranfield not available at {path}")
    return read_cranfield_docs(path)


def write_tsv(path: Path, docs: list[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for doc_id, text in docs:
            f.write(f"{doc_id}\t{text}\n")
    return path
