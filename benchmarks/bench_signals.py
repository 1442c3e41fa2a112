"""Throughput of signal extraction: the Numba fast path against the plain definition.

    python benchmarks/bench_signals.py --collection /tmp/ssr-data/synth-100k/collection.tsv --docs 100000

Reads the first --docs passages of an MS MARCO-style TSV (or generates text when none is given),
checks that both paths give identical signals, and prints MB/s and documents/s (medians of
--repeats runs; the fast path's first call, which loads or compiles the kernel, is excluded).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from ssr_engine.extract import Extractor, pack_values
from ssr_engine.signals import signals, signals_many
from ssr_engine.stopwords import DEFAULT_STOPWORDS


def load_texts(path: Path | None, n: int) -> list[str]:
    if path is None:
        import random

        rng = random.Random(0)
        words = [f"w{i}" for i in range(5000)] + sorted(DEFAULT_STOPWORDS)
        return [" ".join(rng.choice(words) for _ in range(rng.randint(20, 120))) for _ in range(n)]
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            texts.append(line.rstrip("\n").split("\t", 1)[1])
            if len(texts) == n:
                break
    return texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collection", type=Path)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    texts = load_texts(args.collection, args.docs)
    raw = [t.encode("utf-8") for t in texts]
    mb = sum(len(r) for r in raw) / 1e6
    extractor = Extractor(DEFAULT_STOPWORDS, 64)
    packed = pack_values([[r] for r in raw])

    t0 = time.perf_counter()
    extractor.extract(*packed)
    warmup = time.perf_counter() - t0

    fast, fast_sets, plain = [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        extractor.extract(*packed)
        fast.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = signals_many(texts)
        fast_sets.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        expected = [signals(t) for t in texts]
        plain.append(time.perf_counter() - t0)
    assert got == expected, "fast path differs from the definition"

    def row(name: str, seconds: list[float]) -> dict[str, float | str]:
        s = statistics.median(seconds)
        return {"path": name, "seconds": s, "MB/s": mb / s, "docs/s": len(texts) / s}

    rows = [row("numba kernel (byte spans)", fast), row("signals_many (to Python sets)", fast_sets),
            row("signals() definition", plain)]
    print(f"{len(texts)} documents, {mb:.1f} MB of text; kernel warm-up (load/compile) {warmup:.2f} s; "
          f"medians of {args.repeats}")
    print("| path | seconds | MB/s | docs/s | vs definition |")
    print("|---|---:|---:|---:|---:|")
    base = rows[-1]["seconds"]
    for r in rows:
        print(f"| {r['path']} | {r['seconds']:.2f} | {r['MB/s']:.1f} | {r['docs/s']:,.0f} | "
              f"{base / r['seconds']:.1f}x |")
    if args.json:
        args.json.write_text(json.dumps({"docs": len(texts), "mb": mb, "warmup_s": warmup, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
