"""Building a live index's new segments from documents (`LiveIndex.add`: the build's own steps with the
base segment's settings); a segment made of other segments' live documents is `live_compact`'s.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .errors import IndexFormatError, SsrError
from .format import Counts, Manifest
from .generations import (
    IndexWriter,
)
from .live_files import write_id_table

# ----------------------------------------------------------------------- building segments


class ScratchStaging:
    """Segment folders in a private scratch folder (`LiveIndex.prepare`): what `build_segment` needs of an
    `IndexWriter` (`staging`, `discard`), without the index's writer lock."""

    def __init__(self, root: Path):
        self.root, self._n = root, 0

    def staging(self) -> Path:
        from .generations import READERS

        self._n += 1
        path = self.root / f"segment-{self._n}"
        path.mkdir()
        (path / READERS).touch()
        return path

    def discard(self, staged: Path) -> None:
        shutil.rmtree(staged, ignore_errors=True)



def _derived_manifest(base: Manifest, counts: dict[str, int], ids: dict[str, Any], source: dict[str, Any],
                      seed: int, seeds_tried: list[dict[str, Any]], build: dict[str, Any],
                      extra_files: dict[str, str] | None = None) -> Manifest:
    """A new segment's manifest: the base segment's signal settings, its own counts and history."""
    h = base.signals.hash
    signals = replace(base.signals, hash=replace(h, seed=seed, collisions=tuple(seeds_tried)))
    return Manifest(scoring=base.scoring, counts=Counts(**counts), signals=signals, ids=ids, input=source,
                    build=build, extra_files=dict(extra_files or {}))


def build_segment(writer: IndexWriter | ScratchStaging, base: Manifest, source: Any, fmt: str, skip_bad_lines: bool,
                   chunk_docs: int, workers: int, quiet: bool,
                   extra_files: dict[str, tuple[str | os.PathLike[str], str]] | None = None,
                   header: bool = False) -> tuple[Path, Manifest]:
    """Build a staged segment of `source` (a file or an iterable of documents) with the base segment's
    settings, as `build_index` does (its `_build_into` and `_manifest`)."""
    from .format import write_manifest
    from .indexing.builder import MAX_SEED_ATTEMPTS, BuildConfig, _manifest, build_seeded
    from .indexing.runs import HashCollision
    from .signals import DEFAULT_CAP
    from .stopwords import StopwordList

    s = base.signals
    stop = StopwordList(s.stopwords_id, frozenset(s.stopwords))
    if stop.sha256 != s.stopwords_sha256:
        raise IndexFormatError(f"stopword list of the index does not match its checksum {s.stopwords_sha256}")
    config = BuildConfig(fmt=fmt, header=header, stop=stop, cap=s.cap if s.cap is not None else DEFAULT_CAP,
                         chunk_docs=chunk_docs, workers=workers, skip_bad_lines=skip_bad_lines, scoring=base.scoring,
                         stem=s.stem, quiet=quiet, hash_bits=s.hash.bits, store_text=base.doc_store is not None)
    started = time.time()

    def refuse(exc: HashCollision, tried: list[dict[str, Any]]) -> None:
        # the new segment takes the next seed; queries are hashed per segment, so it mixes with the others
        if len(tried) >= MAX_SEED_ATTEMPTS or not isinstance(source, (str, os.PathLike)):
            # an iterable cannot be read twice
            raise SsrError(f"signal hash collision in the added documents ({exc}); add them from a file") from exc

    tmp, stats, seed, seeds_tried = build_seeded(writer, source, config, s.hash.seed, refuse)
    write_id_table(tmp, stats.pop("id_array"))
    for name, (path, _) in (extra_files or {}).items():
        shutil.move(os.fspath(path), os.fspath(tmp / name))
    manifest = _manifest(config, stats, seed, seeds_tried, started, extra_files or {})
    write_manifest(tmp, manifest, sync=False)  # a staged folder: published whole by one rename at commit
    return tmp, manifest
