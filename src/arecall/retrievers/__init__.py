"""Retrievers: fit on document texts, score query texts into a sparse queries × docs matrix.

The Hydra group ``retriever`` selects one by ``retriever.name``. A retriever only scores;
ordering, tie-breaking and depth live in `arecall.core.ranking`, shared by all of them.

Most retrievers read texts. A *keyed* one (``keyed = True``: ``embeddings``, ``model2vec``)
reads the corpus's ids too — vectors are stored by id — so the stages fit every retriever with
`fit_on` and give `score` what `query_inputs` lists: the query texts, or a keyed retriever's
query ids. A retriever with ``ranks_every_document = True`` has every document ranked whatever
its score's sign (a dense retriever has no "no match"); the others rank positive scores only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import scipy.sparse as sp

from arecall.core.schema import select
from arecall.retrievers.config import (
    BM25Config,
    DenseLSAConfig,
    EmbeddingsConfig,
    Model2VecConfig,
    SklearnTfidfConfig,
    TfidfConfig,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RETRIEVERS",
    "SCHEMAS",
    "Retriever",
    "fit_on",
    "make_retriever",
    "query_inputs",
    "ranks_every_document",
]


class Retriever(Protocol):
    """Anything that scores queries against a fitted document collection."""

    def fit(self, documents: Sequence[str]) -> Retriever: ...

    def score(self, queries: Sequence[str]) -> sp.csr_matrix: ...


def fit_on(retriever: Any, documents: pd.DataFrame, queries: pd.DataFrame) -> Any:
    """Fit ``retriever`` on a corpus's ``documents`` (``doc_id``, ``text``): on the texts, or,
    for a keyed retriever, on both tables (``fit_corpus``), which it reads by id.

    Examples
    --------
    >>> import pandas as pd
    >>> docs = pd.DataFrame({"doc_id": ["a", "b"], "text": ["red apple", "blue sky"]})
    >>> r = fit_on(make_retriever({"name": "tfidf"}), docs, pd.DataFrame())
    >>> r.score(["apple"]).toarray().argmax()
    np.int64(0)
    """
    if getattr(retriever, "keyed", False):
        return retriever.fit_corpus(documents, queries)
    return retriever.fit(documents["text"].tolist())


def query_inputs(retriever: Any, queries: pd.DataFrame) -> list[str]:
    """What ``retriever.score`` (and ``embed_queries``) take for ``queries``: their texts, or
    a keyed retriever's query ids.

    Examples
    --------
    >>> import pandas as pd
    >>> query_inputs(make_retriever({"name": "tfidf"}), pd.DataFrame({"query_id": ["q"],
    ...     "text": ["apple"]}))
    ['apple']
    """
    if getattr(retriever, "keyed", False):
        return queries["query_id"].astype(str).tolist()
    return queries["text"].tolist()


def ranks_every_document(retriever: Any) -> bool:
    """Whether the rank stage keeps every document of ``retriever``'s scores (a dense
    retriever's), not only the positive ones."""
    return bool(getattr(retriever, "ranks_every_document", False))


def _tfidf(cfg: Mapping[str, Any]) -> Retriever:
    from arecall.retrievers.tfidf import SeedTfidf

    return SeedTfidf()


def _sklearn_tfidf(cfg: Mapping[str, Any]) -> Retriever:
    from arecall.retrievers.sklearn_tfidf import SklearnTfidf

    return SklearnTfidf()


def _bm25(cfg: Mapping[str, Any]) -> Retriever:
    from arecall.retrievers.bm25 import BM25

    return BM25.from_config(cfg)


def _dense_lsa(cfg: Mapping[str, Any]) -> Retriever:
    from arecall.retrievers.dense_lsa import DenseLSA

    return DenseLSA.from_config(cfg)


def _embeddings(cfg: Mapping[str, Any]) -> Retriever:
    from arecall.retrievers.embeddings import Embeddings

    return Embeddings.from_config(cfg)


def _model2vec(cfg: Mapping[str, Any]) -> Retriever:
    from arecall.retrievers.model2vec import Model2Vec

    return Model2Vec.from_config(cfg)


RETRIEVERS = {
    "tfidf": _tfidf,
    "sklearn_tfidf": _sklearn_tfidf,
    "bm25": _bm25,
    "dense_lsa": _dense_lsa,
    "embeddings": _embeddings,
    "model2vec": _model2vec,
}
#: Each retriever's config schema (the ``retriever`` group's options).
SCHEMAS: dict[str, type] = {
    "tfidf": TfidfConfig,
    "sklearn_tfidf": SklearnTfidfConfig,
    "bm25": BM25Config,
    "dense_lsa": DenseLSAConfig,
    "embeddings": EmbeddingsConfig,
    "model2vec": Model2VecConfig,
}


def make_retriever(cfg: Mapping[str, Any]) -> Retriever:
    """Construct the retriever the ``retriever`` config section names (checked by its schema).

    Examples
    --------
    >>> type(make_retriever({"name": "tfidf"})).__name__
    'SeedTfidf'
    """
    name = cfg.get("name") if isinstance(cfg, Mapping) else None
    if name in RETRIEVERS and name not in SCHEMAS:  # registered without a schema: no settings
        return RETRIEVERS[name](dict(cfg))
    section = select(SCHEMAS, cfg, "retriever", "retriever")
    return RETRIEVERS[section["name"]](section)
