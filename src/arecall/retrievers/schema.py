"""The ``retriever`` group's schemas: one dataclass per retriever, defaults declared here.

``conf/retriever/<name>.yaml`` composes the matching schema (``defaults: [base_<name>]``);
`arecall.retrievers.make_retriever` validates its section against it and the retrievers take
their defaults from it (``k1: float = BM25Config.k1``), so no default is repeated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from arecall.core.schema import NON_NEGATIVE, POSITIVE, Rule, interval, one_of, setting

__all__ = [
    "BM25_METHODS",
    "EMBEDDING_METRICS",
    "BM25Config",
    "DenseLSAConfig",
    "EmbeddingsConfig",
    "Model2VecConfig",
    "RetrieverConfig",
    "SklearnTfidfConfig",
    "TfidfConfig",
]

#: bm25s variants whose scores stay sparse (BM25L and BM25+ give every document a score).
BM25_METHODS = ("lucene", "robertson", "atire")
#: How ``retriever=embeddings`` and ``retriever=model2vec`` score a query against a document.
EMBEDDING_METRICS = ("cosine", "ip", "l2")


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


@dataclass
class EmbeddingsConfig(RetrieverConfig):
    """``retriever=embeddings``: vectors the user computed, keyed by the corpus's own ids.

    Every document is ranked (a dense retriever scores them all), by ``metric``, ties by id.

    Attributes
    ----------
    documents : str
        The documents' vectors: Parquet (``id``, ``vector``) or ``.npy`` with a ``.ids.txt``
        file beside it (`arecall.io.vectors`).
    queries : str
        The queries' vectors, in the same formats and dimensions.
    metric : {"cosine", "ip", "l2"}
        Cosine (a zero vector is refused), inner product, or Euclidean distance (closer first).
    """

    name: str = "embeddings"
    documents: str | None = None
    queries: str | None = None
    metric: str = setting("cosine", one_of(*EMBEDDING_METRICS))

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """Both files are required."""
        for key in ("documents", "queries"):
            if not getattr(self, key):
                yield key, "required for retriever=embeddings (a .parquet or .npy file)", None


@dataclass
class Model2VecConfig(RetrieverConfig):
    """``retriever=model2vec``: a model2vec static-embedding model (numpy, no torch).

    It encodes the corpus in batches, caches the vectors under ``cache`` keyed by the model's
    identity and the corpus's digest, then ranks exactly as ``retriever=embeddings`` does.

    Attributes
    ----------
    model : str
        A model directory (as ``StaticModel.save_pretrained`` writes it) or a model's name on
        the Hugging Face hub (downloaded there by model2vec; a directory needs no network).
    metric : {"cosine", "ip", "l2"}
    batch_size : int
        Texts encoded per call.
    cache : str
        Where encoded vectors are kept, relative to the working directory.
    """

    name: str = "model2vec"
    model: str | None = None
    metric: str = setting("cosine", one_of(*EMBEDDING_METRICS))
    batch_size: int = setting(1024, POSITIVE)
    cache: str = setting("data/embeddings", Rule("a directory", bool))

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """A model is required."""
        if not self.model:
            yield "model", "required for retriever=model2vec (a model directory or name)", None
