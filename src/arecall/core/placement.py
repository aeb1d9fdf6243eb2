"""Where the authorization filter sits: after truncation (post) or before it (pre).

``post``: L_K = filter(top_K(ranking)) — unusable items spend slots, so fewer than K come back.
``pre``:  L_K = top_K(filter(ranking)) — K usable answers whenever K exist.

Claim: post ⊆ pre for every ranking, K and predicate, so Δ@K = ARecall^pre − ARecall^post ≥ 0.
Filtering keeps relative order; an item in post is authorized with at most K − 1 items (so at
most K − 1 authorized items) before it, hence it is among the first K authorized items. The
prove stage checks this on random inputs and on every run's own lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from arecall.core.errors import ArecallError
from arecall.core.measures import Authorized
from arecall.core.ragged import positions_in_runs
from arecall.core.ranking import Ranking
from arecall.io.atomic import write_npz

__all__ = [
    "COMPARED",
    "PLACEMENTS",
    "PlacedLists",
    "Placement",
    "place_all",
    "post_filter",
    "pre_filter",
]


class Placement(StrEnum):
    """Where the authorization filter sits relative to truncation to K: the one vocabulary.

    ``post`` and ``pre`` are the two placements compared throughout arecall (the pipeline's
    ``evaluation.placements``, the ``arecall_post`` / ``arecall_pre`` measures); ``as-is`` is
    ``arecall evaluate``'s third reading of a run: no filter, the list is what the principal
    gets. (A vector index's search strategies are another concept: `arecall.vector.placement`.)
    """

    POST = "post"
    PRE = "pre"
    AS_IS = "as-is"


#: The placements the pipeline compares, in report order.
COMPARED: tuple[str, ...] = (Placement.POST.value, Placement.PRE.value)
#: Every placement ``arecall evaluate`` accepts.
PLACEMENTS: tuple[str, ...] = tuple(p.value for p in Placement)


def post_filter(ranking: Sequence[str], authorized: Authorized, k: int) -> list[str]:
    """Truncate to K, then drop unauthorized items.

    Examples
    --------
    >>> post_filter(["x", "a", "b"], {"a", "b"}.__contains__, 2)
    ['a']
    """
    if k <= 0:
        raise ValueError(f"k must be a positive integer, got {k}")
    return [d for d in ranking[:k] if authorized(d)]


def pre_filter(ranking: Sequence[str], authorized: Authorized, k: int) -> list[str]:
    """Drop unauthorized items, then truncate to K.

    Examples
    --------
    >>> pre_filter(["x", "a", "b"], {"a", "b"}.__contains__, 2)
    ['a', 'b']
    """
    if k <= 0:
        raise ValueError(f"k must be a positive integer, got {k}")
    return [d for d in ranking if authorized(d)][:k]


# -- all query-principal pairs at once ---------------------------------------------------------


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
        arrays = {f: getattr(self, f) for f in ("post", "post_rank", "pre", "pre_rank")}
        write_npz(path, arrays)

    @classmethod
    def load(cls, path: str | Path) -> PlacedLists:
        if not Path(path).is_file():
            raise ArecallError(f"{path}: missing; run the filter stage first")
        with np.load(path, allow_pickle=False) as z:
            return cls(**{f: z[f] for f in ("post", "post_rank", "pre", "pre_rank")})


def _compact(mask: np.ndarray, ranking: np.ndarray, k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Pack the ranked items selected by ``mask`` (P, Q, W) to the left, keeping order."""
    slot = np.cumsum(mask, axis=2) - 1
    keep = mask & (slot < k_max)
    p, q, j = np.nonzero(keep)
    items = np.full((*mask.shape[:2], k_max), -1, dtype=np.int32)
    ranks = np.full_like(items, -1)
    items[p, q, slot[p, q, j]] = ranking[q, j]
    ranks[p, q, slot[p, q, j]] = j
    return items, ranks


def _chunks(lengths: np.ndarray, n_principals: int, budget: int) -> list[slice]:
    """Consecutive query blocks whose padded (principals × queries × width) size fits budget."""
    out, start, widest = [], 0, 0
    for q, n in enumerate(lengths.tolist()):
        wider = max(widest, n, 1)
        if q > start and n_principals * (q - start + 1) * wider > budget:
            out.append(slice(start, q))
            start, wider = q, max(n, 1)
        widest = wider
    if start < len(lengths):
        out.append(slice(start, len(lengths)))
    return out


def place_all(
    ranking: Ranking, acl: sp.spmatrix, k_max: int, *, budget: int = 1 << 24
) -> PlacedLists:
    """Apply both placements for every principal and query, vectorised over query blocks.

    The ranking must be deep enough for exact pre lists (`arecall.core.ranking.rank_queries`
    guarantees it); ``budget`` bounds the elements of one block's principals × queries × depth
    authorization array, and so the memory.

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
    allowed = np.asarray(acl.toarray(), dtype=bool)
    n_principals, n_queries = allowed.shape[0], ranking.n_queries
    shape = (n_principals, n_queries, k_max)
    out = {f: np.full(shape, -1, dtype=np.int32) for f in ("post", "post_rank", "pre", "pre_rank")}
    chunks = _chunks(ranking.lengths, n_principals, budget)
    bar = len(chunks) > 1  # a terminal shows a bar past one block (tqdm: none on a pipe)
    for rows in tqdm(chunks, desc="filter", unit="block", disable=None if bar else True):
        block = ranking.padded(rows=rows)
        valid = block >= 0
        auth = allowed[:, np.where(valid, block, 0)] & valid[None, :, :]
        pre, pre_rank = _compact(auth, block, k_max)
        post, post_rank = _compact(auth[:, :, :k_max], block[:, :k_max], k_max)
        for name, arr in (
            ("post", post),
            ("post_rank", post_rank),
            ("pre", pre),
            ("pre_rank", pre_rank),
        ):
            out[name][:, rows, : arr.shape[2]] = arr
    _append_tails(ranking, out["pre"], out["pre_rank"])
    return PlacedLists(**out)


def _append_tails(
    ranking: Ranking, pre: np.ndarray, pre_rank: np.ndarray, block: int = 1 << 22
) -> None:
    """Complete pre lists with the authorized items the rank stage found below the kept depth.

    Tails are sorted by (query, principal, rank); they are placed ``block`` at a time, cut on
    query boundaries, so the temporaries stay small whatever the number of tails.
    """
    queries = ranking.tail_query
    filled = (pre >= 0).sum(axis=2)
    start = 0
    while start < len(queries):
        stop = min(start + block, len(queries))
        if stop < len(queries):  # do not split a query's tails
            stop = int(np.searchsorted(queries, queries[stop - 1], side="right"))
        q = queries[start:stop].astype(np.int64)
        p = ranking.tail_principal[start:stop].astype(np.int64)
        slot = filled[p, q] + positions_in_runs(q * pre.shape[0] + p)
        pre[p, q, slot] = ranking.tail_doc[start:stop]
        pre_rank[p, q, slot] = ranking.tail_rank[start:stop]
        start = stop
