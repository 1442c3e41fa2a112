"""Parts of one collection (`ssr_engine.parts`): global weights, deletions and the merge by full key,
compared bit for bit with one index built over the live documents."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_identical, write_tsv
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine import build_index
from ssr_engine.bm25 import BM25Searcher
from ssr_engine.errors import IndexFormatError, SsrError
from ssr_engine.format import open_index
from ssr_engine.ids import id_order, ids_are_integers
from ssr_engine.kernels.merge import id_compare
from ssr_engine.parts import Part
from ssr_engine.parts_search import PartsSearcher
from ssr_engine.search import Searcher

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()


def text(rng: random.Random) -> str:
    # a ten-word vocabulary: many documents share a score, so ties decide most ranks
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 7)))


# ------------------------------------------------------------------------- id order in the merge


def _sorted_by_kernel(ids: list[str]) -> list[str]:
    width = max(len(i) for i in ids)
    codes = np.array(ids, dtype=f"<U{width}").view(np.uint32).reshape(len(ids), width)
    integer = ids_are_integers(ids)
    rows = sorted(range(len(ids)), key=functools.cmp_to_key(lambda a, b: id_compare(codes, a, b, integer)))
    return [ids[r] for r in rows]


int_ids = st.builds(lambda sign, zeros, n: sign + "0" * zeros + str(n), st.sampled_from(["", "-"]),
                    st.integers(0, 2), st.integers(0, 10**25))
str_ids = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=6)


def id_lists(most: int) -> st.SearchStrategy[list[str]]:
    """Distinct ids: mixed integers and strings, or integers only (then they sort as numbers)."""
    return (st.lists(st.one_of(int_ids, str_ids), min_size=1, max_size=most, unique=True)
            | st.lists(int_ids, min_size=1, max_size=most, unique=True))


@settings(max_examples=200, deadline=None)
@given(id_lists(30))
def test_merge_compares_ids_as_the_collection_orders_them(ids):
    assert _sorted_by_kernel(ids) == [ids[i] for i in id_order(ids)]


def utf8_ids(ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(bytes uint8, offsets int64[n + 1]): id i is bytes[offsets[i]:offsets[i + 1]], as a live index holds them."""
    raw = [i.encode("utf-8") for i in ids]
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw), dtype=np.uint8), offsets


@settings(max_examples=150, deadline=None)
@given(id_lists(30), st.data())
def test_ids_as_utf8_compare_and_count_as_the_collection_orders_them(ids, data):
    """span_compare on UTF-8 bytes (the bar's ids) agrees with the order; count_below counts by it."""
    from ssr_engine.kernels.live import count_below
    from ssr_engine.kernels.merge import span_compare

    integer = ids_are_integers(ids)
    data_bytes, offsets = utf8_ids(ids)
    ranked = id_order(ids)
    rows = sorted(range(len(ids)), key=functools.cmp_to_key(lambda a, b: span_compare(
        data_bytes, offsets[a], offsets[a + 1], data_bytes, offsets[b], offsets[b + 1], integer)))
    assert rows == ranked
    # a "part": a subset of the documents, in id order; probes: any documents
    part = sorted(data.draw(st.sets(st.integers(0, len(ids) - 1))), key=ranked.index)
    base = 0
    probes = np.array(data.draw(st.lists(st.integers(0, len(ids) - 1), max_size=10)), dtype=np.int64)
    got = count_below(np.array(part, dtype=np.int64), base, offsets, data_bytes, probes, integer)
    want = [sum(ranked.index(d) < ranked.index(int(p)) for d in part) for p in probes]
    assert got.tolist() == want


