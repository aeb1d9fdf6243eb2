"""Retrievers: fit on document texts, score query texts into a sparse queries × docs matrix.

The Hydra group ``retriever`` selects one by ``retriever.name``. A retriever only scores;
ordering, tie-breaking and depth live in `arecall.core.ranking`, shared by all of them.

`RETRIEVERS` is the registry (`arecall.core.registry`): each retriever's ``from_config``
(imported on first use), its schema, what it answers — ``scores``, and ``embeddings`` for a
dense one (``embed_documents``/``embed_queries``), which a vector ``index`` needs — and its
libraries. Adding a retriever is one module with a class (``from_config``, ``fit``, ``score``),
its schema in `arecall.retrievers.schema` and one line below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from arecall.core.registry import Registered, Registry
from arecall.core.schema import select
from arecall.retrievers.schema import (
    BM25Config,
    DenseLSAConfig,
    SklearnTfidfConfig,
    TfidfConfig,
)

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["RETRIEVERS", "Retriever", "make_retriever"]


class Retriever(Protocol):
    """Anything that scores queries against a fitted document collection."""

    def fit(self, documents: Sequence[str]) -> Retriever: ...

    def score(self, queries: Sequence[str]) -> sp.csr_matrix: ...


#: Retriever name -> its factory, schema, what it answers and its libraries; one line each.
RETRIEVERS = Registry(
    "retriever",
    Registered(
        "tfidf",
        "arecall.retrievers.tfidf:SeedTfidf.from_config",
        TfidfConfig,
        answers=("scores",),
    ),
    Registered(
        "sklearn_tfidf",
        "arecall.retrievers.sklearn_tfidf:SklearnTfidf.from_config",
        SklearnTfidfConfig,
        answers=("scores",),
        libraries=("scikit-learn",),
    ),
    Registered(
        "bm25",
        "arecall.retrievers.bm25:BM25.from_config",
        BM25Config,
        answers=("scores",),
        libraries=("bm25s",),
    ),
    Registered(
        "dense_lsa",
        "arecall.retrievers.dense_lsa:DenseLSA.from_config",
        DenseLSAConfig,
        answers=("scores", "embeddings"),
        libraries=("scikit-learn",),
    ),
)


def make_retriever(cfg: Mapping[str, Any]) -> Retriever:
    """Construct the retriever the ``retriever`` config section names (checked by its schema).

    Examples
    --------
    >>> type(make_retriever({"name": "tfidf"})).__name__
    'SeedTfidf'
    """
    name = cfg.get("name") if isinstance(cfg, Mapping) else None
    entry = RETRIEVERS.get(name) if isinstance(name, str) else None
    if entry is not None and entry.schema is None:  # registered without a schema: no settings
        retriever: Retriever = entry.load()(dict(cfg))
        return retriever
    section = select(RETRIEVERS.schemas(), cfg, "retriever", "retriever")
    made: Retriever = RETRIEVERS[section["name"]].load()(section)
    return made
