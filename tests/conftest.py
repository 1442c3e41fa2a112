"""Shared fixtures: Cranfield (bundled with the package), MS MARCO dev-small (tests/data), TSV writers."""

from __future__ import annotations

import hashlib
import importlib.util
import lzma
import os
from pathlib import Path
from types import ModuleType

import pytest

# ir_measures is a dependency of the package (`ssr demo` checks its metrics with it): imported plainly, so a broken
# install fails the tests that compare with it instead of skipping them
from ir_measures import RR, R, nDCG

from ssr_engine.datasets.cranfield import Cranfield, load_cranfield

IR_NAMES = {"MRR@10": RR @ 10, "R@10": R @ 10, "R@20": R @ 20, "R@100": R @ 100, "R@1000": R @ 1000,
            "nDCG@10": nDCG @ 10}

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside the checkout (SSR_SHARED_DATA overrides): where present, the bundled copies
# are compared with it; no test needs it
SHARED_DATA = Path(os.environ.get("SSR_SHARED_DATA", ROOT.parent / "shared" / "data"))
MSMARCO_FILES = {  # tests/data/msmarco-dev-small/NAME.xz (see PROVENANCE.md there)
    "queries.dev.small.tsv": "f4f71fa87b6be4fb968cca2b8f8554c4ebd003e6c3488af3ac1cc5629c3de189",
    "qrels.dev.small.trec": "34ef51a24e049b3dd19b0a448b764f26b0def22ec42f421ecba2db91f82e7042",
}


# README's test command (no paths: the whole suite from `testpaths`) runs on this many pytest-xdist workers, one
# test file per worker at a time (`--dist loadfile`: a module's fixtures, such as test_distributed_ray's one
# local Ray instance, stay in one process). A cold run spends much of its time with Numba compiling kernels on
# one core; two workers compile and test on both. Runs naming paths, `-n N` or `-p no:xdist` run as asked.
WHOLE_SUITE_WORKERS = 2


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if (config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput")
            and config.args_source == pytest.Config.ArgsSource.TESTPATHS
            and getattr(config.option, "numprocesses", None) is None):
        config.option.numprocesses = WHOLE_SUITE_WORKERS
        config.option.dist = "loadfile"
        config.option.tx = ["popen"] * WHOLE_SUITE_WORKERS  # what xdist's own hook makes of `-n`


def load_data_script(name: str) -> ModuleType:
    """A module of data_scripts/ (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "data_scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def cranfield() -> Cranfield:
    """Cranfield as the package reads it: docs (id, title + abstract), queries numbered 1..225."""
    return load_cranfield()


@pytest.fixture(scope="session")
def cranfield_docs(cranfield: Cranfield) -> list[tuple[str, str]]:
    return cranfield.docs


@pytest.fixture(scope="session")
def msmarco_source(tmp_path_factory) -> Path:
    """A directory holding msmarco-dev-small/ with the real dev-small queries and qrels (uncompressed
    from tests/data, checked against their SHA-256)."""
    root = tmp_path_factory.mktemp("shared")
    out = root / "msmarco-dev-small"
    out.mkdir()
    for name, digest in MSMARCO_FILES.items():
        raw = lzma.decompress((ROOT / "tests" / "data" / "msmarco-dev-small" / f"{name}.xz").read_bytes())
        assert hashlib.sha256(raw).hexdigest() == digest, name
        (out / name).write_bytes(raw)
    return root


def write_tsv(path: Path, docs: list[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for doc_id, text in docs:
            f.write(f"{doc_id}\t{text}\n")
    return path


def assert_identical(got, want, docs: bool = True) -> None:
    """Two lists of SearchResults equal: ids, score bits, matches, and document numbers when `docs`
    (the same collection; a fresh build of the live documents numbers them otherwise)."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.ids.tolist() == b.ids.tolist()
        assert a.scores.tobytes() == b.scores.tobytes()
        assert a.matches.tolist() == b.matches.tolist()
        if docs:
            assert a.docs.tolist() == b.docs.tolist()