@settings(max_examples=150, deadline=None)
@given(id_lists(40), st.data())
def test_collection_rank_orders_every_document_by_its_id(ids, data):
    """collection_rank over parts (each in its own id order; an id may repeat in another part, as a
    deleted document's does) strictly increases with the id, and places each document after exactly
    the ones with a smaller id (plus at most the other copies of its own)."""
    from ssr_engine.kernels.live import collection_rank

    integer = ids_are_integers(ids)
    n_parts = data.draw(st.integers(1, 4))
    where = data.draw(st.lists(st.integers(0, n_parts - 1), min_size=len(ids), max_size=len(ids)))
    members = [[i for i, w in enumerate(where) if w == s] for s in range(n_parts)]
    for s in range(n_parts):  # copies of a few ids in other parts
        members[s] += data.draw(st.lists(st.sampled_from(range(len(ids))), max_size=3, unique=True))
        members[s] = sorted(set(members[s]))
    docs = [ids[i] for part in members for i in part]  # collection numbers: part after part
    raw = [d.encode("utf-8") for d in docs]
    data_bytes = np.frombuffer(b"".join(raw) or b"-", dtype=np.uint8)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    rank_of = {ids[i]: r for r, i in enumerate(id_order(ids))}
    starts, orders, base = [], [], 0
    for part in members:
        starts.append(base)
        orders.append(np.array(sorted(range(len(part)), key=lambda j: rank_of[ids[part[j]]]), dtype=np.int64))
        base += len(part)
    got = collection_rank(orders, np.array(starts, dtype=np.int64), offsets, data_bytes, integer).tolist()
    for g, d in enumerate(docs):
        below = sum(rank_of[e] < rank_of[d] for e in docs)
        assert below <= got[g] <= below + docs.count(d) - 1
    for g, d in enumerate(docs):
        for h, e in enumerate(docs):
            if rank_of[d] < rank_of[e]:
                assert got[g] < got[h]


def test_a_bar_keeps_exactly_the_documents_ranking_before_it(tmp_path):
    """kernels.ssr with a bar returns the unbarred result's rows that rank strictly before the bar."""
    from ssr_engine.kernels import ssr
    from ssr_engine.kernels.topk import doc_key

    rng = random.Random(5)
    docs = [(str(i), text(rng)) for i in range(300)]
    ix = open_index(build_index(write_tsv(tmp_path / "c.tsv", docs), tmp_path / "i", quiet=True))
    searcher = Searcher(ix)
    queries = [text(rng) for _ in range(40)]
    qb = searcher.query_batch(queries)
    args = (ix.lists, ix.postings, ix.doc_rank, ix.n_docs, qb.offsets, qb.terms, qb.weights)
    off, d, s, m = ssr.search_batch(*args, None)
    nq = len(queries)
    # per query a bar at a random row of its full ranking (a tie on score and matches, often), or none
    bar_s, bar_m, bar_k = np.full(nq, -np.inf), np.zeros(nq, dtype=np.int32), np.zeros(nq, dtype=np.int64)
    cut = np.zeros(nq, dtype=np.int64)
    for q in range(nq):
        n = int(off[q + 1] - off[q])
        cut[q] = n
        if n and rng.random() < 0.8:
            r = int(off[q]) + rng.randrange(n)
            bar_s[q], bar_m[q], bar_k[q] = s[r], m[r], doc_key(int(ix.doc_rank[d[r]]), int(d[r]))
            cut[q] = r - off[q]
    for k in (None, 3, 50):
        off2, d2, s2, m2 = ssr.search_batch(*args, k, bar=(bar_s, bar_m, bar_k))
        for q in range(nq):
            n = int(cut[q]) if k is None else min(int(cut[q]), k)
            a = int(off[q])
            assert d2[off2[q]:off2[q + 1]].tolist() == d[a:a + n].tolist()
            assert s2[off2[q]:off2[q + 1]].tobytes() == s[a:a + n].tobytes()


# ---------------------------------------------------------------------- parts vs a fresh build


def make_parts(tmp: Path, parts_docs, deleted, scoring, reseed: bool = True):
    parts, live = [], []
    for s, docs in enumerate(parts_docs):
        # part 1 hashes with another seed (as a live segment reseeded after a collision): two look-up groups
        out = build_index(write_tsv(tmp / f"c{s}.tsv", docs), tmp / f"p{s}", quiet=True, scoring=scoring,
                          hash_seed=7 if s == 1 and reseed else 0)
        mask = np.array([d in deleted for d, _ in docs])
        parts.append(Part.with_deletions(open_index(out), mask))
        live += [(d, t) for d, t in docs if d not in deleted]
    fresh = open_index(build_index(write_tsv(tmp / "live.tsv", live), tmp / "fresh", quiet=True, scoring=scoring))
    return parts, fresh


