"""The sharded index layout: the only module that knows its file names and its manifest.

A sharded index is a directory:

    ssr-shards.json        the shard manifest (sealed with its own checksum, `generations.seal`):
                           generation G, scoring, global N, BM25 tokens, the id order (integer
                           ids or strings), and per shard its directory, documents, the sha256 of
                           its segment manifest, its byte range of the input, and its slice of the
                           weight table with that slice's sha256, and its slice of the id ranks
    gG-shard-NNN/          shard NNN: an ordinary index (`format`, `generations`), built alone
    gG-weights-NNN.npy     int64[V_NNN]: the global df of each of shard NNN's term ids
    gG-ranks-NNN.npy       uint32[N_NNN]: each of shard NNN's documents' position in the collection's
                           id order (indexes built before these existed get them from `add_ranks`)
    write.lock             the writer lock (`generations.WriterLock`)

While a build runs, each shard's build also writes gG-hashes-NNN.npy (uint64[V_NNN]: its terms' full
hashes, which the shard's vocabulary keeps 32 bits of) for the weight table; removed before the manifest
is published.

The weight table is one table (signal -> global df) stored as one slice per shard, aligned with the
shard's own term ids, so a searcher holding one shard maps only its slice and needs no lookup. It is
computed once after the shards are built: scores depend on the collection only through N, df (and
BM25's average length), so every shard weighs a signal exactly as one index over the collection.
The id ranks are the collection's `doc_rank`, cut the same way: with them the full key (score,
matches, id) of any result is three numbers, so shards' lists merge without reading an id.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..arrays import load_mapped
from ..atomic import atomic_write
from ..errors import IndexFormatError, SsrError
from ..format import Index, open_index, sha256_file, verify_index
from ..generations import seal, unseal

MANIFEST = "ssr-shards.json"
FORMAT = "ssr-shards"
VERSION = 1
_OURS = re.compile(r"^g(\d+)-(shard|weights|ranks|hashes)-(\d{3,})(\.npy)?$")


def shard_name(generation: int, i: int) -> str:
    return f"g{generation}-shard-{i:03d}"


def weights_name(generation: int, i: int) -> str:
    return f"g{generation}-weights-{i:03d}.npy"


def ranks_name(generation: int, i: int) -> str:
    return f"g{generation}-ranks-{i:03d}.npy"


def hashes_name(generation: int, i: int) -> str:
    return f"g{generation}-hashes-{i:03d}.npy"


def generation_of(name: str) -> int | None:
    """The generation of one of our shard directories or weight slices (by name), else None."""
    m = _OURS.match(name)
    return int(m.group(1)) if m else None


def is_ours(name: str) -> bool:
    """A name this layout writes: shards, slices, the manifest, or a temporary file of one (`atomic`)."""
    from ..atomic import TMP_MARK

    if name == MANIFEST or _OURS.match(name):
        return True
    if name.startswith(".") and TMP_MARK in name:
        return is_ours(name[1:].split(TMP_MARK, 1)[0])
    return False


def is_sharded(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a sharded index directory (it holds a shard manifest)."""
    return (Path(path) / MANIFEST).is_file()


def generation_files(root: Path, generation: int) -> list[Path]:
    """The shard directories and weight slices of one generation found in `root` (ours by name)."""
    out = []
    for name in sorted(os.listdir(root)):
        m = _OURS.match(name)
        if m and int(m.group(1)) == generation:
            out.append(root / name)
    return out


@dataclass(frozen=True)
class ShardEntry:
    name: str
    documents: int
    manifest_sha256: str
    weights: str
    weights_sha256: str
    terms: int
    byte_range: tuple[int, int] | None = None
    ranks: str | None = None
    ranks_sha256: str | None = None


@dataclass(frozen=True)
class ShardManifest:
    """The shard manifest, typed."""

    generation: int
    scoring: str
    documents: int
    tokens: int
    integer: bool
    shards: tuple[ShardEntry, ...]
    input: dict[str, Any] = field(default_factory=dict)
    build: dict[str, Any] = field(default_factory=dict)

    @property
    def ranked(self) -> bool:
        """Whether every shard has its slice of the collection's id ranks."""
        return all(s.ranks is not None for s in self.shards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "generation": self.generation, "scoring": self.scoring,
            "documents": self.documents, "tokens": self.tokens, "integer": self.integer,
            "shards": [{"name": s.name, "documents": s.documents, "manifest_sha256": s.manifest_sha256,
                        "weights": s.weights, "weights_sha256": s.weights_sha256, "terms": s.terms,
                        "byte_range": None if s.byte_range is None else list(s.byte_range),
                        **({} if s.ranks is None else {"ranks": s.ranks, "ranks_sha256": s.ranks_sha256})}
                       for s in self.shards],
            "input": self.input, "build": self.build,
        }


