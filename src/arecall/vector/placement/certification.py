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
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from scipy import special

from arecall.vector.index import Hits
from arecall.vector.placement.settings import DEFAULTS

if TYPE_CHECKING:
    from arecall.vector.placement.planner import AutoPlanner

__all__ = [
    "Audit",
    "audit",
    "below_goal",
    "cells_estimated",
    "checking_costs_more",
    "effective_cells",
    "fewest_exact",
    "mean_lower_bound",
    "pooled_share_fits",
    "read_lists",
    "sample_rows",
    "shift_alarm",
    "unlike_calibration",
    "unsampled_rows",
]


@dataclass(frozen=True)
class Audit:
    """What a batch's answers say about themselves, read against the calibration.

    ``value``: each answer's certified recall — the calibration's mean recall of answers like it
    (typical, tail or deep, `arecall.vector.placement.curves.Stratum`), 0 for a stuck walk,
    and for the tail (or its deep part) where the batch has more there than a batch drawn like
    the calibration queries would (:func:`shift_alarm`); ``tail`` and ``deep``: the answers
    below the calibration's tail and deep thresholds; ``stuck``: a deep answer whose best
    document an authorized landmark outscores (the walk never reached the query's
    neighbourhood); ``shifted``: a count raised the alarm.
    """

    value: npt.NDArray[np.float64]
    tail: npt.NDArray[np.bool_]
    stuck: npt.NDArray[np.bool_]
    shifted: bool
    deep: npt.NDArray[np.bool_]


def audit(
    planner: AutoPlanner,
    q: npt.NDArray[np.float32],
    hits: Hits,
    share: float,
    efs: npt.NDArray[np.int64] | int,
    mask: npt.NDArray[np.bool_] | None,
    *,
    test_shift: bool = True,
) -> Audit | None:
    """Audit full answers ``hits`` of queries ``q`` found at efSearch ``efs`` (one per row, or
    one ``int`` for every row: the direct plan's and a plain search's, no array to read) under
    a filter of ``share`` (``mask``; ``None``: none): :class:`Audit`, or ``None`` where the
    planner has no support table (a planner built by hand: its mean certifies as before).

    The calibration describes its own queries. A batch drawn elsewhere — queries around another
    mean, or noisier — gets lower k-th scores than any of them: on 100,000 low-rank vectors a
    batch around the documents' mean flipped had every one of 200 below the calibration's tail
    threshold (5% of the calibration is), where batches drawn like the calibration put 0-18
    there. Its answers are then not certified by a recall measured on other queries.

    Examples
    --------
    >>> from arecall.vector.placement import AutoPlanner
    >>> p = AutoPlanner(n_docs=100, k=2, ef_base=16, n_calibration=400,
    ...                 support=((1.0, 16, 0.4, 0.5, 0.99, 0.9, 0.8),))
    >>> scores = np.array([[0.9, 0.8], [0.5, 0.45], [0.5, 0.45], [0.5, 0.3]], np.float32)
    >>> hits = Hits(np.arange(8).reshape(4, 2), scores)
    >>> q = np.zeros((4, 3), np.float32)
    >>> a = audit(p, q, hits, 1.0, np.full(4, 16), None, test_shift=False)
    >>> a.value.tolist(), a.tail.tolist(), a.deep.tolist()
    ([0.99, 0.9, 0.9, 0.8], [False, True, True, True], [False, False, False, True])
    >>> audit(p, q, hits, 1.0, np.full(4, 16), None).value.tolist()  # 3 of 4 in the tail
    [0.99, 0.0, 0.0, 0.0]
    """
    if not planner.support:
        return None
    n = hits.ids.shape[0]
    if isinstance(efs, int) and not n:
        efs = np.zeros(0, dtype=np.int64)  # no answer to audit: no stratum looked up
    deep_below, tail_below, typical, in_tail, in_deep = _strata(planner, share, efs)
    kth = hits.scores[:, -1]
    deep, tail = kth < deep_below, kth < tail_below
    # A walk that never reached the query's neighbourhood: some authorized document (a
    # landmark, its cell's member nearest the centroid) outscores its best answer.
    stuck = (
        np.zeros(n, dtype=bool)
        if planner.cells is None
        else planner.cells.stuck(q, hits.scores[:, 0], deep, mask)
    )
    value = np.where(deep, in_deep, np.where(tail, in_tail, typical))
    value[stuck] = 0.0
    shifted = False
    if test_shift:
        unlike = unlike_calibration(planner, tail, deep)
        shifted = unlike is not None
        if unlike is not None:
            value[unlike] = 0.0
    return Audit(value, tail, stuck, shifted, deep)