def id_sets(kind: str, rng: random.Random):
    """Three parts' ids and the ids to delete."""
    if kind == "integer":  # integer order differs from string order ("9" < "10"); "7" and "007" by string
        ids = [[str(3 * v + s) for v in range(40)] for s in range(3)]  # interleaved across parts
        ids[2][0] = "007"
        ids[1][0] = "-3"
    elif kind == "string":
        ids = [[f"{rng.choice('abcXY')}{v}" for v in range(s * 40, s * 40 + 40)] for s in range(3)]
    else:  # one part's non-integer ids are all deleted: the live collection orders as integers
        ids = [[str(3 * v + s) for v in range(40)] for s in range(3)]
        ids[1][:5] = [f"doc{v}" for v in range(5)]
    deleted = {i for part in ids for i in part if rng.random() < 0.25}
    if kind == "mixed-deleted":
        deleted |= {f"doc{v}" for v in range(5)}
    return ids, deleted


@pytest.mark.parametrize("scoring", ["ssr", "bm25"])
@pytest.mark.parametrize("kind", ["integer", "string", "mixed-deleted"])
def test_parts_answer_as_one_fresh_build(tmp_path, scoring, kind):
    rng = random.Random(f"{scoring}-{kind}")
    ids, deleted = id_sets(kind, rng)
    parts_docs = [[(i, text(rng)) for i in part] for part in ids]
    parts, fresh = make_parts(tmp_path, parts_docs, deleted, scoring)
    searcher = PartsSearcher(parts, shared=True)  # as a live index's segments
    assert searcher.n_live == fresh.n_docs
    assert searcher.integer == (kind != "string")
    reference = Searcher(fresh) if scoring == "ssr" else BM25Searcher(fresh)
    # long queries (past levels.MAX_TERMS signals) run part after part, the others one set of levels over all
    queries = [text(rng) for _ in range(150)] + [" ".join(text(rng) for _ in range(4)) for _ in range(20)] + [
        "", "nothing matches"]
    for k in (1, 2, 7, 40, None):  # k < a part's size: later parts search behind the bar of the earlier ones
        assert_identical(searcher.search_batch(queries, k), reference.search_batch(queries, k), docs=False)
        # one thread (the kernels' parallel entries) and two (pieces of the batch on Python threads)
        for threads in (1, 2):
            assert_identical(searcher.search_batch(queries, k, threads=threads),
                             reference.search_batch(queries, k), docs=False)
    if scoring == "ssr":
        for method in ("ssr", "levels"):  # part after part, behind the bars (probe, levels)
            apart = PartsSearcher(parts, method=method, shared=False)
            for k in (1, 7, 40):
                assert_identical(apart.search_batch(queries, k), reference.search_batch(queries, k), docs=False)
    if scoring == "ssr":
        exhaustive = PartsSearcher(parts, method="exhaustive")
        for k in (1, None):
            assert_identical(exhaustive.search_batch(queries, k), reference.search_batch(queries, k), docs=False)
        union = PartsSearcher(parts, method="union")  # the parts' kernel call on the heap union, behind bars
        for k in (1, 7, 40):
            assert_identical(union.search_batch(queries, k), reference.search_batch(queries, k), docs=False)
    assert searcher.pool_sizes(queries).tolist() == reference.pool_sizes(queries).tolist()
    for q in queries[:20]:
        hit = searcher.search(q, 1)
        if len(hit):
            assert searcher.explain(q, str(hit.ids[0])) == reference.explain(q, str(hit.ids[0]))


def test_a_batch_looked_up_at_once_gives_each_piece_its_own_terms_and_a_fresh_builds_results(tmp_path):
    """`parts_tables.look_up` (a threaded batch's signals, in ranges of their keys, one thread each) and
    `arranged` (a piece's terms from it) give every piece the arrays `prepare` makes for it alone."""
    from ssr_engine import parts_tables

    rng = random.Random(11)
    ids, deleted = id_sets("integer", rng)
    parts, fresh = make_parts(tmp_path, [[(i, text(rng)) for i in part] for part in ids], deleted, "ssr",
                              reseed=False)
    searcher = PartsSearcher(parts, shared=True)
    queries = [text(rng) for _ in range(300)] + ["", "nothing matches", " ".join(WORDS * 2)]
    for spans in (1, 3, 1000):  # more ranges than signals: some are empty
        looked = parts_tables.look_up(searcher, queries, spans, lambda fn, items: [fn(x) for x in items])
        assert looked is not None
        for a, b in [(0, 1), (0, len(queries)), (17, 101), (299, 303), (5, 5)]:
            got = parts_tables.arranged(searcher, looked, a, b)[2]
            want = parts_tables.prepare(searcher, queries[a:b])[2]
            assert [x.tobytes() for x in got] == [y.tobytes() for y in want]
    reference = Searcher(fresh)
    for k in (1, 7, 40):  # two threads: the batch looked up at once, then in pieces (`pieces.guided`)
        assert_identical(searcher.search_batch(queries, k, threads=2), reference.search_batch(queries, k), docs=False)


