"""`answer`: a Searcher's batches of ssr and levels, one kernel call a piece, against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from ssr_engine import indexing as build
from ssr_engine.errors import IndexFormatError
from ssr_engine.kernels.packed import gather, pack32
from ssr_engine.reference import ReferenceIndex
from ssr_engine.search import Searcher


def write_tsv(path, ids, texts):
    path.write_text("".join(f"{i}\t{t}\n" for i, t in zip(ids, texts, strict=True)), encoding="utf-8")
    return path


def assert_same(res, hits):
    assert res.ids.tolist() == hits.ids.tolist()
    assert res.scores.view(np.uint64).tolist() == hits.scores.view(np.uint64).tolist()
    assert res.matches.tolist() == hits.matches.tolist()


@pytest.mark.parametrize("method", ["ssr", "levels"])
def test_queries_longer_than_the_workspace_rows(tmp_path, method):
    """Queries of more known terms than a fresh workspace's cursor rows (64): the kernel says so before
    searching, the workspace is widened and the piece answered again; results equal the reference's."""
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(160)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(400)]
    ids = [f"d{i}" for i in range(len(texts))]
    searcher = Searcher(build.build_index(write_tsv(tmp_path / "c.tsv", ids, texts), tmp_path / "idx", quiet=True,
                                          cap=400), method=method)
    ref = ReferenceIndex.from_texts(ids, texts, cap=400)
    queries = [" ".join(rng.permutation(words)[: int(n)]) for n in rng.integers(1, 150, size=24)]
    queries += [" ".join(words), "w1 w2", ""]
    assert max(len(searcher.query_batch([q]).terms) for q in queries) > 64
    for k in (1, 10, 1000):
        for threads in (1, 2):
            results = searcher.search_batch(queries, k, threads=threads)
            for q, res in zip(queries, results, strict=True):
                assert_same(res, ref.search(q, k))
        for q in queries[-6:]:
            assert_same(searcher.search(q, k), ref.search(q, k))


def test_single_queries_follow_the_workspace_as_it_widens(tmp_path):
    """One query at a time on a fresh searcher (the calling thread's `kernels.answer.Held`, the kernel's fixed
    arguments in one object): short, then longer than the workspace's cursor rows (widened, and the held
    arguments made again for the new workspace, else the kernel would read the old one), then short again."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(120)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 30)))) for _ in range(300)]
    ids = [f"d{i}" for i in range(len(texts))]
    searcher = Searcher(build.build_index(write_tsv(tmp_path / "c.tsv", ids, texts), tmp_path / "idx", quiet=True,
                                          cap=400))
    ref = ReferenceIndex.from_texts(ids, texts, cap=400)
    helds = []
    for q in ("w3 w7", " ".join(words[:100]), "w9", " ".join(words[10:110]), "w1 w2 w3"):
        for k in (1, 10, 300):
            assert_same(searcher.search(q, k), ref.search(q, k))
        helds.append(searcher._answers._local.held)
    assert helds[0][1] is not helds[1][1] and helds[1][0] is not helds[0][0]  # widened: a new workspace and held
    assert helds[1][1] is helds[4][1] and helds[4][0] is searcher._answers._local.work[0]  # kept while it serves


def test_corrupt_postings_fail_the_call_and_leave_the_workspace_clean(tmp_path):
    """A posting list out of order: the call raises naming postings_docs.npy, the workspace's masks are
    cleared, and a query that does not read that list is answered as the reference does."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choice(words, size=12)) for _ in range(500)]
    ids = [str(i) for i in range(len(texts))]
    out = build.build_index(write_tsv(tmp_path / "c.tsv", ids, texts), tmp_path / "idx", quiet=True)
    ref = ReferenceIndex.from_texts(ids, texts)
    searcher = Searcher(out)
    ix = searcher.index
    t = ix.term_of("w1")
    a = ix.span(t)[0]
    # the postings as values whatever the column's layout (format 6 packs them at whole bytes): two swapped
    values = gather(ix.postings, [0], [ix.postings_length])
    values[[a, a + 1]] = values[[a + 1, a]]
    width, path = ix.postings_width, ix.path / "postings_docs.npy"  # the commit's segment
    ix.close()
    arr = np.load(path, mmap_mode="r+")
    arr[:] = pack32(values, width) if width else values
    arr.flush()
    del arr
    searcher = Searcher(out)
    for threads in (1, 2):
        with pytest.raises(IndexFormatError, match="postings_docs.npy"):
            searcher.search_batch(["w1 w2 w3"] * 40, 10, threads=threads)
    clean = ["w2 w3", "w4 w5 w6 w7", "w9"] * 30
    for bad in (0, 45, 89):  # one query of a threaded batch reads the list: whichever thread takes it
        with pytest.raises(IndexFormatError, match="postings_docs.npy"):
            searcher.search_batch([*clean[:bad], "w1 w5", *clean[bad:]], 10, threads=2)
        for q, res in zip(clean, searcher.search_batch(clean, 10, threads=2), strict=True):  # both workspaces clean
            assert_same(res, ref.search(q, 10))
    with pytest.raises(IndexFormatError, match="postings_docs.npy"):
        searcher.search("w1 w5", 10)
    work = searcher._answers._local.work[0]
    assert not work[0].any() and not work[14].any() and not work[15].any()
    for q in ("w2 w3", "w4 w5 w6 w7", "w9"):
        assert_same(searcher.search(q, 10), ref.search(q, 10))


def test_guided_pieces_cover_the_batch_big_first():
    # `pieces.guided`: the spans tile range(n) in order; sizes never grow, stay within [least, most] but for
    # the last, and the last pieces are the smallest allowed (threads finish together)
    from ssr_engine.pieces import guided

    for n in (0, 1, 15, 16, 17, 100, 6_980, 100_003):
        for threads in (1, 2, 3, 8):
            for least, most in ((1, 3), (16, 64), (16, 1024), (5, 5)):
                spans = guided(n, threads, least, most)
                assert [a for a, _ in spans] == [0, *(b for _, b in spans[:-1])][: len(spans)]
                assert (spans[-1][1] if spans else 0) == n
                sizes = [b - a for a, b in spans]
                assert all(least <= s <= most for s in sizes[:-1]) and all(0 < s <= most for s in sizes)
                assert sizes[:-1] == sorted(sizes[:-1], reverse=True)
                if n >= 4 * threads * most:
                    assert sizes[0] == most and sizes[-2] <= max(least, 2)


def test_fetch_add_takes_each_value_once_across_threads():
    """`kernels.answer.fetch_add` (the threaded batch's shared piece counter) called by two threads at once,
    GIL-free: each value of the counter is taken by exactly one call, and its neighbours are untouched."""
    import threading

    import numba as nb

    from ssr_engine.kernels.answer import fetch_add

    @nb.njit(nogil=True)
    def take(counter, out):
        for i in range(out.shape[0]):
            out[i] = fetch_add(counter, 1, 1)

    counter = np.zeros(3, dtype=np.int64)
    take(counter, np.empty(1, dtype=np.int64))  # compiled before the race
    counter[1] = 0
    outs = [np.empty(2_000_000, dtype=np.int64) for _ in range(2)]
    threads = [threading.Thread(target=take, args=(counter, out)) for out in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.tolist() == [0, 4_000_000, 0]
    assert np.array_equal(np.sort(np.concatenate(outs)), np.arange(4_000_000))
