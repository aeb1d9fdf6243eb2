"""Where the authorization filter sits: after truncation (post) or before it (pre).

``post``: L_K = filter(top_K(ranking)) — unusable items spend slots, so fewer than K come back.
``pre``:  L_K = top_K(filter(ranking)) — K usable answers whenever K exist.

Claim: post ⊆ pre for every ranking, K and predicate, so Δ@K = ARecall^pre − ARecall^post ≥ 0.
Filtering keeps relative order; an item in post is authorized with at most K − 1 items (so at
most K − 1 authorized items) before it, hence it is among the first K authorized items. The
prove stage checks this on random inputs and on every run's own lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arecall.core.errors import ArecallError
from arecall.core.filters import post_filter, pre_filter
from arecall.core.ragged import positions_in_runs

if TYPE_CHECKING:  # scipy and the ranking load when lists are placed: ``arecall evaluate``
    import scipy.sparse as sp  # imports this module for the names alone

    from arecall.core.engine import Engine
    from arecall.core.ranking import Ranking

__all__ = [
    "CELL_BYTES",
    "COMPARED",
    "LIST_FIELDS",
    "PLACEMENTS",
    "PlacedLists",
    "Placement",
    "place_all",
    "place_to_file",
    "post_filter",
    "pre_filter",
    "principal_bytes",
]


class Placement(StrEnum):
    """Where the authorization filter sits relative to truncation to K: the one vocabulary.

    ``post`` and ``pre`` are the two placements compared throughout arecall (the pipeline's
    ``evaluation.placements``, the ``arecall_post`` / ``arecall_pre`` measures); ``as-is`` is
    ``arecall evaluate``'s third reading of a run: no filter, the list is what the principal
    gets. (Where a filter sits relative to an ANN search is another vocabulary,
    `arecall.vector.schema.SEARCH_PLACEMENTS`, planned in `arecall.vector.placement`.)
    """

    POST = "post"
    PRE = "pre"
    AS_IS = "as-is"


#: The placements the pipeline compares, in report order.
COMPARED: tuple[str, ...] = (Placement.POST.value, Placement.PRE.value)
#: Every placement ``arecall evaluate`` accepts.
PLACEMENTS: tuple[str, ...] = tuple(p.value for p in Placement)


# -- all query-principal pairs at once ---------------------------------------------------------

#: The arrays of a lists file, in `PlacedLists` order.
LIST_FIELDS = ("post", "post_rank", "pre", "pre_rank")

#: Bytes of temporaries per list cell (query × rank) of one principal in a block: the lists'
#: slices and the per-principal arrays of placement, `arecall.core.scoring`'s block and the
#: proof's checks. On this machine's engine a block is then about 2^22 cells
#: (`arecall.core.engine.LOCAL_BLOCK_BYTES`).
CELL_BYTES = 64


def principal_bytes(n_q: int, k_max: int) -> int:
    """Bytes one principal's block temporaries take: the engine sizes its blocks from them."""
    return CELL_BYTES * max(1, n_q * k_max)


@dataclass(frozen=True)
class PlacedLists:
    """What each placement returns for every (principal, query) pair, at the largest K.

    Arrays have shape (n_principals, n_queries, k_max) and hold document row indices padded
    with -1; ``*_rank`` holds each item's 0-based position in the unfiltered ranking. The post
    list at a smaller K is its items with rank < K; the pre list at a smaller K is its first K.
    """

    post: np.ndarray
    post_rank: np.ndarray
    pre: np.ndarray
    pre_rank: np.ndarray

    def save(self, path: str | Path) -> None:
        arrays = {f: getattr(self, f) for f in LIST_FIELDS}
        from arecall.io.atomic import write_npz

        write_npz(path, arrays)

    @classmethod
    def load(cls, path: str | Path) -> PlacedLists:
        if not Path(path).is_file():
            raise ArecallError(f"{path}: missing; run the filter stage first")
        with np.load(path, allow_pickle=False) as z:
            return cls(**{f: z[f] for f in LIST_FIELDS})

    @classmethod
    def read(cls, path: str | Path, start: int = 0, stop: int | None = None) -> PlacedLists:
        """Principals ``start … stop − 1`` of a lists file, read from the file alone.

        Why: a block of principals (on a Dask worker, or in this process) needs its own rows of
        every principal's lists; the members are mapped (`arecall.io.atomic.npz_member`), so
        only those rows are read, whatever the number of principals.
        """
        from arecall.io.atomic import npz_member

        if not Path(path).is_file():
            raise ArecallError(f"{path}: missing; run the filter stage first")
        return cls(**{f: np.array(npz_member(path, f)[start:stop]) for f in LIST_FIELDS})

    @staticmethod
    def shape_of(path: str | Path) -> tuple[int, int, int]:
        """(principals, queries, K_max) of a lists file, from its header alone."""
        from arecall.io.atomic import npz_member

        if not Path(path).is_file():
            raise ArecallError(f"{path}: missing; run the filter stage first")
        n_p, n_q, k_max = npz_member(path, "pre").shape
        return int(n_p), int(n_q), int(k_max)

    def block(self) -> dict[str, np.ndarray]:
        """The four arrays by name (what a block function takes)."""
        return {f: getattr(self, f) for f in LIST_FIELDS}