def _strata(
    planner: AutoPlanner, share: float, efs: npt.NDArray[np.int64] | int
) -> npt.NDArray[np.float64]:
    """The calibration's stratum at each row's efSearch, as a (5, rows) array of
    (deep_below, tail_below, typical, in_tail, in_deep) — or (5, 1), broadcast over the rows,
    where every row has the same efSearch (an ``int``, or an array of one value: the direct
    plan's and a plain search's answers, no per-row table to sort and fill). float64 either
    way: the k-th scores (float32) are compared against the thresholds in float64, as they
    always were."""
    if isinstance(efs, int):
        stratum = planner.stratum(share, float(efs))
        assert stratum is not None
        return np.array(stratum, dtype=np.float64)[:, None]
    if efs.size and efs[0] == efs.min() == efs.max():
        stratum = planner.stratum(share, float(efs[0]))
        assert stratum is not None
        return np.array(stratum, dtype=np.float64)[:, None]
    got = np.empty((efs.shape[0], 5))
    for ef in np.unique(efs):
        stratum = planner.stratum(share, float(ef))
        assert stratum is not None
        got[efs == ef] = stratum
    return got.T


def unlike_calibration(
    planner: AutoPlanner, tail: npt.NDArray[np.bool_], deep: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_] | None:
    """The answers the calibration does not certify because the batch is unlike its queries:
    the tail, where the batch has more answers there than a batch drawn like the calibration
    queries puts there, else the tail's deep part, where that count is; ``None`` where
    neither raises the :func:`shift_alarm`."""
    settings, n = planner.settings, tail.shape[0]
    if shift_alarm(planner, int(np.count_nonzero(tail)), n, settings.tail_share):
        return tail
    if shift_alarm(planner, int(np.count_nonzero(deep)), n, settings.deep_share):
        return deep
    return None


def effective_cells(planner: AutoPlanner, best_ids: npt.NDArray[np.int64]) -> float:
    """In how many cells, effectively, a batch's answers lie: the inverse of the sum of squared
    shares of the cells holding each query's best answer (``best_ids``). Batches drawn like the
    documents spread over a hundred cells and more; the queries of one tight cluster, over a
    few. Infinite without cells.

    Examples
    --------
    >>> from arecall.vector.placement import AutoPlanner, Cells
    >>> cells = Cells(np.eye(2, dtype=np.float32), np.array([0, 0, 1, 1]), np.array([2, 2]))
    >>> p = AutoPlanner(n_docs=4, k=1, ef_base=2, cells=cells)
    >>> effective_cells(p, np.array([0, 1, 2, 3])), effective_cells(p, np.array([0, 1, 0, 1]))
    (2.0, 1.0)
    """
    if planner.cells is None or not best_ids.size:
        return math.inf
    counts = np.bincount(planner.cells.assignment[best_ids], minlength=planner.cells.n_cells)
    share = counts / best_ids.size
    return float(1.0 / np.sum(share * share))


def cells_estimated(labels: npt.NDArray[np.int64], n_cells: int) -> float:
    """A batch's effective cells (:func:`effective_cells`) estimated from the cells of a sample
    of its queries (``labels``): the inverse of the rate at which two of them share a cell,
    unbiased for the batch's sum of squared cell shares. Infinite where none share one.

    Examples
    --------
    >>> cells_estimated(np.array([0, 0, 1, 1]), 4), cells_estimated(np.arange(5), 8)
    (3.0, inf)
    """
    m = labels.size
    if m < 2:
        return math.inf
    n_in = np.bincount(labels, minlength=n_cells)
    collide = float(np.sum(n_in * (n_in - 1))) / (m * (m - 1))
    return 1.0 / collide if collide > 0 else math.inf


