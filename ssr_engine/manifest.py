"""A segment's manifest (part of the format, `format`): the typed `Manifest`, sealed with its
own checksum, holding the format version, counts, signal settings, build parameters and a record
(bytes, sha256) of every other file of the segment. Nobody else reads manifest JSON.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .atomic import sha256_file
from .errors import IndexFormatError
from .generations import SEGMENT_MANIFEST, seal, unseal

FORMAT_NAME = "ssr-index"
FORMAT_VERSION = 7
# 2: offsets always int64; 3: offsets int32 when they fit; 4: compact signal strings (signal_codes);
# 5: forward rows bit-packed (`kernels.forward`); 6: postings bit-packed (`Index.postings`);
# 7: no offset for a term of df 1 (`kernels.lists`: postings_long, postings_rank)
READABLE_VERSIONS = (2, 3, 4, 5, 6, 7)
MANIFEST = SEGMENT_MANIFEST


@dataclass(frozen=True)
class Counts:
    documents: int
    terms: int
    postings: int
    empty_documents: int = 0


@dataclass(frozen=True)
class HashSettings:
    name: str
    seed: int
    bits: int = 64
    collision_policy: str = ""
    collisions: tuple[Any, ...] = ()


@dataclass(frozen=True)
class SignalSettings:
    """What a query must be processed with: the index's own settings (DESIGN.md 1 and 3)."""

    stopwords_id: str
    stopwords_sha256: str
    stopwords: tuple[str, ...]
    cap: int | None
    bigrams: bool
    stem: bool
    hash: HashSettings


@dataclass(frozen=True)
class FileRecord:
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A segment's manifest, typed. Free-form build metadata (`ids`, `input`, `build`) stays as dicts."""

    scoring: str
    counts: Counts
    signals: SignalSettings
    ids: dict[str, Any] = field(default_factory=dict)
    input: dict[str, Any] = field(default_factory=dict)
    build: dict[str, Any] = field(default_factory=dict)
    files: dict[str, FileRecord] = field(default_factory=dict)
    extra_files: dict[str, str] = field(default_factory=dict)
    doc_store: dict[str, Any] | None = None  # `docstore`: the stored texts (--store-text), or None
    format_version: int = FORMAT_VERSION  # the layout of the segment's files (read from the manifest)

    def to_dict(self) -> dict[str, Any]:
        """The JSON body (without format keys and checksum)."""
        from dataclasses import replace

        s = self.signals
        # the word lists go in as lists, never through asdict's deep copy (hundreds of words: ~3 ms a write)
        d = asdict(replace(self, signals=replace(s, stopwords=(), hash=replace(s.hash, collisions=()))))
        d["signals"]["stopwords"] = list(s.stopwords)
        d["signals"]["hash"]["collisions"] = list(s.hash.collisions)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: object = "manifest") -> Manifest:
        """Parse and type-check a manifest body; `IndexFormatError` naming `where` on any defect."""
        try:
            c, s = data["counts"], data["signals"]
            h = s["hash"]
            counts = Counts(_int(c, "documents"), _int(c, "terms"), _int(c, "postings"),
                            _int(c, "empty_documents") if "empty_documents" in c else 0)
            stop = s["stopwords"]
            if not isinstance(stop, list) or not all(isinstance(w, str) for w in stop):
                raise ValueError("signals.stopwords must be a list of strings")
            cap = s["cap"]
            if cap is not None and (type(cap) is not int or cap < 1):
                raise ValueError(f"signals.cap must be a positive integer or null, got {cap!r}")
            bits = _int(h, "bits")
            if not 1 <= bits <= 64:
                raise ValueError(f"signals.hash.bits must be in 1..64, got {bits}")
            seed = _int(h, "seed")
            if seed >= 2**64:
                raise ValueError(f"signals.hash.seed out of range: {seed}")
            for key in ("bigrams", "stem"):
                if type(s[key]) is not bool:
                    raise ValueError(f"signals.{key} must be true or false")
            settings = SignalSettings(
                str(s["stopwords_id"]), str(s["stopwords_sha256"]), tuple(stop), cap, s["bigrams"], s["stem"],
                HashSettings(str(h["name"]), seed, bits, str(h.get("collision_policy", "")),
                             tuple(h.get("collisions", ()))),
            )
            scoring = data["scoring"]
            if scoring not in ("ssr", "bm25"):
                raise ValueError(f"scoring must be ssr or bm25, got {scoring!r}")
            files = {str(n): FileRecord(_int(r, "bytes"), str(r["sha256"])) for n, r in data.get("files", {}).items()}
            extra = {str(n): str(f) for n, f in data.get("extra_files", {}).items()}
            store = data.get("doc_store")
            if store is not None and not isinstance(store, dict):
                raise ValueError("doc_store must be an object or null")
            version = data.get("format_version", FORMAT_VERSION)
            if version not in READABLE_VERSIONS:
                raise ValueError(f"format_version {version!r} is not one of {READABLE_VERSIONS}")
            return cls(scoring, counts, settings, dict(data.get("ids", {})), dict(data.get("input", {})),
                       dict(data.get("build", {})), files, extra, store, version)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise IndexFormatError(f"{where}: corrupt manifest ({detail})") from exc


