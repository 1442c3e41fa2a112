"""Searcher and `ssr search` on indexes built by `build_index`, against the pure-Python reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssr_engine import indexing as build
from ssr_engine.cli import main
from ssr_engine.errors import SsrError
from ssr_engine.hashing import signal_hash
from ssr_engine.reference import ReferenceIndex
from ssr_engine.retrieval import SearchResult
from ssr_engine.scoring import canonical_sum
from ssr_engine.search import Searcher


def write_tsv(path: Path, ids, texts) -> Path:
    path.write_text("".join(f"{i}\t{t}\n" for i, t in zip(ids, texts, strict=True)), encoding="utf-8")
    return path


def random_collection(n=600, seed=0):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(80)] + ["the", "of", "Ärger", "x"]
    texts = []
    for d in range(n):
        if d % 5 == 4:
            texts.append(texts[int(rng.integers(len(texts)))])  # duplicates: ties broken by id
        else:
            texts.append(" ".join(rng.choice(vocab, size=int(rng.integers(0, 20)))))
    ids = [str(x) for x in rng.permutation(10 * n)[:n]]
    queries = [" ".join(rng.choice(vocab, size=int(rng.integers(0, 7)))) for _ in range(60)]
    queries += ["", "the of", "unknown words", "w1 unknown", "W1 W2 w3"]
    return ids, texts, queries


def assert_same(res: SearchResult, hits) -> None:
    assert res.ids.tolist() == hits.ids.tolist()
    assert res.scores.view(np.uint64).tolist() == hits.scores.view(np.uint64).tolist()
    assert res.matches.tolist() == hits.matches.tolist()
    assert res.ids.dtype.kind == "U" and res.scores.dtype == np.float64
    assert len(res) == len(hits)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("search")
    ids, texts, queries = random_collection()
    out = build.build_index(write_tsv(tmp / "c.tsv", ids, texts), tmp / "idx", quiet=True, cap=12)
    return Searcher(out), ReferenceIndex.from_texts(ids, texts, cap=12), queries


@pytest.mark.parametrize("ids", [
    ["a-é", "b", "ü", "c"],  # non-ASCII ids: the Arrow path
    ["x" * 40, "y" * 33, "z", "w"],  # ids too long for the fixed-width table
    ["d10", "d9", "d100", "d0"],  # short ASCII ids: the fixed-width table
])
def test_external_ids_of_every_kind(tmp_path, ids):
    texts = ["alpha beta", "alpha", "beta gamma", "alpha beta gamma"]
    searcher = Searcher(build.build_index(write_tsv(tmp_path / "c.tsv", ids, texts), tmp_path / "idx", quiet=True))
    ref = ReferenceIndex.from_texts(ids, texts)
    for query in ("alpha", "alpha beta gamma", "nothing"):
        assert_same(searcher.search(query, k=None), ref.search(query, k=None))


@pytest.mark.parametrize("k", [1, 7, 10_000, None])
@pytest.mark.parametrize("method", ["ssr", "levels", "union", "maxscore", "exhaustive"])
def test_search_batch_matches_reference(small, k, method):
    searcher, ref, queries = small
    results = searcher.search_batch(queries, k, method=method)
    assert len(results) == len(queries)
    for q, res in zip(queries, results, strict=True):
        assert_same(res, ref.search(q, k))
    assert_same(searcher.search(queries[0], k, method=method), ref.search(queries[0], k))


def test_no_signals_or_no_match_is_empty(small):
    searcher, _, _ = small
    for q in ["", "the of and", "zzz yyy", "x"]:
        for k in (10, None):
            res = searcher.search(q, k)
            assert len(res) == 0 and res.ids.shape == (0,)


def test_threads_and_blocks_identical(small):
    searcher, _, queries = small
    runs = [searcher.search_batch(queries, 50, threads=t) for t in (1, 2)]
    plain = Searcher(searcher.index, block=searcher.n_docs)  # one N-wide block: the plain scatter
    runs.append(plain.search_batch(queries, 50))
    runs.append(searcher.search_batch(queries, 50, method="exhaustive", threads=1))
    runs += [searcher.search_batch(queries, 50, method=m, threads=t) for m in ("union", "maxscore") for t in (1, 2)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            assert a.docs.tobytes() == b.docs.tobytes()
            assert a.scores.tobytes() == b.scores.tobytes()
            assert a.matches.tobytes() == b.matches.tobytes()


def test_explain_gives_the_score(small):
    searcher, ref, queries = small
    for q in queries[:20]:
        res = searcher.search(q, 5)
        for doc, score, m in zip(res.ids, res.scores, res.matches, strict=True):
            pairs = searcher.explain(q, doc)
            assert len(pairs) == m
            assert canonical_sum([w for _, w in pairs]) == score
            doc_sigs = ref.doc_signals[ref.ids.index(doc)]
            assert {s for s, _ in pairs} == ref.query_signals(q) & doc_sigs
            assert [w for _, w in pairs] == sorted(ref.weight(s) for s, _ in pairs)
    assert searcher.explain("zzz", ref.ids[0]) == []
    with pytest.raises(SsrError, match="no document"):
        searcher.explain("w1", "not-an-id")


def test_bad_k_and_method(small):
    searcher, _, _ = small
    for k in (0, -3, True, 2.5):
        with pytest.raises(SsrError, match="k must"):
            searcher.search("w1", k)
    with pytest.raises(SsrError, match="unknown method"):
        searcher.search("w1", 10, method="bm42")
    with pytest.raises(SsrError, match="threads"):
        searcher.search_batch(["w1"], 10, threads=0)


def test_hash_hit_with_another_string_is_not_a_match(tmp_path):
    # 16-bit hashes: find a string that is not in the vocabulary but hashes like a term
    ids, texts = ["1", "2", "3"], ["alpha beta", "gamma", "beta delta"]
    out = build.build_index(write_tsv(tmp_path / "c.tsv", ids, texts), tmp_path / "idx", quiet=True, hash_bits=16)
    searcher = Searcher(out)
    seed = searcher.index.manifest.signals.hash.seed
    targets = {signal_hash(s, seed, 16): s for s in ["alpha", "beta", "gamma", "delta"]}
    impostor = next(f"q{i}" for i in range(1_000_000) if signal_hash(f"q{i}", seed, 16) in targets)
    assert len(searcher.search(impostor, None)) == 0
    assert len(searcher.search(f"{impostor} gamma", None)) == 1
    assert searcher.search_batch([impostor], None, method="exhaustive")[0].ids.tolist() == []


def test_bm25_index_is_refused(tmp_path):
    out = build.build_index(write_tsv(tmp_path / "c.tsv", ["1"], ["alpha"]), tmp_path / "idx", quiet=True,
                            scoring="bm25")
    with pytest.raises(SsrError, match="bm25"):
        Searcher(out)


# ------------------------------------------------------------------------------ CLI


def parse_run(text: str) -> dict[str, list[tuple[str, int, float]]]:
    run: dict[str, list[tuple[str, int, float]]] = {}
    for line in text.splitlines():
        qid, q0, doc, rank, score, tag = line.split(" ")
        assert q0 == "Q0"
        run.setdefault(qid, []).append((doc, int(rank), float(score)))
    return run


def test_cli_run_matches_reference(small, tmp_path, capsys):
    searcher, ref, queries = small
    qfile = tmp_path / "q.tsv"
    qfile.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(queries)), encoding="utf-8")
    out = tmp_path / "run.txt"
    assert main(["search", "--index", str(searcher.index.root), "--queries", str(qfile), "-k", "9",
                 "--output", str(out), "--method", "exhaustive", "--threads", "1"]) == 0
    assert not (tmp_path / "run.txt.tmp").exists()
    run = parse_run(out.read_text())
    for i, q in enumerate(queries):
        hits = ref.search(q, 9)
        rows = list(hits.rows())
        # trec-stable scores (the default): float32, strictly decreasing, never above the true score
        assert [(d, r) for d, r, _ in run.get(f"q{i}", [])] == [(d, r + 1) for r, (d, _, _) in enumerate(rows)]
        written = [s for _, _, s in run.get(f"q{i}", [])]
        assert all(a > b for a, b in zip(written, written[1:], strict=False))
        assert all(float(np.float32(w)) == w and w <= s for w, (_, s, _) in zip(written, rows, strict=True))
    assert out.read_text().split("\n")[0].endswith(" exhaustive")
    assert main(["search", "--index", str(searcher.index.root), "--queries", str(qfile), "-k", "9",
                 "--output", str(out), "--run-scores", "exact"]) == 0
    run = parse_run(out.read_text())
    for i, q in enumerate(queries):
        assert run.get(f"q{i}", []) == [(d, r + 1, s) for r, (d, s, _) in enumerate(ref.search(q, 9).rows())]

    assert main(["search", "--index", str(searcher.index.root), "--json", "--explain", "-k", "3", "w1 w2", ""]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [x["qid"] for x in lines] == ["1", "2"] and lines[1]["results"] == []
    for r, hit in enumerate(lines[0]["results"]):
        h_id, h_score, h_matches = ref.search("w1 w2", 3).rows()[r]
        assert (hit["id"], hit["score"], hit["matches"], hit["rank"]) == (h_id, h_score, h_matches, r + 1)
        assert canonical_sum([w for _, w in hit["explain"]]) == h_score


def test_cli_errors(small, tmp_path, capsys):
    searcher, _, _ = small
    idx = str(searcher.index.root)
    bad = tmp_path / "bad.tsv"
    bad.write_text("1\tfine\nno tab here\n", encoding="utf-8")
    out = tmp_path / "run.txt"
    assert main(["search", "--index", idx, "--queries", str(bad), "--output", str(out)]) == 2
    assert f"{bad}:2:" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "run.txt.tmp").exists()
    assert main(["search", "--index", idx, "-k", "0", "w1"]) == 2
    assert "k must be >= 1" in capsys.readouterr().err
    assert main(["search", "--index", idx, "--method", "nope", "w1"]) == 2
    assert "unknown method" in capsys.readouterr().err
    assert main(["search", "--index", idx]) == 2
    assert main(["search", "--index", str(tmp_path / "missing"), "w1"]) == 2
    assert "missing" in capsys.readouterr().err


def test_cli_on_cranfield_matches_reference(tmp_path, capsys, cranfield):
    ids = [i for i, _ in cranfield.docs]
    texts = [t for _, t in cranfield.docs]
    queries = [t for _, t in cranfield.queries]
    assert len(ids) == 1400 and len(queries) == 225
    idx = build.build_index(write_tsv(tmp_path / "cran.tsv", ids, texts), tmp_path / "idx", quiet=True)
    qfile = tmp_path / "q.tsv"
    qfile.write_text("".join(f"{i + 1}\t{q}\n" for i, q in enumerate(queries)), encoding="utf-8")
    ref = ReferenceIndex.from_texts(ids, texts)
    for method in ("ssr", "levels", "union", "maxscore", "exhaustive"):
        assert main(["search", "--index", str(idx), "--queries", str(qfile), "-k", "100", "--method", method,
                     "--run-scores", "exact"]) == 0
        run = parse_run(capsys.readouterr().out)
        for i, q in enumerate(queries):
            hits = ref.search(q, 100)
            assert run.get(str(i + 1), []) == [(d, r + 1, s) for r, (d, s, _) in enumerate(hits.rows())], q


@pytest.mark.parametrize("method", ["ssr", "levels"])
@pytest.mark.parametrize("failing", ["caller", "helper"])
def test_threaded_pieces_give_the_reference_in_query_order(small, monkeypatch, method, failing):
    """A batch cut into many pieces taken by two threads (`answer.Answers.threaded`: into flat arrays by one
    GIL-free call a thread, the caller making results between its pieces; or, beyond `_FLAT_MOST` rows,
    each piece on its own) answers every query as the reference does, in query order; a failure on either
    thread fails the call, and the searcher answers the next call."""
    import threading

    from ssr_engine import answer

    searcher, ref, queries = small
    pieces = answer.answer_pieces
    calls = {"caller": 0, "helper": 0}
    went = threading.Event()  # the caller has answered a piece: on this tiny index a helper let go at once
    # would take every piece before the caller's first call

    def gated(*args, fail=False):
        thread = "caller" if threading.current_thread() is threading.main_thread() else "helper"
        calls[thread] += 1
        if thread == "helper":
            assert went.wait(10)
        if fail and thread == failing and calls[thread] == (2 if failing == "caller" else 1):  # the caller's: after
            raise RuntimeError("piece failed")  # a piece
        try:
            return pieces(*args)
        finally:
            went.set()

    monkeypatch.setattr(answer, "_PIECE", (1, 3))
    monkeypatch.setattr(answer, "answer_pieces", gated)
    for flat in (0, answer._FLAT_MOST):
        monkeypatch.setattr(answer, "_FLAT_MOST", flat)
        for k in (1, 10, 10_000):
            for threads in (1, 2):
                went.clear()
                results = searcher.search_batch(queries, k, threads=threads, method=method)
                assert len(results) == len(queries)
                for q, res in zip(queries, results, strict=True):
                    assert_same(res, ref.search(q, k))
    went.clear()
    calls.update(caller=0, helper=0)
    monkeypatch.setattr(answer, "answer_pieces", lambda *args: gated(*args, fail=True))
    with pytest.raises(RuntimeError, match="piece failed"):
        searcher.search_batch(queries, 10, threads=2, method=method)
    monkeypatch.setattr(answer, "answer_pieces", pieces)
    for q, res in zip(queries, searcher.search_batch(queries, 10, threads=2, method=method), strict=True):
        assert_same(res, ref.search(q, 10))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(least=st.integers(1, 40), most=st.integers(1, 80), rows=st.integers(1, 3_000), threads=st.sampled_from([1, 2]),
       k=st.sampled_from([1, 3, 10, 55, 700]), method=st.sampled_from(["ssr", "levels"]), flat=st.booleans())
def test_any_piece_size_and_thread_count_give_the_reference(small, least, most, rows, threads, k, method, flat):
    """Whatever the piece bounds (`answer._PIECE`, `_PIECE_ROWS`), the thread count and whether pieces write into
    one flat set of arrays (`answer._FLAT_MOST`), each call (one thread) or piece (two) takes at most the queries
    the bounds allow (but never fewer than the least, nor more than the batch) and every query's results are the
    reference's, in query order."""
    from unittest import mock

    from ssr_engine import answer
    from ssr_engine.answer import Answers

    searcher, ref, queries = small
    most = max(least, most)
    sizes: list[int] = []
    call, pieces = Answers.__call__, answer.answer_pieces

    def counted(self, qs, k, method):
        sizes.append(len(qs))
        return call(self, qs, k, method)

    batches: dict[int, list[int]] = {}  # a threaded batch's pieces, whichever thread calls first

    def spans(data, q_offsets, cut, *args):
        batches[id(cut)] = np.diff(cut, axis=1)[:, 0].tolist()
        return pieces(data, q_offsets, cut, *args)

    with mock.patch.object(answer, "_PIECE", (least, most)), mock.patch.object(answer, "_PIECE_ROWS", rows), \
            mock.patch.object(Answers, "__call__", counted), mock.patch.object(answer, "answer_pieces", spans), \
            mock.patch.object(answer, "_FLAT_MOST", answer._FLAT_MOST if flat else 0):
        results = searcher.search_batch(queries, k, threads=threads, method=method)
    sizes += [n for b in batches.values() for n in b]
    allowed = max(least, min(most, rows // min(k, searcher.n_docs)))
    assert sum(sizes) == len(queries) and max(sizes) <= allowed
    assert len(results) == len(queries)
    for q, res in zip(queries, results, strict=True):
        assert_same(res, ref.search(q, k))


def test_query_batch_is_the_definition(tmp_path):
    # kernels.query.prepare against the definition: signals.signals, a term look-up one signal at a time,
    # scoring.signal_weight; ascending weight; a batch gives what each query alone gives
    from ssr_engine.scoring import signal_weight
    from ssr_engine.signals import signals

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(60)] + ["Ärger", "İstanbul", "\u212aelvin", "kelvin", "istanbul", "x" * 20]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 30)))) for _ in range(300)]
    ids = [str(i) for i in range(len(texts))]
    searcher = Searcher(build.build_index(write_tsv(tmp_path / "c.tsv", ids, texts), tmp_path / "idx", quiet=True,
                                          cap=200))
    queries = [" ".join(rng.choice(words, size=int(rng.integers(0, 60)))) for _ in range(40)]
    queries += ["", "the of", "nothing here", "İSTANBUL \u212aelvin ärger", "w1\x00w2", texts[0], "\ud800 w3"]
    qb = searcher.query_batch(queries)
    assert qb.offsets.tolist()[-1] == len(qb.terms) and max(np.diff(qb.offsets)) > 32  # both sorts ran
    n = searcher.n_docs
    for i, q in enumerate(queries):
        a, b = int(qb.offsets[i]), int(qb.offsets[i + 1])
        want = []
        for s in signals(q, searcher.stopwords, 200):
            t = searcher.index.term_of(s)
            if t >= 0:
                df = int(searcher.index.df_of(np.array([t]))[0])
                want.append((t, signal_weight(n, df), df))
        got = list(zip(qb.terms[a:b].tolist(), qb.weights[a:b].tolist(), qb.df[a:b].tolist(), strict=True))
        assert sorted(got) == sorted(want), q
        assert all(x[1] <= y[1] for x, y in zip(got, got[1:], strict=False)), "not in ascending weight"
        one = searcher.query_batch([q])
        assert one.terms.tolist() == qb.terms[a:b].tolist()
        assert one.weights.tobytes() == qb.weights[a:b].tobytes()


