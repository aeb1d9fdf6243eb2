"""``retriever=embeddings``: rank with vectors the user computed, keyed by the corpus's ids.

The retriever reads two files (`arecall.io.vectors`: Parquet ``id``/``vector``, or ``.npy``
with its ids beside it), puts their rows in the corpus's order and scores every query against
every document:

* ``cosine`` — the inner product of the L2-normalised vectors (a zero vector has no direction:
  refused, naming the file and the id);
* ``ip`` — the inner product as given;
* ``l2`` — the negated squared Euclidean distance ``−‖q − d‖²`` (closer ranks higher).

Every document is ranked, whatever its score's sign (`ranks_every_document`): a dense retriever
has no "no match". Scores are computed in float64 and rounded to float32 — as `DenseLSA` does,
so a query's scores do not depend on the other queries scored with it (BLAS picks kernels by
block shape) — and tied scores are ordered by document id, as everywhere in arecall
(`arecall.core.ranking`). The same vectors go into a vector index for ``index=hnsw|exact``
(`embed_documents`, `embed_queries`; unit vectors under ``cosine``, and the index measures
``index_metric``).

A keyed retriever: the stages give it the corpus's ids (`fit_corpus`) and score queries by id.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.core.schema import validate
from arecall.io.ids import as_strings, index_in
from arecall.io.vectors import VectorFile, align, read_pair
from arecall.retrievers.schema import EmbeddingsConfig

__all__ = ["Embeddings"]

#: Float64 copies of the documents above this many bytes are made a block at a time.
_WHOLE_BYTES = 1 << 30
#: Documents per block when they are (float64 cells per block).
_BLOCK_CELLS = 1 << 25


class Embeddings:
    """The user's document and query vectors, scored by ``metric``.

    Parameters
    ----------
    documents, queries : str
        The vector files (`arecall.io.vectors`).
    metric : {"cosine", "ip", "l2"}

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from arecall.io.vectors import write_vectors
    >>> d = Path(tempfile.mkdtemp())
    >>> write_vectors(d / "docs.parquet", ["b", "a"], [[0.0, 1.0], [1.0, 0.0]])
    >>> write_vectors(d / "queries.parquet", ["q1"], [[1.0, 0.2]])
    >>> r = Embeddings(documents=d / "docs.parquet", queries=d / "queries.parquet").fit_corpus(
    ...     pd.DataFrame({"doc_id": ["a", "b"]}), pd.DataFrame({"query_id": ["q1"]}))
    >>> r.score(["q1"]).toarray().astype(float).round(3).tolist()
    [[0.981, 0.196]]
    """

    #: The stages pass corpus ids (`arecall.retrievers.fit_on`); `score` takes query ids.
    keyed: ClassVar[bool] = True
    #: Every document is ranked, whatever the sign of its score (`arecall.core.ranking`).
    ranks_every_document: ClassVar[bool] = True

    def __init__(self, *, documents: Any, queries: Any, metric: str = "cosine") -> None:
        self.documents, self.queries, self.metric = documents, queries, metric

    @classmethod
    def from_config(cls, cfg: Any) -> Embeddings:
        """Build from the ``retriever`` section, checked against `EmbeddingsConfig`.

        Examples
        --------
        >>> Embeddings.from_config({"queries": "q.npy"})
        Traceback (most recent call last):
        ...
        arecall.core.schema.ConfigProblem: retriever.documents: required for \
