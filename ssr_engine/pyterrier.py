"""`SSRRetriever`: an ssr_engine index as a PyTerrier transformer (optional extra `pyterrier`).

    import pyterrier as pt
    from ssr_engine.pyterrier import SSRRetriever
    ssr, bm25 = SSRRetriever("idx"), SSRRetriever("idx-bm25")
    pt.Experiment([ssr, bm25], topics, qrels, eval_metrics=["RR@10", "nDCG@10", "R@1000"])

Queries in (columns `qid`, `query`), results out (`qid`, `query`, `docno`, `score`, `rank`, plus
`ssr_score` and, with `text=True`, the stored `text`). PyTerrier and ir_measures rank by `score`
and break ties by docno, which is not our order (score desc, matches desc, id asc); so by default
`score` holds the run-file scores of `eval.trec.trec_scores` (float32, strictly decreasing along
our ranking) and `ssr_score` the true float64 score: `pt.Experiment` then evaluates exactly the
ranking `ssr evaluate` does. `scores="exact"` puts the true scores in `score`.

This needs no Java: PyTerrier's transformers and `Experiment` are pure Python (Java is needed only
for Terrier's own indexes, whose jars PyTerrier downloads on `pt.java.init()`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    import pyterrier as pt
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("ssr_engine.pyterrier needs python-terrier: pip install 'ssr_engine[pyterrier]'") from exc

if TYPE_CHECKING:
    import pandas as pd

    from .format import Index


class SSRRetriever(pt.Transformer):
    """Retrieve from an ssr_engine index: queries DataFrame -> ranked results DataFrame.

    Parameters
    ----------
    index : an index directory or an opened `Index`.
    method : "ssr", "exhaustive" or "bm25"; default: the index's own scoring.
    k : results per query (None: every candidate).
    threads : Numba threads for the batch (None: all cores).
    scores : "trec" (default; see the module docstring) or "exact".
    text : add the stored `text` of each result (an index built with store_text=True).
    k1, b : BM25 parameters (method "bm25" only).
    """

    def __init__(self, index: str | os.PathLike[str] | Index, method: str | None = None, k: int | None = 1000,
                 threads: int | None = None, scores: str = "trec", text: bool = False, **bm25: float):
        from .format import Index, open_index
        from .retrieval import check_k, check_threads, open_retriever

        check_k(k)
        check_threads(threads)
        if scores not in ("trec", "exact"):
            raise ValueError(f"scores must be 'trec' or 'exact', got {scores!r}")
        self.index = index if isinstance(index, Index) else open_index(index)
        self.method = method or ("bm25" if self.index.scoring == "bm25" else "ssr")
        self.retriever = open_retriever(self.index, self.method, **bm25)
        self.k, self.threads, self.scores, self.text = k, threads, scores, text
        if text and self.index.n_docs:
            self.retriever.doc(0)  # fails now, not mid-experiment, when no text is stored

    def __repr__(self) -> str:
        return f"SSRRetriever({str(self.index.path)!r}, method={self.method!r}, k={self.k})"

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        """The columns `transform` returns for these input columns (PyTerrier's pipeline inspection)."""
        pt.validate.columns(list(input_columns), includes=["qid", "query"], context=self)
        extra = [c for c in input_columns if c not in ("qid", "query", "docno", "score", "rank", "text")]
        return ["qid", "query", "docno", "score", "rank", "ssr_score", *(["text"] if self.text else []), *extra]

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        """One row per (query, result), best first; queries without results add no row."""
        import pandas as pd

        from .eval.trec import trec_scores

        missing = {"qid", "query"} - set(topics.columns)
        if missing:
            raise ValueError(f"SSRRetriever needs columns qid and query; missing {sorted(missing)}")
        queries = topics.drop_duplicates("qid")
        texts = queries["query"].astype(str).tolist()
        results = self.retriever.search_batch(texts, self.k, self.threads) if texts else []
        parts: dict[str, list[Any]] = {"qid": [], "docno": [], "score": [], "ssr_score": [], "rank": []}
        if self.text:
            parts["text"] = []
        for qid, res in zip(queries["qid"].tolist(), results, strict=True):
            n = len(res.ids)
            parts["qid"].extend([qid] * n)
            parts["docno"].extend(res.ids.tolist())
            parts["ssr_score"].extend(res.scores.tolist())
            written = trec_scores(res.scores) if self.scores == "trec" else res.scores
            parts["score"].extend(np.asarray(written, dtype=np.float64).tolist())
            parts["rank"].extend(range(n))
            if self.text:
                parts["text"].extend(self.retriever.doc(int(d)) for d in res.docs.tolist())
        out = pd.DataFrame(parts)
        out["rank"] = out["rank"].astype("int64")
        others = [c for c in queries.columns if c not in ("docno", "score", "rank", "text")]
        out = out.merge(queries[others], on="qid", how="left") if others != ["qid"] else out
        front = ["qid", "query", "docno", "score", "rank"]
        return out[[c for c in front if c in out.columns] + [c for c in out.columns if c not in front]]