def _int(d: dict[str, Any], key: str) -> int:
    v = d[key]
    if type(v) is not int or v < 0:
        raise ValueError(f"{key} must be a non-negative integer, got {v!r}")
    return v


def file_record(directory: Path, name: str) -> FileRecord:
    path = directory / name
    return FileRecord(path.stat().st_size, sha256_file(path))


SMALL_SEGMENT = 1 << 23  # bytes: below, a manifest's file records are hashed on the calling thread

# files of a segment that the manifest does not list: itself, and the readers' lock
_UNLISTED = (MANIFEST, "readers.lock")


def write_manifest(directory: Path, manifest: Manifest, sync: bool = True) -> Manifest:
    """Write a segment's manifest.json, sealed, with a record (size, sha256) of every other file
    (`sync`: atomically and fsynced; without, plainly: a staged folder published by one rename)."""
    from .atomic import write_text

    names = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name not in _UNLISTED)
    missing = [n for n in manifest.extra_files if n not in names]
    if missing:
        raise ValueError(f"extra files not in the segment: {missing}")
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    # hashlib releases the GIL on large blocks: the files are hashed on all cores (gigabytes at 8.8M)
    sizes = {n: (directory / n).stat().st_size for n in names}
    by_size = sorted(names, key=lambda n: -sizes[n])
    if sum(sizes.values()) < SMALL_SEGMENT:  # a small segment (a live write): threads cost more than hashing
        records = {n: file_record(directory, n) for n in by_size}
    else:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            records = dict(zip(by_size, pool.map(lambda n: file_record(directory, n), by_size), strict=True))
    # a writer writes the current layout, whatever manifest it started from (a live segment: its base's)
    manifest = replace(manifest, files={n: records[n] for n in names}, format_version=FORMAT_VERSION)
    body = {"format": FORMAT_NAME, **manifest.to_dict()}
    if sync:
        write_text(directory / MANIFEST, seal(body))
    else:
        (directory / MANIFEST).write_text(seal(body), encoding="utf-8", newline="\n")
    return manifest


def read_manifest(segment: Path, sha256: str | None = None) -> Manifest:
    """A segment's manifest, checked: seal, format, version, types, and `sha256` when the commit gives it."""
    path = segment / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise IndexFormatError(f"{path}: missing") from exc
    except OSError as exc:
        raise IndexFormatError(f"{path}: unreadable ({exc.strerror})") from exc
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise IndexFormatError(f"{path}: differs from the checksum in the commit point (edited or corrupt)")
    body = unseal(path, raw)
    if body.get("format") != FORMAT_NAME:
        raise IndexFormatError(f"{path}: not an ssr index manifest")
    if body.get("format_version") not in READABLE_VERSIONS:
        raise IndexFormatError(
            f"{path}: index format version {body.get('format_version')!r}, this ssr_engine reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}; rebuild the index (ssr build-index ... --force)"
        )
    return Manifest.from_dict(body, path)
