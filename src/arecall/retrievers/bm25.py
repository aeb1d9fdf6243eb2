"""BM25 through the bm25s package, as a sparse queries × documents score matrix.

TF-IDF cosine is the seed's retriever; BM25 is what most production lexical search runs, so the
placement effect is measured on it too. The scoring is bm25s's own: its eager index holds, for
every term, the BM25 contribution of each document containing it (idf × saturated tf with length
normalisation, per ``method``), and a query's score of a document is the sum of its terms'
contributions, a repeated query term counting again — exactly what ``bm25s.BM25.get_scores``
computes. Here that sum is taken for a whole chunk of queries at once as one sparse product
(query term counts × bm25s's term-by-document matrix, the same arrays bm25s holds, not a copy),
and only documents scoring above zero are kept, as for every retriever.

Tokens are ``[a-z0-9]+`` of the lower-cased text, by `arecall.retrievers.tfidf.tokenize` itself
(no stemming, no stop words; Arrow buffers, no Python object per token), so lexical retrievers
differ only in weighting. ``method`` is one of
``lucene`` (default), ``robertson`` or ``atire``; bm25s's BM25L and BM25+ add a constant to every
document's score, which a sparse ranking of positive scores cannot hold, so they are refused.
Scores are float32, bm25s's precision.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, overload

import bm25s
import numpy as np
import pyarrow.compute as pc
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.core.schema import validate
from arecall.retrievers.schema import BM25_METHODS as METHODS
from arecall.retrievers.schema import BM25Config
from arecall.retrievers.tfidf import encode, tokenize

# bm25s sets its own logger to DEBUG at import; under Hydra's logging that put "[DEBUG]" lines
# into every sweep. Its warnings still show.
logging.getLogger("bm25s").setLevel(logging.WARNING)

__all__ = ["BM25", "METHODS", "positive_part"]


def positive_part(scores: sp.spmatrix) -> sp.csr_matrix:
    """``scores`` as CSR with every entry ≤ 0 removed (documents that do not match), sorted.

    Examples
    --------
    >>> positive_part(sp.csr_matrix(np.array([[0.5, -1.0, 0.0]]))).toarray().tolist()
    [[0.5, 0.0, 0.0]]
    """
    out = sp.csr_matrix(scores)
    out.data[out.data <= 0] = 0
    out.eliminate_zeros()
    out.sort_indices()
    return out


class BM25:
    """Okapi BM25 scores from a `bm25s.BM25` index.

    Parameters
    ----------
    k1 : float, default `BM25Config.k1`
        Term-frequency saturation (≥ 0).
    b : float, default `BM25Config.b`
        Length normalisation, in [0, 1].
    method : {"lucene", "robertson", "atire"}, default `BM25Config.method`
        bm25s's variant (idf and tf formulas, Kamphuis et al. 2020).

    Attributes
    ----------
    model : bm25s.BM25
        The fitted bm25s index (after `fit`); its ``vocab_dict`` maps the tokeniser's terms.

    Examples
    --------
    >>> r = BM25().fit(["red apple", "green apple pie", "blue sky"])
    >>> s = r.score(["apple pie"])
    >>> s.shape, s.indices.tolist()
    ((1, 3), [0, 1])
    >>> bool(s[0, 1] > s[0, 0])
    True
    """

    def __init__(
        self,
        *,
        k1: float = BM25Config.k1,
        b: float = BM25Config.b,
        method: str = BM25Config.method,
    ) -> None:
        self.k1, self.b, self.method = k1, b, method

    @classmethod
    def from_config(cls, cfg: Any) -> BM25:
        """Build from the ``retriever`` section, checked against `BM25Config`.

        Examples
        --------
        >>> BM25.from_config({"b": 2})
        Traceback (most recent call last):
        ...
        arecall.core.schema.ConfigProblem: retriever.b: must be a number in [0, 1], got 2
        """
        section = validate(BM25Config, {"name": "bm25", **cfg}, "retriever")
        return cls(k1=section["k1"], b=section["b"], method=section["method"])

    @staticmethod
    def tokenize(texts: Sequence[str]) -> list[list[str]]:
        """The tokens this retriever indexes: `arecall.retrievers.tfidf.tokenize`'s, per text.

        Examples
        --------
        >>> BM25.tokenize(["Red-Apple 42", ""])
        [['red', 'apple', '42'], []]
        """
        rows, tokens = tokenize(texts)
        return _split(tokens.to_pylist(), rows, len(texts))

    def fit(self, documents: Sequence[str]) -> BM25:
        """Index ``documents`` with bm25s (token ids from this tokeniser's vocabulary)."""
        rows, codes, self._vocabulary = encode(documents)
        if len(codes) == 0:
            raise ArecallError("retriever=bm25: the documents contain no [a-z0-9]+ token")
        vocab = {str(t): i for i, t in enumerate(self._vocabulary.to_pylist())}
        # each document as its list of term ids (bm25s counts tf and length itself), made on
        # demand: a million documents' lists held at once would take gigabytes
        corpus = _Tokenized(_TermIds(codes, rows, len(documents)), vocab)
        self.model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        self.model.index(corpus, create_empty_token=False, show_progress=False)
        s = self.model.scores
        # bm25s keeps documents × terms as CSC: the same arrays are terms × documents as CSR
        self._terms = sp.csr_matrix(
            (s["data"], s["indices"], s["indptr"]), shape=(len(vocab), int(s["num_docs"]))
        )
        return self

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        """BM25 scores, queries × documents (float32), positive entries only."""
        rows, tokens = tokenize(queries)
        codes = pc.index_in(tokens, value_set=self._vocabulary).to_numpy(zero_copy_only=False)
        seen = ~np.isnan(codes.astype(np.float64))  # a term bm25s never indexed scores nothing
        counts = sp.csr_matrix(
            (
                np.ones(int(seen.sum()), dtype=np.float32),
                (rows[seen], codes[seen].astype(np.int64)),
            ),
            shape=(len(queries), len(self._vocabulary)),
        )
        counts.sum_duplicates()  # a repeated query term counts again, as in bm25s
        return positive_part(counts @ self._terms)

    def document_shard(self, start: int, stop: int) -> BM25:
        """This fitted retriever restricted to documents ``start:stop`` (their columns of
        `score`, the same numbers; global statistics such as the idf stay the whole corpus's):
        one document shard of the rank stage (`arecall.core.rank_blocks`)."""
        shard = copy.copy(self)
        shard._terms = self._terms[:, start:stop]
        shard.model = None  # bm25s's own index: scoring reads only the term matrix
        return shard


class _Tokenized(NamedTuple):
    """What `bm25s.BM25.index` accepts as a tokenised corpus: ``ids`` and ``vocab``."""

    ids: Sequence[list[int]]
    vocab: dict[str, int]


class _TermIds(Sequence[list[int]]):
    """Each document's term ids as a list, built when bm25s asks for it."""

    def __init__(self, codes: np.ndarray, rows: np.ndarray, n: int) -> None:
        self._codes = codes
        self._ends = np.cumsum(np.bincount(rows, minlength=n))
        self._starts = self._ends - np.bincount(rows, minlength=n)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> list[int]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[int]]: ...

    def __getitem__(self, i: int | slice) -> list[int] | list[list[int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._codes[self._starts[i] : self._ends[i]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        for a, z in zip(self._starts.tolist(), self._ends.tolist(), strict=True):
            yield self._codes[a:z].tolist()


def _split(flat: list[Any], rows: np.ndarray, n: int) -> list[list[Any]]:
    """Group ``flat`` (ordered by ``rows``, ascending) into ``n`` lists."""
    ends = np.cumsum(np.bincount(rows, minlength=n)).tolist()
    return [flat[a:z] for a, z in zip([0, *ends[:-1]], ends, strict=True)]
