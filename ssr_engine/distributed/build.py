"""`build_sharded`: a collection split into S shards, built in parallel (Ray tasks or local processes),
then one global weight table, then the shard manifest.

The input file is cut into S byte ranges that start and end on line boundaries (each task reads only
its own range: `corpus.ByteRange`); a list of documents is cut into S slices. Each shard is an
ordinary `build_index` into its own directory. Then, in the driver: every shard must have the same
hash seed (a shard that re-seeded after a collision makes the others rebuild with its seed, and a
collision across shards re-seeds all), ids must be unique across shards (an error naming the file
and both lines, as in a single build), the id order is decided globally (integers only when every
shard's ids are), the weight table is reduced once (`layout.global_tables`) and the collection's id
ranks are cut into one slice per shard (`layout.id_ranks`). The manifest is published last, so
readers see the previous sharded index or this one; a failed build removes what it wrote and leaves
the previous generation as it was.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..corpus import ByteRange, read_collection
from ..errors import InputError, SsrError
from ..format import peek_index
from ..generations import WriterLock
from ..indexing.builder import MAX_SEED_ATTEMPTS, BuildConfig
from ..inputs import CHUNK_DOCS, detect_format, sniff_compression
from ..pieces import even
from ..signals import DEFAULT_CAP
from . import layout

RUNNERS = ("ray", "processes", "inline")
_BLOCK = 1 << 20


def build_sharded(collection: str | os.PathLike[str] | Sequence[Any], out: str | os.PathLike[str], shards: int, *,
                  runner: str = "ray", ray_address: str | None = None, force: bool = False, quiet: bool = False,
                  hash_seed: int = 0, fmt: str = "auto", header: bool = False, **options: Any) -> Path:
    """Build a sharded index of `collection` (an uncompressed TSV/JSONL file, or a list of documents) in `out`.

    runner: "ray" (tasks on the Ray instance at `ray_address`, a local one by default), "processes"
    (a process pool on this machine) or "inline" (one after another, in this process). `options`
    are `build_index`'s (stopwords, cap, chunk_docs, workers, skip_bad_lines, scoring, stem,
    hash_bits, store_text); `workers` is per shard (default: the cores divided among the shards
    that run at once). `out` must be absent, empty or a sharded index (replaced only with `force`).
    """
    started = time.time()
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise SsrError(f"shards must be a positive integer, got {shards!r}")
    if runner not in RUNNERS:
        raise SsrError(f"unknown runner {runner!r} (expected one of {', '.join(RUNNERS)})")
    BuildConfig.checked(fmt=fmt, header=header, quiet=quiet, hash_bits=options.get("hash_bits", 64),
                        **{k: options.get(k, d) for k, d in _DEFAULTS.items()})  # bad options fail here
    pieces, fmt = _pieces(collection, shards, fmt, header)
    root = Path(out).absolute()
    created = _claim(root, force)
    lock = WriterLock(root)
    try:
        lock.acquire()
    except BaseException:
        if created:
            _remove_empty(root)
        raise
    generation = 0
    try:
        previous = _previous(root)
        generation = max([previous.generation if previous else 0] + _generations(root)) + 1
        _remove_leftovers(root, keep=previous.generation if previous else None)
        running = min(len(pieces), _cpus(runner, ray_address))
        if options.get("workers") is None:  # the cores shared among the shards that run at once
            options["workers"] = max(1, (os.cpu_count() or 1) // running)
        manifest = _build(root, generation, pieces, fmt, runner, ray_address, hash_seed, quiet, options, started)
        layout.write_manifest(root, manifest)
        if previous is not None:
            for p in layout.generation_files(root, previous.generation):
                _remove(p)
    except BaseException:
        if generation:
            for p in layout.generation_files(root, generation):
                _remove(p)
        lock.release()
        if created:
            _remove_empty(root)
        raise
    lock.release()
    return root


_DEFAULTS = {"stopwords": None, "cap": DEFAULT_CAP, "chunk_docs": CHUNK_DOCS, "workers": None, "skip_bad_lines": False,
             "scoring": "ssr", "stem": False, "store_text": False}


class _Piece:
    """One shard's input: a byte range of the file, or a slice of the documents (`first`: items before it)."""

    def __init__(self, source: Any, header: bool, first: int | None):
        self.source = source
        self.header = header
        self.first = first  # lines (or items) before the piece; None: counted when an error needs it

    def lines_before(self) -> int:
        if self.first is None:
            self.first = _count_lines(self.source.path, self.source.start)
        return self.first


