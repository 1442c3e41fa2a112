"""The ways one kernel call searches a live index's segments (`kernels.live.search_parts`) all rank as a fresh
build does: one set of levels in blocks widened for sparse queries (`probe.widen`), its first bar from the
large segments only; queries probe's cost rule would prune, segment after segment through `probe.search_one`
behind bars (`_levels_pay`); segments in id order or not, with deletions and heavy ties."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import assert_identical, write_tsv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssr_engine import build_index
from ssr_engine.format import open_index
from ssr_engine.kernels import live as live_kernels
from ssr_engine.kernels.live import RULE_PARTS
from ssr_engine.kernels.probe import RULE
from ssr_engine.parts import Part
from ssr_engine.parts_search import PartsSearcher
from ssr_engine.search import Searcher

WORDS = "alpha beta gamma delta epsilon zeta eta theta".split()
# probe's cost rule as given, and two that send every query of 2+ terms segment by segment: with `small`
# answering the tiny ones, and without it (probe itself, its levels fallback)
RULES = {"default": RULE_PARTS, "parts": (0.0, 0.0, 0.0, *RULE[3:], 0.0),
         "probe": (0.0, 0.0, 0.0, *RULE[3:6], 0.0, *RULE[7:], 0.0)}


def test_levels_pay_follows_the_cost_rule():
    rule = np.asarray(RULE_PARTS, dtype=np.float64)
    even = np.array([30_000, 30_000, 30_000], dtype=np.int64)
    skewed = np.array([90_000, 5_000, 5_000], dtype=np.int64)
    assert live_kernels._levels_pay(skewed, 3, 10, False, rule)  # method levels: always
    assert live_kernels._levels_pay(skewed[:1], 1, 10, True, rule)  # one term: nothing to probe
    assert not live_kernels._levels_pay(skewed, 3, 10, True, rule)  # probe would prune: part after part
    assert live_kernels._levels_pay(even, 3, 10, True, rule)  # the lightest list under 3/4: levels
    assert live_kernels._levels_pay(skewed // 4, 3, 1, True, rule)  # under 32,768 postings: levels
    assert live_kernels._levels_pay(skewed, 3, 100, True, rule)  # under 6,000 postings a result: levels


@pytest.mark.parametrize("ordered", [True, False])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_path_over_segments_ranks_as_a_fresh_build(tmp_path_factory, ordered, data):
    tmp = tmp_path_factory.mktemp("paths")
    rng = random.Random(data.draw(st.integers(0, 2**16)))
    sizes = data.draw(st.lists(st.integers(1, 60), min_size=2, max_size=4))
    ids = list(range(sum(sizes)))
    if not ordered:  # segments whose ids interleave: no monotone shortcuts
        rng.shuffle(ids)
    parts, live, first = [], [], 0
    for s, n in enumerate(sizes):
        # few words, short texts: heavy ties; each segment its own words, so a small one may lack a query's
        words = rng.sample(WORDS, rng.randint(1, len(WORDS)))
        docs = [(str(ids[first + i]), " ".join(rng.choice(words) for _ in range(rng.randint(0, 5))))
                for i in range(n)]
        first += n
        deleted = np.array([rng.random() < 0.2 for _ in docs])
        ix = open_index(build_index(write_tsv(tmp / f"p{s}.tsv", docs), tmp / f"p{s}", quiet=True))
        parts.append(Part.with_deletions(ix, deleted))
        live += [d for d, gone in zip(docs, deleted.tolist(), strict=True) if not gone]
    # narrow blocks: `widen` widens them for these sparse queries (the workspace is WIDEN x as wide)
    searcher = PartsSearcher(parts, shared=True, block=data.draw(st.sampled_from([1, 2, 4, 16, 16384])))
    searcher.rule = RULES[data.draw(st.sampled_from(sorted(RULES)))]
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 5))) for _ in range(30)]
    if not live:
        assert all(len(r) == 0 for r in searcher.search_batch(queries, 3, threads=1))
        return
    reference = Searcher(open_index(build_index(write_tsv(tmp / "live.tsv", live), tmp / "fresh", quiet=True)))
    for k in (1, 2, 5, 40):
        assert_identical(searcher.search_batch(queries, k, threads=1), reference.search_batch(queries, k), docs=False)
