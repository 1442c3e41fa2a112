"""The terms of an index segment by their strings (part of the format, `format`): vocabulary keys,
full hashes, one-term look-up and the signal strings of format 4 (`kernels.strings`).

`TermTable` is a base of `format.Index`: it reads the index's vocab, signal_offsets,
signal_bytes, signal_codes and settings, and checks (`validate.check_terms`) before it reads a
term's entries.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .errors import IndexFormatError

if TYPE_CHECKING:
    from .format import Index
    from .manifest import Manifest, SignalSettings


class TermTable:
    """Term strings, keys and hashes of an index segment (a base of `format.Index`)."""

    path: Path
    manifest: Manifest
    vocab: np.ndarray
    signal_offsets: np.ndarray
    signal_bytes: np.ndarray
    signal_codes: np.ndarray

    @property
    def _index(self) -> Index:
        return cast("Index", self)  # the validate functions take the whole index

    @property
    def n_terms(self) -> int:
        return int(self.vocab.shape[0])

    @property
    def settings(self) -> SignalSettings:
        return self.manifest.signals

    @cached_property
    def string_bits(self) -> int:
        """Bits per table entry in a signal code; 0 when there are no codes (term t is literal t)."""
        from .kernels.strings import string_bits

        return string_bits(self.signal_offsets.shape[0] - 1) if self.signal_codes.shape[0] else 0

    def keys_of(self, hashes: np.ndarray) -> np.ndarray:
        """The vocabulary keys of signal hashes: `hashing.vocab_keys` (format 4), the hashes (2, 3)."""
        from .hashing import vocab_keys

        if self.vocab.dtype == np.uint64:
            return np.ascontiguousarray(hashes, dtype=np.uint64)
        return vocab_keys(hashes, self.settings.hash.bits)

    def hashes(self) -> np.ndarray:
        """Every term's full signal hash, uint64[V]. Format 4 keeps 32 bits of it in the vocabulary: hashed
        again from the strings, read through their codes (`kernels.strings.term_hashes`, which checks every
        term's string entries: a corrupt one is an `IndexFormatError` naming the file)."""
        from .hashing import hash_mask
        from .kernels.strings import term_hashes
        from .validate import check_terms

        if self.vocab.dtype == np.uint64:
            return np.asarray(self.vocab)
        h = self.settings.hash
        out, bad = term_hashes(self.signal_bytes.view(np.ndarray), self.signal_offsets.view(np.ndarray),
                               self.signal_codes.view(np.ndarray), self.string_bits, self.n_terms, np.uint64(h.seed),
                               hash_mask(h.bits))
        if bad >= 0:
            check_terms(self._index, np.array([bad], dtype=np.int64))  # names the file and the entries at fault
            raise IndexFormatError(f"{self.path}: term {bad}'s string is out of range (corrupt index; rebuild it)")
        return out

    def term_of(self, signal: str) -> int:
        """The term id of one signal string, or -1 (the look-up of `search.lookup_terms`, one at a time)."""
        from .hashing import signal_hash
        from .validate import term_candidates

        h = self.settings.hash
        for t in term_candidates(self._index, self.keys_of(np.array([signal_hash(signal, h.seed, h.bits)]))).tolist():
            if self.signal(t) == signal:
                return t
        return -1

    def strings_of(self, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The signal strings of term ids (checked first) as (offsets int64[m + 1], bytes uint8)."""
        from .kernels.strings import gather
        from .validate import check_terms

        terms = np.ascontiguousarray(terms, dtype=np.int64)
        check_terms(self._index, terms)
        return gather(self.signal_bytes.view(np.ndarray), self.signal_offsets.view(np.ndarray),
                      self.signal_codes.view(np.ndarray), self.string_bits, terms)

    def signal(self, term: int) -> str:
        """The string of term id `term`; an id or offsets out of range, or bytes that are not UTF-8,
        raise `IndexFormatError`."""
        if not 0 <= term < self.n_terms:
            raise IndexFormatError(f"{self.path}: term id {term} out of range 0..{self.n_terms - 1} (corrupt index)")
        _, data = self.strings_of(np.array([term], dtype=np.int64))
        try:
            return data.tobytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IndexFormatError(f"{self.path / 'signal_bytes.npy'}: the string of term {term} is not UTF-8 "
                                   "(corrupt index)") from exc

    def signal_table(self) -> Any:
        """Every term as an Arrow table (hash uint64, signal string), row = term id.

        Every string decoded (the whole table in memory), for tools and debugging."""
        import pyarrow as pa

        from .validate import check_signal_offsets

        check_signal_offsets(self._index)  # every term's code and table offsets, before the gather reads them
        offsets, data = self.strings_of(np.arange(self.n_terms, dtype=np.int64))
        strings = pa.Array.from_buffers(pa.large_string(), self.n_terms, [None, pa.py_buffer(offsets),
                                                                         pa.py_buffer(data)])
        return pa.table({"hash": pa.array(self.hashes()), "signal": strings})
