"""A vocabulary's key directory (`kernels.terms.key_directory`, built by a shard's worker): a key's first
position through it is np.searchsorted's on any sorted vocabulary, even, clustered or with repeated 32-bit
keys; building it checks every block, and a worker refuses a shard whose vocabulary is out of order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import write_tsv
from hypothesis import given, settings
from hypothesis import strategies as st
from test_distributed import random_docs

from ssr_engine.distributed import build_sharded
from ssr_engine.distributed.layout import read_manifest
from ssr_engine.distributed.worker import ShardWorker
from ssr_engine.errors import IndexFormatError
from ssr_engine.kernels.terms import directory_search, key_directory


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_directory_search_is_searchsorted(data) -> None:
    dtype = data.draw(st.sampled_from([np.uint32, np.uint64]))
    top = int(np.iinfo(dtype).max)
    cluster = data.draw(st.sampled_from([top, 1 << 20, 50]))  # spread over the range, or bunched low
    values = data.draw(st.lists(st.integers(0, cluster), min_size=0, max_size=300))
    strict = data.draw(st.booleans())
    vocab = np.unique(np.array(values, dtype=dtype)) if strict else np.sort(np.array(values, dtype=dtype))
    bits = data.draw(st.integers(1, 12))
    checked = np.zeros((vocab.shape[0] >> 4) + 1, dtype=np.uint8)
    directory, bad = key_directory(vocab, bits, checked, 4, strict)
    assert bad == -1 and checked.all()
    probes = np.array(data.draw(st.lists(st.integers(0, top), max_size=40)) + values[:20] + [0, top], dtype=dtype)
    got = directory_search(vocab, directory, bits, probes)
    assert got.tolist() == np.searchsorted(vocab, probes, side="left").tolist()


@pytest.mark.parametrize("strict", [True, False])
def test_building_the_directory_finds_an_entry_out_of_order(strict: bool) -> None:
    vocab = np.arange(0, 4000, 3, dtype=np.uint64 if strict else np.uint32)
    vocab[700] = vocab[10]  # a descent
    checked = np.zeros((vocab.shape[0] >> 6) + 1, dtype=np.uint8)
    _, bad = key_directory(vocab, 6, checked, 6, strict)
    assert bad == 699


def test_a_worker_refuses_a_shard_whose_vocabulary_is_out_of_order(tmp_path: Path) -> None:
    path = write_tsv(tmp_path / "c.tsv", random_docs(5, 90, "int"))
    build_sharded(path, tmp_path / "s", 3, runner="inline", quiet=True)
    m = read_manifest(tmp_path / "s")
    vocab_file = next((tmp_path / "s").glob("*shard-001/**/vocab.npy"))
    arr = np.load(vocab_file, mmap_mode="r+")
    arr[0] = arr[-1]
    arr.flush()
    del arr
    with pytest.raises(IndexFormatError, match="shard-001.*vocab.npy"):
        ShardWorker(str(tmp_path / "s"), [0, 1, 2], m.generation, "ssr", 1, 1.2, 0.75)
