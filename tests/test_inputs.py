"""Inputs: Python iterables, compressed files (by content), TSV headers, BEIR and Pyserini JSONL with
titles as fields, BEIR qrels, JSONL queries and ir_datasets, all giving the same index."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path

import numpy as np
import pytest
from conftest import write_tsv

from ssr_engine import build_index, card_signals, open_index
from ssr_engine.cli import main
from ssr_engine.errors import InputError, SsrError
from ssr_engine.eval.trec import read_qrels, read_queries
from ssr_engine.format import ARRAYS


def index_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an index (postings, forward CSR, vocabulary, ranks, BM25 tf/lengths) and its ids."""
    ix = open_index(path)
    out = {name: np.asarray(getattr(ix, name)) for name in ARRAYS}
    for name in ("postings_tf", "doc_lengths"):
        if getattr(ix, name, None) is not None:
            out[name] = np.asarray(getattr(ix, name))
    out["ids"] = np.asarray(ix.doc_ids(), dtype=object)
    return out


def assert_same_index(a: Path, b: Path) -> None:
    x, y = index_arrays(a), index_arrays(b)
    assert x.keys() == y.keys()
    for name in x:
        assert x[name].dtype == y[name].dtype and np.array_equal(x[name], y[name]), name


@pytest.fixture(scope="module")
def docs(cranfield_docs) -> list[tuple[str, str]]:
    return cranfield_docs


@pytest.mark.parametrize("scoring", ["ssr", "bm25"])
def test_same_documents_same_postings_from_every_source(docs, tmp_path, scoring):
    base = write_tsv(tmp_path / "plain.tsv", docs)
    sources: dict[str, object] = {
        "list": list(docs),
        "generator": (pair for pair in docs),  # one-shot
        "dicts": [{"id": d, "text": t} for d, t in docs],
        # compressed files, named as if plain: recognised by their magic bytes
        "gzip": tmp_path / "collection.tsv",
        "bzip2": tmp_path / "bz.tsv",
        "xz": tmp_path / "xz.data",
        "jsonl": tmp_path / "docs.jsonl",
        "jsonl.gz": tmp_path / "docs.jsonl.gz",
        "header": tmp_path / "header.tsv",
    }
    raw = base.read_bytes()
    (tmp_path / "collection.tsv").write_bytes(gzip.compress(raw))
    (tmp_path / "bz.tsv").write_bytes(bz2.compress(raw))
    (tmp_path / "xz.data").write_bytes(lzma.compress(raw))
    jsonl = "".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in docs).encode()
    (tmp_path / "docs.jsonl").write_bytes(jsonl)
    (tmp_path / "docs.jsonl.gz").write_bytes(gzip.compress(jsonl))
    (tmp_path / "header.tsv").write_bytes(b"docid\ttext\n" + raw)
    ref = build_index(base, tmp_path / "idx-tsv", scoring=scoring, quiet=True, workers=2, chunk_docs=333)
    for name, source in sources.items():
        out = build_index(source, tmp_path / f"idx-{name}", scoring=scoring, quiet=True, workers=2,
                          chunk_docs=333, header=name == "header")
        assert_same_index(ref, out)
    m = open_index(tmp_path / "idx-list").manifest.input
    assert m["format"] == "python" and m["bytes"] == sum(len(t.encode()) for _, t in docs)
    # without --header the header line is a document
    with_header_doc = build_index(tmp_path / "header.tsv", tmp_path / "idx-h2", quiet=True, workers=1)
    assert open_index(with_header_doc).n_docs == len(docs) + 1


def test_titles_are_a_field_of_their_own(tmp_path):
    beir = [{"_id": "d1", "title": "Alpha beta", "text": "gamma delta"},
            {"_id": "d2", "title": "", "text": "beta gamma"}]
    pyserini = [{"id": "d1", "contents": "Alpha beta gamma delta"}]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in beir), encoding="utf-8")
    ix = open_index(build_index(path, tmp_path / "beir", quiet=True, workers=1))
    signals = {ix.signal(t) for t in range(ix.n_terms)}
    d1 = {ix.signal(int(t)) for t in ix.forward_row(0)}
    assert d1 == set(card_signals(["Alpha beta", "gamma delta"]))  # no "beta gamma" bigram across fields
    assert "beta gamma" in signals  # d2's body has it
    assert ix.doc_ids() == ["d1", "d2"]
    path = tmp_path / "pyserini.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in pyserini), encoding="utf-8")
    ix = open_index(build_index(path, tmp_path / "pys", quiet=True, workers=1))
    assert {ix.signal(t) for t in range(ix.n_terms)} >= {"beta gamma", "alpha beta"}


