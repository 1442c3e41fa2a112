"""prepare_real.py: documented counts on the real files, and clear errors on bad ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_data_script

pr = load_data_script("prepare_real")


def tsv(path: Path) -> list[list[str]]:
    return [line.split("\t", 1) for line in path.read_text().splitlines()]


def test_cranfield_counts(tmp_path, capsys):
    assert pr.main(["cranfield", "--out", str(tmp_path)]) == 0  # the copy bundled with the package
    assert "1,400 documents, 225 queries, 1,837 qrels" in capsys.readouterr().out
    docs = tsv(tmp_path / "collection.tsv")
    assert [int(d) for d, _ in docs] == list(range(1, 1401))
    text = dict(docs)
    assert text["1"].startswith("experimental investigation of the aerodynamics of a wing in a slipstream .")
    assert "an experimental study of a wing in a propeller slipstream" in text["1"]
    assert text["471"] == "" and text["995"] == ""
    # record 240 repeats .A/.B inside its abstract: that text stays in the passage
    assert "application to turbulent separations" in text["240"]
    queries = tsv(tmp_path / "queries.tsv")
    assert [q for q, _ in queries] == [str(i) for i in range(1, 226)]
    assert queries[0][1].startswith("what similarity laws must be obeyed")
    qrels = [line.split() for line in (tmp_path / "qrels.tsv").read_text().splitlines()]
    assert len(qrels) == 1837  # every judgement line, the -1 ones as grade 0
    assert qrels[0] == ["1", "0", "184", "3"]  # cranqrel line 1 is "1 184 2": code 2 -> grade 3
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["qrel_lines"]["codes"] == {"-1": 225, "1": 128, "2": 387, "3": 734, "4": 363}
    assert stats["qrel_lines"]["grades"] == {"0": 225, "1": 363, "2": 734, "3": 387, "4": 128}
    assert sum(stats["qrel_lines"]["codes"].values()) == 1837
    assert stats["query_position_to_qry_id"]["3"] == "004"
    assert stats["records_with_repeated_markers"] == ["240", "576", "578"]


def test_cranfield_grade_mapping_is_higher_is_better():
    assert pr.CRANFIELD_GRADES == {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}


def _fake_cranfield(root: Path, qrels: bytes) -> Path:
    d = root / "cranfield"
    d.mkdir(parents=True)
    (d / "cran.all.1400").write_bytes(b".I 1\r\n.T\r\ntitle one\r\n.A\r\nx\r\n.B\r\ny\r\n.W\r\nbody one\r\n"
                                      b".I 2\n.T\ntitle two\n.W\nbody two\n")
    (d / "cran.qry").write_bytes(b".I 001\r\n.W\r\nfirst query\r\n.I 007\r\n.W\r\nsecond\r\nquery\r\n")
    (d / "cranqrel").write_bytes(qrels)
    return root


def test_cranfield_mixed_endings_and_no_final_newline(tmp_path):
    src = _fake_cranfield(tmp_path / "src", b"1 1 1\r\n1 2 -1\n2 2 4")
    stats = pr.prepare_cranfield(src, tmp_path / "out")
    assert (tmp_path / "out" / "qrels.tsv").read_text() == "1 0 1 4\n1 0 2 0\n2 0 2 1\n"
    assert (tmp_path / "out" / "collection.tsv").read_text() == "1\ttitle one body one\n2\ttitle two body two\n"
    assert (tmp_path / "out" / "queries.tsv").read_text() == "1\tfirst query\n2\tsecond query\n"
    assert stats["query_position_to_qry_id"] == {"1": "001", "2": "007"}


@pytest.mark.parametrize(
    "qrels, message",
    [(b"1 1 5\n", "cranqrel:1: unknown relevance code 5"), (b"1 1 1\n3 1 1\n", "cranqrel:2: query number 3"),
     (b"1 9 1\n", "document 9 is not in the collection"), (b"1 1\n", "expected 'query doc code'"),
     (b"1 x 1\n", "non-integer")],
)
def test_cranfield_bad_qrels(tmp_path, capsys, qrels, message):
    src = _fake_cranfield(tmp_path / "src", qrels)
    assert pr.main(["cranfield", "--out", str(tmp_path / "out"), "--source", str(src)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "qrels.tsv").exists()


def test_missing_source_is_a_clear_error(tmp_path, capsys):
    assert pr.main(["metatool", "--out", str(tmp_path / "o"), "--source", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "plugin_des.json: no such file" in err


def test_metatool_counts(tmp_path, capsys):
    assert pr.main(["metatool", "--out", str(tmp_path)]) == 0  # the copy bundled with the package
    assert "199 documents, 20,614 queries, 20,614 qrels" in capsys.readouterr().out
    docs = dict(tsv(tmp_path / "collection.tsv"))
    assert len(docs) == 199 and "calculator" in docs
    cards = [json.loads(line) for line in (tmp_path / "cards.jsonl").read_text().splitlines()]
    assert len(cards) == 199
    assert all(set(c) == {"id", "name", "description"} and docs[c["id"]] == c["description"] for c in cards)
    queries = tsv(tmp_path / "queries.tsv")
    assert len(queries) == 20614 and queries[0] == ["1", "Can I find academic research papers on this topic?"]
    qrels = [line.split() for line in (tmp_path / "qrels.tsv").read_text().splitlines()]
    assert qrels[0] == ["1", "0", "ResearchHelper", "1"]
    assert {d for _, _, d, _ in qrels} <= set(docs)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["tools_with_queries"] == 199


def refused(tmp_path, capsys, dataset: str, files: dict[str, str]) -> str:
    """Run `prepare_real.py DATASET` on a source folder holding `files` (name: text): it exits 2,
    writes nothing, and the error is returned."""
    d = tmp_path / dataset
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    assert pr.main([dataset, "--out", str(tmp_path / "o"), "--source", str(tmp_path)]) == 2
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
    return capsys.readouterr().err


def test_metatool_unknown_tool(tmp_path, capsys):
    files = {"plugin_des.json": '{"calc": "A calculator."}',
             "all_clean_data.csv": 'Query,Tool\n"add 2, 3",calc\nweather?,weather\n'}
    err = refused(tmp_path, capsys, "metatool", files)
    assert "all_clean_data.csv:3: tool 'weather' is not in plugin_des.json" in err


def test_msmarco_dev_small_counts(tmp_path, capsys, msmarco_source):
    assert pr.main(["msmarco-dev-small", "--out", str(tmp_path), "--source", str(msmarco_source)]) == 0
    assert "6,980 queries, 7,437 qrels" in capsys.readouterr().out
    queries = dict(tsv(tmp_path / "queries.tsv"))
    assert len(queries) == 6980
    assert queries["2"] == "Androgen receptor define"  # leading space removed
    lines = (tmp_path / "qrels.tsv").read_text().splitlines()
    assert len(lines) == 7437 and lines[0] == "300674 0 7067032 1"
    assert not (tmp_path / "collection.tsv").exists()


def test_duplicate_query_ids_rejected(tmp_path, capsys):
    err = refused(tmp_path, capsys, "msmarco-dev-small", {"queries.dev.small.tsv": "1\ta\n1\tb\n",
                                                          "qrels.dev.small.trec": "1 0 5 1\n"})
    assert "duplicate query id '1'" in err