def checking_costs_more(planner: AutoPlanner, n_q: int, walks: float, n_allowed: int) -> bool:
    """Whether, were the batch concentrated, its walks still to run (``walks`` scan distances)
    and the fewest exact checks that can certify it (:func:`fewest_exact`: 101 of 200, each
    then answered exactly) cost at least its scan: the check
    (`arecall.vector.placement.settle.check_concentration`) cannot then pay, and the plan
    scans outright (a slower right answer is never the cost; here it is the cheaper one).

    Examples
    --------
    >>> from arecall.vector.placement import AutoPlanner
    >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16)
    >>> [checking_costs_more(p, 200, 200 * walk, 1000) for walk in (600.0, 400.0)]
    [True, False]
    """
    checks = int(
        planner._remember(
            ("fewest", n_q), lambda: fewest_exact(n_q, planner.goal, 1.0 - planner.confidence)
        )
    )
    scan = n_q * planner.scan_share(n_allowed, n_q)
    return walks + checks * planner.scan_each(n_allowed, checks) >= scan


def mean_lower_bound(
    x: npt.NDArray[np.float64],
    n: int,
    delta: float,
    kappas: tuple[float, ...] = (0.7, 0.9, 0.97, 0.99),
) -> float:
    """A lower confidence bound, at level ``1 - delta``, on the mean of ``n`` values in [0, 1]
    of which ``x`` are the first ``x.size`` in a uniformly random order (drawn without
    replacement) — valid whatever the values are, and at every size of ``x`` at once, so a
    sample may be extended round by round and the bound read after each.

    A betting test per candidate mean m (Waudby-Smith and Ramdas, 2024, without replacement):
    the capital prod(1 + (kappa / c_t)(x_t - c_t)), where c_t is the mean the values not yet
    drawn must have if the whole mean is m, averaged over the fixed bets ``kappas``, is a
    nonnegative martingale under m, so it reaches 1/delta with probability at most delta
    (Ville). The bound is the largest m it rejects; a value below a mean ruled out before
    (c_t < 0) rejects it outright. No variance or shape is assumed: a stuck walk's 0 counts
    as it is.

    Examples
    --------
    >>> 0.95 < mean_lower_bound(np.ones(100), 200, 0.005) < 0.96  # 100 of 200 perfect
    True
    >>> mean_lower_bound(np.ones(16), 200, 0.005) < 0.75  # 16 say little about 200
    True
    >>> mean_lower_bound(np.ones(200), 200, 0.005)  # all of them: the mean itself
    1.0
    """
    t = x.size
    if t == 0:
        return 0.0
    if t >= n:
        return float(np.mean(x))
    before = np.concatenate([[0.0], np.cumsum(x)[:-1]])
    left = (n - np.arange(t)).astype(np.float64)
    bets = np.asarray(kappas)[:, None]
    threshold = -math.log(delta)

    def rejected(m: float) -> bool:
        c = (n * m - before) / left  # the mean the undrawn values must have, under m
        if (c < 0).any():
            return True  # the values drawn already exceed what m allows
        bet = np.where(c <= 1, bets / np.maximum(c, 1e-12), 0.0)  # each factor >= 1 - kappa
        log_capital = np.sum(np.log1p(bet * (x - c)), axis=1)
        top = float(log_capital.max())
        return top + math.log(float(np.mean(np.exp(log_capital - top)))) >= threshold

    # Rejection is monotone in m (each factor falls as c_t rises): bisect for its edge.
    lo, hi = 0.0, 1.0
    if not rejected(lo):
        return 0.0
    for _ in range(20):  # to 1e-6
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
    return lo


