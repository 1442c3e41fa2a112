"""Structural validation of an opened index: corruption is an error, never a crash.

Three tiers, so that what open reads stays small (the O(V) arrays are 240 MB each at 30M terms):

- at every open (`check_index`, from `format.open_segment`): the O(N) and O(1) invariants:
  forward_indptr from 0 to its data's length and never decreasing, doc_rank a permutation of
  0..N-1, postings_indptr and signal_offsets starting at 0 and ending at their data's length;
- per looked-up term (`find_terms`, `check_terms`, called by every term lookup before a kernel
  reads the term's rows): the vocabulary blocks the binary search reads are strictly sorted
  (checked once per block, remembered on the index), the term's postings are in range with
  df <= N, and its signal code names table strings whose offsets are in range. A query thus
  never reads an offset nobody checked;
- `full=True` (`ssr verify`, `Searcher(..., verify=True)`, `ssr search --verify`): the whole
  O(V) arrays (offsets monotone, vocabulary strictly sorted) and the O(P) ones: every posting
  list strictly ascending with ids < N, every forward row strictly ascending with term ids < V,
  term frequencies >= 1, every term's code sound and its string hashing to its vocabulary entry.

`verify_index` (`ssr verify`) adds every file's sha256 against the manifests to `full=True`.

What neither open nor the lookup reads (posting and forward contents) the kernels guard as they
read it (`kernels.candidates.CorruptIndexData`), so an index that lies still cannot make a kernel
read out of bounds; `kernel_guard` turns that into an error naming the index.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import IndexFormatError

if TYPE_CHECKING:
    from .format import Index

VOCAB_BLOCK_SHIFT = 12  # vocabulary blocks of 4,096 entries (32 KB) are checked on first use


def _fail(index: Index, name: str, what: str) -> IndexFormatError:
    return IndexFormatError(f"{index.path / (name + '.npy')}: {what} (corrupt index; rebuild it)")


def _ends(index: Index, name: str, indptr: np.ndarray, length: int, what: str) -> None:
    if indptr.shape[0] == 0:
        raise _fail(index, name, "no offsets")
    first, last = int(indptr[0]), int(indptr[-1])
    if first != 0 or last != length:
        raise _fail(index, name, f"offsets must run from 0 to {length} ({what}); found {first}..{last}")


# below this many entries the checks run in NumPy: no kernel to load for the small segments a
# live index opens often
_SMALL = 1 << 16


def _first(bad: np.ndarray) -> int:
    hits = np.flatnonzero(bad)
    return int(hits[0]) if hits.shape[0] else -1


def _offsets(index: Index, name: str, indptr: np.ndarray, length: int, what: str) -> None:
    from .kernels.validate import descent

    _ends(index, name, indptr, length, what)
    i = descent(indptr, False) if indptr.shape[0] > _SMALL else _first(np.diff(indptr) < 0)
    if i >= 0:
        raise _fail(index, name, f"offsets decrease at entry {i + 1} ({int(indptr[i])} then {int(indptr[i + 1])})")


def check_signal_offsets(index: Index) -> None:
    """The whole string table and every term's code (open checks only the table's ends): before
    reading every term's string."""
    from .kernels.strings import first_unsound_range

    _offsets(index, "signal_offsets", index.signal_offsets, index.signal_bytes.shape[0], "signal bytes")
    t = first_unsound_range(index.signal_offsets.view(np.ndarray), index.signal_bytes.shape[0],
                            index.signal_codes.view(np.ndarray), index.string_bits, 0, index.n_terms)
    if t >= 0:
        raise _fail(index, "signal_codes", f"the code of term {t} names no string of the table")


def check_signal_hashes(index: Index, chunk: int = 1 << 20) -> None:
    """Every term's string hashes to its vocabulary entry (`verify`): a flipped code or string byte
    cannot pass for another signal."""
    from .hashing import hash_mask, hash_spans

    h = index.settings.hash
    for lo in range(0, index.n_terms, chunk):
        terms = np.arange(lo, min(lo + chunk, index.n_terms), dtype=np.int64)
        offsets, data = index.strings_of(terms)
        full = hash_spans(data, offsets, np.uint64(h.seed), hash_mask(h.bits))
        bad = np.flatnonzero(index.keys_of(full) != index.vocab[terms])
        if bad.shape[0]:
            t = lo + int(bad[0])
            name = "signal_codes" if index.string_bits else "signal_bytes"
            raise _fail(index, name, f"the string of term {t} does not hash to its vocabulary entry")


