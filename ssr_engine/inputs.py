"""How an input is opened: files compressed with gzip, bzip2, xz or zstd are recognised by their
magic bytes, whatever their name; `irds:NAME` is an ir_datasets dataset. `corpus` reads what
these open into chunks; `eval.trec` reads queries and qrels through them too.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from pathlib import Path
from typing import IO, Any, cast

from .errors import InputError, SsrError

# documents per in-memory chunk, the default of every build, `add` and compaction: it sets the memory a
# build needs (not the collection's size); here, where the CLI's parsers can read it without NumPy
CHUNK_DOCS = 100_000

# (magic bytes, name): how compressed input is recognised, by content rather than by file name
MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")
DECOMPRESS_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError)


def sniff_compression(path: str | Path) -> str | None:
    """'gzip', 'bzip2', 'xz' or 'zstd' from the file's first bytes; None for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror}") from exc
    for magic, name in MAGIC:
        if head.startswith(magic):
            return name
    return None


def open_input(path: str | Path) -> tuple[IO[bytes], IO[bytes]]:
    """(decompressed byte stream, the raw file under it) for a file, compressed or not.

    The raw file's position tells how much of the input has been consumed (progress).
    """
    path = Path(path)
    kind = sniff_compression(path)
    raw = open(path, "rb")  # noqa: SIM115 (closed by the caller, with the stream)
    if kind is None:
        return raw, raw
    if kind == "gzip":
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")), raw
    if kind == "bzip2":
        return bz2.BZ2File(raw, "rb"), raw
    if kind == "xz":
        return lzma.LZMAFile(raw, "rb"), raw
    try:
        import zstandard
    except ImportError:
        raw.close()
        raise InputError(path, None, "zstd-compressed input needs the 'zstandard' package") from None
    return zstandard.ZstdDecompressor().stream_reader(raw), raw


BOM = b"\xef\xbb\xbf"


def starts_with_bom(path: str | Path) -> bool:
    """Whether the (decompressed) input starts with a UTF-8 byte order mark, which the readers strip."""
    stream, raw = open_input(Path(path))
    with raw, stream as f:
        try:
            return f.read(len(BOM)) == BOM
        except DECOMPRESS_ERRORS:
            return False  # the reader reports it, with the line


def irds_dataset(name: str) -> Any:
    """The ir_datasets dataset `name` (with or without the `irds:` prefix); SsrError if unavailable."""
    name = name[5:] if name.startswith("irds:") else name
    try:
        import ir_datasets
    except ImportError:
        raise SsrError(f"irds:{name}: needs ir_datasets (pip install 'ssr_engine[irds]')") from None
    try:
        return ir_datasets.load(name)
    except KeyError:
        raise SsrError(f"irds:{name}: no such ir_datasets dataset") from None


def detect_format(path: str | Path) -> str:
    """'jsonl' or 'tsv': by the name (.jsonl/.json/.ndjson, .tsv/.txt, a compression suffix
    aside), else by the content (a first non-blank byte `{` is JSONL)."""
    name = Path(path).name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    suffix = os.path.splitext(name)[1]
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".tsv", ".txt"):
        return "tsv"
    stream, raw = open_input(path)
    with raw, stream:
        try:
            head = stream.read(4096)
        except DECOMPRESS_ERRORS as exc:
            raise InputError(path, None, f"cannot decompress ({exc})") from None
    return "jsonl" if head.lstrip().startswith(b"{") else "tsv"
