"""scikit-learn's TfidfVectorizer configured to the seed's weighting.

``sublinear_tf`` gives 1 + ln(tf), ``smooth_idf`` gives ln((n + 1) / (df + 1)) + 1, ``norm='l2'``
gives cosine. The only difference from `arecall.retrievers.tfidf` is that scikit-learn drops
unseen query terms before normalising, which rescales a query's scores by a constant: the
ranking, and so every metric, is the same. It exists as an independent implementation to
cross-check the built-in one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from arecall.retrievers.tfidf import TOKEN_PATTERN

__all__ = ["SklearnTfidf"]


class SklearnTfidf:
    """TF-IDF cosine via `sklearn.feature_extraction.text.TfidfVectorizer`.

    Examples
    --------
    >>> r = SklearnTfidf().fit(["red apple", "green apple", "blue sky"])
    >>> (r.score(["apple"]).toarray() > 0).tolist()
    [[True, True, False]]
    """

    @classmethod
    def from_config(cls, cfg: Any) -> SklearnTfidf:
        """Build from the ``retriever`` section (`SklearnTfidfConfig`: nothing of its own)."""
        return cls()

    def __init__(self) -> None:
        self._vectorizer = TfidfVectorizer(
            lowercase=True,
            token_pattern=TOKEN_PATTERN,
            sublinear_tf=True,
            smooth_idf=True,
            norm="l2",
            dtype=np.float64,
        )

    def fit(self, documents: Sequence[str]) -> SklearnTfidf:
        self._terms_by_docs = self._vectorizer.fit_transform(documents).T.tocsr()
        return self

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        return (self._vectorizer.transform(queries) @ self._terms_by_docs).tocsr()

    def document_shard(self, start: int, stop: int) -> SklearnTfidf:
        """This fitted retriever restricted to documents ``start:stop`` (their columns of
        `score`, the same numbers; global statistics such as the idf stay the whole corpus's):
        one document shard of the rank stage (`arecall.core.rank_blocks`)."""
        shard = copy.copy(self)
        shard._terms_by_docs = self._terms_by_docs[:, start:stop]
        return shard
