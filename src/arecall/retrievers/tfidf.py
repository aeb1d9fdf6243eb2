"""The seed's TF-IDF, exactly, on scipy sparse matrices.

Tokens are ``[a-z0-9]+`` of the lower-cased text; tf weight 1 + ln(count); idf
ln((n + 1) / (df + 1)) + 1; vectors L2-normalised; score = cosine. A query term the corpus never
saw has idf 1.0: it scores against nothing but still counts in the query's norm, so the scores
(not only the order) equal the seed's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.preprocessing import normalize

__all__ = ["TOKEN_PATTERN", "SeedTfidf"]

TOKEN_PATTERN = r"[a-z0-9]+"


def _sublinear(counts: sp.csr_matrix) -> sp.csr_matrix:
    weighted = counts.astype(np.float64)
    weighted.data = 1.0 + np.log(weighted.data)
    return weighted


class SeedTfidf:
    """TF-IDF cosine retrieval with authorized-recall 0.1.0's weighting.

    Examples
    --------
    >>> r = SeedTfidf().fit(["red apple", "green apple", "blue sky"])
    >>> np.round(r.score(["apple pie"]).toarray(), 4).tolist()
    [[0.4882, 0.4882, 0.0]]
    """

    def __init__(self) -> None:
        self._counter = CountVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN, dtype=np.int64)

    def fit(self, documents: Sequence[str]) -> SeedTfidf:
        counts = self._counter.fit_transform(documents).tocsr()
        n = counts.shape[0]
        df = np.bincount(counts.indices, minlength=counts.shape[1])
        self._idf = np.log((n + 1) / (df + 1.0)) + 1.0
        self._docs = normalize(_sublinear(counts) @ sp.diags(self._idf), norm="l2").tocsr()
        self._analyzer = self._counter.build_analyzer()
        return self

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        weighted = _sublinear(self._counter.transform(queries).tocsr()) @ sp.diags(self._idf)
        sq_norm = np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel()
        vocab = self._counter.vocabulary_
        for i, text in enumerate(queries):  # unseen terms: idf 1.0, present only in the norm
            unseen = Counter(t for t in self._analyzer(text) if t not in vocab)
            sq_norm[i] += sum((1.0 + np.log(c)) ** 2 for c in unseen.values())
        norm = np.sqrt(sq_norm)
        norm[norm == 0] = 1.0
        query_vectors = sp.diags(1.0 / norm) @ weighted
        return (query_vectors @ self._docs.T).tocsr()
