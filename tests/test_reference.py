"""The exhaustive reference scorer (DESIGN.md section 2): weights, order, K, empty results."""

from __future__ import annotations

import math

import pytest

from ssr_engine import ReferenceIndex
from ssr_engine.ids import id_order, ids_are_integers
from ssr_engine.scoring import canonical_sum, signal_weight


def test_weight_formula_and_positivity():
    assert signal_weight(10, 3) == math.log(11 / 4) + 1
    assert signal_weight(10, 10) == 1.0
    assert all(signal_weight(n, df) > 0 for n in (1, 5, 1000) for df in range(0, n + 1))


def test_canonical_sum_depends_only_on_the_multiset():
    ws = [0.1, 1e16, -0.0, 3.3, 1e-9, 2.2]
    assert canonical_sum(ws) == canonical_sum(list(reversed(ws))) == canonical_sum(sorted(ws))


def test_weights_use_document_counts_including_empty_documents():
    ref = ReferenceIndex.from_texts(["a", "b", "c"], ["apple pie", "apple", ""])
    assert ref.n_docs == 3
    assert ref.weight("apple") == math.log(4 / 3) + 1
    assert ref.weight("pie") == math.log(4 / 2) + 1
    assert ref.weight("unseen") == math.log(4 / 1) + 1


def test_score_is_sum_of_matched_weights():
    ref = ReferenceIndex.from_texts(["a", "b"], ["apple pie crust", "apple"])
    hits = ref.search("apple pie", k=10)
    assert hits.ids.tolist() == ["a", "b"]
    assert hits.matches[0] == 3  # apple, pie, "apple pie"
    assert hits.scores[0] == canonical_sum([ref.weight("apple"), ref.weight("pie"), ref.weight("apple pie")])
    assert hits.matches[1] == 1 and hits.scores[1] == ref.weight("apple")


def test_equal_score_ties_broken_by_match_count():
    ref = ReferenceIndex.from_texts(["a", "z"], ["solo", "common extra"])
    # exact binary fractions so that the two scores tie exactly: 2.0 == 0.5 + 0.5 + 1.0
    ref.weight = {"solo": 2.0, "common": 0.5, "extra": 0.5, "common extra": 1.0}.get  # type: ignore[method-assign]
    hits = ref.search("solo common extra", k=None)
    assert hits.rows() == [("z", 2.0, 3), ("a", 2.0, 1)]


def test_equal_score_and_count_ties_broken_by_integer_id():
    ref = ReferenceIndex.from_texts(["10", "9", "100"], ["alpha beta", "alpha beta", "alpha beta"])
    hits = ref.search("alpha beta", k=None)
    assert hits.ids.tolist() == ["9", "10", "100"]  # integer ids compare as integers


def test_string_ids_compare_as_strings():
    ref = ReferenceIndex.from_texts(["b10", "b9", "a"], ["same text", "same text", "same text"])
    assert ref.search("same text", k=None).ids.tolist() == ["a", "b10", "b9"]


def test_mixed_ids_are_strings_and_integer_detection():
    assert ids_are_integers(["1", "-2", "007"])
    assert not ids_are_integers(["1", "x"])
    assert not ids_are_integers(["1.0"])
    assert not ids_are_integers(["١"])  # non-ASCII digit
    assert [["10", "9", "x"][i] for i in id_order(["10", "9", "x"])] == ["10", "9", "x"]
    assert [["10", "9", "-1"][i] for i in id_order(["10", "9", "-1"])] == ["-1", "9", "10"]
    assert [["7", "007"][i] for i in id_order(["7", "007"])] == ["007", "7"]


def test_k_limits_results_and_none_returns_all():
    ref = ReferenceIndex.from_texts([str(i) for i in range(5)], ["apple"] * 5)
    assert ref.search("apple", k=1).ids.tolist() == ["0"]
    assert len(ref.search("apple", k=100)) == 5  # K larger than the candidates: no padding
    assert len(ref.search("apple", k=None)) == 5


def test_no_signals_or_no_match_gives_empty_result():
    ref = ReferenceIndex.from_texts(["a", "b"], ["apple", "pear"])
    assert len(ref.search("the of and", k=10)) == 0
    assert len(ref.search("banana", k=10)) == 0
    assert len(ref.search("", k=10)) == 0


def test_empty_registry():
    ref = ReferenceIndex.from_texts([], [])
    assert len(ref.search("apple", k=5)) == 0


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_invalid_k_rejected(k):
    ref = ReferenceIndex.from_texts(["a"], ["apple"])
    with pytest.raises(ValueError):
        ref.search("apple", k=k)


def test_duplicate_ids_rejected():
    with pytest.raises(ValueError, match="duplicate"):
        ReferenceIndex.from_texts(["a", "a"], ["x", "y"])


def test_from_fields_uses_card_signals():
    ref = ReferenceIndex.from_fields(["c1"], [["weather forecast", "forecast api"]])
    assert ref.doc_signals[0] == {"weather", "forecast", "api", "weather forecast", "forecast api"}
