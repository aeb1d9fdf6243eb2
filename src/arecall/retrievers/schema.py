"""The ``retriever`` group's schemas: one dataclass per retriever, defaults declared here.

``conf/retriever/<name>.yaml`` composes the matching schema (``defaults: [base_<name>]``);
`arecall.retrievers.make_retriever` validates its section against it and the retrievers take
their defaults from it (``k1: float = BM25Config.k1``), so no default is repeated.
"""

from __future__ import annotations

from dataclasses import dataclass

from arecall.core.schema import NON_NEGATIVE, POSITIVE, Rule, interval, setting

__all__ = [
    "BM25_METHODS",
    "BM25Config",
    "DenseLSAConfig",
    "RetrieverConfig",
    "SklearnTfidfConfig",
    "TfidfConfig",
]

#: bm25s variants whose scores stay sparse (BM25L and BM25+ give every document a score).
BM25_METHODS = ("lucene", "robertson", "atire")


@dataclass
class RetrieverConfig:
    """What every retriever has: how deep to rank and how many queries to score at once.

    Attributes
    ----------
    name : str
        The retriever (a key of `arecall.retrievers.RETRIEVERS`).
    depth : int or None
        null: the whole ranking; N: at least N (and K) per query plus each principal's tail
        (pre stays exact).
    chunk_queries : int
        Queries scored per call (bounds memory; the rank stage caps a dense chunk to ~64M
        cells).
    """

    name: str = ""
    depth: int | None = setting(None, POSITIVE)
    chunk_queries: int = setting(1024, POSITIVE)


@dataclass
class TfidfConfig(RetrieverConfig):
    """``retriever=tfidf``: the built-in TF-IDF with the seed's weighting (scipy sparse)."""

    name: str = "tfidf"


@dataclass
class SklearnTfidfConfig(RetrieverConfig):
    """``retriever=sklearn_tfidf``: scikit-learn's TfidfVectorizer set to the seed's weighting."""

    name: str = "sklearn_tfidf"


@dataclass
class BM25Config(RetrieverConfig):
    """``retriever=bm25``: Okapi BM25 via bm25s (tokens ``[a-z0-9]+``, lower-cased).

    Attributes
    ----------
    k1 : float
        Term-frequency saturation (≥ 0).
    b : float
        Length normalisation, in [0, 1].
    method : {"lucene", "robertson", "atire"}
        The bm25s variant.
    """

    name: str = "bm25"
    k1: float = setting(1.5, interval(0.0, high_open=True))
    b: float = setting(0.75, interval(0.0, 1.0))
    method: str = setting(
        "lucene",
        Rule(
            f"one of {', '.join(BM25_METHODS)} (bm25l and bm25+ give every document a positive "
            "score)",
            lambda v: v in BM25_METHODS,
        ),
    )


@dataclass
class DenseLSAConfig(RetrieverConfig):
    """``retriever=dense_lsa``: the seed's TF-IDF → truncated SVD → cosine.

    Attributes
    ----------
    n_components : int
        SVD dimensions (capped at the number of documents and of terms).
    random_state : int
        Seed of the randomized SVD.
    n_iter : int
        Its power iterations.
    """

    name: str = "dense_lsa"
    n_components: int = setting(128, POSITIVE)
    random_state: int = setting(0, NON_NEGATIVE)
    n_iter: int = setting(5, NON_NEGATIVE)
