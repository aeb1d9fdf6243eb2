"""Rankings: per query, documents in descending score order, ties by ascending document id.

Every retriever returns sparse queries × documents scores; `rank_queries` turns them into a
ragged `Ranking` a block of queries at a time (one sort per block, no Python loop per query),
keeping only documents that score above zero (as the seed does) — or, for a dense retriever
whose every document has a score (``every_entry=True``: ``retriever=embeddings``), every stored
entry, zero and negative scores included. Scores are compared after
rounding to 12 decimals, so two scores equal in exact arithmetic but different in the last bit
(another library's summation order) still tie and fall back to the id order, identically in every
implementation.

How deep a ranking is kept is decided per query. ``depth=None`` keeps every positive document
(the seed's full ranking). An integer ``depth`` keeps at least the first ``max(depth, k_max)``
documents (the *head*) — enough for every top-K metric and for the post placement — and keeps
the pre lists (each principal's first ``k_max`` authorized documents of the full ranking) exact
in whichever of two ways stores fewer entries for that query:

* **head + tails**: the head, plus each principal's authorized documents below it that its pre
  list needs (the *tails*: principal, document, rank) — small with few principals;
* **ranked to the needed depth**: the ranking down to the deepest document any principal's pre
  list reaches, no tails — small with many principals (with 100 principals the tails can hold
  several times more entries than the ranking itself).

`Ranking.sizes` reports both totals and the choice (the rank stage prints and saves it). The rank
of the first relevant document is taken from the full row, so MRR is exact either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.core.ragged import (
    expand,
    offsets,
    positions_in_groups,
    positions_in_runs,
    run_starts,
)
from arecall.io.atomic import write_npz

__all__ = [
    "RANKING_FIELDS",
    "TIE_DECIMALS",
    "Ranking",
    "rank_queries",
    "rank_scores",
]

TIE_DECIMALS = 12
# One int64 sort key per entry: the row above bit 52, the 12-decimal score grid below. Exact for
# scores under 2**12 (there 10**-12 exceeds the float64 spacing, so distinct grid points stay
# distinct rounded floats) and blocks under 2**11 rows; anything else sorts on the floats.
_SCORE_BITS = 52
_SCORE_MASK = (1 << _SCORE_BITS) - 1
_PACKED_LIMIT = float(1 << 12)
_PACKED_ROWS = 1 << 11
#: What `Ranking.sizes` counts (summed over blocks; plus ``queries``).
_SIZES = ("head_entries", "tail_entries", "depth_entries", "kept_entries", "queries_as_tails")
RANKING_FIELDS = (
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
#: Each field's dtype, as `rank_queries` makes it.
_FIELD_TYPES = {
    "indptr": np.int64,
    "doc_index": np.int32,
    "score": np.float64,
    "first_relevant": np.int64,
    "n_positive": np.int64,
    "tail_principal": np.int32,
    "tail_query": np.int32,
    "tail_doc": np.int32,
    "tail_rank": np.int32,
}


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
    sizes : mapping of str to int
        How `rank_queries` chose to store it (not saved): ``head_entries`` + ``tail_entries``
        (head and tails for every query), ``depth_entries`` (every query ranked as deep as its
        pre lists need), ``kept_entries`` (what is stored: the smaller of the two per query),
        ``queries_as_tails`` and ``queries``. Empty for a loaded ranking.
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
    sizes: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

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
        write_npz(path, {f: getattr(self, f) for f in RANKING_FIELDS})

    @classmethod
    def load(cls, path: str | Path) -> Ranking:
        if not Path(path).is_file():
            raise ArecallError(f"{path}: missing; run the rank stage first")
        with np.load(path, allow_pickle=False) as z:
            return cls(**{f: z[f] for f in RANKING_FIELDS})


def _sorted_block(
    block: sp.csr_matrix, every_entry: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One block's positive entries (every stored entry, with ``every_entry``) ordered by (row,
    rounded score descending, id ascending).

    Returns the row of each entry, its document, its score and its 0-based rank in its row.
    Scores in [0, `_PACKED_LIMIT`) sort as one int64 key per entry (row, then the score's
    12-decimal integer ``rint(score × 10**12)`` — the number `numpy.round` divides back — so the
    order and the ties are those of the rounded floats); other scores sort on the rounded
    floats themselves. Either way the sort is stable over ascending ids.
    """
    block = sp.csr_matrix(block)
    if not block.has_sorted_indices:
        block = block.sorted_indices()
    vals = np.asarray(block.data, dtype=np.float64)
    idx = block.indices
    keep = np.ones(len(vals), dtype=bool) if every_entry else vals > 0
    lengths = np.diff(block.indptr)
    if not keep.all():
        vals, idx = vals[keep], idx[keep]
        lengths = np.bincount(
            np.repeat(np.arange(block.shape[0]), lengths)[keep], minlength=block.shape[0]
        )
    rows = np.repeat(np.arange(block.shape[0], dtype=np.int64), lengths)
    packed = len(vals) and vals.min() >= 0 and vals.max() < _PACKED_LIMIT
    if packed and block.shape[0] < _PACKED_ROWS:
        grid = np.rint(vals * 10.0**TIE_DECIMALS).astype(np.int64)
        order = np.argsort((rows << _SCORE_BITS) + (_SCORE_MASK - grid), kind="stable")
    else:
        order = np.lexsort((-np.round(vals, TIE_DECIMALS), rows))
    rank = positions_in_groups(lengths)
    return rows, idx[order].astype(np.int32), vals[order], rank