def test_bad_inputs_named(tmp_path, capsys):
    with pytest.raises(InputError, match=r"<python iterable>:2: .*id"):
        build_index([("a", "text"), {"text": "no id"}], tmp_path / "x", quiet=True)
    with pytest.raises(InputError, match=r"<python iterable>:1: .*UTF-8"):
        build_index([("a", "bad \ud800 surrogate")], tmp_path / "x", quiet=True)
    with pytest.raises(SsrError, match="iterable of documents"):
        build_index(42, tmp_path / "x", quiet=True)  # type: ignore[arg-type]
    corrupt = tmp_path / "c.tsv"
    corrupt.write_bytes(gzip.compress(b"1\thello world\n" * 10000)[:200])
    assert main(["build-index", "--collection", str(corrupt), "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert f"{corrupt}" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"id": "1", "text": "a"}\n')
    with pytest.raises(InputError, match="TSV collections only"):
        build_index(jsonl, tmp_path / "x", header=True, quiet=True)
    assert list(p.name for p in tmp_path.iterdir() if p.name.startswith("x") or p.name.startswith(".x")) == []


def test_beir_qrels_jsonl_queries_and_compressed(tmp_path):
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n")
    assert read_qrels(tmp_path / "qrels.tsv") == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    (tmp_path / "q.jsonl").write_text('{"_id": "q1", "text": "alpha beta", "metadata": {}}\n'
                                      '{"_id": "q2", "text": "gamma"}\n')
    assert read_queries(tmp_path / "q.jsonl") == {"q1": "alpha beta", "q2": "gamma"}
    (tmp_path / "q.tsv").write_bytes(gzip.compress(b"q1\talpha beta\nq2\tgamma\n"))
    assert read_queries(tmp_path / "q.tsv") == {"q1": "alpha beta", "q2": "gamma"}
    (tmp_path / "bad.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"_id": "q2"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: needs an id"):
        read_queries(tmp_path / "bad.jsonl")


@pytest.fixture()
def irds_dataset(tmp_path, docs):
    """A small dataset registered with ir_datasets from local files (no network)."""
    ir_datasets = pytest.importorskip("ir_datasets", reason="ir_datasets (optional extra 'irds') is not installed")
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    sample = docs[:300]
    write_tsv(tmp_path / "docs.tsv", sample)
    (tmp_path / "queries.tsv").write_text("1\tflow over a flat plate\n2\tboundary layer\n")
    (tmp_path / "qrels.txt").write_text(f"1 0 {sample[0][0]} 1\n2 0 {sample[1][0]} 2\n2 0 {sample[2][0]} 0\n")
    name = f"ssr-test-{tmp_path.name}"
    ir_datasets.registry.register(name, Dataset(
        TsvDocs(LocalDownload(tmp_path / "docs.tsv")),
        TsvQueries(LocalDownload(tmp_path / "queries.tsv")),
        TrecQrels(LocalDownload(tmp_path / "qrels.txt"), {0: "not", 1: "relevant", 2: "very"}),
    ))
    return name, sample


def test_ir_datasets_offline(irds_dataset, tmp_path, capsys):
    name, sample = irds_dataset
    ref = build_index(list(sample), tmp_path / "ref", quiet=True, workers=1)
    assert main(["build-index", "--dataset", f"irds:{name}", "--out", str(tmp_path / "irds"), "--quiet"]) == 0
    assert_same_index(ref, tmp_path / "irds")
    assert open_index(tmp_path / "irds").manifest.input["path"] == f"irds:{name}"
    assert read_queries(f"irds:{name}") == {"1": "flow over a flat plate", "2": "boundary layer"}
    assert read_qrels(f"irds:{name}") == {"1": {sample[0][0]: 1}, "2": {sample[1][0]: 2, sample[2][0]: 0}}
    capsys.readouterr()
    assert main(["evaluate", "--index", str(tmp_path / "irds"), "--queries", f"irds:{name}", "--qrels",
                 f"irds:{name}", "--report", str(tmp_path / "r.json"), "--latency-queries", "0"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["queries"]["judged"] == 2 and report["files"]["queries"] == f"irds:{name}"
    assert main(["build-index", "--dataset", "irds:no-such-dataset-xyz", "--out", str(tmp_path / "n")]) == 2
    assert "no such ir_datasets dataset" in capsys.readouterr().err


@pytest.mark.parametrize("scoring", ["ssr", "bm25"])
def test_store_text_and_show_text(docs, tmp_path, capsys, scoring):
    from ssr_engine import BM25Searcher, Searcher, verify_index

    beir = [{"_id": d, "title": f"title of {d}", "text": t} for d, t in docs]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in beir), encoding="utf-8")
    idx = build_index(path, tmp_path / "idx", scoring=scoring, store_text=True, quiet=True, workers=2,
                      chunk_docs=999)  # chunks that do not align with the store's row groups
    assert verify_index(idx) == []
    assert open_index(idx).manifest.doc_store["rows"] == len(docs)
    searcher = BM25Searcher(idx) if scoring == "bm25" else Searcher(idx)
    for i in (0, 1, 998, 999, len(docs) - 1):
        d, t = docs[i]
        assert searcher.doc(d) == f"title of {d}\n{t}"
        assert searcher.doc(i) == f"title of {d}\n{t}"
    with pytest.raises(SsrError, match="no document"):
        searcher.doc("no-such-id")
    # the CLI takes the method from the index and shows the stored text of each result
    capsys.readouterr()
    assert main(["search", "--index", str(idx), "--json", "--show-text", "-k", "3", docs[5][1]]) == 0
    hit = json.loads(capsys.readouterr().out)["results"][0]
    assert hit["text"] == searcher.doc(hit["id"])
    assert main(["search", "--index", str(idx), "-k", "2", "--show-text", docs[5][1]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f" {scoring}") and lines[1].startswith("#\ttext\ttitle of ")
    # a corrupted store is found by verify and reported, never a crash
    store = open_index(idx).path / "doc_text.parquet"
    data = bytearray(store.read_bytes())
    data[len(data) // 2] ^= 0xFF
    store.write_bytes(bytes(data))
    assert any("doc_text.parquet" in p for p in verify_index(idx))


def test_show_text_needs_a_store(docs, tmp_path, capsys):
    idx = build_index(docs[:50], tmp_path / "idx", quiet=True, workers=1)
    assert main(["search", "--index", str(idx), "--show-text", "flow"]) == 2
    assert "--store-text" in capsys.readouterr().err


def _tsv_by_the_rules(raw: bytes) -> tuple[list[tuple[int, str, str]], dict[int, str]]:
    """MS MARCO TSV read line by line in Python (the rules `corpus.read_tsv` implements with a kernel):
    (line, id, text) of each good line, and each bad line's reason."""
    good, bad = [], {}
    lines = raw.split(b"\n")
    for number, line in enumerate(lines[:-1] if raw.endswith(b"\n") else lines, start=1):
        line = line[:-1] if line.endswith(b"\r") else line
        if b"\t" not in line:
            bad[number] = "no tab"
            continue
        raw_id, _, body = line.partition(b"\t")
        if not raw_id:
            bad[number] = "empty id"
            continue
        try:
            doc_id, text = raw_id.decode("utf-8"), body.decode("utf-8")
        except UnicodeDecodeError:
            bad[number] = "invalid UTF-8"
            continue
        if any(c.isspace() for c in doc_id):
            bad[number] = "whitespace"
            continue
        good.append((number, doc_id, text))
    return good, bad


@pytest.mark.parametrize("seed", range(4))
def test_tsv_lines_follow_the_rules(tmp_path, seed):
    """Ids with every kind of whitespace (ASCII, \\x1c, U+00A0, U+3000), non-ASCII ids, CR before the
    newline or alone, missing tabs, empty ids, bad UTF-8, no final newline: read in small chunks."""
    from ssr_engine.corpus import read_tsv

    rng = np.random.default_rng(seed)
    pieces = [b"a", b"7", b"\xc3\xa9", b" ", b"\r", b"\x0b", b"\x1c", b"\xc2\xa0", b"\xe3\x80\x80", b"\xff", b"\t"]
    rows = []
    for _ in range(300):
        doc_id = b"".join(pieces[k] for k in rng.choice(len(pieces) - 1, size=rng.integers(0, 4),
                                                        p=[0.3, 0.3, 0.1] + [0.3 / 7] * 7))
        text = b"".join(pieces[k] for k in rng.integers(0, len(pieces), size=rng.integers(0, 6)))
        tab = b"\t" if rng.random() > 0.05 else b""
        rows.append(doc_id + tab + text + (b"\r" if rng.random() < 0.2 else b""))
    raw = b"\n".join(rows) + (b"\n" if seed % 2 else b"")
    path = tmp_path / "c.tsv"
    path.write_bytes(raw)
    good, bad = _tsv_by_the_rules(raw)
    got_good, got_bad = [], {}
    for chunk in read_tsv(path, chunk_docs=7, skip_bad_lines=True):
        got_bad.update({b.line: b.reason for b in chunk.bad})
        for d, doc_id in enumerate(chunk.ids):
            v = int(chunk.doc_values[d])
            text = chunk.data[chunk.value_starts[v] : chunk.value_ends[v]].tobytes().decode("utf-8")
            got_good.append((int(chunk.lines[d]), doc_id, text))
    assert got_good == good
    assert sorted(got_bad) == sorted(bad)
    assert all(bad[line].lower() in got_bad[line].lower() for line in bad)
    first_bad = min(bad)
    with pytest.raises(InputError, match=rf"c\.tsv:{first_bad}: "):
        list(read_tsv(path, chunk_docs=7))


def test_jsonl_and_iterable_chunks_keep_documents_lines_and_bad_reasons(tmp_path):
    """JSONL lines and an iterable's items, read in chunks of 2 with bad lines skipped: every good document's
    line and values, and each bad line's reason as the error gives it (a path holding ": " included)."""
    from ssr_engine.corpus import read_documents, read_jsonl

    lines = ['{"id": "1", "text": "alpha"}', "not json", '{"_id": "2", "title": "T", "text": "beta"}', "",
             '{"text": "no id"}', '["a list"]', '{"id": "3", "contents": "gamma delta"}']
    folder = tmp_path / "a: b"
    folder.mkdir()
    path = folder / "d.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    items = [("1", "alpha"), {"text": "no id"}, ("2", "x \ud800"), {"id": "3", "fields": ["T", "beta"]}]
    for chunks, want_good, bad_lines, source in (
            (read_jsonl(path, 2, skip_bad_lines=True), [(1, "1", ["alpha"]), (3, "2", ["T", "beta"]),
                                                        (7, "3", ["gamma delta"])], [2, 5, 6], path),
            (read_documents(items, 2, skip_bad_lines=True), [(1, "1", ["alpha"]), (4, "3", ["T", "beta"])], [2, 3],
             "<python iterable>")):
        chunks = list(chunks)
        good = [(int(c.lines[d]), doc_id, [c.data[c.value_starts[v]:c.value_ends[v]].tobytes().decode()
                                           for v in range(c.doc_values[d], c.doc_values[d + 1])])
                for c in chunks for d, doc_id in enumerate(c.ids)]
        assert good == want_good
        bad = [b for c in chunks for b in c.bad]
        assert [b.line for b in bad] == bad_lines
        for b in bad:  # the reason recorded is the one the error gives for that line alone
            if source == path:
                alone = folder / f"line-{b.line}.jsonl"
                alone.write_text(lines[b.line - 1] + "\n", encoding="utf-8")
                with pytest.raises(InputError) as err:
                    list(read_jsonl(alone, 2))
                assert str(err.value) == f"{alone}:1: {b.reason}"
            else:
                with pytest.raises(InputError) as err:
                    list(read_documents([items[b.line - 1]], 2))
                assert str(err.value) == f"{source}:1: {b.reason}"