def _lists(index: Index) -> int:
    """Check format 7's postings directory (`kernels.lists`) in O(V / 64): every rank the popcount of the
    words before it, no bit past V, one offset per long term and one more; return the postings that
    postings_indptr covers (those of the long terms; every posting before format 7)."""
    long, rank = index.postings_long, index.postings_rank
    if long is None or rank is None:
        return index.postings_length
    v = index.n_terms
    counts = np.bitwise_count(long.view(np.ndarray))
    if v & 63 and long.shape[0] and int(long[-1]) >> (v & 63):
        raise _fail(index, "postings_long", f"bits set past the last term ({v})")
    expected = np.zeros(long.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=expected[1:])
    i = _first(rank != expected)
    if i >= 0:
        raise _fail(index, "postings_long", f"the bits before word {i} count {int(expected[i])}, but entry {i} of "
                                            f"postings_rank.npy says {int(rank[i])}")
    n_long = int(expected[-1])
    if index.postings_indptr.shape[0] != n_long + 1:
        raise _fail(index, "postings_indptr", f"{index.postings_indptr.shape[0]} entries for {n_long} terms of df != 1")
    return index.postings_length - (v - n_long)


def check_index(index: Index, full: bool = False) -> None:
    """Raise `IndexFormatError` naming the file and entry of the first structural defect found."""
    from .kernels import validate as kv

    n, v = index.n_docs, index.n_terms
    long_postings = _lists(index)
    _ends(index, "postings_indptr", index.postings_indptr, long_postings, "postings")
    _ends(index, "signal_offsets", index.signal_offsets, index.signal_bytes.shape[0], "signal bytes")
    _offsets(index, "forward_indptr", index.forward_indptr, index.forward_length, "forward terms")
    i = -1 if index.manifest.ids.get("rank") == "identity" else kv.permutation(index.doc_rank)  # else built: arange
    if i >= 0:
        raise _fail(index, "doc_rank", f"not a permutation of 0..{n - 1} (entry {i} = {int(index.doc_rank[i])})")
    if not full:
        return
    _offsets(index, "postings_indptr", index.postings_indptr, long_postings, "postings")
    check_signal_offsets(index)
    vocab = index.vocab
    strict = vocab.dtype == np.uint64  # hashes (formats 2, 3); format 4's 32-bit keys may repeat
    _vocab_defect(index, kv.descent(vocab, strict) if vocab.shape[0] > _SMALL else
                  _first(vocab[1:] <= vocab[:-1] if strict else vocab[1:] < vocab[:-1]))
    row = kv.rows_ascending_below(index.lists, index.postings, np.int64(n), np.int64(v))
    if row >= 0:
        raise _fail(index, "postings_docs", f"the postings of term {row} are not strictly ascending ids < {n}")
    row = kv.rows_ascending_below(index.forward_indptr, index.forward, np.int64(v), np.int64(n))
    if row >= 0:
        raise _fail(index, "forward_terms", f"the terms of document {row} are not strictly ascending ids < {v}")
    if index.postings_tf is not None:
        i = kv.first_zero(index.postings_tf)
        if i >= 0:
            raise _fail(index, "postings_tf", f"term frequency 0 at entry {i}")
    check_signal_hashes(index)


def _vocab_defect(index: Index, i: int) -> None:
    if i >= 0:
        raise _fail(index, "vocab", f"not sorted at entry {i + 1}")


def find_terms(index: Index, keys: np.ndarray) -> np.ndarray:
    """Vocabulary positions of keys (`Index.keys_of`; `np.searchsorted`, side left), int64[len(keys)].

    Every vocabulary block the search reads is checked sorted on first use (remembered on the
    index); a defect raises `IndexFormatError`.
    """
    from .kernels.validate import search_checked

    pos, bad = search_checked(index.vocab, np.ascontiguousarray(keys, dtype=index.vocab.dtype),
                              checked_blocks(index), VOCAB_BLOCK_SHIFT, index.vocab.dtype == np.uint64)
    _vocab_defect(index, int(bad))
    return pos


def term_candidates(index: Index, keys: np.ndarray) -> np.ndarray:
    """Every vocabulary entry holding one of `keys` (their blocks checked), int64: the terms whose
    strings a look-up compares."""
    from .kernels.validate import block_sound

    vocab, checked = index.vocab, checked_blocks(index)
    found = []
    for key, p in zip(keys.tolist(), find_terms(index, keys).tolist(), strict=True):
        while p < vocab.shape[0] and int(vocab[p]) == key:
            _vocab_defect(index, int(block_sound(vocab, p >> VOCAB_BLOCK_SHIFT, VOCAB_BLOCK_SHIFT, checked,
                                                 vocab.dtype == np.uint64)))
            found.append(p)
            p += 1
    return np.array(found, dtype=np.int64)


def checked_blocks(index: Index) -> np.ndarray:
    """uint8 per vocabulary block of `index`: 1 once found strictly sorted (kept on the index)."""
    if index._vocab_checked is None:
        index._vocab_checked = np.zeros((index.n_terms >> VOCAB_BLOCK_SHIFT) + 1, dtype=np.uint8)
    return index._vocab_checked


