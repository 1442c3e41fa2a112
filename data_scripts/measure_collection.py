"""Measure a collection.tsv the way the index will see it, and extrapolate to MS MARCO's size.

    python data_scripts/measure_collection.py DIR/collection.tsv [--limit N] [--checkpoints 100000,1000000]

Counts, over the first N passages, with SSR's own signal extraction (the Numba path that
`ssr_engine.signals_many` wraps; stopwords ssr-stopwords-v1, cap 64): distinct words (tokens
of 2+ characters, no stopwords, no cap), distinct unigram and bigram signals, and postings
(signals per passage, summed). Distinct signals are counted exactly via their 64-bit SSR hash.
At each checkpoint it prints the figures; the last two checkpoints give the growth exponent
used to extrapolate distinct counts (a power law, which overestimates for concave Heaps curves)
to 8,841,823 passages, and the index size at 16 bytes per distinct signal + 4 per posting.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

MSMARCO = 8_841_823


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("collection", help="collection.tsv (pid<TAB>passage)")
    p.add_argument("--limit", type=int, default=None, help="read at most this many passages")
    p.add_argument("--checkpoints", default="100000,300000,1000000",
                   help="passage counts at which to report (comma separated)")
    p.add_argument("--target", type=int, default=MSMARCO, help="extrapolate to this many passages")
    p.add_argument("--batch", type=int, default=50_000)
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    return p.parse_args(argv)


class Counter:
    """Exact distinct counts of 64-bit hashes, kept as one sorted unique array."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.seen = np.zeros(0, dtype=np.uint64)
        self.pending: list = []
        self.pending_size = 0

    def add(self, hashes) -> None:  # noqa: ANN001
        # merge in bulk: one sort per ~64M pending hashes instead of one per batch
        self.pending.append(hashes)
        self.pending_size += int(hashes.shape[0])
        if self.pending_size > 64_000_000:
            self._merge()

    def _merge(self) -> None:
        if self.pending:
            self.seen = self.np.unique(self.np.concatenate([self.seen, *self.pending]))
            self.pending, self.pending_size = [], 0

    def __len__(self) -> int:
        self._merge()
        return int(self.seen.shape[0])


def measure(path: str, limit: int | None, checkpoints: list[int], batch: int) -> list[dict]:
    import numpy as np

    from ssr_engine.extract import Extractor, pack_values
    from ssr_engine.hashing import hash_mask, hash_spans
    from ssr_engine.stopwords import DEFAULT_STOPWORDS

    sig_x = Extractor(DEFAULT_STOPWORDS, 64, bigrams=True)
    word_x = Extractor(DEFAULT_STOPWORDS, None, bigrams=False)
    mask = hash_mask(64)
    uni, bi, words = Counter(), Counter(), Counter()
    postings = 0
    tokens = 0
    n = 0
    rows: list[dict] = []
    marks = sorted(c for c in checkpoints if limit is None or c <= limit)
    texts: list[bytes] = []
    t0 = time.time()

    def flush() -> None:
        nonlocal postings, tokens
        if not texts:
            return
        packed = pack_values([[t] for t in texts])
        s = sig_x.extract(*packed)
        h = hash_spans(s.data, s.offsets, 0, mask)
        uni.add(np.unique(h[~s.is_bigram]))
        bi.add(np.unique(h[s.is_bigram]))
        postings += int(s.offsets.shape[0] - 1)
        w = word_x.extract(*packed)
        words.add(np.unique(hash_spans(w.data, w.offsets, 0, mask)))
        tokens += int(w.doc_tokens.sum())
        texts.clear()

    def report() -> None:
        row = {"passages": n, "distinct_words": len(words), "distinct_unigrams": len(uni),
               "distinct_bigrams": len(bi), "distinct_signals": len(uni) + len(bi), "postings": postings,
               "postings_per_passage": round(postings / max(1, n), 2), "kept_tokens": tokens,
               "seconds": round(time.time() - t0, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)

    with open(path, "rb") as fh:
        for line in fh:
            tab = line.find(b"\t")
            texts.append(line[tab + 1 :].rstrip(b"\r\n"))
            n += 1
            if len(texts) >= batch or (marks and n == marks[0]):
                flush()
            if marks and n == marks[0]:
                report()
                marks.pop(0)
            if limit is not None and n >= limit:
                break
    flush()
    if not rows or rows[-1]["passages"] != n:
        report()
    return rows


def extrapolate(rows: list[dict], target: int) -> dict:
    """Power-law growth from the last two checkpoints; postings grow linearly."""
    if len(rows) < 2:
        raise SystemExit("need at least two checkpoints to extrapolate")
    a, b = rows[-2], rows[-1]
    ratio = target / b["passages"]
    out: dict = {"target_passages": target, "from": [a["passages"], b["passages"]]}
    for key in ("distinct_words", "distinct_unigrams", "distinct_bigrams"):
        beta = math.log(b[key] / a[key]) / math.log(b["passages"] / a["passages"])
        out[key + "_exponent"] = round(beta, 4)
        out[key] = int(b[key] * ratio**beta)
    out["distinct_signals"] = out["distinct_unigrams"] + out["distinct_bigrams"]
    out["postings"] = int(b["postings"] * ratio)
    out["index_bytes_16_per_signal_4_per_posting"] = 16 * out["distinct_signals"] + 4 * out["postings"]
    out["index_gb"] = round(out["index_bytes_16_per_signal_4_per_posting"] / 1e9, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if not Path(args.collection).is_file():
        print(f"measure_collection: error: {args.collection}: no such file", file=sys.stderr)
        return 2
    checkpoints = [int(c) for c in args.checkpoints.split(",") if c]
    rows = measure(args.collection, args.limit, checkpoints, args.batch)
    result: dict = {"collection": args.collection, "checkpoints": rows}
    if len(rows) >= 2:
        result["extrapolated"] = extrapolate(rows, args.target)
        print(json.dumps(result["extrapolated"]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
