"""Numba kernels: arrays in, arrays out, no I/O; they import nothing from the package but each other.

Shared parts:
    topk        the bounded top-k heap keyed by the full result order (every search kernel)
    candidates  output-region bounds and exact candidate-pool sizes over an inverted CSR
    spans       byte-span comparison and gathering
    packed      fixed-width bit packing in uint64 words
    forward     the forward rows (each document's term ids), read here and nowhere else
    id_table    external ids gathered from a fixed-width table (`format.Index.ids_of`)
Users of those:
    terms       query signals to term ids: vocabulary look-up with its range and string checks
    probe       method ssr: heavy lists first, then bounded probes (levels where pruning would not pay)
    levels      the union read as term masks, ranked by levels; `long` for queries of > 12 terms;
                `split` its MaxScore split (the lightest lists read only into the others' documents)
    small       tiny and one-term queries list by list, rarest first, into the heap (behind probe)
    ssr         the heap union (method union), the exhaustive forward scan, shared block helpers
    prune       method maxscore (MaxScore), kept as a check
    bm25        Lucene BM25 over an index with term frequencies
    merge       merging ranked parts by the full key (live segments, shards)
    live        a live index's segments searched as one, and read back for compaction
    shards      two shards' sorted vocabularies matched (the global df table)
    text        signal extraction from UTF-8 bytes (the bulk fast path of `signals`)
    strings     format 4's signal strings (a literal table plus one code per term)
    indexing    chunk inversion, bucket merge, forward CSR, radix sort (the build)
    validate    structural checks of index arrays (open and `ssr verify`)
"""
