"""The signal contract of DESIGN.md section 1: hand-written cases per rule, and properties."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine import STOPWORDS_V1, STOPWORDS_V1_ID, card_signals, load_stopwords, signals, signals_many
from ssr_engine.errors import InputError
from ssr_engine.extract import extract_cards


def test_stopwords_v1_is_the_filtered_nltk_list():
    assert len(STOPWORDS_V1) == 145
    assert STOPWORDS_V1_ID == "ssr-stopwords-v1"
    assert all(re.fullmatch(r"[a-z0-9]{2,}", w) for w in STOPWORDS_V1)
    assert {"the", "wouldn", "ma", "ll", "don"} <= STOPWORDS_V1
    assert not {"a", "i", "s", "t", "d", "o", "y", "m"} & STOPWORDS_V1  # 1-letter NLTK words are not in it


def test_short_tokens_are_dropped():
    assert signals("a b c x") == frozenset()
    assert signals("a go") == {"go"}


def test_stopwords_are_dropped_and_bigrams_join_across_them():
    assert signals("the cat and the hat") == {"cat", "hat", "cat hat"}


def test_short_tokens_removed_before_bigrams():
    assert signals("cat x hat") == {"cat", "hat", "cat hat"}


def test_lowercase_and_separators():
    assert signals("Hello, WORLD!") == {"hello", "world", "hello world"}
    assert signals("e-mail re:sync") == {"mail", "sync", "mail sync"}  # "e" short, "re" a stopword


def test_digits_are_token_characters():
    assert signals("COVID19 in 2020") == {"covid19", "2020", "covid19 2020"}
    assert signals("3.14") == {"14"}


def test_duplicates_collapse():
    assert signals("dog dog dog") == {"dog", "dog dog"}


def test_empty_and_signal_free_texts():
    assert signals("") == frozenset()
    assert signals("   \t\n") == frozenset()
    assert signals("the of and to") == frozenset()


def test_unicode_dotted_capital_i_lowers_to_i_and_a_separator():
    # U+0130 lowers to "i" + U+0307 (combining dot, a separator)
    assert signals("\u0130stanbul") == {"stanbul"}
    assert signals("X\u0130Y zz") == {"xi", "zz", "xi zz"}  # "x"+"i" joins, then "y" alone is short


def test_unicode_kelvin_sign_lowers_to_k():
    assert signals("5\u212a run") == {"5k", "run", "5k run"}


def test_accented_letters_are_separators():
    assert signals("café naïve") == {"caf", "na", "caf na"}
    assert signals("ÉCOLE") == {"cole"}
    assert signals("日本語 text") == {"text"}


def test_only_two_non_ascii_code_points_lower_to_ascii():
    # the fast path relies on this; a Python whose str.lower changes it must fail here
    found = [cp for cp in range(0x80, sys.maxunicode + 1)
             if not 0xD800 <= cp < 0xE000 and any(ord(c) < 128 for c in chr(cp).lower())]
    assert found == [0x130, 0x212A]


def test_cap_keeps_most_frequent_unigrams_ties_by_string():
    text = "bb aa cc aa dd cc aa"  # aa x3, cc x2, bb x1, dd x1
    assert signals(text, cap=1) == {"aa"}
    assert signals(text, cap=2) == {"aa", "cc"}
    assert signals(text, cap=3) == {"aa", "cc", "bb"}  # bb < dd at equal frequency
    assert signals(text, cap=4) == {"aa", "bb", "cc", "dd"}


def test_cap_fills_remaining_slots_with_bigrams_in_string_order():
    text = "zz yy xx"  # unigrams xx yy zz; bigrams "yy xx", "zz yy"
    assert signals(text, cap=4) == {"xx", "yy", "zz", "yy xx"}
    assert signals(text, cap=5) == {"xx", "yy", "zz", "yy xx", "zz yy"}
    assert signals(text, cap=64) == signals(text, cap=5)


def test_cap_bigram_order_is_string_order_with_space_first():
    # "ab cd" < "abc de" because " " sorts before letters
    text = "ab cd qq abc de"
    sigs = signals(text, cap=6)
    assert sigs == {"ab", "abc", "cd", "de", "qq", "ab cd"}


def test_cap_counts_the_whole_card_and_bigrams_stay_inside_values():
    values = ["alpha beta", "beta gamma", "beta"]
    assert card_signals(values) == {"alpha", "beta", "gamma", "alpha beta", "beta gamma"}
    assert "beta beta" not in card_signals(["alpha beta", "beta gamma"])
    assert card_signals(values, cap=1) == {"beta"}  # beta occurs 3 times across values


def test_default_cap_is_64_and_cap_must_be_positive():
    text = " ".join(f"w{i:03d}" for i in range(100))
    assert len(signals(text)) == 64
    assert signals(text) == {f"w{i:03d}" for i in range(64)}  # all freq 1: first 64 by string
    with pytest.raises(ValueError):
        signals("abc", cap=0)


def test_replaced_stopword_list_changes_signals(tmp_path):
    path = tmp_path / "stop.txt"
    path.write_text("# my list\nCat\n\nhat  # trailing comment\n", encoding="utf-8")
    stop = load_stopwords(path)
    assert stop.words == {"cat", "hat"}
    assert signals("the cat in the hat", stop) == {"the", "in", "the in", "in the"}
    assert signals("the cat in the hat", stop.words) == signals("the cat in the hat", stop)


def test_stopword_file_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\n\xff\xfe\n")
    with pytest.raises(InputError, match=r"bad.txt:2"):
        load_stopwords(path)
    with pytest.raises(InputError, match="cannot read"):
        load_stopwords(tmp_path / "missing.txt")


def test_fast_path_matches_definition_on_hand_cases():
    texts = ["The quick brown fox, the quick dog", "\u0130\u0130\u212a\u212a", "", "a", "x" * 1000, "é" * 10 + "ab"]
    assert signals_many(texts) == [signals(t) for t in texts]
    assert signals_many(texts, cap=2) == [signals(t, cap=2) for t in texts]


def test_fast_path_orders_words_sharing_a_long_prefix():
    """Words equal in their first 8 or 16 bytes (the kernel sorts on packed keys first), under a cap that keeps
    some by string order; and texts of over 32,768 tokens or of 100 words sharing 8 bytes (the kernel's other
    sort)."""
    words = ["internationalization", "internationally", "international", "internationalizations", "internat",
             "internatz", "abcdefghijklmnopq", "abcdefghijklmnopr", "abcdefghijklmnop", "abcdefgh", "abcdefg"]
    texts = [" ".join(words), " ".join(reversed(words)), " ".join(words[i % len(words)] for i in range(50)),
             " ".join(f"w{i % 5000}" for i in range(40_000)), " ".join(f"abcdefgh{i}" for i in range(300, 0, -3)),
             " ".join(["abcdefghijklmnopqrstuvwxyz"] * 70)]
    for cap in (1, 3, 7, 12, 64):
        assert signals_many(texts, cap=cap) == [signals(t, cap=cap) for t in texts]


_ALPHABET = st.sampled_from(list("abcAB z09 \t\n.,-'") + ["\u0130", "\u212a", "é", "ß", "\u0307", "日", "\U0001f600"])
_TEXT = st.one_of(st.text(), st.text(alphabet=_ALPHABET, max_size=200))
_WORDS = st.lists(st.sampled_from(["the", "and", "aa", "bb", "cc", "dd", "ee", "ff", "x", "7", "42"]), max_size=120)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXT, max_size=8), cap=st.integers(1, 70))
def test_fast_path_equals_definition_on_arbitrary_unicode(texts, cap):
    assert signals_many(texts, cap=cap) == [signals(t, cap=cap) for t in texts]


@settings(max_examples=200, deadline=None)
@given(docs=st.lists(st.lists(_WORDS.map(" ".join), max_size=4), max_size=6), cap=st.integers(1, 20))
def test_fast_path_equals_card_signals_on_multi_value_documents(docs, cap):
    from ssr_engine.stopwords import DEFAULT_STOPWORDS

    batch = extract_cards([[v.encode() for v in doc] for doc in docs], DEFAULT_STOPWORDS, cap)
    assert batch.as_sets() == [card_signals(doc, cap=cap) for doc in docs]


@settings(max_examples=100, deadline=None)
@given(text=_TEXT, stop=st.sets(st.sampled_from(["aa", "bb", "the", "k", "ab", "zz"])))
def test_fast_path_honours_a_replaced_stopword_list(text, stop):
    assert signals_many([text], frozenset(stop)) == [signals(text, frozenset(stop))]


@settings(max_examples=200, deadline=None)
@given(text=_TEXT)
def test_signals_are_well_formed(text):
    for s in signals(text):
        parts = s.split(" ")
        assert 1 <= len(parts) <= 2
        assert all(re.fullmatch(r"[a-z0-9]{2,}", p) and p not in STOPWORDS_V1 for p in parts)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=6), pad=st.integers(0, 5000), cap=st.integers(1, 70))
def test_fast_path_reads_only_its_spans_of_a_larger_buffer(texts, pad, cap):
    """Values given as spans inside a larger buffer (a piece of a batch) give the same signals as alone, with
    outputs first sized by the bytes read (grown as needed: dense short texts need more than twice theirs)."""
    import numpy as np

    from ssr_engine.extract import Extractor
    from ssr_engine.stopwords import DEFAULT_STOPWORDS

    raw = [t.encode("utf-8", "surrogatepass") for t in texts]
    data = np.frombuffer(b"q w e r " * (pad // 8) + b"".join(raw) + b" z" * pad, dtype=np.uint8)
    starts = np.cumsum([(pad // 8) * 8] + [len(r) for r in raw[:-1]]).astype(np.int64)
    ends = starts + np.array([len(r) for r in raw], dtype=np.int64)
    got = Extractor(DEFAULT_STOPWORDS, cap).extract(data, starts, ends, np.arange(len(raw) + 1, dtype=np.int64))
    assert got.as_sets() == [signals(t, cap=cap) for t in texts]
    assert signals_many(["a bb cc dd ee ff gg hh"] * 3, cap=cap) == [signals("a bb cc dd ee ff gg hh", cap=cap)] * 3
