"""Index building: chunks of the collection -> sorted runs on disk -> bucketed merge -> CSR."""

from .builder import HashCollision, build_index

__all__ = ["HashCollision", "build_index"]
