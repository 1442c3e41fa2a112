"""Parts whose ids ascend with their collection numbers (a live index grown by adds in id order): one set of
levels over them takes the monotone shortcuts and skips parts behind the bar unopened (`kernels.live`);
results stay bit for bit a fresh build's."""

from __future__ import annotations

import random

import numpy as np
from conftest import assert_identical, write_tsv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssr_engine import build_index, parts_tables
from ssr_engine.format import open_index
from ssr_engine.parts import Part
from ssr_engine.parts_search import PartsSearcher
from ssr_engine.search import Searcher

WORDS = "alpha beta gamma delta epsilon zeta".split()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_parts_in_id_order_rank_as_a_fresh_build(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("ordered")
    rng = random.Random(data.draw(st.integers(0, 2**16)))
    sizes = data.draw(st.lists(st.integers(1, 30), min_size=2, max_size=4))
    parts, live, first = [], [], 0
    for s, n in enumerate(sizes):
        # each part its own few words: later (small) parts lack terms others hold, so a bar can rule them out
        words = rng.sample(WORDS, rng.randint(1, len(WORDS)))
        docs = [(str(first + i), " ".join(rng.choice(words) for _ in range(rng.randint(0, 4)))) for i in range(n)]
        first += n
        deleted = np.array([rng.random() < 0.2 for _ in docs])
        ix = open_index(build_index(write_tsv(tmp / f"p{s}.tsv", docs), tmp / f"p{s}", quiet=True))
        parts.append(Part.with_deletions(ix, deleted))
        live += [d for d, gone in zip(docs, deleted.tolist(), strict=True) if not gone]
    searcher = PartsSearcher(parts, shared=True)
    assert parts_tables.parts_arrays(searcher, "ssr")[6]  # ids ascend with collection numbers: monotone
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(30)]
    if not live:
        assert all(len(r) == 0 for r in searcher.search_batch(queries, 3))
        return
    reference = Searcher(open_index(build_index(write_tsv(tmp / "live.tsv", live), tmp / "fresh", quiet=True)))
    for k in (1, 2, 5, 40):
        assert_identical(searcher.search_batch(queries, k, threads=1), reference.search_batch(queries, k), docs=False)
