"""The peers' index builds (`python -m harness.worker build ENGINE`), and the tokens every peer is given.

Tokens: what our BM25 uses where each peer's API allows (text.lower(), [a-z0-9]+, at least 2
characters, minus ssr-stopwords-v1); see harness/worker.py's docstring for each peer's way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ssr_engine.retrieval import BM25_B, BM25_K1  # the library's defaults, defined once (a light module)

TANTIVY_ANALYZER = "ssr_tokens"


def tsv_rows(path: str) -> Iterator[tuple[str, str]]:
    """(id, text) of each line of an MS MARCO TSV."""
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            pid, _, text = line.rstrip("\n").partition("\t")
            yield pid, text


def stopword_list() -> list[str]:
    from ssr_engine.stopwords import STOPWORDS_V1

    return sorted(STOPWORDS_V1)


def our_tokens(text: str) -> list[str]:
    from ssr_engine.signals import value_tokens
    from ssr_engine.stopwords import STOPWORDS_V1

    return value_tokens(text, STOPWORDS_V1)


# ---------------------------------------------------------------------------- builds


def build_bm25s(collection: str, out: Path) -> dict:
    import bm25s
    import numpy as np
    from bm25s.tokenization import Tokenizer

    # [a-z0-9]{2,} over lower() matches exactly the [a-z0-9]+ runs of length >= 2
    tokenizer = Tokenizer(lower=True, splitter=r"[a-z0-9]{2,}", stopwords=stopword_list())
    ids: list[str] = []

    def texts() -> Iterator[str]:
        for pid, text in tsv_rows(collection):
            ids.append(pid)
            yield text

    with open(collection, "rb") as f:
        n_lines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))
    corpus = tokenizer.tokenize(texts(), length=n_lines, return_as="tuple", show_progress=False)
    retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene", backend="numba")
    retriever.index(corpus, show_progress=False)
    del corpus
    out.mkdir(parents=True, exist_ok=True)
    retriever.save(out)
    tokenizer.save_vocab(out)
    tokenizer.save_stopwords(out)
    np.save(out / "doc_ids.npy", np.array(ids))
    return {"documents": len(ids)}


def build_pisa(collection: str, out: Path) -> dict:
    import pandas as pd
    import pyterrier_pisa

    index = pyterrier_pisa.PisaIndex(str(out), stemmer="none", stops="none", threads=os.cpu_count() or 1)
    n = 0

    def docs() -> Iterator[dict]:
        nonlocal n
        for pid, text in tsv_rows(collection):
            n += 1
            yield {"docno": pid, "text": " ".join(our_tokens(text))}

    index.index(docs())
    # PISA compresses the postings and computes block-max data for a scorer on first use:
    # that is part of building a BM25 index, so it is done (and timed) here.
    index.bm25(k1=BM25_K1, b=BM25_B, num_results=10, threads=1).transform(
        pd.DataFrame({"qid": ["warm"], "query": ["index"]}))
    return {"documents": n}


def tantivy_analyzer():
    import tantivy

    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"[A-Za-z0-9]{2,}"))
            .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.custom_stopword(stopword_list())).build())


def build_tantivy(collection: str, out: Path) -> dict:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("pid", stored=True, tokenizer_name="raw")
    # frequencies without positions: all BM25 needs
    sb.add_text_field("body", stored=False, tokenizer_name=TANTIVY_ANALYZER, index_option="freq")
    out.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(sb.build(), path=str(out))
    index.register_tokenizer(TANTIVY_ANALYZER, tantivy_analyzer())
    writer = index.writer(heap_size=1 << 30, num_threads=os.cpu_count() or 1)
    n = 0
    for pid, text in tsv_rows(collection):
        writer.add_document(tantivy.Document(pid=pid, body=text))
        n += 1
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return {"documents": n, "segments": index.searcher().num_segments}


BUILDERS = {"bm25s": build_bm25s, "pisa": build_pisa, "tantivy": build_tantivy}
