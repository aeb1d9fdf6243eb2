"""Rankings: per query, documents in descending score order, ties by ascending document id.

Every retriever returns a sparse queries × documents score matrix; `rank_scores` turns it into
a padded `Ranking` in one vectorised sort, keeping only documents that score above zero (as the
seed does) and, when ``depth`` is set, only the first ``depth`` of them. Scores are compared after
rounding to 12 decimals, so that two scores that are equal in exact arithmetic but differ in the
last bit (different summation orders in different libraries) still tie and fall back to the id
order, identically in every implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from arecall.atomic import write_npz
from arecall.errors import ArecallError

__all__ = ["TIE_DECIMALS", "Ranking", "rank_scores"]

TIE_DECIMALS = 12


@dataclass(frozen=True)
class Ranking:
    """Ranked document row indices per query, padded with -1 (scores padded with NaN).

    Attributes
    ----------
    doc_index : ndarray of int32, shape (n_queries, width)
    score : ndarray of float64, shape (n_queries, width)
    truncated : ndarray of bool, shape (n_queries,)
        True where more documents scored above zero than ``depth`` kept.
    """

    doc_index: np.ndarray
    score: np.ndarray
    truncated: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """Number of ranked documents per query."""
        return (self.doc_index >= 0).sum(axis=1)

    def save(self, path: str | Path) -> None:
        """Write as an uncompressed ``.npz`` (plain arrays; read back without pickle)."""
        arrays = {"doc_index": self.doc_index, "score": self.score, "truncated": self.truncated}
        write_npz(path, arrays)

    @classmethod
    def load(cls, path: str | Path) -> Ranking:
        if not Path(path).is_file():
            raise ArecallError(f"{path}: missing; run the rank stage first")
        with np.load(path, allow_pickle=False) as z:
            return cls(doc_index=z["doc_index"], score=z["score"], truncated=z["truncated"])


def rank_scores(scores: sp.spmatrix, depth: int | None = None) -> Ranking:
    """Order each row's positive scores: descending score, then ascending column (= doc id).

    Parameters
    ----------
    scores : sparse matrix, shape (n_queries, n_docs)
        Column order must be ascending document id (as in `arecall.collection.Collection`).
    depth : int, optional
        Keep at most this many documents per query; ``None`` keeps every positive score.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> r = rank_scores(sp.csr_matrix([[0.5, 0.0, 0.5, 0.9], [0.0, 0.0, 0.0, 0.0]]))
    >>> r.doc_index.tolist()
    [[3, 0, 2], [-1, -1, -1]]
    """
    if depth is not None and depth <= 0:
        raise ArecallError(f"retriever.depth: must be a positive integer or null, got {depth}")
    coo = sp.coo_matrix(scores)
    keep = coo.data > 0
    rows, cols, vals = coo.row[keep], coo.col[keep], coo.data[keep].astype(np.float64)
    order = np.lexsort((cols, -np.round(vals, TIE_DECIMALS), rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    n_queries = scores.shape[0]
    counts = np.bincount(rows, minlength=n_queries)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    position = np.arange(len(rows)) - np.repeat(starts, counts)
    width = int(counts.max()) if len(counts) and counts.max() > 0 else 0
    if depth is not None:
        width = min(width, depth)
    sel = position < width
    doc_index = np.full((n_queries, max(width, 1)), -1, dtype=np.int32)
    score = np.full((n_queries, max(width, 1)), np.nan, dtype=np.float64)
    doc_index[rows[sel], position[sel]] = cols[sel]
    score[rows[sel], position[sel]] = vals[sel]
    return Ranking(doc_index=doc_index, score=score, truncated=counts > width)
