"""Stage `rank`: fit the retriever and rank every query, as deep as exact pre lists need."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import scipy.sparse as sp
from tqdm.auto import tqdm

from arecall.core.ranking import Ranking, rank_queries
from arecall.data.collection import Collection
from arecall.pipeline.budget import check_lists_memory
from arecall.pipeline.config import ks_of
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage
from arecall.retrievers import make_retriever

__all__ = ["rank"]


def _score_chunks(retriever: Any, texts: list[str], chunk: int) -> Iterator[sp.spmatrix]:
    for start in tqdm(
        range(0, len(texts), chunk), desc="rank", unit="chunk", disable=len(texts) <= chunk
    ):
        yield retriever.score(texts[start : start + chunk])


def rank(cfg: Mapping[str, Any], layout: Layout) -> Ranking:
    """Fit the retriever on the documents and rank every query, as deep as exactness needs."""
    collection = Collection.load(layout.corpus)
    check_lists_memory(
        cfg, n_principals=len(collection.principals), n_queries=len(collection.queries)
    )  # the corpus's own sizes, before anything is allocated or written
    rcfg = cfg["retriever"]
    retriever = make_retriever(rcfg).fit(collection.documents["text"].tolist())
    n_docs = len(collection.documents)
    # a dense retriever's chunk is queries × documents floats: cap it at ~64M cells
    chunk = max(1, min(rcfg["chunk_queries"], (1 << 26) // max(n_docs, 1)))
    ranking = rank_queries(
        _score_chunks(retriever, collection.queries["text"].tolist(), chunk),
        n_queries=len(collection.queries),
        depth=rcfg["depth"],
        acl=collection.acl_matrix(),
        k_max=max(ks_of(cfg)),
        relevance=collection.relevance_matrix(),
    )
    ranking.save(layout.ranking)
    return ranking


if __name__ == "__main__":
    raise SystemExit(run_stage(rank))
