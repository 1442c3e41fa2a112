"""Readers of queries and qrels, and the TREC run writer/reader."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine.errors import InputError
from ssr_engine.eval.trec import read_qrels, read_queries, read_run, trec_scores, write_run


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_queries_basic(tmp_path):
    p = write(tmp_path, "q.tsv", b"\xef\xbb\xbf1\thello world\r\n2\t Androgen receptor\n\n3\t\n")
    assert read_queries(p) == {"1": "hello world", "2": " Androgen receptor", "3": ""}


@pytest.mark.parametrize(
    "data,line,fragment",
    [
        (b"1\ta\n2 b\n", 2, "qid<TAB>query"),
        (b"1\ta\n1\tb\n", 2, "duplicate query id '1' (first on line 1)"),
        (b"1\ta\n2\t\xff\n", 2, "UTF-8"),
        (b"\n\n", None, "no queries"),
        (b"\tquery\n", 1, "bad query id"),
    ],
)
def test_queries_errors(tmp_path, data, line, fragment):
    p = write(tmp_path, "q.tsv", data)
    with pytest.raises(InputError) as err:
        read_queries(p)
    assert err.value.line == line
    assert fragment in str(err.value) and str(p) in str(err.value)


def test_queries_skip_bad_lines_is_counted(tmp_path):
    p = write(tmp_path, "q.tsv", b"1\ta\nbroken\n2\tb\n")
    skipped: list[str] = []
    assert read_queries(p, skipped) == {"1": "a", "2": "b"}
    assert len(skipped) == 1 and ":2:" in skipped[0]


def test_qrels_forms(tmp_path):
    trec = write(tmp_path, "a", b"1 0 d1 1\n1 0 d2 0\n2 Q0 d3 2\n")
    tab = write(tmp_path, "b", b"1\t0\td1\t1\n1\t0\td2\t0\n2\t0\td3\t2\n")
    two = write(tmp_path, "c", b"1\td1\n2\td3\n")
    expected = {"1": {"d1": 1, "d2": 0}, "2": {"d3": 2}}
    assert read_qrels(trec) == expected
    assert read_qrels(tab) == expected
    assert read_qrels(two) == {"1": {"d1": 1}, "2": {"d3": 1}}


@pytest.mark.parametrize(
    "data,line,fragment",
    [
        (b"1 0 d1\n", 1, "relevance 'd1' is not an integer"),  # 3 columns: BEIR's qid docid rel
        (b"1 0 d1 1 7\n", 1, "5 columns"),
        (b"1 0 d1 1\n1 d2\n", 2, "4 columns like the first line"),
        (b"1 0 d1 x\n", 1, "not an integer"),
        (b"1 0 d1 1\n1 0 d1 0\n", 2, "judged twice"),
        (b"1 0 d1 1\n1 0 \xe9 1\n", 2, "UTF-8"),
        (b"", None, "no judgements"),
    ],
)
def test_qrels_errors(tmp_path, data, line, fragment):
    p = write(tmp_path, "qrels", data)
    with pytest.raises(InputError) as err:
        read_qrels(p)
    assert err.value.line == line and fragment in str(err.value)


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        read_qrels(tmp_path / "nope")


def test_real_msmarco_files(msmarco_source):
    msmarco = msmarco_source / "msmarco-dev-small"
    queries = read_queries(msmarco / "queries.dev.small.tsv")
    qrels = read_qrels(msmarco / "qrels.dev.small.trec")
    assert len(queries) == 6980 and len(qrels) == 6980
    assert sum(len(v) for v in qrels.values()) == 7437
    assert set(queries) == set(qrels)


def test_run_round_trip_exact(tmp_path):
    scores = [1 / 3, 1e-300, 12345678.123456789, 0.1 + 0.2, 5e-324, 2.0]
    run = [("q1", [f"d{i}" for i in range(6)], scores), ("q2", [], []), ("7", ["x"], [math.pi])]
    p = tmp_path / "run.trec"
    assert write_run(p, run, tag="mytag", scores="exact") == 7
    assert not (tmp_path / "run.trec.tmp").exists()
    first = p.read_text().splitlines()[0]
    assert first == f"q1 Q0 d0 1 {1 / 3!r} mytag"
    back = read_run(p)
    assert list(back) == ["q1", "7"]  # an empty result writes no line
    assert back["q1"].docids == run[0][1] and back["q1"].scores == scores  # bit-exact
    assert back["7"].scores == [math.pi]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_run_round_trip_any_float(tmp_path_factory, scores):
    p = tmp_path_factory.mktemp("run") / "r"
    write_run(p, [("q", [f"d{i}" for i in range(len(scores))], scores)], scores="exact")
    assert read_run(p)["q"].scores == [float(s) for s in scores]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(min_value=-3e38, max_value=1e300),
                          st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e-45, 7.0000001])), min_size=1, max_size=300))
def test_trec_scores_strictly_decreasing_in_float32(tmp_path_factory, values):
    true = sorted(values, reverse=True)
    written = trec_scores(true)
    f32 = written.astype(np.float32)
    assert np.array_equal(f32.astype(np.float64), written)  # exactly float32 values
    assert np.all(f32[1:] < f32[:-1])  # strict, even for a reader holding float32 (trec_eval)
    assert np.all(written <= np.asarray(true))
    p = tmp_path_factory.mktemp("run") / "r"
    write_run(p, [("q", [f"d{i}" for i in range(len(true))], true)])
    back = read_run(p)["q"]
    assert back.scores == written.tolist()  # the text reads back as the same values
    # as trec_eval sorts (score desc, docno desc) the file keeps our order
    assert sorted(back.docids, key=lambda d: (-np.float32(back.scores[int(d[1:])]), [-ord(c) for c in d])) \
        == back.docids


def test_trec_scores_ties_and_gaps():
    tied = trec_scores([10.0] * 1000 + [9.0])
    assert tied[0] == 10.0 and tied[-1] == 9.0  # a float32-exact score with room below is kept
    assert 10.0 - tied[999] < 1e-3  # 999 float32 ulps of 10.0 (9.5e-7 each) below it
    with pytest.raises(ValueError):
        trec_scores([1.0, 2.0])  # not best first


def test_run_reader_orders_by_rank_and_rejects_bad_lines(tmp_path):
    p = write(tmp_path, "r", b"q Q0 b 2 1.0 t\nq Q0 a 1 2.0 t\n")
    assert read_run(p)["q"].docids == ["a", "b"]
    for data, fragment in [
        (b"q Q0 a 1 2.0\n", "5 columns"),
        (b"q Q0 a one 2.0 t\n", "bad rank"),
        (b"q Q0 a 1 nan t\n", "not finite"),
        (b"q Q0 a 1 2 t\nq Q0 a 2 1 t\n", "twice"),
        (b"q Q0 a 1 2 t\nq Q0 b 1 1 t\n", "rank 1 twice"),
    ]:
        with pytest.raises(InputError, match=fragment):
            read_run(write(tmp_path, "bad", data))


def test_run_writer_rejects_whitespace_and_leaves_nothing(tmp_path):
    p = tmp_path / "run"
    with pytest.raises(ValueError):
        write_run(p, [("q", ["a b"], [1.0])])
    with pytest.raises(ValueError):
        write_run(p, [("q", ["a"], [1.0])], tag="two words")
    assert list(tmp_path.iterdir()) == []