def _first_relevant(
    rows: np.ndarray, docs: np.ndarray, rank: np.ndarray, rel: sp.csr_matrix, n_rows: int
) -> np.ndarray:
    """1-based rank of each row's first relevant entry (0: none), entries in ranked order."""
    out = np.zeros(n_rows, dtype=np.int64)
    if rel.nnz == 0 or len(docs) == 0:
        return out
    n_docs = rel.shape[1]
    keys = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(rel.indptr)) * n_docs
    keys += rel.indices
    probe = rows * n_docs + docs
    at = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
    hit = np.flatnonzero(keys[at] == probe)
    if len(hit):
        first = hit[run_starts(rows[hit])]
        out[rows[first]] = rank[first] + 1
    return out


@dataclass
class _Block:
    """What `_rank_block` keeps of one block of queries (``needed``: per query, the depth its
    pre lists reach in the full ranking, which a sharded ranking checks its exactness by)."""

    lengths: np.ndarray
    docs: np.ndarray
    scores: np.ndarray
    first_relevant: np.ndarray
    n_positive: np.ndarray
    tails: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    sizes: dict[str, int]
    needed: np.ndarray


def _pre_needs(
    rows: np.ndarray,
    docs: np.ndarray,
    rank: np.ndarray,
    allowed: np.ndarray,
    k_max: int,
    needed: np.ndarray,
) -> Iterable[tuple[int, np.ndarray]]:
    """Per principal, the entries of its first ``k_max`` authorized documents per query
    (entries in ranked order); raises ``needed`` in place to the depth the deepest reaches."""
    for p in range(allowed.shape[0]):
        at = np.flatnonzero(allowed[p][docs])  # principal p's documents, in ranked order
        if not len(at):
            continue
        at = at[positions_in_runs(rows[at]) < k_max]  # its first k_max per query
        r = rows[at]
        last = at[np.r_[r[1:] != r[:-1], True]]  # one per query: its deepest needed item
        needed[rows[last]] = np.maximum(needed[rows[last]], rank[last] + 1)
        yield p, at


