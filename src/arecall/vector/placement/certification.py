"""Certification: what a batch's own searches say about the recall they delivered.

faiss's filtered HNSW walk visits exactly the nodes the unfiltered walk visits (the selector
only gates what is collected), so a query's unfiltered top-ef list, filtered, *is*
pushdown(ef)'s answer whenever it holds k authorized documents — and it says where they sit
(:func:`read_lists`). A strided sample of the batch gathers that evidence first
(:func:`sample_rows`); its pooled authorized share checks that a filter independent of the
cells is independent of the queries too (:func:`pooled_share_fits`); and whatever the
certificate cannot lift to the batch's goal is answered exactly (:func:`below_goal`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from arecall.vector.index import Hits
from arecall.vector.placement.settings import DEFAULTS

__all__ = ["below_goal", "pooled_share_fits", "read_lists", "sample_rows", "unsampled_rows"]


def read_lists(
    full: Hits, mask: npt.NDArray[np.bool_], k: int, ok: npt.NDArray[np.bool_] | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Hits]:
    """What a query's unfiltered top-ef list says under ``mask``: the authorized count, the rank
    of its k-th authorized entry (0 when it holds fewer than k), and — for the lists that hold k
    — the first k authorized, which *are* pushdown(ef)'s answer (faiss's walk ignores the
    selector, so the filtered walk visits the same nodes).

    Examples
    --------
    >>> full = Hits(np.array([[5, 2, 7, 9], [3, 8, -1, -1]]), np.ones((2, 4), dtype=np.float32))
    >>> count, rank_k, kept = read_lists(full, np.arange(10) % 2 == 1, 2)
    >>> count.tolist(), rank_k.tolist(), kept.ids.tolist()
    ([3, 1], [3, 0], [[5, 7]])
    """
    if ok is None:  # ``mask`` at the lists' entries, unless the caller has read it
        ok = mask[full.ids] & (full.ids >= 0)  # faiss pads with -1: mask[-1], masked out
    count = np.count_nonzero(ok, axis=1).astype(np.int64)
    good = count >= k
    # The first k authorized positions of each list that holds k, in rank order.
    at = np.argsort(~ok[good], axis=1, kind="stable")[:, :k]
    rank_k = np.zeros(count.shape[0], dtype=np.int64)
    if at.shape[0]:
        rank_k[good] = at[:, k - 1] + 1
    rows = np.flatnonzero(good)[:, None]  # fancy indexing: half take_along_axis's time
    return count, rank_k, Hits(full.ids[rows, at], full.scores[rows, at])


def sample_rows(
    n: int, minimum: int = DEFAULTS.sample_min, share: float = DEFAULTS.sample_share
) -> npt.NDArray[np.int64]:
    """The queries ``auto`` gathers evidence on first: ``minimum`` or ``share`` of ``n``,
    strided (:func:`strided`)."""
    return strided(n, max(minimum, math.ceil(n * share)))


@lru_cache(maxsize=64)
def unsampled_rows(
    n: int, minimum: int = DEFAULTS.sample_min, share: float = DEFAULTS.sample_share
) -> npt.NDArray[np.int64]:
    """The queries :func:`sample_rows` leaves out, ascending. Cached (read-only): ``setdiff1d``
    sorted on every call of the direct plan, 0.04 ms of its ~0.3 ms of numpy at 200 queries.

    Examples
    --------
    >>> unsampled_rows(40).tolist() == sorted(set(range(40)) - set(sample_rows(40).tolist()))
    True
    """
    out = np.setdiff1d(np.arange(n, dtype=np.int64), sample_rows(n, minimum, share), True)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def strided(n: int, m: int) -> npt.NDArray[np.int64]:
    """``m`` of ``range(n)`` evenly spread (all of them when ``n ≤ 2m``): a sample that does
    not depend on how the caller ordered the queries. Cached (read-only): a batch size recurs.

    Examples
    --------
    >>> strided(10, 3).tolist(), strided(5, 3).tolist()
    ([0, 4, 9], [0, 1, 2, 3, 4])
    """
    out = (
        np.arange(n, dtype=np.int64)
        if n <= 2 * m
        else np.unique(np.linspace(0, n - 1, m).round().astype(np.int64))
    )
    out.flags.writeable = False
    return out


def pooled_share_fits(
    count: npt.NDArray[np.int64],
    efs: npt.NDArray[np.int64] | int,
    s: float,
    z: float = DEFAULTS.pooled_share_z,
) -> bool:
    """Whether the searched lists hold, pooled, at least the authorized share ``s`` predicts
    (within ``z`` binomial standard errors): the check, at the scale of the graph's own
    neighbourhoods, that a filter independent of the cells is independent of the queries too.
    ``efs``: each list's efSearch (its length), or one for all.

    Examples
    --------
    >>> pooled_share_fits(np.array([14, 12, 15]), np.array([46, 46, 46]), 0.3)
    True
    >>> pooled_share_fits(np.array([14, 12, 15]), 46, 0.3)
    True
    >>> pooled_share_fits(np.array([2, 1, 3]), np.array([46, 46, 46]), 0.3)
    False
    """
    total = float(efs * count.size if isinstance(efs, int) else np.sum(efs))
    if total <= 0:
        return False
    pooled = float(np.sum(count)) / total
    return pooled >= s - z * math.sqrt(s * (1.0 - s) / total)


def below_goal(predicted: npt.NDArray[np.float64], goal: float) -> npt.NDArray[np.int64]:
    """Fewest queries (lowest predicted first) whose exact answers lift the mean to ``goal``.

    Examples
    --------
    >>> below_goal(np.array([1.0, 0.5, 0.9, 0.0]), 0.75).tolist()  # 0.6 -> 0.85
    [3]
    """
    if predicted.mean() >= goal:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(predicted, kind="stable")
    gain = np.cumsum(1.0 - predicted[order])
    deficit = goal * predicted.shape[0] - predicted.sum()
    n = int(np.searchsorted(gain, deficit - 1e-12) + 1)
    return np.sort(order[:n]).astype(np.int64)