def place_all(
    ranking: Ranking, acl: sp.spmatrix, k_max: int, *, budget: int = 1 << 24, first: int = 0
) -> PlacedLists:
    """Apply both placements for every principal and query, one principal at a time.

    A principal's pre lists are its first ``k_max`` authorized items of each query's kept
    ranking (one gather of its ACL row over every kept item, then the first ``k_max`` per
    query), completed by the tails the rank stage found below the kept depth; its post lists
    are the pre items ranked above ``k_max`` (post ⊆ pre: an authorized item in the first K
    has fewer than K authorized items before it). The ranking must be deep enough for exact
    pre lists (`arecall.core.ranking.rank_queries` guarantees it); ``budget`` bounds the items
    gathered at once (memory), not the result. ``acl`` may be the rows of a block of
    principals, ``first`` the index of its first: the block's lists are those rows of the
    lists of every principal (the filter stage places blocks on its engine and joins them).

    Parameters
    ----------
    ranking : Ranking
    acl : sparse matrix of bool, shape (n_principals, n_docs)
    k_max : int
        The largest K evaluated.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from arecall.core.ranking import rank_scores
    >>> r = rank_scores(sp.csr_matrix([[0.5, 0.1, 0.9]]))
    >>> lists = place_all(r, sp.csr_matrix([[True, True, False]]), 2)
    >>> lists.post.tolist(), lists.pre.tolist()
    ([[[0, -1]]], [[[0, 1]]])
    """
    if k_max <= 0:
        raise ValueError(f"k_max must be positive, got {k_max}")
    import scipy.sparse as sp
    from tqdm import tqdm

    allowed = np.ascontiguousarray(np.asarray(sp.csr_matrix(acl).toarray(), dtype=bool))
    n_principals, n_queries = allowed.shape[0], ranking.n_queries
    shape = (n_principals, n_queries, k_max)
    out = {f: np.full(shape, -1, dtype=np.int32) for f in ("post", "post_rank", "pre", "pre_rank")}
    flat = {f: a.reshape(n_principals, n_queries * k_max) for f, a in out.items()}  # views
    spans = _query_spans(ranking.indptr, max(budget // 4, 1))
    bar = len(spans) > 1  # a terminal shows a bar past one block (tqdm: none on a pipe)
    for q_lo, q_hi in tqdm(spans, desc="filter", unit="block", disable=None if bar else True):
        lo, hi = int(ranking.indptr[q_lo]), int(ranking.indptr[q_hi])
        docs = ranking.doc_index[lo:hi]
        query_of = np.repeat(np.arange(q_lo, q_hi, dtype=np.int64), ranking.lengths[q_lo:q_hi])
        rank_of = np.arange(lo, hi, dtype=np.int64) - ranking.indptr[query_of]
        for p in range(n_principals):
            at = np.flatnonzero(allowed[p][docs])  # p's items, in (query, rank) order
            if not len(at):
                continue
            query = query_of[at]
            slot = positions_in_runs(query)
            kept = slot < k_max
            at, query, slot = at[kept], query[kept], slot[kept]
            rank, doc, cell = rank_of[at], docs[at], query * k_max + slot
            flat["pre"][p, cell], flat["pre_rank"][p, cell] = doc, rank
            top = rank < k_max  # a prefix of each query's pre items: the post list
            flat["post"][p, cell[top]], flat["post_rank"][p, cell[top]] = doc[top], rank[top]
    _append_tails(ranking, out["pre"], out["pre_rank"], first=first)
    return PlacedLists(**out)


def place_to_file(
    ranking: Ranking, acl: sp.spmatrix, k_max: int, out: str | Path, *, engine: Engine
) -> tuple[int, int, int]:
    """`place_all`'s lists written to ``out``, placed by blocks of principals on ``engine``.

    Why: the lists hold 16 bytes per (principal, query, slot) — gigabytes at 10^7 pairs — and
    no one process needs them whole. Each block places its principals (`place_all` on its ACL
    rows) and writes its part beside ``out``; the parts are joined in principal order, one
    part's array at a time (`arecall.io.atomic.write_npz_pieces`), into the bytes
    ``place_all(...).save(out)`` writes, whatever the engine and block size. A Dask worker
    writes its part itself (the directory must be on a filesystem the workers share, as for
    the rank stage's blocks). Returns the file's shape (principals, queries, K_max).
    """
    import scipy.sparse as sp

    from arecall.io.atomic import npz_member, temporary_directory, write_npz_pieces

    if k_max <= 0:
        raise ValueError(f"k_max must be positive, got {k_max}")
    rows = sp.csr_matrix(acl, dtype=bool)
    n_p, n_q = rows.shape[0], ranking.n_queries
    target = Path(out).absolute()  # workers write beside it: not relative to their own cwd
    with temporary_directory(target) as where:
        parts: list[tuple[int, int, str]] = engine.map_blocks(
            _place_block,
            n_p,
            shared={"ranking": ranking, "k_max": k_max, "where": str(where)},
            block_data=lambda s, e: rows[s:e],
            per_principal=principal_bytes(n_q, k_max),
        )
        covered = [(s, e) for s, e, _ in parts]
        if [s for s, _ in covered] != [0, *(e for _, e in covered[:-1])] or (
            covered and covered[-1][1] != n_p
        ):  # pragma: no cover - the engine returns every block once, in order
            raise ArecallError(f"{target}: the blocks placed {covered}, not 0 … {n_p}")

        def pieces(field: str) -> Any:
            return lambda: (npz_member(path, field) for _, _, path in parts)

        shape = (n_p, n_q, k_max)
        write_npz_pieces(target, {f: (np.int32, shape, pieces(f)) for f in LIST_FIELDS})
    return shape


def _place_block(
    start: int, stop: int, acl: sp.csr_matrix, *, ranking: Ranking, k_max: int, where: str
) -> tuple[int, int, str]:
    """Place principals ``start … stop − 1`` and write their lists to a part file in ``where``."""
    path = str(Path(where) / f"lists-{start:012d}.npz")
    place_all(ranking, acl, k_max, first=start).save(path)
    return start, stop, path


def _query_spans(indptr: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Consecutive query ranges holding about ``size`` kept items each (at least one query)."""
    n_queries = len(indptr) - 1
    out, q = [], 0
    while q < n_queries:
        stop = int(np.searchsorted(indptr, indptr[q] + size, side="right")) - 1
        stop = min(max(stop, q + 1), n_queries)
        out.append((q, stop))
        q = stop
    return out


def _append_tails(
    ranking: Ranking, pre: np.ndarray, pre_rank: np.ndarray, block: int = 1 << 22, first: int = 0
) -> None:
    """Complete pre lists with the authorized items the rank stage found below the kept depth.

    Tails are sorted by (query, principal, rank); they are placed ``block`` at a time, cut on
    query boundaries, so the temporaries stay small whatever the number of tails. ``pre`` holds
    principals ``first …``: other principals' tails are skipped.
    """
    queries = ranking.tail_query
    filled = (pre >= 0).sum(axis=2)
    start = 0
    while start < len(queries):
        stop = min(start + block, len(queries))
        if stop < len(queries):  # do not split a query's tails
            stop = int(np.searchsorted(queries, queries[stop - 1], side="right"))
        q = queries[start:stop].astype(np.int64)
        p = ranking.tail_principal[start:stop].astype(np.int64) - first
        mine = (p >= 0) & (p < pre.shape[0])
        q, p = q[mine], p[mine]
        slot = filled[p, q] + positions_in_runs(q * pre.shape[0] + p)
        pre[p, q, slot] = ranking.tail_doc[start:stop][mine]
        pre_rank[p, q, slot] = ranking.tail_rank[start:stop][mine]
        start = stop
