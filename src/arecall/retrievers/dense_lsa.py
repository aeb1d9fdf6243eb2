"""Latent semantic analysis: the seed's TF-IDF projected onto a truncated SVD, scored by cosine.

A dense retriever ranks differently from a lexical one — every document gets a score, documents
sharing no word with the query can rank high — and placement effects depend on the ranking, so
the study needs one. LSA is the dense retriever that needs no model download and is
deterministic given ``random_state``:

1. the seed's TF-IDF weighting, as scikit-learn's `TfidfVectorizer` would compute it: tokens
   ``[a-z0-9]+`` (by `arecall.retrievers.tfidf.tokenize`, on Arrow buffers, so a million
   documents tokenise in seconds), then `TfidfTransformer` with 1 + ln tf, smooth idf and L2
   norm; query terms the corpus never saw are dropped, as scikit-learn drops them;
2. `TruncatedSVD` (randomized; ``n_components`` capped at the number of documents and of terms);
3. rows L2-normalised, so a dot product is a cosine.

`score` returns the *positive* cosines as CSR — documents scoring ≤ 0 are dropped, as the seed
drops zero scores — computed in float64 (unit vectors are kept in float64) and rounded to
float32, in blocks of queries sized so that a dense block stays near `BLOCK_CELLS` cells whatever
the number of documents. `embed_documents` / `embed_queries` give the float32 unit vectors
themselves, for a vector index (e.g. faiss inner product) to reuse.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow.compute as pc
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize

from arecall.core.errors import ArecallError
from arecall.core.ragged import offsets
from arecall.core.schema import validate
from arecall.retrievers.schema import DenseLSAConfig
from arecall.retrievers.tfidf import encode, tokenize

__all__ = ["BLOCK_CELLS", "DenseLSA"]

BLOCK_CELLS = 1 << 23  # queries × documents cells per dense block (64 MB as float64)


class DenseLSA:
    """TF-IDF → truncated SVD → cosine, with embeddings exposed.

    Parameters
    ----------
    n_components : int, default `DenseLSAConfig.n_components`
        Dimensions kept (at most the number of documents and of distinct terms).
    random_state : int, default `DenseLSAConfig.random_state`
        Seed of the randomized SVD: equal seeds give equal embeddings.
    n_iter : int, default `DenseLSAConfig.n_iter`
        Power iterations of the randomized SVD.

    Examples
    --------
    >>> r = DenseLSA(n_components=2).fit(["red apple", "green apple", "blue sky", "grey sky"])
    >>> r.embed_documents().shape, r.embed_documents().dtype.name
    ((4, 2), 'float32')
    >>> int(r.score(["apple"]).toarray().argmax())
    0
    """

    def __init__(
        self,
        *,
        n_components: int = DenseLSAConfig.n_components,
        random_state: int = DenseLSAConfig.random_state,
        n_iter: int = DenseLSAConfig.n_iter,
    ) -> None:
        self.n_components, self.random_state, self.n_iter = n_components, random_state, n_iter
        self._weighting = TfidfTransformer(sublinear_tf=True, smooth_idf=True, norm="l2")

    @classmethod
    def from_config(cls, cfg: Any) -> DenseLSA:
        """Build from the ``retriever`` section, checked against `DenseLSAConfig`.

        Examples
        --------
        >>> DenseLSA.from_config({"n_components": 0})
        Traceback (most recent call last):
        ...
        arecall.core.schema.ConfigProblem: retriever.n_components: must be a positive integer, got 0
        """
        section = validate(DenseLSAConfig, {"name": "dense_lsa", **cfg}, "retriever")
        return cls(
            n_components=section["n_components"],
            random_state=section["random_state"],
            n_iter=section["n_iter"],
        )

    def _counts(self, texts: Sequence[str], *, fit: bool = False) -> sp.csr_matrix:
        """Term counts, texts × vocabulary (terms outside the fitted vocabulary dropped)."""
        if fit:
            rows, codes, self._vocabulary = encode(texts)
            seen = np.ones(len(codes), dtype=bool)
        else:
            rows, tokens = tokenize(texts)
            found = pc.index_in(tokens, value_set=self._vocabulary).to_numpy(zero_copy_only=False)
            seen = ~np.isnan(found.astype(np.float64))
            codes = found[seen].astype(np.int64)
        counts = sp.csr_matrix(
            (np.ones(len(codes), dtype=np.float32), (rows[seen], codes)),
            shape=(len(texts), len(self._vocabulary)),
        )
        counts.sum_duplicates()
        return counts

    def fit(self, documents: Sequence[str]) -> DenseLSA:
        """Fit the TF-IDF weighting and the SVD on ``documents``; embed them."""
        counts = self._counts(documents, fit=True)
        if counts.shape[1] == 0:
            raise ArecallError("retriever=dense_lsa: the documents contain no [a-z0-9]+ token")
        if counts.shape[1] < 2:
            raise ArecallError(
                "retriever=dense_lsa: the documents have fewer than 2 distinct terms"
            )
        tfidf = self._weighting.fit_transform(counts)
        k = min(self.n_components, *tfidf.shape)
        self._svd = TruncatedSVD(
            n_components=k,
            algorithm="randomized",
            n_iter=self.n_iter,
            random_state=self.random_state,
        )
        self._docs = self._unit(self._svd.fit_transform(tfidf))
        return self

    @staticmethod
    def _unit(vectors: np.ndarray) -> np.ndarray:
        return np.asarray(normalize(np.asarray(vectors, dtype=np.float64), norm="l2"))

    def _queries(self, queries: Sequence[str]) -> np.ndarray:
        return self._unit(self._svd.transform(self._weighting.transform(self._counts(queries))))

    def embed_documents(self) -> np.ndarray:
        """The fitted documents' unit vectors, float32 (n_docs, n_components)."""
        return self._docs.astype(np.float32)

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``queries`` in the documents' space, float32 (n_queries, k).

        A query sharing no term with the corpus is the zero vector (it scores nothing).
        """
        return self._queries(queries).astype(np.float32)

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Cosine scores, queries × documents (float32), positive entries only.

        Products are taken in float64 and rounded to float32: BLAS picks kernels by block
        shape, so a float32 product would let a query's scores depend (in the last bit) on the
        other queries scored with it; rounding the float64 result hides that difference.
        """
        vectors = self._queries(queries)
        n_docs = self._docs.shape[0]
        step = max(1, BLOCK_CELLS // max(n_docs, 1))
        blocks = []
        for start in range(0, len(vectors), step):
            dense = (vectors[start : start + step] @ self._docs.T).astype(np.float32)
            keep = dense > 0
            indptr = offsets(keep.sum(axis=1))
            flat = np.flatnonzero(keep)  # row-major: grouped by query, columns ascending
            cols = (flat % n_docs).astype(np.int32 if n_docs < 2**31 else np.int64)
            blocks.append(sp.csr_matrix((dense.ravel()[flat], cols, indptr), shape=dense.shape))
        if not blocks:
            return sp.csr_matrix((0, n_docs), dtype=np.float32)
        return sp.vstack(blocks, format="csr")

    def document_shard(self, start: int, stop: int) -> DenseLSA:
        """This fitted retriever restricted to documents ``start:stop`` (their columns of
        `score`, the same numbers; global statistics such as the idf stay the whole corpus's):
        one document shard of the rank stage (`arecall.core.rank_blocks`)."""
        shard = copy.copy(self)
        shard._docs = self._docs[start:stop]
        return shard