def write_manifest(root: Path, manifest: ShardManifest) -> None:
    """Publish `manifest` (atomically: readers see the old one or this one)."""
    with atomic_write(root / MANIFEST) as f:
        f.write(seal(manifest.to_dict()))


def read_manifest(root: str | os.PathLike[str]) -> ShardManifest:
    """The shard manifest of `root`; `IndexFormatError` when it is missing, corrupt or of another version."""
    path = Path(root) / MANIFEST
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise IndexFormatError(f"{path}: unreadable ({exc.strerror})") from exc
    body = unseal(path, text)
    try:
        if body["format"] != FORMAT or body["version"] != VERSION:
            raise IndexFormatError(f"{path}: format {body['format']!r} version {body['version']!r}; this "
                                   f"ssr_engine reads {FORMAT} version {VERSION}")
        shards = tuple(ShardEntry(s["name"], int(s["documents"]), s["manifest_sha256"], s["weights"],
                                  s["weights_sha256"], int(s["terms"]),
                                  None if s["byte_range"] is None else tuple(s["byte_range"]),
                                  s.get("ranks"), s.get("ranks_sha256"))
                       for s in body["shards"])
        for s in shards:
            if not (_OURS.match(s.name) and _OURS.match(s.weights) and (s.ranks is None or _OURS.match(s.ranks))):
                raise ValueError(f"bad shard entry {s.name!r}, {s.weights!r}")
        return ShardManifest(int(body["generation"]), body["scoring"], int(body["documents"]), int(body["tokens"]),
                             bool(body["integer"]), shards, body.get("input", {}), body.get("build", {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise IndexFormatError(f"{path}: corrupt shard manifest ({exc})") from exc


def describe(root: str | os.PathLike[str]) -> dict[str, Any]:
    """The sharded index's summary for reports (`ssr evaluate`)."""
    m = read_manifest(root)
    return {"path": str(Path(root).absolute()), "scoring": m.scoring, "counts": {"documents": m.documents},
            "shards": len(m.shards), "ids": {"integer": m.integer}, "build": m.build}


def save_table(path: Path, table: np.ndarray, dtype: type = np.int64) -> str:
    """Write one weight slice (int64) or id rank slice (uint32) as .npy, atomically; its sha256."""
    with atomic_write(path, "wb") as f:
        np.save(f, np.ascontiguousarray(table, dtype=dtype), allow_pickle=False)
    return sha256_file(path)


def _load_slice(path: Path, dtype: type, n: int, what: str) -> np.ndarray:
    """A weight or rank slice, memory-mapped; `IndexFormatError` unless it is dtype[n]."""
    a = load_mapped(path, what)
    if a.dtype != dtype or a.shape != (n,):
        raise IndexFormatError(f"{path}: {a.dtype}{list(a.shape)}, expected {np.dtype(dtype)}[{n}] (corrupt)")
    return a


def open_ranks(root: Path, manifest: ShardManifest, i: int) -> np.ndarray | None:
    """Shard i's slice of the collection's id ranks (uint32, memory-mapped), or None when it has none."""
    entry = manifest.shards[i]
    return None if entry.ranks is None else _load_slice(root / entry.ranks, np.uint32, entry.documents, "id rank slice")


def id_ranks(indexes: list[Index], integer: bool) -> tuple[list[np.ndarray], str | None]:
    """Per shard, uint32[N_shard]: each document's position in the collection's id order (`integer`:
    as `integer_ids` says), as one index's `doc_rank` over the whole collection would hold it; and an id
    that two shards hold (the first in id order), or None. Equal ids are neighbours in the id order, so
    one pass over the ids in that order finds a repeat (0.9 s at 8.8M, where Arrow's `count_distinct` took
    7.4: RESULTS.md)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..indexing.doc_ids import rank_ids

    n = sum(ix.n_docs for ix in indexes)
    if n >= 1 << 32:
        raise SsrError("id ranks need fewer than 2**32 documents")
    every = pa.concat_arrays([ix.doc_id_array().cast(pa.large_string()) for ix in indexes])
    rank = rank_ids(every, integer)
    in_order = np.empty(n, dtype=np.int64)
    in_order[rank] = np.arange(n, dtype=np.int64)
    ordered = every.take(pa.array(in_order))
    repeats = np.flatnonzero(np.asarray(pc.equal(ordered.slice(0, n - 1), ordered.slice(1)))) if n > 1 else np.zeros(0)
    repeat = None if repeats.shape[0] == 0 else ordered[int(repeats[0])].as_py()
    return np.split(rank, np.cumsum([ix.n_docs for ix in indexes])[:-1]), repeat


def add_ranks(root: str | os.PathLike[str]) -> bool:
    """Give a sharded index built before id ranks existed its rank slices, and republish its manifest
    (under the writer lock; nothing else changes). False when it has them already."""
    from dataclasses import replace

    from ..generations import WriterLock

    root = Path(root).absolute()
    with WriterLock(root):
        m = read_manifest(root)
        if m.ranked:
            return False
        opened = []
        try:
            for i in range(len(m.shards)):
                opened.append(open_shard(root, m, i)[0])
            ranks, _ = id_ranks(opened, m.integer)
        finally:
            for ix in opened:
                ix.close()
        entries = []
        for entry, rank in zip(m.shards, ranks, strict=True):
            name = entry.weights.replace("-weights-", "-ranks-")
            entries.append(replace(entry, ranks=name, ranks_sha256=save_table(root / name, rank, np.uint32)))
        write_manifest(root, replace(m, shards=tuple(entries)))
    return True


def open_shard(root: Path, manifest: ShardManifest, i: int) -> tuple[Index, np.ndarray]:
    """Shard i's index and weight slice (memory-mapped), checked against the manifest."""
    entry = manifest.shards[i]
    index = open_index(root / entry.name)
    try:
        assert index.commit is not None
        refs = index.commit.segments
        if len(refs) != 1 or refs[0].manifest_sha256 != entry.manifest_sha256:
            raise IndexFormatError(f"{root / entry.name}: not the shard {root / MANIFEST} records (changed since "
                                   "the sharded build; rebuild it)")
        if index.n_terms != entry.terms or index.n_docs != entry.documents:
            raise IndexFormatError(f"{root / entry.name}: {index.n_terms} terms and {index.n_docs} documents, "
                                   f"not the {entry.terms} and {entry.documents} {root / MANIFEST} records")
        table = _load_slice(root / entry.weights, np.int64, index.n_terms, "weight table")
    except BaseException:
        index.close()
        raise
    return index, table


def load_hashes(path: Path, ix: Index) -> np.ndarray:
    """A shard build's full hashes of its terms (`build_index(term_hashes=...)`), memory-mapped;
    `IndexFormatError` unless they are uint64[V] and give the shard's vocabulary keys."""
    hashes = _load_slice(path, np.uint64, ix.n_terms, "term hashes")
    if not np.array_equal(ix.keys_of(hashes), ix.vocab):
        raise IndexFormatError(f"{path}: not the hashes of {ix.path}'s vocabulary (corrupt)")
    return hashes.view(np.ndarray)


def global_tables(indexes: list[Index], hashes: list[np.ndarray] | None = None) -> tuple[list[np.ndarray], list[str]]:
    """The weight table's slices (global df of each shard's terms) and the cross-shard hash collisions found.

    Shards share the hash seed, so one signal has one hash everywhere; a hash held by two shards
    is one signal only when its strings agree (a collision is reported, never summed). Each shard's full
    hashes (`hashes`, as the shard builds wrote them: `load_hashes`; else computed from the strings,
    `Index.hashes`), then per pair of shards one merge pass (`kernels.shards.match_sorted`) and the shared
    hashes' strings compared through their codes (`kernels.strings.terms_equal`, their entries checked
    first), both on the cores (the kernels release the GIL). Gathering the strings per pair and hashing
    from gathered strings took 41.5 s of the 8.8M sharded build (RESULTS.md).
    """
    from concurrent.futures import ThreadPoolExecutor

    from ..kernels.shards import match_sorted
    from ..kernels.strings import first_unsound, terms_equal

    tables = [ix.df().astype(np.int64) for ix in indexes]
    own = [t.copy() for t in tables]
    collisions: list[str] = []
    strings = [(ix.signal_bytes.view(np.ndarray), ix.signal_offsets.view(np.ndarray),
                ix.signal_codes.view(np.ndarray), ix.string_bits) for ix in indexes]
    workers = max(1, min(len(indexes), os.cpu_count() or 1))
    pairs = [(s, t) for s in range(len(indexes)) for t in range(s + 1, len(indexes))]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        full = hashes if hashes is not None else list(pool.map(lambda ix: ix.hashes(), indexes))

        def checked(s: int, terms: np.ndarray) -> np.ndarray:
            """`terms` of shard s, their string entries checked (`terms_equal` reads through them)."""
            bad = first_unsound(strings[s][1], strings[s][0].shape[0], strings[s][2], strings[s][3], terms)
            if bad >= 0:
                indexes[s].strings_of(terms[bad : bad + 1])  # raises, naming the file
            return terms

        def matched(pair: tuple[int, int]) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
            """(s, t, the terms of s whose hash t holds, t's terms of them, whether their strings agree)."""
            s, t = pair
            pos = match_sorted(full[s], full[t])
            hit = checked(s, np.flatnonzero(pos >= 0))
            at = checked(t, pos[hit])
            return s, t, hit, at, terms_equal(*strings[s], hit, *strings[t], at)

        for a in range(0, len(pairs), workers):  # a few pairs at a time: each holds its matches
            for s, t, hit, at, same in pool.map(matched, pairs[a : a + workers]):
                if not same.all():
                    j = int(np.flatnonzero(~same)[0])
                    x, y = indexes[s], indexes[t]
                    collisions.append(f"{x.signal(int(hit[j]))!r} ({x.path}) and {y.signal(int(at[j]))!r} ({y.path}) "
                                      f"share hash {int(full[s][hit[j]]):#x}")
                    continue
                tables[s][hit] += own[t][at]
                tables[t][at] += own[s][hit]
    return tables, collisions


def total_tokens(indexes: list[Index]) -> int:
    """Tokens of every document (BM25 indexes; 0 for SSR ones)."""
    return sum(int(np.asarray(ix.doc_lengths).sum(dtype=np.int64)) for ix in indexes if ix.doc_lengths is not None)


def verify_sharded(root: str | os.PathLike[str]) -> list[str]:
    """The full check of a sharded index: manifest, every shard (`format.verify_index`), every weight
    slice's sha256, and the table recomputed from the shards; the problems found (empty: sound)."""
    root = Path(root)
    try:
        manifest = read_manifest(root)
    except IndexFormatError as exc:
        return [str(exc)]
    problems: list[str] = []
    for entry in manifest.shards:
        problems += verify_index(root / entry.name)
        for name, sha in ((entry.weights, entry.weights_sha256), (entry.ranks, entry.ranks_sha256)):
            if name is None:
                continue
            w = root / name
            if not w.is_file():
                problems.append(f"{w}: missing")
            elif sha256_file(w) != sha:
                problems.append(f"{w}: checksum mismatch (corrupt)")
    if problems:
        return problems
    opened: list[Index] = []
    try:
        stored = []
        for i in range(len(manifest.shards)):
            ix, table = open_shard(root, manifest, i)
            opened.append(ix)
            stored.append(table)
        tables, collisions = global_tables(opened)
        problems += [f"{root}: hash collision across shards: {c}" for c in collisions]
        for entry, mine, theirs in zip(manifest.shards, tables, stored, strict=True):
            if not np.array_equal(mine, theirs):
                problems.append(f"{root / entry.weights}: differs from the df recomputed from the shards")
        ranks, repeat = id_ranks(opened, manifest.integer)
        if repeat is not None:
            problems.append(f"{root}: document id {repeat!r} is held by two shards")
        if manifest.ranked:
            for i, mine in enumerate(ranks):
                if not np.array_equal(mine, np.asarray(open_ranks(root, manifest, i))):
                    problems.append(f"{root / str(manifest.shards[i].ranks)}: differs from the id order of the "
                                    "shards' ids")
        n = sum(ix.n_docs for ix in opened)
        if n != manifest.documents or total_tokens(opened) != manifest.tokens:
            problems.append(f"{root / MANIFEST}: N or token count differs from the shards'")
        if integer_ids(opened) != manifest.integer:
            problems.append(f"{root / MANIFEST}: the id order differs from the shards' ids")
    except (IndexFormatError, SsrError) as exc:
        problems.append(str(exc))
    finally:
        for ix in opened:
            ix.close()
    return problems


def integer_ids(indexes: list[Index]) -> bool:
    """The collection's id order: integers only when every shard's ids all are (`ids`)."""
    return all(bool(ix.manifest.ids.get("integer")) for ix in indexes)
