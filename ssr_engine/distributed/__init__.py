"""Sharded indexes: build them in parallel (Ray tasks or processes) and search them exactly, in this
process or through one Ray actor per shard. Ray is optional (the `distributed` extra); see
docs/scale-out.md."""

from .build import build_sharded
from .layout import is_sharded, verify_sharded
from .search import LocalSharded, ShardedResult, ShardedSearcher, open_local

__all__ = ["build_sharded", "is_sharded", "verify_sharded", "open_local", "LocalSharded", "ShardedSearcher",
           "ShardedResult"]