@lru_cache(maxsize=64)
def fewest_exact(n: int, goal: float, delta: float) -> int:
    """Fewest of ``n`` walked answers checked exactly (then answered exactly) with which even a
    perfect sample certifies the ``n`` at ``goal`` (:func:`mean_lower_bound`): no exact check
    smaller than this can certify a batch, whatever the walks returned. ``n`` where none can.

    Examples
    --------
    >>> fewest_exact(200, 0.96, 0.005), fewest_exact(1000, 0.96, 0.005)
    (101, 132)
    """
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        rest = (n * mean_lower_bound(np.ones(mid), n, delta) - mid) / (n - mid) if mid < n else 1
        if (mid + (n - mid) * rest) / n >= goal:
            hi = mid
        else:
            lo = mid + 1
    return lo


def shift_alarm(planner: AutoPlanner, n_below: int, n: int, share: float) -> bool:
    """Whether ``n_below`` of a batch of ``n`` below the calibration's ``share`` threshold
    (tail or deep) is more than a batch drawn like the calibration queries puts there, at
    false-alarm rate ``settings.shift_level`` / 2 (the two thresholds are tested each).

    Exactly ``a = ceil(share × n_cal)`` of the ``n_cal`` calibration queries are below the
    threshold, so the chance that a fresh query drawn like them falls below it is the (a+1)-th
    smallest of n_cal uniforms, Beta(a + 1, n_cal − a), and a batch's count is beta-binomial —
    the threshold's own noise included, not only the batch's. Cached per batch size.

    Examples
    --------
    >>> from arecall.vector.placement import AutoPlanner
    >>> p = AutoPlanner(n_docs=100, k=2, ef_base=16, n_calibration=400)
    >>> shift_alarm(p, 18, 200, 0.05), shift_alarm(p, 40, 200, 0.05)  # 10 expected
    (False, True)
    >>> shift_alarm(p, 5, 43, 0.01), shift_alarm(p, 2, 43, 0.01)  # 0.5 expected
    (True, False)
    """
    settings = planner.settings
    n_cal = max(1, planner.n_calibration)
    a = min(n_cal, math.ceil(share * n_cal))
    level = settings.shift_level / 2

    def critical() -> int:
        counts = np.arange(n + 1)
        alpha, beta = a + 1.0, max(n_cal - a, 1e-9)
        log_pmf = (
            special.gammaln(n + 1)
            - special.gammaln(counts + 1)
            - special.gammaln(n - counts + 1)
            + special.betaln(counts + alpha, n - counts + beta)
            - special.betaln(alpha, beta)
        )
        upper = np.cumsum(np.exp(log_pmf)[::-1])[::-1]  # P[count >= c]
        return int(np.argmax(upper < level)) if upper[-1] < level else n + 1

    return bool(n_below >= planner._remember(("shift", n, share), critical))


def read_lists(
    full: Hits,
    mask: npt.NDArray[np.bool_],
    k: int,
    ok: npt.NDArray[np.bool_] | None = None,
    count: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Hits]:
    """What a query's unfiltered top-ef list says under ``mask``: the authorized count, the rank
    of its k-th authorized entry (0 when it holds fewer than k), and — for the lists that hold k
    — the first k authorized, which *are* pushdown(ef)'s answer (faiss's walk ignores the
    selector, so the filtered walk visits the same nodes). ``ok`` and ``count``: the mask at
    the lists' entries and its count per list, where the caller has read them already.

    Examples
    --------
    >>> full = Hits(np.array([[5, 2, 7, 9], [3, 8, -1, -1]]), np.ones((2, 4), dtype=np.float32))
    >>> count, rank_k, kept = read_lists(full, np.arange(10) % 2 == 1, 2)
    >>> count.tolist(), rank_k.tolist(), kept.ids.tolist()
    ([3, 1], [3, 0], [[5, 7]])
    """
    if ok is None:  # ``mask`` at the lists' entries, unless the caller has read it
        ok = mask[full.ids] & (full.ids >= 0)  # faiss pads with -1: mask[-1], masked out
    if count is None:  # and their count (``ok``'s, per row)
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