def _rank_block(
    block: sp.csr_matrix,
    first_query: int,
    head_depth: int | None,
    allowed: np.ndarray | None,
    k_max: int,
    rel: sp.csr_matrix | None,
    every_entry: bool = False,
    n_positive: np.ndarray | None = None,
) -> _Block:
    """Rank one block of queries and keep, per query, the smaller exact representation.

    ``n_positive`` (per query) is the full ranking's length when ``block`` holds only its
    first entries (a merge of document shards); by default, what ``block`` holds."""
    n_rows = block.shape[0]
    rows, docs, scores, rank = _sorted_block(block, every_entry)
    if n_positive is None:
        n_positive = np.bincount(rows, minlength=n_rows).astype(np.int64)
    first_relevant = (
        np.zeros(n_rows, dtype=np.int64)
        if rel is None
        else _first_relevant(rows, docs, rank, rel[first_query : first_query + n_rows], n_rows)
    )
    head = n_positive if head_depth is None else np.minimum(n_positive, head_depth)
    needed = head.copy()  # depth the pre lists need, if ranked that deep with no tails
    n_tails = np.zeros(n_rows, dtype=np.int64)
    found: list[tuple[int, np.ndarray]] = []
    if head_depth is not None and allowed is not None and (head < n_positive).any():
        for p, at in _pre_needs(rows, docs, rank, allowed, k_max, needed):
            below = at[rank[at] >= head[rows[at]]]
            if len(below):
                n_tails += np.bincount(rows[below], minlength=n_rows)
                found.append((p, below))
    as_tails = head + n_tails < needed  # head + tails is smaller: keep that, else rank deeper
    kept = np.where(as_tails, head, needed)
    keep = rank < kept[rows]
    parts = [
        (np.full(len(at), p, np.int32), at)
        for p, at in ((p, below[as_tails[rows[below]]]) for p, below in found)
        if len(at)
    ]
    if parts:
        principal = np.concatenate([w for w, _ in parts])
        at = np.concatenate([a for _, a in parts])
        order = np.argsort(rows[at], kind="stable")  # (query, principal, rank)
        principal, at = principal[order], at[order]
        tails = (
            principal,
            (rows[at] + first_query).astype(np.int32),
            docs[at],
            rank[at].astype(np.int32),
        )
    else:
        tails = tuple(np.zeros(0, np.int32) for _ in range(4))  # type: ignore[assignment]
    sizes = {
        "head_entries": int(head.sum()),
        "tail_entries": int(n_tails.sum()),
        "depth_entries": int(needed.sum()),
        "kept_entries": int(kept.sum()) + int(n_tails[as_tails].sum()),
        "queries_as_tails": int((as_tails & (n_tails > 0)).sum()),
    }
    return _Block(
        kept.astype(np.int64),
        docs[keep],
        scores[keep],
        first_relevant,
        n_positive,
        tails,
        sizes,
        needed,
    )


def rank_queries(
    score_chunks: Iterable[sp.spmatrix],
    *,
    n_queries: int,
    depth: int | None = None,
    acl: sp.spmatrix | np.ndarray | None = None,
    k_max: int = 1,
    relevance: sp.spmatrix | None = None,
    every_entry: bool = False,
    first_query: int = 0,
) -> Ranking:
    """Rank every query's positive scores, as deep as ``depth`` and the pre-filter need.

    Parameters
    ----------
    score_chunks : iterable of sparse matrices
        Consecutive blocks of query rows (queries × documents, columns in ascending id order).
    n_queries : int
        Total rows across the chunks.
    depth : int, optional
        ``None`` keeps every document scoring > 0. An integer keeps at least
        ``max(depth, k_max)`` per query (a depth below ``k_max`` is raised to it here; the rank
        stage refuses such a configuration, `check_depth`), and keeps every principal's first
        ``k_max`` authorized documents exactly, as head + tails or by ranking deeper, whichever
        stores fewer entries for that query (see the module docstring).
    acl : sparse bool matrix (principals × documents), optional
    k_max : int
        The largest K that will be evaluated.
    relevance : sparse matrix (queries × documents), optional
        To record the rank of the first relevant document in the full ranking.
    every_entry : bool
        Rank every stored entry, whatever its sign, not only positive scores: for a dense
        retriever that scores every document (``n_positive`` then counts them all).
    first_query : int
        The first row's query number, when the chunks are one block of a larger query set
        (``relevance`` then holds the block's rows): the tails name queries by it, so blocks
        ranked apart join into the ranking of the whole set (`arecall.core.rank_blocks`).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> s = sp.csr_matrix([[0.9, 0.8, 0.7, 0.6]])
    >>> acl = sp.csr_matrix([[False, False, False, True]])
    >>> r = rank_queries([s], n_queries=1, depth=1, acl=acl, k_max=1)
    >>> r.padded().tolist(), r.tail_doc.tolist(), r.tail_rank.tolist()
    ([[0]], [3], [3])
    >>> wide = sp.csr_matrix([[False, True, True, True]])  # 4 ranked beat 3 + 2 tails
    >>> r = rank_queries([s], n_queries=1, depth=1, acl=sp.vstack([acl, wide]), k_max=3)
    >>> r.padded().tolist(), r.tail_doc.tolist(), r.sizes["kept_entries"]
    ([[0, 1, 2, 3]], [], 4)
    """
    if depth is not None and depth <= 0:
        raise ArecallError(f"retriever.depth: must be a positive integer or null, got {depth}")
    head_depth = None if depth is None else max(depth, k_max)  # top-K metrics need K deep
    allowed = None if acl is None or depth is None else _dense_acl(acl)
    rel = None if relevance is None else sp.csr_matrix(relevance).sorted_indices()
    blocks: list[_Block] = []
    q = 0
    for chunk in score_chunks:
        for block in _row_slices(sp.csr_matrix(chunk)):
            blocks.append(_rank_block(block, q, head_depth, allowed, k_max, rel, every_entry))
            q += block.shape[0]
    if q != n_queries:
        raise ValueError(f"score chunks held {q} rows, expected {n_queries}")
    return _ranking_of(blocks, n_queries, first_query)


