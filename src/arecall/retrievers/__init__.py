"""Retrievers: fit on document texts, score query texts into a sparse queries × docs matrix.

The Hydra group ``retriever`` selects one by ``retriever.name``. A retriever only scores;
ordering, tie-breaking and depth live in `arecall.core.ranking`, shared by all of them.

`RETRIEVERS` is the registry (`arecall.core.registry`): each retriever's ``from_config``
(imported on first use), its schema, what it answers — ``scores``, and ``embeddings`` for a
dense one (``embed_documents``/``embed_queries``), which a vector ``index`` needs — and its
libraries. Adding a retriever is one module with a class (``from_config``, ``fit``, ``score``),
its schema in `arecall.retrievers.schema` and one line below.

Most retrievers read texts. A *keyed* one (``keyed = True``: ``embeddings``, ``model2vec``)
reads the corpus's ids too — vectors are stored by id — so the stages fit every retriever with
`fit_on` and give `score` what `query_inputs` lists: the query texts, or a keyed retriever's
query ids. A retriever with ``ranks_every_document = True`` has every document ranked whatever
its score's sign (a dense retriever has no "no match"); the others rank positive scores only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from arecall.core.errors import ArecallError
from arecall.core.registry import Registered, Registry
from arecall.core.schema import select
from arecall.retrievers.schema import (
    BM25Config,
    DenseLSAConfig,
    EmbeddingsConfig,
    Model2VecConfig,
    SklearnTfidfConfig,
    TfidfConfig,
)

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp

__all__ = [
    "RETRIEVERS",
    "Retriever",
    "document_shard",
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


def document_shard(retriever: Any, start: int, stop: int) -> Any:
    """``retriever`` (fitted) restricted to documents ``start:stop``: what one document shard of
    the rank stage scores (`arecall.core.rank_blocks`). Every built-in retriever has one.

    Examples
    --------
    >>> import pandas as pd
    >>> docs = pd.DataFrame({"doc_id": ["a", "b", "c"], "text": ["red apple", "sky", "apple"]})
    >>> r = fit_on(make_retriever({"name": "tfidf"}), docs, pd.DataFrame())
    >>> (document_shard(r, 1, 3).score(["apple"]) != r.score(["apple"])[:, 1:3]).nnz
    0
    """
    shard = getattr(retriever, "document_shard", None)
    if shard is None:
        raise ArecallError(
            f"evaluation.engine.doc_shards: {type(retriever).__name__} cannot score a shard of "
            "the documents; set evaluation.engine.doc_shards=1"
        )
    return shard(start, stop)


def ranks_every_document(retriever: Any) -> bool:
    """Whether the rank stage keeps every document of ``retriever``'s scores (a dense
    retriever's), not only the positive ones."""
    return bool(getattr(retriever, "ranks_every_document", False))


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
    Registered(
        "embeddings",
        "arecall.retrievers.embeddings:Embeddings.from_config",
        EmbeddingsConfig,
        answers=("scores", "embeddings"),
        libraries=("pyarrow",),
    ),
    Registered(
        "model2vec",
        "arecall.retrievers.model2vec:Model2Vec.from_config",
        Model2VecConfig,
        answers=("scores", "embeddings"),
        libraries=("model2vec", "pyarrow"),
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
