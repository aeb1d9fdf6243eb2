"""Retrievers: fit on document texts, score query texts into a sparse queries × docs matrix.

The Hydra group ``retriever`` selects one by ``retriever.name``. A retriever only scores;
ordering, tie-breaking and depth live in `arecall.core.ranking`, shared by all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import scipy.sparse as sp

from arecall.core.schema import select
from arecall.retrievers.schema import (
    BM25Config,
    DenseLSAConfig,
    SklearnTfidfConfig,
    TfidfConfig,
)

__all__ = ["RETRIEVERS", "SCHEMAS", "Retriever", "make_retriever"]


class Retriever(Protocol):
    """Anything that scores queries against a fitted document collection."""

    def fit(self, documents: Sequence[str]) -> Retriever: ...

    def score(self, queries: Sequence[str]) -> sp.csr_matrix: ...


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


RETRIEVERS = {
    "tfidf": _tfidf,
    "sklearn_tfidf": _sklearn_tfidf,
    "bm25": _bm25,
    "dense_lsa": _dense_lsa,
}
#: Each retriever's config schema (the ``retriever`` group's options).
SCHEMAS: dict[str, type] = {
    "tfidf": TfidfConfig,
    "sklearn_tfidf": SklearnTfidfConfig,
    "bm25": BM25Config,
    "dense_lsa": DenseLSAConfig,
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
