"""The real collections bundled with the package: byte-exact copies, checked on read."""

from __future__ import annotations

import hashlib
import lzma

import pytest
from conftest import SHARED_DATA

from ssr_engine import datasets
from ssr_engine.datasets.cranfield import load_cranfield
from ssr_engine.datasets.metatool import load_metatool
from ssr_engine.errors import InputError


@pytest.mark.parametrize("dataset,name", [(d, n) for d, files in datasets.CHECKSUMS.items() for n in files])
def test_bundled_files_are_the_originals(dataset, name):
    raw = lzma.decompress(datasets.bundled_file(dataset, name).read_bytes())
    assert hashlib.sha256(raw).hexdigest() == datasets.CHECKSUMS[dataset][name]
    assert datasets.CHECKSUMS[dataset][name] in (datasets.bundled_file(dataset, name).parent
                                                 / "PROVENANCE.md").read_text()
    original = SHARED_DATA / dataset / name
    if original.is_file():  # the team's copy, where it exists, is the same file byte for byte
        assert original.read_bytes() == raw


def test_licence_and_provenance_are_shipped():
    base = datasets.bundled_file("metatool", "x").parent
    assert "MIT License" in (base / "LICENSE").read_text() and "Yue Huang" in (base / "LICENSE").read_text()
    assert "Cleverdon" in (datasets.bundled_file("cranfield", "x").parent / "PROVENANCE.md").read_text()


def test_counts_of_the_bundled_collections():
    c = load_cranfield()
    assert (len(c.docs), len(c.queries), len(c.qrels)) == (1400, 225, 1837)
    m = load_metatool()
    assert (len(m.tools), len(m.queries), len(m.multi)) == (199, 20614, 497)
    assert all(len(gold) == 2 and set(gold) <= {t for t, _ in m.tools} for _, gold in m.multi)
    assert m.gold[0] == "ResearchHelper"


def test_damaged_bundled_file_is_a_clear_error(tmp_path, monkeypatch):
    bad = tmp_path / "cranfield"
    bad.mkdir()
    raw = lzma.decompress(datasets.bundled_file("cranfield", "cranqrel").read_bytes())
    (bad / "cranqrel.xz").write_bytes(lzma.compress(raw.replace(b"184", b"185", 1)))
    (bad / "cran.qry.xz").write_bytes(b"not xz at all")
    monkeypatch.setattr(datasets, "bundled_file", lambda dataset, name: tmp_path / dataset / f"{name}.xz")
    with pytest.raises(InputError, match="does not match its SHA-256"):
        datasets.read_bytes("cranfield", "cranqrel")
    with pytest.raises(InputError, match="corrupt"):
        datasets.read_bytes("cranfield", "cran.qry")
    with pytest.raises(InputError, match="missing"):
        datasets.read_bytes("cranfield", "cran.all.1400")


def test_a_directory_replaces_the_bundled_copy(tmp_path):
    d = tmp_path / "cran"
    d.mkdir()
    (d / "cran.all.1400").write_text(".I 1\n.T\nwing flow\n.W\nwing flow over a plate\n")
    (d / "cran.qry").write_text(".I 001\n.W\nflow\n")
    (d / "cranqrel").write_text("1 1 2\n")
    c = load_cranfield(d)
    assert c.docs == [("1", "wing flow wing flow over a plate")] and c.qrels == [("1", "1", 3)]
    with pytest.raises(InputError, match="no such file"):
        load_metatool(d)


def test_msmarco_test_copy_is_the_original(msmarco_source):
    from conftest import MSMARCO_FILES

    for name, digest in MSMARCO_FILES.items():
        assert hashlib.sha256((msmarco_source / "msmarco-dev-small" / name).read_bytes()).hexdigest() == digest
        original = SHARED_DATA / "msmarco-dev-small" / name
        if original.is_file():
            assert hashlib.sha256(original.read_bytes()).hexdigest() == digest
