"""Shared fixtures: ../shared/data (Cranfield through the project's converter) and small TSV writers."""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside the checkout (SSR_SHARED_DATA overrides); tests needing it skip without it
SHARED_DATA = Path(os.environ.get("SSR_SHARED_DATA", ROOT.parent / "shared" / "data"))


def load_data_script(name: str) -> ModuleType:
    """A module of data_scripts/ (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "data_scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Cranfield:
    docs: list[tuple[str, str]]  # (id, title + abstract), as data_scripts/prepare_real.py converts them
    queries: list[tuple[str, str]]  # (position 1..225, text): the qrels number queries by position


@functools.lru_cache(maxsize=1)
def load_cranfield() -> Cranfield | None:
    directory = SHARED_DATA / "cranfield"
    if not (directory / "cran.all.1400").is_file():
        return None
    prepare_real = load_data_script("prepare_real")
    docs, _ = prepare_real.parse_cran_docs(directory / "cran.all.1400")
    queries, _ = prepare_real.parse_cran_queries(directory / "cran.qry")
    return Cranfield(docs, queries)


@pytest.fixture(scope="session")
def cranfield() -> Cranfield:
    data = load_cranfield()
    if data is None:
        pytest.skip(f"Cranfield not available under {SHARED_DATA}")
    return data


@pytest.fixture(scope="session")
def cranfield_docs(cranfield: Cranfield) -> list[tuple[str, str]]:
    return cranfield.docs


def write_tsv(path: Path, docs: list[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for doc_id, text in docs:
            f.write(f"{doc_id}\t{text}\n")
    return path