def test_weight_kernel_is_signal_weight_bit_for_bit():
    from ssr_engine.kernels.query import weight
    from ssr_engine.scoring import signal_weight

    rng = np.random.default_rng(8)
    for n in [1, 2, 3, 10, 999, 8_841_823, 2**31 + 11, 2**40 + 3, *rng.integers(1, 2**45, size=20).tolist()]:
        dfs = {0, 1, 2, n - 1, n, *rng.integers(0, n + 1, size=300).tolist()}
        for df in sorted(d for d in dfs if 0 <= d <= n):
            assert weight(n, df) == signal_weight(n, df), (n, df)


def test_threaded_pieces_with_ids_of_any_width(tmp_path, monkeypatch):
    # ids without a fixed-width table (non-ASCII, of growing length): each piece's ids are its own array
    # (`index.ids_of` of its rows); the results still equal the reference's, in query order
    from ssr_engine import answer

    ids = ["é"] + [f"d{'ü' * (i % 7)}{i}" for i in range(1, 60)]
    texts = [" ".join(f"w{(i * j) % 13}" for j in range(1, 6)) for i in range(60)]
    searcher = Searcher(build.build_index(write_tsv(tmp_path / "c.tsv", ids, texts), tmp_path / "idx", quiet=True))
    ref = ReferenceIndex.from_texts(ids, texts)
    queries = [f"w{i % 13} w{(i + 3) % 13}" for i in range(40)]
    monkeypatch.setattr(answer, "_PIECE", (1, 2))
    for k in (1, 5, 100):
        for q, res in zip(queries, searcher.search_batch(queries, k, threads=2), strict=True):
            assert_same(res, ref.search(q, k))