@pytest.mark.parametrize("reseed", [True, False])
def test_a_corrupt_vocabulary_of_one_part_is_an_error_naming_it(tmp_path, reseed):
    rng = random.Random(3)
    parts, _ = make_parts(tmp_path, [[(f"{s}-{i}", text(rng)) for i in range(30)] for s in range(3)], set(), "ssr",
                          reseed=reseed)
    path = parts[2].index.path / "vocab.npy"
    arr = np.load(path, mmap_mode="r+")
    arr[0] = arr[-1]  # unsorted: the first look-up that reads the block says so
    arr.flush()
    del arr
    parts = [Part(open_index(p.index.root)) for p in parts]  # an index opens at its root, not its segment
    with pytest.raises(IndexFormatError, match=f"{parts[2].index.path}.*vocab.npy"):
        PartsSearcher(parts, shared=True).search_batch(WORDS, 3)
    with pytest.raises(IndexFormatError, match=f"{parts[2].index.path}.*vocab.npy"):  # a threaded batch
        PartsSearcher(parts, shared=True).search_batch(WORDS * 5, 3, threads=2)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_vocabulary_search_from_an_interpolated_start_finds_the_lower_bound(data):
    """`part_terms._first_at_least` starts where a key falls between the ends (hash keys spread evenly):
    on any sorted vocabulary, even or clustered, it returns np.searchsorted's position from lo."""
    from ssr_engine.kernels.part_terms import _first_at_least

    dtype = data.draw(st.sampled_from([np.uint32, np.uint64]))
    top = int(np.iinfo(dtype).max)
    cluster = data.draw(st.sampled_from([top, 1000, 10]))  # evenly spread over the range, or bunched at one end
    keys = data.draw(st.lists(st.integers(0, cluster), min_size=0, max_size=300, unique=True))
    tail = data.draw(st.lists(st.integers(0, top), max_size=3, unique=True))  # a few far keys skew the ends
    vocab = np.unique(np.array(keys + tail, dtype=dtype))
    checked = np.zeros((vocab.shape[0] >> 4) + 1, dtype=np.uint8)
    lo = data.draw(st.integers(0, vocab.shape[0]))
    for key in data.draw(st.lists(st.integers(0, top), min_size=1, max_size=20)) + keys[:5]:
        want = max(lo, int(np.searchsorted(vocab, dtype(key))))  # it never looks before lo
        assert _first_at_least(vocab, dtype(key), np.int64(lo), checked, np.int64(4), True) == want