def check_terms(index: Index, terms: np.ndarray) -> None:
    """Raise unless every term id (int64, in 0..V-1) has in-range postings (df <= N) and signal offsets.

    The per-query share of the open-time checks: a kernel may then read these terms' rows.
    """
    from .kernels.strings import first_unsound, parts

    terms = np.ascontiguousarray(terms, dtype=np.int64)
    if terms.shape[0] == 0:
        return
    length = index.postings_length
    lists = index.lists
    if isinstance(lists, tuple):
        from .kernels.lists import spans

        a, b = spans(lists, terms)
    else:
        a = np.asarray(lists[terms], dtype=np.int64)
        b = np.asarray(lists[terms + 1], dtype=np.int64)
    bad = np.flatnonzero((a < 0) | (b < a) | (b > length) | (b - a > index.n_docs))
    if bad.shape[0]:
        t = int(terms[bad[0]])
        raise _fail(index, "postings_indptr", f"term {t}'s postings ({int(a[bad[0]])}, {int(b[bad[0]])}) are out "
                                              f"of order or past {length}")
    codes, bits = index.signal_codes.view(np.ndarray), index.string_bits
    i = first_unsound(index.signal_offsets.view(np.ndarray), index.signal_bytes.shape[0], codes, bits, terms)
    if i >= 0:
        t = int(terms[i])
        left, right = parts(codes, bits, t)
        if left >= index.signal_offsets.shape[0] - 1 or right >= index.signal_offsets.shape[0] - 1:
            raise _fail(index, "signal_codes", f"the code of term {t} names no string of the table")
        raise _fail(index, "signal_offsets", f"the entries of term {t}'s string ({left}, {right}) are out of order "
                                             f"or past {index.signal_bytes.shape[0]}")


def verify_opened(index: Index) -> None:
    """`verify_index` for an opened index (its root) plus the O(postings) structural checks; raises."""
    if index.root is not None:
        problems = verify_index(index.root)
        if problems:
            raise IndexFormatError("; ".join(problems[:5]))
    check_index(index, full=True)


def verify_index(path: str | os.PathLike[str]) -> list[str]:
    """The full check: owner marker, commit point, manifests and every file's sha256; problems found (empty: sound)."""
    from .atomic import sha256_file
    from .format import open_segment, resolve_index
    from .generations import open_commit
    from .manifest import read_manifest

    try:
        root = resolve_index(path)
        commit, holds = open_commit(root)
    except IndexFormatError as exc:
        return [str(exc)]
    problems: list[str] = []
    try:
        for ref in commit.segments:
            directory = root / ref.name
            try:
                manifest = read_manifest(directory, ref.manifest_sha256)
            except IndexFormatError as exc:
                problems.append(str(exc))
                continue
            for name, record in sorted(manifest.files.items()):
                p = directory / name
                if not p.is_file():
                    problems.append(f"{p}: missing")
                elif p.stat().st_size != record.bytes:
                    problems.append(f"{p}: {p.stat().st_size} bytes, expected {record.bytes}")
                elif sha256_file(p) != record.sha256:
                    problems.append(f"{p}: checksum mismatch (corrupt)")
            if ref.deletes is not None:  # a live index's deletion file, checksummed in the commit point
                p = directory / ref.deletes
                if not p.is_file():
                    problems.append(f"{p}: missing")
                elif sha256_file(p) != ref.deletes_sha256:
                    problems.append(f"{p}: checksum mismatch (corrupt)")
            if not problems:
                try:
                    open_segment(directory, ref.manifest_sha256, full=True)._id_file.close()
                except IndexFormatError as exc:
                    problems.append(str(exc))
    finally:
        for h in holds:
            h.close()
    return problems


def check_id_table(segment: Path, hashes: np.ndarray, doc: np.ndarray, offsets: np.ndarray, data: np.ndarray,
                   n: int) -> None:
    """Raise unless a live segment's id table (`live_files.IdTable`) is sound for its n documents: the sizes,
    offsets from 0 ascending to the data's end, hashes ascending, doc a permutation (O(N) vector passes)."""
    from .kernels.validate import permutation

    h, off = np.asarray(hashes), np.asarray(offsets)
    problem = None
    if h.shape[0] != n or doc.shape[0] != n or off.shape[0] != n + 1 or int(off[-1]) != data.shape[0]:
        problem = f"sizes differ from the segment's {n} documents"
    elif int(off[0]) != 0 or bool(np.any(off[1:] < off[:-1])):
        problem = "offsets out of order"
    elif bool(np.any(h[1:] < h[:-1])):
        problem = "hashes out of order"
    elif permutation(np.asarray(doc)) >= 0:
        problem = "doc is not a permutation"
    if problem is not None:
        raise IndexFormatError(f"{segment}: corrupt id table ({problem})")


@contextmanager
def kernel_guard(index: Index) -> Iterator[None]:
    """Turn a kernel's bounds-guard report into an `IndexFormatError` naming the index."""
    from .kernels.candidates import CorruptIndexData

    try:
        yield
    except CorruptIndexData as exc:
        where = index.root or index.path
        raise IndexFormatError(f"{index.path}: {exc} (corrupt index; `ssr verify {where}` checks every file; "
                               "rebuild it)") from None