retriever=embeddings (a .parquet or .npy file), got null
        """
        section = validate(EmbeddingsConfig, {"name": "embeddings", **cfg}, "retriever")
        return cls(
            documents=section["documents"], queries=section["queries"], metric=section["metric"]
        )

    @property
    def index_metric(self) -> str:
        """What a vector index over `embed_documents` measures: ``ip`` (cosine on unit
        vectors) or ``l2``."""
        return "l2" if self.metric == "l2" else "ip"

    def fit_corpus(self, documents: pd.DataFrame, queries: pd.DataFrame) -> Embeddings:
        """Read both files and align them to the corpus (``doc_id``, ``query_id`` columns).

        Every check names its file: the formats' own (`arecall.io.vectors.read_vectors`), a
        corpus id without a vector or a vector without a corpus id (`~arecall.io.vectors.align`),
        the query vectors' dimensions against the documents', a zero vector under ``cosine``.
        """
        doc_file, query_file, doc_norms, query_norms = read_pair(
            self.documents, self.queries, self.metric
        )
        doc_ids = documents["doc_id"].astype(str).tolist()
        query_ids = queries["query_id"].astype(str).tolist()
        self._docs = align(doc_file, doc_ids, what="document")
        self._queries = align(query_file, query_ids, what="query")
        self._doc_norms = _aligned(doc_norms, doc_file, doc_ids)
        self._query_norms = _aligned(query_norms, query_file, query_ids)
        self._query_ids = as_strings(query_ids)
        whole = self._docs.shape[0] * self._docs.shape[1] * 8 <= _WHOLE_BYTES
        self._docs64 = self._prepared(self._docs, self._doc_norms) if whole else None
        return self

    def fit(self, documents: Sequence[str]) -> Embeddings:
        """Not used: the vectors are keyed by id, so the stages call `fit_corpus`."""
        raise ArecallError(
            "retriever=embeddings: needs the corpus's ids (fit_corpus), not its texts"
        )

    def _prepared(
        self, vectors: npt.NDArray[np.float32], norms: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        out = np.asarray(vectors, dtype=np.float64)
        if self.metric == "cosine":
            out = out / norms[:, None]
        return out

    def _rows(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        at = index_in(as_strings([str(i) for i in ids]), self._query_ids)
        if (at < 0).any():
            missing = ids[int(np.flatnonzero(at < 0)[0])]
            raise ArecallError(f"retriever=embeddings: query {missing!r} is not in the corpus")
        return at

    def _doc_blocks(self) -> Iterator[tuple[int, int, npt.NDArray[np.float64]]]:
        """The documents prepared in float64: whole, or a block at a time when large."""
        n_docs = self._docs.shape[0]
        if self._docs64 is not None:
            yield 0, n_docs, self._docs64
            return
        step = max(1, _BLOCK_CELLS // self._docs.shape[1])
        for start in range(0, n_docs, step):
            stop = min(start + step, n_docs)
            yield start, stop, self._prepared(self._docs[start:stop], self._doc_norms[start:stop])

    def _scores(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """Queries ``rows`` × every document, float64 products rounded to float32."""
        q = self._prepared(self._queries[rows], self._query_norms[rows])
        out = np.empty((len(rows), self._docs.shape[0]), dtype=np.float32)
        q_squared = np.einsum("ij,ij->i", q, q)
        for start, stop, d in self._doc_blocks():
            products = q @ d.T
            if self.metric == "l2":  # −‖q − d‖² = 2 q·d − ‖q‖² − ‖d‖²
                products *= 2.0
                products -= q_squared[:, None]
                products -= np.einsum("ij,ij->i", d, d)[None, :]
            out[:, start:stop] = products
        return out

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Scores of the queries with ids ``queries`` against every document (float32 CSR,
        every entry stored, zeros and negative scores included)."""
        dense = self._scores(self._rows(queries))
        n_q, n_docs = dense.shape
        indptr = np.arange(0, (n_q + 1) * n_docs, n_docs, dtype=np.int64)
        indices = np.tile(np.arange(n_docs, dtype=np.int32 if n_docs < 2**31 else np.int64), n_q)
        return sp.csr_matrix((dense.ravel(), indices, indptr), shape=(n_q, n_docs))

    def document_shard(self, start: int, stop: int) -> Embeddings:
        """This fitted retriever restricted to documents ``start:stop`` (their columns of
        `score`, the same numbers; global statistics such as the idf stay the whole corpus's):
        one document shard of the rank stage (`arecall.core.rank_blocks`)."""
        shard = copy.copy(self)
        shard._docs = self._docs[start:stop]
        shard._doc_norms = self._doc_norms[start:stop]
        if self._docs64 is not None:
            shard._docs64 = self._docs64[start:stop]
        return shard

    def embed_documents(self) -> npt.NDArray[np.float32]:
        """The documents' vectors for a vector index: unit rows under ``cosine``, else as given."""
        if self.metric != "cosine":
            return self._docs
        return (np.asarray(self._docs, dtype=np.float64) / self._doc_norms[:, None]).astype(
            np.float32
        )

    def embed_queries(self, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        """The vectors of the queries with ids ``queries``, as `embed_documents` treats them."""
        rows = self._rows(queries)
        return self._prepared(self._queries[rows], self._query_norms[rows]).astype(np.float32)


def _aligned(
    norms: npt.NDArray[np.float64], found: VectorFile, corpus_ids: list[str]
) -> npt.NDArray[np.float64]:
    """``norms`` (file order) in the corpus's order (`align` checked the ids already)."""
    return norms[index_in(as_strings(corpus_ids), found.ids)]