def _joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


def _ranking_of(blocks: list[_Block], n_queries: int, first_query: int = 0) -> Ranking:
    """The ranking of consecutive blocks (their tails' queries numbered from ``first_query``)."""
    sizes = {key: sum(b.sizes[key] for b in blocks) for key in _SIZES}
    sizes["queries"] = n_queries
    tail_query = _joined([b.tails[1] for b in blocks], np.int32)
    if first_query:
        tail_query = (tail_query + first_query).astype(np.int32)
    return Ranking(
        indptr=offsets(_joined([b.lengths for b in blocks], np.int64)),
        doc_index=_joined([b.docs for b in blocks], np.int32),
        score=_joined([b.scores for b in blocks], np.float64),
        first_relevant=_joined([b.first_relevant for b in blocks], np.int64),
        n_positive=_joined([b.n_positive for b in blocks], np.int64),
        tail_principal=_joined([b.tails[0] for b in blocks], np.int32),
        tail_query=tail_query,
        tail_doc=_joined([b.tails[2] for b in blocks], np.int32),
        tail_rank=_joined([b.tails[3] for b in blocks], np.int32),
        sizes=sizes,
    )


def _dense_acl(acl: sp.spmatrix | np.ndarray) -> np.ndarray:
    """The ACL as a dense principals × documents bool array (row p: one contiguous gather);
    one already dense is used as it is."""
    if isinstance(acl, np.ndarray) and acl.dtype == bool and acl.flags.c_contiguous:
        return acl
    return np.ascontiguousarray(np.asarray(sp.csr_matrix(acl).toarray(), dtype=bool))


def _row_slices(matrix: sp.csr_matrix) -> Iterable[sp.csr_matrix]:
    """``matrix`` in blocks of at most `_PACKED_ROWS` - 1 rows (what one packed sort key holds)."""
    step = _PACKED_ROWS - 1
    if matrix.shape[0] <= step:
        yield matrix
        return
    for start in range(0, matrix.shape[0], step):
        yield matrix[start : start + step]


def rank_scores(scores: sp.spmatrix, depth: int | None = None) -> Ranking:
    """Rank one score matrix with no principals: the first ``depth`` (or all) positive scores.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> rank_scores(sp.csr_matrix([[0.5, 0.0, 0.5, 0.9]])).padded().tolist()
    [[3, 0, 2]]
    """
    return rank_queries([scores], n_queries=scores.shape[0], depth=depth)
