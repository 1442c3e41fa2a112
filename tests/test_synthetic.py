"""The MS MARCO-shaped generator: determinism, shape statistics, queries, planting, bad input."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from ssr_engine import STOPWORDS_V1, signals
from ssr_engine.datagen.collection import BLOCK, generate
from ssr_engine.datagen.queries import plant_run
from ssr_engine.errors import InputError, SsrError
from ssr_engine.signals import value_tokens

SCRIPT = Path(__file__).resolve().parent.parent / "data_scripts" / "make_collection.py"
TOKEN = re.compile(r"[a-z0-9]+")


def _script():
    spec = importlib.util.spec_from_file_location("make_collection", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_tsv(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        k, v = line.split("\t", 1)
        out[k] = v
    return out


def files(d: Path) -> dict[str, bytes]:
    return {n: (d / n).read_bytes() for n in ("collection.tsv", "queries.tsv", "qrels.tsv", "stats.json")}


def test_same_seed_byte_identical_whatever_the_workers(tmp_path):
    n = BLOCK + 3000  # two blocks
    generate(tmp_path / "a", passages=n, seed=7, wordlist=None, workers=1)
    generate(tmp_path / "b", passages=n, seed=7, wordlist=None, workers=2)
    generate(tmp_path / "c", passages=n, seed=8, wordlist=None, workers=1)
    a, b, c = files(tmp_path / "a"), files(tmp_path / "b"), files(tmp_path / "c")
    assert a == b
    assert a["collection.tsv"] != c["collection.tsv"]
    assert not list((tmp_path / "a").glob("*.tmp"))
    lines = a["collection.tsv"].decode().splitlines()
    assert [int(x.split("\t", 1)[0]) for x in lines] == list(range(n))
    assert all(x.count("\t") == 1 for x in lines)


def test_smaller_collection_is_a_prefix(tmp_path):
    generate(tmp_path / "small", passages=1000, seed=3, wordlist=None, workers=1)
    generate(tmp_path / "big", passages=5000, seed=3, wordlist=None, workers=1)
    small = (tmp_path / "small" / "collection.tsv").read_bytes()
    assert (tmp_path / "big" / "collection.tsv").read_bytes().startswith(small)


def test_wordlist_gives_real_words_and_is_deterministic(tmp_path):
    words = tmp_path / "words"
    vocab = ["apple", "river", "mountain", "Boston", "Alice", "quantum", "garden", "yellow", "engine", "window"]
    words.write_text("\n".join(vocab + ["it's", "café"]) + "\n")
    generate(tmp_path / "a", passages=3000, seed=1, wordlist=words, workers=1)
    generate(tmp_path / "b", passages=3000, seed=1, wordlist=words, workers=1)
    assert files(tmp_path / "a") == files(tmp_path / "b")
    text = (tmp_path / "a" / "collection.tsv").read_text().lower()
    for w in ("apple", "mountain", "boston", "alice"):
        assert w in text
    stats = json.loads((tmp_path / "a" / "stats.json").read_text())
    assert stats["real_words"] == 8 and stats["real_names"] == 2
    assert len(stats["wordlist_sha256"]) == 64


def test_missing_explicit_wordlist_is_an_error(tmp_path):
    with pytest.raises(InputError, match="word list not found"):
        generate(tmp_path / "x", passages=10, wordlist=tmp_path / "nope")


@pytest.fixture(scope="module")
def c100k(tmp_path_factory):
    """100,000 passages (about 5 s on 2 workers), no word list: independent of the machine."""
    d = tmp_path_factory.mktemp("c100k")
    stats = generate(d, passages=100_000, seed=11, wordlist=None, workers=2)
    return d, stats


def test_shape_of_100k_collection(c100k):
    d, stats = c100k
    lines = (d / "collection.tsv").read_text().splitlines()
    assert len(lines) == 100_000 == stats["passages"]
    texts = [x.split("\t", 1)[1] for x in lines]
    lengths = np.array([len(t.split()) for t in texts])
    # MS MARCO: mean 56 words, median ~50, long right tail
    assert 52 <= lengths.mean() <= 60
    assert 43 <= np.median(lengths) <= 54
    assert np.percentile(lengths, 99) >= 130
    assert lengths.max() <= 400 and lengths.min() >= 3
    assert stats["words_per_passage_mean"] == pytest.approx(lengths.mean(), abs=0.01)
    sample = texts[:20_000]
    tokens = [t for x in sample for t in TOKEN.findall(x.lower())]
    stop = sum(t in STOPWORDS_V1 for t in tokens) / len(tokens)
    assert 0.33 <= stop <= 0.50  # function words at natural rates
    short = sum(len(t) < 2 for t in tokens) / len(tokens)
    assert 0.02 <= short <= 0.12  # "a", digits after a decimal point
    assert sum(t.isdigit() for t in tokens) / len(tokens) >= 0.005  # numbers


def test_vocabulary_is_zipfian_and_grows(c100k):
    d, _ = c100k
    texts = [x.split("\t", 1)[1].lower() for x in (d / "collection.tsv").read_text().splitlines()]
    seen: dict[str, int] = {}
    growth = []
    for i, t in enumerate(texts, start=1):
        for tok in TOKEN.findall(t):
            seen[tok] = seen.get(tok, 0) + 1
        if i in (10_000, 100_000):
            growth.append(len(seen))
    assert growth[1] >= 3.5 * growth[0]  # still growing fast (Heaps exponent > 0.54)
    assert growth[1] >= 80_000
    counts = np.sort(np.array(list(seen.values())))[::-1]
    hapax = (counts == 1).sum() / len(counts)
    assert 0.3 <= hapax <= 0.8  # a long tail of rare words
    # Zipf: log-frequency against log-rank has a slope near -1 over ranks 10..10,000
    r = np.arange(10, 10_000)
    slope = np.polyfit(np.log(r), np.log(counts[r]), 1)[0]
    assert -1.6 <= slope <= -0.6


def test_bigrams_repeat_across_passages(c100k):
    d, _ = c100k
    texts = [x.split("\t", 1)[1] for x in (d / "collection.tsv").read_text().splitlines()[:20_000]]
    df: dict[str, int] = {}
    per_doc = []
    for t in texts:
        sigs = signals(t)
        per_doc.append(len(sigs))
        for s in sigs:
            if " " in s:
                df[s] = df.get(s, 0) + 1
    occurrences = sum(df.values())
    repeated = sum(v for v in df.values() if v >= 2)
    # about half of the bigram occurrences among 20,000 passages are shared with another passage
    assert 0.45 <= repeated / occurrences <= 0.9
    assert 30 <= np.mean(per_doc) <= 56  # signals per passage (postings)


def test_queries_have_msmarco_shape_and_point_at_their_passage(c100k):
    d, stats = c100k
    queries = read_tsv(d / "queries.tsv")
    qrels = [line.split() for line in (d / "qrels.tsv").read_text().splitlines()]
    assert len(queries) == len(qrels) == stats["queries"] == 1000
    assert all(q[1] == "0" and q[3] == "1" for q in qrels)
    passages = read_tsv(d / "collection.tsv")
    lengths = [len(q.split()) for q in queries.values()]
    assert 4.5 <= np.mean(lengths) <= 7.5  # MS MARCO dev: 5.9
    question = sum(q.split()[0] in {"what", "how", "who", "where", "when", "why", "which", "define", "is"}
                   for q in queries.values())
    assert 0.25 <= question / len(queries) <= 0.8
    assert sum(any(w in STOPWORDS_V1 for w in q.split()) for q in queries.values()) / len(queries) >= 0.4
    covered = []
    for qid, _, pid, _ in qrels:
        q_tokens = value_tokens(queries[qid], STOPWORDS_V1) or ["-"]
        p_tokens = set(value_tokens(passages[pid], STOPWORDS_V1))
        covered.append(sum(t in p_tokens for t in q_tokens) / len(q_tokens))
    assert np.mean(covered) >= 0.75  # written from the passage, with noise
    assert np.mean([c == 1.0 for c in covered]) <= 0.95  # ... and the noise is there


def _plant_files(tmp_path: Path) -> tuple[Path, Path]:
    q = tmp_path / "q.tsv"
    q.write_text("101\twhat is paula deen's brother\n102\t Androgen receptor define\n"
                 "103\thow long to boil an egg?\n104\tfar away query\n")
    r = tmp_path / "r.trec"
    r.write_text("101 0 5 1\n102 0 17000 1\n103 0 5 1\n104 0 999999 1\n102 0 18 0\n")
    return q, r


def test_planted_queries_land_at_their_pids(tmp_path):
    q, r = _plant_files(tmp_path)
    stats = generate(tmp_path / "o", passages=20_000, seed=5, wordlist=None, plant_queries=q, plant_qrels=r,
                     workers=2)
    passages = read_tsv(tmp_path / "o" / "collection.tsv")
    assert len(passages) == 20_000
    queries = read_tsv(tmp_path / "o" / "queries.tsv")
    assert set(queries) == {"101", "102", "103"}  # 104 only points past the collection
    assert (tmp_path / "o" / "qrels.tsv").read_text() == "101 0 5 1\n102 0 17000 1\n103 0 5 1\n102 0 18 0\n"
    assert stats["planted"]["qrels_skipped_pid_out_of_range"] == 1
    assert stats["planted"]["passages_planted"] == 2  # pid 5 answers two queries
    for qid, pid in (("101", "5"), ("102", "17000"), ("103", "5")):
        want = value_tokens(queries[qid], STOPWORDS_V1)
        got = value_tokens(passages[pid], STOPWORDS_V1)
        # every content word of the query, in the query's order
        it = iter(got)
        assert all(any(w == g for g in it) for w in want), (qid, want, passages[pid])
    # the same generation without planting differs only at the planted pids
    generate(tmp_path / "p", passages=20_000, seed=5, wordlist=None, queries=0, workers=1)
    plain = read_tsv(tmp_path / "p" / "collection.tsv")
    assert {k for k in plain if plain[k] != passages[k]} == {"5", "17000"}


def test_plant_real_dev_small_queries(tmp_path, msmarco_source):
    dev_small = msmarco_source / "msmarco-dev-small"
    stats = generate(tmp_path, passages=60_000, seed=1, wordlist=None,
                     plant_queries=dev_small / "queries.dev.small.tsv", plant_qrels=dev_small / "qrels.dev.small.trec")
    pl = stats["planted"]
    assert pl["queries_read"] == 6980 and pl["qrels_read"] == 7437
    assert pl["qrels_kept"] + pl["qrels_skipped_pid_out_of_range"] == 7437
    assert pl["qrels_kept"] >= 10
    passages = read_tsv(tmp_path / "collection.tsv")
    queries = read_tsv(tmp_path / "queries.tsv")
    for line in (tmp_path / "qrels.tsv").read_text().splitlines():
        qid, _, pid, _ = line.split()
        assert int(pid) < 60_000
        p_tokens = set(value_tokens(passages[pid], STOPWORDS_V1))
        assert set(value_tokens(queries[qid], STOPWORDS_V1)) - {"define", "definition"} <= p_tokens


def test_plant_run_drops_leading_question_words():
    assert plant_run("what is paula deen's brother") == ["paula", "deen's", "brother"]
    assert plant_run("how long to boil an egg?") == ["long", "to", "boil", "an", "egg"]
    assert plant_run("what") == ["what"]


@pytest.mark.parametrize(
    "qrels, message",
    [("101 0 x 1\n", "passage id 'x'"), ("101 0 5\n101 0 5 1 9\n", ":2: expected"),
     ("999 0 5 1\n", "query id '999'"), ("101 0 5 high\n", "relevance 'high'")],
)
def test_bad_plant_files(tmp_path, qrels, message):
    q = tmp_path / "q.tsv"
    q.write_text("101\tsome query\n")
    r = tmp_path / "r.trec"
    r.write_text(qrels)
    with pytest.raises(InputError, match=re.escape(message)) as exc:
        generate(tmp_path / "o", passages=100, wordlist=None, plant_queries=q, plant_qrels=r)
    assert str(r) in str(exc.value)
    assert not (tmp_path / "o" / "collection.tsv").exists()


def test_bad_arguments(tmp_path):
    with pytest.raises(SsrError, match="--passages"):
        generate(tmp_path, passages=0)
    with pytest.raises(SsrError, match="--queries"):
        generate(tmp_path, passages=10, queries=11, wordlist=None)
    with pytest.raises(SsrError, match="go together"):
        generate(tmp_path, passages=10, plant_queries=tmp_path / "q")
    q = tmp_path / "q.tsv"
    q.write_text("no tab here\n")
    with pytest.raises(InputError, match=r"q\.tsv:1: expected qid<TAB>query"):
        generate(tmp_path, passages=10, plant_queries=q, plant_qrels=q)
    q.write_bytes(b"1\tcaf\xe9\n")
    with pytest.raises(InputError, match="not valid UTF-8"):
        generate(tmp_path, passages=10, plant_queries=q, plant_qrels=q)


def test_cli(tmp_path, capsys):
    mc = _script()
    out = tmp_path / "cli"
    assert mc.main(["--passages", "500", "--seed", "2", "--out", str(out), "--queries", "20", "--quiet",
                    "--wordlist", "none", "--workers", "1"]) == 0
    assert len((out / "queries.tsv").read_text().splitlines()) == 20
    assert "500 passages" in capsys.readouterr().err
    assert mc.main(["--passages", "0", "--out", str(out), "--quiet"]) == 2
    assert "error: --passages must be >= 1" in capsys.readouterr().err
    assert os.path.exists(out / "stats.json")


def test_measure_collection_counts_match_signals(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("measure_collection", SCRIPT.parent / "measure_collection.py")
    mc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mc)
    generate(tmp_path, passages=3000, seed=4, wordlist=None, queries=0, workers=1)
    rows = mc.measure(str(tmp_path / "collection.tsv"), None, [1000, 3000], batch=700)
    texts = [x.split("\t", 1)[1] for x in (tmp_path / "collection.tsv").read_text().splitlines()]
    for row in rows:
        sets = [signals(t) for t in texts[: row["passages"]]]
        every = set().union(*sets)
        assert row["postings"] == sum(len(s) for s in sets)
        assert row["distinct_bigrams"] == sum(" " in s for s in every)
        assert row["distinct_unigrams"] == sum(" " not in s for s in every)
        words = {t for x in texts[: row["passages"]] for t in value_tokens(x, STOPWORDS_V1)}
        assert row["distinct_words"] == len(words)
    ex = mc.extrapolate(rows, 9000)
    assert ex["postings"] == rows[-1]["postings"] * 3
    assert rows[-1]["distinct_bigrams"] < ex["distinct_bigrams"] < 3 * rows[-1]["distinct_bigrams"]
    assert ex["index_bytes_16_per_signal_4_per_posting"] == 16 * ex["distinct_signals"] + 4 * ex["postings"]