def _pieces(collection: Any, shards: int, fmt: str, header: bool) -> tuple[list[_Piece], str]:
    if isinstance(collection, (str, os.PathLike)):
        path = Path(collection).absolute()
        if str(collection).startswith("irds:"):
            raise SsrError(f"{collection}: a sharded build reads a file by byte ranges; export the dataset to a file")
        if not path.is_file():
            raise InputError(path, None, "no such file")
        if sniff_compression(path) is not None:
            raise InputError(path, None, "a sharded build splits the file by byte ranges: give it uncompressed")
        fmt = detect_format(path) if fmt == "auto" else fmt
        if header and fmt != "tsv":
            raise InputError(path, None, "header applies to TSV collections only")
        return [_Piece(ByteRange(path, a, z), header and a == 0, 0 if a == 0 else None)
                for a, z in split_ranges(path, shards)], fmt
    if isinstance(collection, Sequence) and not isinstance(collection, (bytes, str)):
        docs = list(collection)
        return [_Piece(docs[a:z], False, a) for a, z in even(len(docs), shards)], fmt
    raise SsrError("a sharded build takes a file path or a list of documents")


def split_ranges(path: Path, shards: int) -> list[tuple[int, int]]:
    """`shards` byte ranges of about equal size covering the file, each starting on a line (empty ones dropped)."""
    size = path.stat().st_size
    cuts = [0]
    with open(path, "rb") as f:
        for i in range(1, shards):
            pos = max(size * i // shards, cuts[-1])
            if pos == 0:
                cuts.append(0)
                continue
            f.seek(pos - 1)  # the line that holds byte pos - 1 ends the range
            while True:
                block = f.read(_BLOCK)
                nl = block.find(b"\n")
                if nl >= 0:
                    cuts.append(f.tell() - len(block) + nl + 1)
                    break
                if not block:
                    cuts.append(size)
                    break
    cuts.append(size)
    return [(a, z) for a, z in zip(cuts, cuts[1:], strict=False) if z > a]


def _count_lines(path: Path, end: int) -> int:
    """Newlines in the file's first `end` bytes (the lines before a shard's range; error paths only)."""
    n = 0
    with open(path, "rb") as f:
        left = end
        while left > 0:
            block = f.read(min(_BLOCK * 16, left))
            if not block:
                break
            n += block.count(b"\n")
            left -= len(block)
    return n


def build_shard(piece: _Piece, out: str, fmt: str, seed: int, options: dict[str, Any],
                hashes: str | None = None) -> dict[str, Any] | None:
    """Build one shard (a task: runs in a Ray worker, a pool process or inline); its documents and seed.
    `hashes`: where its terms' full hashes go too (`build_index(term_hashes=...)`, for the weight table).

    None when the piece holds no document. Line numbers in errors are made the file's own.
    """
    from ..indexing.builder import build_index

    try:
        build_index(piece.source, out, fmt=fmt, header=piece.header, hash_seed=seed, quiet=True, force=True,
                    term_hashes=hashes, **options)
    except InputError as exc:
        if exc.line is None:
            if "empty collection" in str(exc):
                _remove(Path(out))
                return None
            raise
        raise shifted(exc, piece.lines_before()) from None
    peeked = peek_index(out)
    assert peeked is not None
    m = peeked[0]
    return {"documents": m.counts.documents, "seed": m.signals.hash.seed}


def shifted(exc: InputError, before: int) -> InputError:
    """`exc` with its line numbers (and an earlier duplicate's) counted from the file's start."""
    assert exc.line is not None
    message = re.sub(r"first at line (\d+)", lambda m: f"first at line {int(m.group(1)) + before}", exc.reason)
    return InputError(exc.path, exc.line + before, message)


def _build(root: Path, generation: int, pieces: list[_Piece], fmt: str, runner: str, address: str | None,
           seed: int, quiet: bool, options: dict[str, Any], started: float) -> layout.ShardManifest:
    names = [layout.shard_name(generation, i) for i in range(len(pieces))]
    hashes = [layout.hashes_name(generation, i) for i in range(len(pieces))]
    todo = list(range(len(pieces)))
    done: dict[int, dict[str, Any] | None] = {}
    seeds_tried: list[int] = []
    while True:
        calls = [(pieces[i], str(root / names[i]), fmt, seed, options, str(root / hashes[i])) for i in todo]
        t0 = time.time()
        for i, summary in zip(todo, _run(calls, runner, address), strict=True):
            done[i] = summary
        if not quiet:
            print(f"ssr: built {len(todo)} shard(s) in {time.time() - t0:.1f} s ({runner})", file=sys.stderr)
        kept = [i for i in range(len(pieces)) if done[i] is not None]
        if not kept:
            raise InputError(str(pieces[0].source), None, "empty collection: no documents")
        top = max(done[i]["seed"] for i in kept)  # type: ignore[index]
        todo = [i for i in kept if done[i]["seed"] != top]  # type: ignore[index]
        if todo:  # a shard re-seeded after a collision: the others follow, so hashes agree
            seed = top
            seeds_tried.append(seed)
            continue
        from ..format import open_index

        indexes = [open_index(root / names[i]) for i in kept]
        try:
            # the ids' checks and ranks need no weights: on a thread of their own beside the table's reduction
            # (Arrow and NumPy release the GIL); the pool's exit waits for them before the indexes close
            with ThreadPoolExecutor(max_workers=1) as aside:
                ids_work = aside.submit(_ranked_ids, indexes, [pieces[i] for i in kept], fmt, options)
                # the terms' full hashes as the shard builds wrote them (hashing the strings again took a shard
                # of 8.8M 2.3 s of CPU); removed before the manifest is published
                full = [layout.load_hashes(root / hashes[i], ix) for i, ix in zip(kept, indexes, strict=True)]
                tables, collisions = layout.global_tables(indexes, full)
                del full
                for name in hashes:
                    _remove(root / name)
                ranks = None if collisions else ids_work.result()  # (a duplicate id: its error, as before)
            if collisions:
                if len(seeds_tried) >= MAX_SEED_ATTEMPTS:
                    raise SsrError(f"{root}: signal hash collisions across shards under {MAX_SEED_ATTEMPTS} seeds; "
                                   f"last: {collisions[0]}")
                seed = top + 1
                seeds_tried.append(seed)
                todo = kept
                if not quiet:
                    print(f"ssr: hash collision across shards ({collisions[0]}); rebuilding with seed {seed}",
                          file=sys.stderr)
                continue
            assert ranks is not None
            entries = []
            for j, i in enumerate(kept):
                wname, rname = layout.weights_name(generation, i), layout.ranks_name(generation, i)
                sha = layout.save_table(root / wname, tables[j])
                ix = indexes[j]
                assert ix.commit is not None
                src = pieces[i].source
                entries.append(layout.ShardEntry(names[i], ix.n_docs, ix.commit.segments[0].manifest_sha256, wname,
                                                 sha, ix.n_terms, (src.start, src.end)
                                                 if isinstance(src, ByteRange) else None, rname,
                                                 layout.save_table(root / rname, ranks[j], np.uint32)))
            source = pieces[0].source
            return layout.ShardManifest(
                generation=generation, scoring=indexes[0].scoring, documents=sum(ix.n_docs for ix in indexes),
                tokens=layout.total_tokens(indexes), integer=layout.integer_ids(indexes), shards=tuple(entries),
                input={"path": str(source.path) if isinstance(source, ByteRange) else "<python list>", "format": fmt},
                build={"runner": runner, "shards_asked": len(pieces), "hash_seed": top, "reseeded": seeds_tried,
                       "seconds": round(time.time() - started, 3),
                       "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        finally:
            for ix in indexes:
                ix.close()


def _ranked_ids(indexes: list, pieces: list[_Piece], fmt: str, options: dict[str, Any]) -> list[np.ndarray]:
    """The shards' id ranks (`layout.id_ranks`); an id held by two shards is an error naming the file and
    both lines (as a single build's)."""
    import pyarrow.compute as pc

    ranks, dup = layout.id_ranks(indexes, layout.integer_ids(indexes))
    if dup is None:
        return ranks
    holders = [s for s, ix in enumerate(indexes) if pc.index(ix.doc_id_array(), dup).as_py() >= 0]
    first, second = (_line_of(pieces[s], dup, fmt, options) for s in holders[:2])
    where = pieces[holders[1]].source
    label = where.path if isinstance(where, ByteRange) else "<python iterable>"
    raise InputError(label, second, f"duplicate document id {dup!r} (first at line {first}; ids must be "
                                    "unique across shards, --skip-bad-lines does not skip these)")


def _line_of(piece: _Piece, doc_id: str, fmt: str, options: dict[str, Any]) -> int | None:
    """The file's line (or the list's item number) holding `doc_id` in a piece (error paths only)."""
    for chunk in read_collection(piece.source, fmt, 10_000, options.get("skip_bad_lines", False), piece.header):
        if doc_id in chunk.ids:
            return int(chunk.lines[chunk.ids.index(doc_id)]) + piece.lines_before()
    return None


# ------------------------------------------------------------------------------- runners


def _cpus(runner: str, address: str | None) -> int:
    if runner == "inline":
        return 1
    if runner == "ray":
        from ._ray import cluster_cpus

        return cluster_cpus(address)
    return os.cpu_count() or 1


def _run(calls: list[tuple[Any, ...]], runner: str, address: str | None) -> list[dict[str, Any] | None]:
    if runner == "inline":
        return [build_shard(*c) for c in calls]
    if runner == "processes":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")  # no forked copy of a threaded parent (Numba, Ray)
        with ProcessPoolExecutor(max_workers=min(len(calls), os.cpu_count() or 1), mp_context=ctx) as pool:
            return list(pool.map(build_shard, *zip(*calls, strict=True)))
    from ._ray import run_tasks

    return run_tasks(build_shard, calls, address)


# -------------------------------------------------------------------------- the directory


def _claim(root: Path, force: bool) -> bool:
    """Check that `root` may be written (absent, empty, a sharded index with force, or our leftovers);
    True when it was created here."""
    if root.exists() and not root.is_dir():
        raise SsrError(f"{root}: exists and is not a directory; refusing to touch it")
    if not root.exists():
        try:
            root.mkdir(parents=True)
        except OSError as exc:
            raise SsrError(f"{root}: cannot create ({exc.strerror})") from exc
        return True
    names = set(os.listdir(root))
    if layout.MANIFEST in names:
        if not force:
            raise SsrError(f"{root}: already a sharded index; pass --force to replace it")
        return False
    strangers = sorted(n for n in names if n != "write.lock" and not layout.is_ours(n))
    if strangers:
        raise SsrError(f"{root}: not empty and not a sharded index (holds {strangers[0]!r}); refusing to touch it")
    return False


def _previous(root: Path) -> layout.ShardManifest | None:
    if not (root / layout.MANIFEST).is_file():
        return None
    return layout.read_manifest(root)


def _generations(root: Path) -> list[int]:
    return [g for g in (layout.generation_of(n) for n in os.listdir(root)) if g is not None]


def _remove_leftovers(root: Path, keep: int | None) -> None:
    """A dead build's shards and slices (ours by name, of a generation no manifest refers to)."""
    for name in os.listdir(root):
        g = layout.generation_of(name)
        if g is not None and g != keep:
            _remove(root / name)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


def _remove_empty(root: Path) -> None:
    """Remove a directory this build created, if nothing but our lock is in it."""
    try:
        for name in os.listdir(root):
            if name != "write.lock":
                return
        (root / "write.lock").unlink(missing_ok=True)
        root.rmdir()
    except OSError:
        pass
