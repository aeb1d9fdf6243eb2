"""Rankings: per query, documents in descending score order, ties by ascending document id.

Every retriever returns sparse queries × documents scores; `rank_queries` turns them into a
ragged `Ranking` one query at a time, keeping only documents that score above zero (as the seed
does). Scores are compared after rounding to 12 decimals, so two scores equal in exact arithmetic
but different in the last bit (another library's summation order) still tie and fall back to the
id order, identically in every implementation.

How deep a ranking is kept is decided per query. ``depth=None`` keeps every positive document
(the seed's full ranking). An integer keeps the first ``max(depth, k_max)`` documents — enough for
every top-K metric and for the post placement — plus, for each principal that has fewer than
``k_max`` authorized documents among them, its next authorized documents further down (the
*tail*), found in the full row. So the pre list — the first K authorized items of the full
ranking — stays exact while only what it needs is stored. The rank of the first relevant
document is taken from the full row too, so MRR is exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.core.ragged import expand, offsets, positions_in_groups, positions_in_runs
from arecall.io.atomic import write_npz

__all__ = ["TIE_DECIMALS", "Ranking", "rank_queries", "rank_scores"]

TIE_DECIMALS = 12
_FIELDS = (
    "indptr",
    "doc_index",
    "score",
    "first_relevant",
    "n_positive",
    "tail_principal",
    "tail_query",
    "tail_doc",
    "tail_rank",
)


@dataclass(frozen=True)
class Ranking:
    """Ranked document row indices per query, stored ragged (CSR-like).

    Attributes
    ----------
    indptr : ndarray of int64, shape (n_queries + 1,)
        Query i's ranking is ``doc_index[indptr[i]:indptr[i + 1]]``, best first.
    doc_index : ndarray of int32
    score : ndarray of float64
    first_relevant : ndarray of int64, shape (n_queries,)
        1-based rank of the first relevant document in the full ranking; 0 if none scores > 0.
    n_positive : ndarray of int64, shape (n_queries,)
        How many documents scored above zero (the full ranking's length).
    tail_principal, tail_query, tail_doc, tail_rank : ndarrays
        Authorized documents below the kept depth that a principal's pre list needs: which
        principal and query, which document, and its 0-based rank in the full ranking. Sorted
        by (query, principal, rank); empty when the whole ranking is kept.
    """

    indptr: np.ndarray
    doc_index: np.ndarray
    score: np.ndarray
    first_relevant: np.ndarray
    n_positive: np.ndarray
    tail_principal: np.ndarray
    tail_query: np.ndarray
    tail_doc: np.ndarray
    tail_rank: np.ndarray

    @property
    def n_queries(self) -> int:
        return len(self.indptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        """Number of ranked documents kept per query."""
        return np.diff(self.indptr)

    def padded(self, width: int | None = None, rows: slice = slice(None)) -> np.ndarray:
        """Rows ``rows`` as a (n, width) int array padded with -1 (width: the longest row).

        Examples
        --------
        >>> import scipy.sparse as sp
        >>> rank_scores(sp.csr_matrix([[0.2, 0.0, 0.9], [0.0, 0.0, 0.0]])).padded().tolist()
        [[2, 0], [-1, -1]]
        """
        starts = self.indptr[:-1][rows]
        lengths = self.lengths[rows]
        if width is None:
            width = int(lengths.max()) if len(lengths) else 0
        width = max(width, 1)
        out = np.full((len(starts), width), -1, dtype=np.int32)
        take = np.minimum(lengths, width)
        row = np.repeat(np.arange(len(starts)), take)
        out[row, positions_in_groups(take)] = self.doc_index[expand(starts, take)]
        return out

    def save(self, path: str | Path) -> None:
        """Write as an uncompressed ``.npz`` (plain arrays; read back without pickle)."""
        write_npz(path, {f: getattr(self, f) for f in _FIELDS})

    @classmethod
    def load(cls, path: str | Path) -> Ranking:
        if not Path(path).is_file():
            raise ArecallError(f"{path}: missing; run the rank stage first")
        with np.load(path, allow_pickle=False) as z:
            return cls(**{f: z[f] for f in _FIELDS})


def _first_d(key: np.ndarray, idx: np.ndarray, d: int) -> np.ndarray:
    """Positions of the ``d`` best entries by (key, idx), in order; exact under ties."""
    n = len(key)
    if d >= n:
        return np.lexsort((idx, key))
    part = np.argpartition(key, d - 1)[:d]
    threshold = key[part].max()
    better = np.flatnonzero(key < threshold)
    equal = np.flatnonzero(key == threshold)
    equal = equal[np.argsort(idx[equal], kind="stable")[: d - len(better)]]
    chosen = np.concatenate([better, equal])
    return chosen[np.lexsort((idx[chosen], key[chosen]))]


def _rank_of(key: np.ndarray, idx: np.ndarray, at: int) -> int:
    """1-based rank of entry ``at`` among all entries ordered by (key, idx)."""
    return int(np.count_nonzero((key < key[at]) | ((key == key[at]) & (idx < idx[at])))) + 1


def _rank_row(
    key: np.ndarray, idx: np.ndarray, allowed_t: np.ndarray, k_max: int, depth: int
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One row: the kept head (positions, in order) and the tails (principal, position, rank).

    ``allowed_t`` is the ACL transposed (documents × principals, C order), so gathering the
    rows of a query's documents reads contiguous memory.
    """
    n = len(key)
    head = _first_d(key, idx, min(depth, n))
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(head) == n or allowed_t.shape[1] == 0:
        return head, empty
    need = k_max - allowed_t[idx[head]].sum(axis=0)
    if not (need > 0).any():
        return head, empty
    order = np.lexsort((idx, key))  # a principal is short of authorized items: go down the row
    rest = order[len(head) :]
    position, who = np.nonzero(allowed_t[idx[rest]])
    by_principal = np.argsort(who, kind="stable")
    who, position = who[by_principal], position[by_principal]
    keep = positions_in_runs(who) < need[who]
    who, position = who[keep], position[keep]
    return head, (who.astype(np.int64), rest[position], len(head) + position.astype(np.int64))


def rank_queries(
    score_chunks: Iterable[sp.spmatrix],
    *,
    n_queries: int,
    depth: int | None = None,
    acl: sp.spmatrix | None = None,
    k_max: int = 1,
    relevance: sp.spmatrix | None = None,
) -> Ranking:
    """Rank every query's positive scores, as deep as ``depth`` and the pre-filter need.

    Parameters
    ----------
    score_chunks : iterable of sparse matrices
        Consecutive blocks of query rows (queries × documents, columns in ascending id order).
    n_queries : int
        Total rows across the chunks.
    depth : int, optional
        ``None`` keeps every document scoring > 0; an integer keeps at least that many and
        extends each query until every principal of ``acl`` has ``k_max`` authorized documents
        in it (or has all of its authorized documents in it).
    acl : sparse bool matrix (principals × documents), optional
    k_max : int
        The largest K that will be evaluated.
    relevance : sparse matrix (queries × documents), optional
        To record the rank of the first relevant document in the full ranking.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> s = sp.csr_matrix([[0.9, 0.8, 0.7, 0.6]])
    >>> acl = sp.csr_matrix([[False, False, False, True]])
    >>> r = rank_queries([s], n_queries=1, depth=1, acl=acl, k_max=1)
    >>> r.padded().tolist(), r.tail_doc.tolist(), r.tail_rank.tolist()
    ([[0]], [3], [3])
    """
    if depth is not None and depth <= 0:
        raise ArecallError(f"retriever.depth: must be a positive integer or null, got {depth}")
    depth = None if depth is None else max(depth, k_max)  # top-K metrics need K deep at least
    allowed_t = (  # documents × principals, so a query's documents are contiguous rows
        np.zeros((0, 0), dtype=bool)
        if acl is None
        else np.ascontiguousarray(np.asarray(acl.toarray(), dtype=bool).T)
    )
    rel = None if relevance is None else sp.csr_matrix(relevance)
    lengths = np.zeros(n_queries, dtype=np.int64)
    first_relevant = np.zeros(n_queries, dtype=np.int64)
    n_positive = np.zeros(n_queries, dtype=np.int64)
    docs: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    tails: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    q = 0
    for chunk in score_chunks:
        block = sp.csr_matrix(chunk)
        for r in range(block.shape[0]):
            lo, hi = block.indptr[r], block.indptr[r + 1]
            vals, idx = block.data[lo:hi], block.indices[lo:hi]
            keep = vals > 0
            vals, idx = vals[keep].astype(np.float64), idx[keep]
            key = -np.round(vals, TIE_DECIMALS)
            n_positive[q] = len(vals)
            if rel is not None and len(vals):
                relevant = np.isin(idx, rel.indices[rel.indptr[q] : rel.indptr[q + 1]])
                if relevant.any():
                    sub = np.flatnonzero(relevant)
                    best = sub[_first_d(key[sub], idx[sub], 1)[0]]
                    first_relevant[q] = _rank_of(key, idx, best)
            head, (who, at, rank) = _rank_row(key, idx, allowed_t, k_max, depth or len(vals) or 1)
            lengths[q] = len(head)
            docs.append(idx[head].astype(np.int32))
            scores.append(vals[head])
            if len(who):
                tails.append(
                    (
                        who.astype(np.int32),
                        np.full(len(who), q, dtype=np.int32),
                        idx[at].astype(np.int32),
                        rank.astype(np.int32),
                    )
                )
            q += 1
    if q != n_queries:
        raise ValueError(f"score chunks held {q} rows, expected {n_queries}")
    indptr = offsets(np.asarray(lengths, dtype=np.int64))
    columns = list(zip(*tails, strict=True)) if tails else [(np.zeros(0),)] * 4
    tail = [np.concatenate(column) for column in columns]
    return Ranking(
        indptr=indptr,
        doc_index=np.concatenate(docs) if docs else np.zeros(0, dtype=np.int32),
        score=np.concatenate(scores) if scores else np.zeros(0, dtype=np.float64),
        first_relevant=first_relevant,
        n_positive=n_positive,
        tail_principal=tail[0].astype(np.int32),
        tail_query=tail[1].astype(np.int32),
        tail_doc=tail[2].astype(np.int32),
        tail_rank=tail[3].astype(np.int32),
    )


def rank_scores(scores: sp.spmatrix, depth: int | None = None) -> Ranking:
    """Rank one score matrix with no principals: the first ``depth`` (or all) positive scores.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> rank_scores(sp.csr_matrix([[0.5, 0.0, 0.5, 0.9]])).padded().tolist()
    [[3, 0, 2]]
    """
    return rank_queries([scores], n_queries=scores.shape[0], depth=depth)