def test_parts_of_different_settings_are_refused(tmp_path):
    a = build_index(write_tsv(tmp_path / "a.tsv", [("1", "alpha beta")]), tmp_path / "a", quiet=True)
    b = build_index(write_tsv(tmp_path / "b.tsv", [("2", "alpha beta")]), tmp_path / "b", quiet=True, cap=3)
    with pytest.raises(SsrError, match="cap"):
        PartsSearcher([Part(open_index(a)), Part(open_index(b))])


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_two_step_merge_equals_the_one_step_merge(data):
    """merge_ranked == a sort of each query's rows by the full key; select_candidates keeps the best k on
    (score, matches) and every row tying with the k-th; + order_candidates == merge_ranked."""
    from ssr_engine.kernels.merge import merge_ranked, order_candidates, select_candidates

    n_parts = data.draw(st.integers(1, 4))
    nq = data.draw(st.integers(1, 3))
    k = data.draw(st.integers(0, 6))
    ids = data.draw(st.lists(int_ids, min_size=1, max_size=40, unique=True))
    integer = ids_are_integers(ids)
    rank = {ids[i]: r for r, i in enumerate(id_order(ids))}
    rows, table = [], np.zeros((nq, n_parts + 1), dtype=np.int64)
    pool = list(ids)
    for q in range(nq):
        table[q, 0] = len(rows)
        for s in range(n_parts):
            n = data.draw(st.integers(0, min(5, len(pool))))
            part = [(data.draw(st.sampled_from([1.0, 2.0, 3.5])), data.draw(st.integers(1, 2)), pool.pop())
                    for _ in range(n)]
            part.sort(key=lambda r: (-r[0], -r[1], rank[r[2]]))
            rows += part
            table[q, s + 1] = len(rows)
        pool = list(ids)
    scores = np.array([r[0] for r in rows], dtype=np.float64)
    matches = np.array([r[1] for r in rows], dtype=np.int32)
    width = max([len(r[2]) for r in rows] + [1])
    codes = np.array([r[2] for r in rows] or [""], dtype=f"<U{width}").view(np.uint32).reshape(-1, width)
    want_off, want = merge_ranked(table, scores, matches, codes, k, integer)
    sel, picked = select_candidates(table, scores, matches, k)
    for q in range(nq):
        mine = sorted(range(table[q, 0], table[q, -1]), key=lambda r: (-rows[r][0], -rows[r][1], rank[rows[r][2]]))
        assert want[want_off[q]:want_off[q + 1]].tolist() == mine[: k or None]
        bar = (rows[mine[k - 1]][0], rows[mine[k - 1]][1]) if 0 < k <= len(mine) else (-1.0, -1)
        assert sorted(picked[sel[q]:sel[q + 1]].tolist()) == sorted(r for i, r in enumerate(mine) if k <= 0 or i < k
                                                                  or (rows[r][0], rows[r][1]) == bar)
    got_off, pos = order_candidates(sel, scores[picked], matches[picked], codes[picked], k, integer)
    assert got_off.tolist() == want_off.tolist()
    assert picked[pos].tolist() == want.tolist()


@settings(max_examples=60, deadline=None)
@given(id_lists(20), st.data())
def test_the_two_run_walk_keeps_the_best_k_by_the_full_key_with_either_tie_test(ids, data):
    """merge_two with ids' bytes (live segments) or rank keys (shards) deciding ties == the sorted union."""
    from ssr_engine.kernels.merge import merge_two

    integer = ids_are_integers(ids)
    id_bytes, id_offsets = utf8_ids(ids)
    rank = {d: r for r, d in enumerate(id_order(ids))}
    score = {d: data.draw(st.sampled_from([1.0, 2.5])) for d in range(len(ids))}  # few values: ties decide
    match = {d: data.draw(st.integers(1, 2)) for d in range(len(ids))}
    order = lambda docs: sorted(docs, key=lambda d: (-score[d], -match[d], rank[d]))  # noqa: E731
    in_a = data.draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids)))
    a = order([d for d in range(len(ids)) if in_a[d]])
    b = order([d for d in range(len(ids)) if not in_a[d]])
    k = data.draw(st.integers(0, len(ids) + 1))
    want = order(range(len(ids)))[:k]
    for ties, x_of in (((id_offsets, id_bytes, integer), lambda d: d), (0, lambda d: rank[d] << 32 | d)):
        runs = [(np.array([x_of(d) for d in run], dtype=np.int64), np.array([score[d] for d in run]),
                 np.array([match[d] for d in run], dtype=np.int32)) for run in (a, b)]
        out = (np.empty(len(ids), np.int64), np.empty(len(ids)), np.empty(len(ids), np.int32))
        n = merge_two(ties, *runs[0], len(a), *runs[1], len(b), k, *out)
        assert [d & 0xFFFFFFFF for d in out[0][:n].tolist()] == want
        assert out[1][:n].tolist() == [score[d] for d in want] and out[2][:n].tolist() == [match[d] for d in want]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 300), max_size=80, unique=True), st.integers(-10, 310), st.data())
def test_galloping_from_a_known_lower_position_finds_the_lower_bound(values, x, data):
    """`part_terms._gallop` (the deleted-df search resumed where the last one ended) returns np.searchsorted's
    position from any start below it."""
    from ssr_engine.kernels.part_terms import _gallop

    a = np.array(sorted(values), dtype=np.int64)
    want = int(np.searchsorted(a, x))
    lo = data.draw(st.integers(0, want))
    assert _gallop(a, np.int64(x), np.int64(lo)) == want
