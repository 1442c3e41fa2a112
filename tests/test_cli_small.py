"""`ssr signals` and `ssr agents generate` end to end, and the BM25 fast path against its definition."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine.agents.discovery import Registry
from ssr_engine.agents.sources import iter_cards
from ssr_engine.cli import main
from ssr_engine.extract import Extractor, pack_values
from ssr_engine.signals import signals
from ssr_engine.stemming import bm25_tokens
from ssr_engine.stopwords import STOPWORDS_V1, StopwordList, load_stopwords


def test_signals_command_prints_the_signals(capsys, tmp_path):
    texts = ["The quick brown fox, the quick dog", "Ärger über KELVIN \u212a and naïve café", ""]
    assert main(["signals", *texts]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[:3] == ["\t".join(sorted(signals(t))) for t in texts]
    assert main(["signals", "--json", "--cap", "2", "alpha beta gamma alpha"]) == 0
    assert json.loads(capsys.readouterr().out) == sorted(signals("alpha beta gamma alpha", cap=2))
    stop = tmp_path / "stop.txt"
    stop.write_text("# mine\nquick\n\nfox\n", encoding="utf-8")
    assert main(["signals", "--json", "--stopwords", str(stop), "the quick brown fox"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == sorted(signals("the quick brown fox", load_stopwords(stop))) and "the" in got and "quick" not in got


def test_signals_command_bad_input_exits_2(capsys, tmp_path):
    assert main(["signals", "--stopwords", str(tmp_path / "missing.txt"), "text"]) == 2
    assert "missing.txt" in capsys.readouterr().err


def test_the_program_exits_with_mains_status_after_all_its_output(tmp_path):
    # `python -m ssr_engine` ends through cli.exit_process (os._exit after flushing): the status is
    # main's, and a large output through a pipe arrives whole
    texts = [f"text number {i} with words w{i} w{i + 1}" for i in range(3000)]
    args = tmp_path / "args.txt"
    proc = subprocess.run([sys.executable, "-m", "ssr_engine", "signals", *texts], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:-1] == ["\t".join(sorted(signals(t))) for t in texts]
    bad = subprocess.run([sys.executable, "-m", "ssr_engine", "signals", "--stopwords", str(args), "x"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "args.txt" in bad.stderr


def test_agents_generate_writes_a_registry_that_finds_its_gold_cards(tmp_path, capsys):
    out = tmp_path / "synth"
    assert main(["agents", "generate", "--out", str(out), "--cards", "60", "--queries", "20", "--seed", "3"]) == 0
    assert "60 cards" in capsys.readouterr().out
    cards = list(iter_cards(out / "cards.jsonl"))
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(cards) == 60 and len({c.id for c in cards}) == 60
    assert len(queries) == 20 and all(q["gold"] in {c.id for c in cards} for q in queries)
    # the same seed gives the same files; another seed another registry
    again = tmp_path / "again"
    assert main(["agents", "generate", "--out", str(again), "--cards", "60", "--queries", "20", "--seed", "3"]) == 0
    assert (again / "cards.jsonl").read_bytes() == (out / "cards.jsonl").read_bytes()
    assert (again / "queries.jsonl").read_bytes() == (out / "queries.jsonl").read_bytes()
    other = tmp_path / "other"
    assert main(["agents", "generate", "--out", str(other), "--cards", "60", "--queries", "20", "--seed", "4"]) == 0
    assert (other / "cards.jsonl").read_bytes() != (out / "cards.jsonl").read_bytes()
    # the queries are answerable: discovery over the generated cards finds most gold cards in its pool
    registry = Registry.from_cards(cards)
    found = sum(q["gold"] in registry.discover(q["query"], 20).ids for q in queries)
    assert found >= 0.8 * len(queries)


_STOP = StopwordList("test-stopwords", frozenset(STOPWORDS_V1 | {"zz", "longstopwordbeyondsixteen"}))
_BM25 = Extractor(_STOP, cap=None, bigrams=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
                | st.lists(st.sampled_from(["the", "Zz", "\u212a", "\u0130", "ab", "a1", "LongStopwordBeyondSixteen",
                                            " ", ",", "é", "x", "123"]), max_size=12).map("".join),
                min_size=1, max_size=5))
def test_bm25_fast_path_equals_bm25_tokens_and_counter(texts):
    """The index build's BM25 terms (the Numba extractor without cap or bigrams) are exactly
    Counter(bm25_tokens(text)), with the document length = the number of kept tokens."""
    batch = _BM25.extract(*pack_values([[t.encode("utf-8")] for t in texts]))
    for d, text in enumerate(texts):
        want = Counter(bm25_tokens(text, _STOP.words))
        a, b = int(batch.doc_offsets[d]), int(batch.doc_offsets[d + 1])
        got = {batch.signal(i): int(batch.counts[i]) for i in range(a, b)}
        assert got == dict(want), text
        assert int(batch.doc_tokens[d]) == sum(want.values()), text
        assert not batch.is_bigram[a:b].any()
