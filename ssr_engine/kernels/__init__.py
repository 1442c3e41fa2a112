"""Numba kernels: arrays in, arrays out, no I/O; they import nothing from the package but each other.

Shared parts:
    topk        the bounded top-k heap keyed by the full result order (every search kernel)
    candidates  output-region bounds and exact candidate-pool sizes over an inverted CSR
    spans       byte-span comparison and gathering
    id_table    external ids gathered from a fixed-width table (`format.Index.ids_of`)
Users of those:
    ssr         SSR search: inverted term-at-a-time blocks, and the exhaustive forward scan
    bm25        Lucene BM25 over an index with term frequencies
    text        signal extraction from UTF-8 bytes (the bulk fast path of `signals`)
    indexing    chunk inversion, bucket merge, forward CSR, radix sort (the build)
"""
