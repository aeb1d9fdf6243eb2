"""What the calibration says a walk recalls: the recall curves ``auto`` certifies with.

The calibration (`arecall.vector.placement.calibration`) measures recall@k against the exact
scan at efSearch values on a ladder, unfiltered and under uniform filters of shares 1/2,
1/sqrt(2)·1/2, 1/4, ...; :class:`RecallCurves` reads those points as curves — linear in log
efSearch, and between two calibrated shares linear in log share — and turns them into the
efSearch a batch needs: :meth:`RecallCurves.aim` keeps ``target_recall`` plus ``z`` standard
errors of a batch's mean and ``z`` of the calibration's own (``z`` from ``confidence``), and
:meth:`RecallCurves.ef_direct` is where the curve crosses that aim. These curves describe the
calibration queries; whether a batch is like them is the certificate's question
(`arecall.vector.placement.certification`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special

from arecall.vector.placement.memo import Remembering

__all__ = ["RecallCurves", "Stratum", "curve_table", "lookup"]


class Stratum(NamedTuple):
    """What the calibration says about one answer at a share and efSearch, by its k-th score:
    below ``deep_below`` the answer is in the tail's deepest part, below ``tail_below`` in the
    tail; a typical answer recalls ``typical`` on average, a tail one ``tail``, a deep one
    ``deep``."""

    deep_below: float
    tail_below: float
    typical: float
    tail: float
    deep: float


_Curve = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]
"""(log efSearch, recall) points of one calibrated share."""

_Table = tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
]
"""(shares descending, the union grid of log efSearch, each share's values on it, each share's
first log efSearch) — what :func:`lookup` reads."""


def curve_table(
    unfiltered: Sequence[tuple[int, float]], filtered: Sequence[tuple[float, int, float]]
) -> _Table:
    """:func:`lookup`'s table of calibrated points: unfiltered (efSearch, value) and filtered
    (share, efSearch, value), each share's curve on one grid of log efSearch."""
    shares = [1.0]
    curves: list[_Curve] = []
    if unfiltered:
        curves.append(
            (
                np.log([float(e) for e, _ in unfiltered]),
                np.array([r for _, r in unfiltered], dtype=np.float64),
            )
        )
    else:  # nothing measured: the unfiltered search is taken as exact (predicted_recall)
        curves.append((np.zeros(1), np.ones(1)))
    for share in sorted({g for g, _, _ in filtered}, reverse=True):
        points = sorted((e, r) for g, e, r in filtered if g == share)
        shares.append(share)
        curves.append(
            (
                np.log([float(e) for e, _ in points]),
                np.array([r for _, r in points], dtype=np.float64),
            )
        )
    grid = np.unique(np.concatenate([le for le, _ in curves]))
    values = np.stack(
        [np.interp(grid, le, r, left=0.0 if i else r[0]) for i, (le, r) in enumerate(curves)]
    )
    firsts = np.array([le[0] if i else -np.inf for i, (le, _) in enumerate(curves)])
    return np.array(shares, dtype=np.float64), grid, values, firsts


def _share_table(
    points: Sequence[tuple[float, int, float]], unmeasured: float | None = None
) -> _Table:
    """:func:`curve_table` of (share, efSearch, value) points, share 1 the unfiltered curve;
    ``unmeasured``: its value where no unfiltered point was measured (``None``: as
    :func:`curve_table` takes no points, 1)."""
    unfiltered = [(e, v) for g, e, v in points if g >= 1.0]
    if not unfiltered and unmeasured is not None:
        unfiltered = [(1, unmeasured)]
    return curve_table(unfiltered, [p for p in points if p[0] < 1.0])


def lookup(table: _Table, ef: npt.ArrayLike, share: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A calibrated value at efSearch ``ef`` and ``share`` (:meth:`AutoPlanner.filtered_recall`
    says how: linear in log efSearch, 0 before a filtered curve's first point, flat past its
    last; between two calibrated shares linear in log share; 0 below the smallest)."""
    efs = np.asarray(ef, dtype=np.float64)
    x = np.broadcast_to(np.asarray(share, dtype=np.float64), efs.shape).ravel()
    shares, grid, values, firsts = table
    log_ef = np.log(np.maximum(efs, 1.0)).ravel()
    # Each curve is linear in log efSearch between the union of all calibrated points (a
    # superset of its own), 0 before its first point (the unfiltered one: its first value)
    # and flat past the last: one table lookup instead of an interp per curve per call.
    j = np.clip(np.searchsorted(grid, log_ef, side="right") - 1, 0, grid.size - 1)
    j1 = np.minimum(j + 1, grid.size - 1)
    span = grid[j1] - grid[j]
    w = np.clip(np.where(span > 0, (log_ef - grid[j]) / np.where(span > 0, span, 1.0), 0), 0, 1)

    def curve(i: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        v = values[i, j] + w * (values[i, j1] - values[i, j])
        return np.asarray(np.where(log_ef < firsts[i], 0.0, v), dtype=np.float64)

    out = np.where(x >= 1.0, curve(np.zeros(x.shape, np.int64)), 0.0)
    if shares.size > 1:
        # shares descend from 1.0; lo_i is the first calibrated share ≤ x, hi_i the one above
        lo_i = np.clip(np.searchsorted(-shares, -x, side="left"), 1, shares.size - 1)
        hi_i = lo_i - 1
        lo, hi = shares[lo_i], shares[hi_i]
        t = np.log(np.maximum(x, lo) / lo) / np.log(hi / lo)
        v_lo = curve(lo_i)
        out = np.where((x >= lo) & (x < hi), v_lo + t * (curve(hi_i) - v_lo), out)
    return np.asarray(out, dtype=np.float64).reshape(efs.shape)


class RecallCurves(Remembering):
    """The calibrated recall curves of an `~arecall.vector.placement.planner.AutoPlanner`
    (a mixin: the planner's fields are declared here for the type checker only)."""

    n_docs: int
    k: int
    ef_base: int | None
    recall: tuple[tuple[int, float], ...]
    filtered: tuple[tuple[float, int, float], ...]
    spread: tuple[tuple[float, int, float], ...]
    stuck_deficit: tuple[tuple[float, int, float], ...]
    target_recall: float
    margin: float
    confidence: float
    n_calibration: int
    support: tuple[tuple[float, int, float, float, float, float, float], ...]

    def filtered_recall(self, ef: npt.ArrayLike, share: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Calibrated pushdown recall at efSearch ``ef`` where ``share`` of the neighbourhood is
        authorized.

        Each calibrated share (1 = the unfiltered curve, then the uniform-filter shares of
        :func:`calibrate_auto`) gives a curve in log efSearch (held flat past its last point, 0
        before its first); between two calibrated shares the recall is interpolated in log share
        — recall grows smoothly with the share, and the grid is √2 apart — and below the
        smallest share measured it is 0 (unknown, so never certified).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((10, 0.9), (32, 1.0)),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.96)))
        >>> np.round(p.filtered_recall([32, 32, 32, 16], [1.0, 0.5, 0.1, 0.7]), 3).tolist()
        [1.0, 0.96, 0.0, 0.92]
        """
        return lookup(self._table, ef, share)

    def recall_spread(self, ef: npt.ArrayLike, share: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The calibration queries' per-query standard deviation of recall@k at efSearch ``ef``
        and ``share``, interpolated like :meth:`filtered_recall` (1.0 where nothing was
        measured: the most a spread of recalls in [0, 1] can be, so the margin stays whole).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.96)),
        ...                 spread=((1.0, 16, 0.05), (0.5, 16, 0.1), (0.5, 32, 0.06)))
        >>> np.round(p.recall_spread([16, 32, 24], [1.0, 0.5, 0.5]), 3).tolist()
        [0.05, 0.06, 0.077]
        """
        if not self.spread:
            return np.ones(np.broadcast_shapes(np.shape(ef), np.shape(share)))
        return lookup(self._spread_table, ef, share)

    @cached_property
    def _table(self) -> _Table:
        """(shares descending, the union grid of log efSearch, each share's recall on it, each
        share's first log efSearch — −∞ for the unfiltered curve, held at its first value)."""
        return curve_table(self.recall, self.filtered)

    @cached_property
    def _spread_table(self) -> _Table:
        """:attr:`_table` for the per-query spread (``spread``)."""
        return _share_table(self.spread)

    @cached_property
    def _deficit_table(self) -> _Table:
        """:attr:`_table` for ``stuck_deficit`` (0 where nothing was measured)."""
        return _share_table(self.stuck_deficit, unmeasured=0.0)

    def stuck_allowance(
        self, share: float, ef: float, n_queries: int, *, deficit: float | None = None
    ) -> int:
        """How many of a batch's ``n_queries`` answers, walked at efSearch ``ef`` under a
        uniform filter of ``share``, may stay stuck without being searched again: the
        calibration's ``stuck_deficit`` there (or ``deficit``, the share a second look lets
        stay), in queries, rounded down.

        The aim is crossed on curves that count each calibration walk as it came back, stuck
        ones at their 0; the recall the plans deliver (whose spread the aim keeps) searches
        the stuck ones again. So the curves stand ``deficit`` below what the promise is stated
        for, and a batch that leaves ``deficit × n`` stuck walks at 0 keeps it. At 100,000
        clustered vectors (``clustered-corr``, seed 0) with no filter, one calibration's curve
        at efSearch 64 stood 0.0097 below the recall delivered (4 of 400 walks stuck): a batch
        of 200 walked there may leave one stuck walk as it came back.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.97), (32, 0.98)),
        ...                 stuck_deficit=((1.0, 16, 0.01), (1.0, 32, 0.005)))
        >>> p.stuck_allowance(1.0, 16, 200), p.stuck_allowance(1.0, 32, 200)
        (2, 1)
        >>> AutoPlanner(n_docs=1000, k=10, ef_base=16).stuck_allowance(1.0, 16, 200)
        0
        """
        if deficit is None:
            if not self.stuck_deficit:
                return 0
            # Remembered: the direct plan and a plain search ask on every call.
            key = ("stuck deficit", float(share), float(ef))
            deficit = float(
                self._remember(
                    key, lambda: lookup(self._deficit_table, np.array([float(ef)]), share)[0]
                )
            )
        return math.floor(max(0.0, deficit) * n_queries + 1e-9)

    def ef_needed(
        self, share: npt.ArrayLike, *, between: bool = False, wanted: float | None = None
    ) -> npt.NDArray[np.float64]:
        """Smallest calibrated efSearch whose :meth:`filtered_recall` at ``share`` reaches
        ``wanted`` (default ``target_recall + margin``); ``ef_base / share`` where the
        calibration never reached it or measured no share that low.

        With ``between``, the efSearch between that one and the calibrated one below it where
        the interpolated recall (the same curve :meth:`filtered_recall` certifies with) crosses
        the goal: the calibration ladder is 19% a step, and a plan that must run within 10% of
        the best fixed efSearch cannot round up by a whole step.

        A ``wanted`` below the whole margin is reached sooner, and below ``ef_base`` too: from
        the first calibrated efSearch whose unfiltered recall reaches it (the crossing from the
        one below it, with ``between``), at share 1 as under any filter.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)))
        >>> p.ef_needed([1.0, 0.7, 0.5, 0.1]).tolist()
        [16.0, 32.0, 32.0, 160.0]
        >>> np.round(p.ef_needed([0.5], between=True), 2).tolist()  # 0.97 = 7/8 of the way
        [29.34]
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=32,
        ...                 recall=((10, 0.9), (16, 0.96), (32, 0.98)))
        >>> p.ef_needed([1.0]).tolist()  # the whole margin, 0.97: ef_base
        [32.0]
        >>> np.round(p.ef_needed([1.0], between=True, wanted=0.95), 2).tolist()
        [14.79]
        """
        shares = np.maximum(np.asarray(share, dtype=np.float64), 1e-12)
        base = float(self.ef_base or self.k)
        whole = min(1.0, self.target_recall + self.margin)
        if wanted is None:
            wanted = whole
        lowered = wanted < whole - 1e-12
        floor = base
        if lowered:
            # A goal below the calibration's own is reached sooner, unfiltered first: no filter
            # needs less than the first calibrated efSearch whose unfiltered recall reaches it.
            floor = next((float(e) for e, r in self.recall if r >= wanted - 1e-12), base)
            floor = min(floor, base)
        grid = sorted({float(e) for e, _ in self.recall} | {float(e) for _, e, _ in self.filtered})
        # Below a lowered floor, and below ef_base for a goal above the whole margin, the rung
        # below stays on the grid, unreached: the crossing starts there.
        under = [e for e in grid if e < floor][-1:] if abs(wanted - whole) > 1e-12 else []
        grid = under + [e for e in grid if e >= floor] or [floor]
        efs = np.broadcast_to(np.array(grid), (*shares.shape, len(grid)))
        values = self.filtered_recall(efs, shares[..., None])
        reached = (values >= wanted - 1e-12) & (np.array(grid) >= floor)
        at = np.argmax(reached, axis=-1)
        first = np.array(grid)[at]
        if between:
            below = np.maximum(at - 1, 0)
            lo, hi = np.log(np.array(grid)[below]), np.log(first)
            r_lo = np.take_along_axis(values, below[..., None], axis=-1)[..., 0]
            r_hi = np.take_along_axis(values, at[..., None], axis=-1)[..., 0]
            t = np.clip((wanted - r_lo) / np.maximum(r_hi - r_lo, 1e-12), 0.0, 1.0)
            cross = np.exp(lo + t * (hi - lo))
            # A curve that starts at ``first`` (0 below its first point) is not linear there:
            # keep the crossing only where the certified curve confirms it.
            sure = self.filtered_recall(cross, shares) >= wanted - 1e-9
            first = np.where((at > 0) & sure, cross, first)
        if wanted > whole + 1e-12:
            # Above the whole margin (the calibration's own error kept too), an aim no curve
            # reaches gets the deepest efSearch calibrated (where the ladders stopped, a walk
            # cost a scan), or the size-only rule's, whichever is deeper.
            deepest = np.maximum(grid[-1], np.where(shares >= 1.0, base, base / shares))
            return np.asarray(np.where(reached.any(axis=-1), first, deepest), dtype=np.float64)
        out = np.where(reached.any(axis=-1), first, base / shares)
        # No filter needs more than ef_base; at the whole margin the grid starts there, so
        # share 1 gets ef_base itself.
        return np.asarray(np.where(shares >= 1.0, np.minimum(out, base), out), dtype=np.float64)

    def predicted_recall(self, ef: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Calibrated unfiltered recall@k at (effective) efSearch ``ef``, log-interpolated.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=32, recall=((10, 0.8), (40, 1.0)))
        >>> p.predicted_recall(np.array([10.0, 20.0, 80.0])).tolist()
        [0.8, 0.9, 1.0]
        """
        if not self.recall:
            return np.ones_like(ef, dtype=np.float64)
        log_efs, values = self._recall_curve
        return np.asarray(np.interp(np.log(np.maximum(ef, 1.0)), log_efs, values), dtype=np.float64)

    def predicted_at(self, ef: int) -> float:
        """:meth:`predicted_recall` at one efSearch, remembered: a plain search asks it on every
        call, and the interpolation's numpy took 35 us of it after the walk.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=32, recall=((10, 0.8), (40, 1.0)))
        >>> p.predicted_at(20)
        0.9
        """
        return float(
            self._remember(
                ("predicted", int(ef)),
                lambda: self.predicted_recall(np.array([float(ef)]))[0],
            )
        )

    @cached_property
    def _recall_curve(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """:attr:`recall` as (log efSearch, recall) arrays, built once: ``auto`` certifies
        every batch by it."""
        return np.log([float(e) for e, _ in self.recall]), np.array([r for _, r in self.recall])

    @property
    def goal(self) -> float:
        """The batch's certified-recall goal, ``target_recall + margin/2``: what ``auto``
        escalates and scans to reach, half the calibration's margin kept against the gap
        between the held-out queries and the scored ones."""
        return min(1.0, self.target_recall + self.margin / 2)

    def aim(self, share: float, n_queries: int | None = None) -> float:
        """The calibrated recall a direct pushdown under a uniform filter of ``share`` aims at
        for a batch of ``n_queries``: ``target_recall`` plus the batch's own noise (within
        [``margin``/2, ``margin``]), plus how far the calibration's mean may sit above the
        true one.

        With per-query standard deviation σ (``recall_spread``, read where the curve crosses
        the goal), two errors stand between a calibrated mean and a batch's: the batch's mean
        strays from the true mean by σ/√n_queries, and the calibration's from it by
        σ/√n_calibration. ``z`` of each is kept (2.58 at the default confidence, 0.995), the
        two added rather than pooled, so that the promise holds per calibration: unless the
        calibration is among the unluckiest 0.5%, every batch it plans keeps the target at
        the confidence. Pooled, it held only over calibrations: at a million low-rank vectors
        one calibration came out 0.007 above the true mean under a 50% filter, and 2 of 80
        fresh batches of 100 fell below 0.95. The batch's part keeps half the margin at least
        and the whole margin at most (a small batch relies on it); on 100,000 low-rank vectors
        σ is about 0.07, so 200 queries aim at 0.963 + 0.009. On the clustered corpus σ is
        0.16-0.25, and the calibration's part 0.02-0.03. Without a batch size or a measured
        spread: the whole margin.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)),
        ...                 spread=((1.0, 16, 0.05), (0.5, 16, 0.06), (0.5, 32, 0.06)),
        ...                 n_calibration=400)
        >>> p.aim(0.5), round(p.aim(0.5, 200), 4), round(p.aim(0.5, 1), 4)
        (0.97, 0.9687, 0.9777)
        >>> p.ef_direct(0.5), p.ef_direct(0.5, 200)
        (30, 30)
        """
        whole = min(1.0, self.target_recall + self.margin)
        if n_queries is None or self.n_calibration <= 0 or not self.spread:
            return whole
        goal = self.goal
        at = float(self.ef_needed(np.array([share]), between=True, wanted=goal)[0])
        if float(self.filtered_recall(np.array([at]), share)[0]) < goal - 1e-9:
            return whole  # never reached at this share: no spread measured where it matters
        sd = float(self.recall_spread(np.array([at]), share)[0])
        batch = self.target_recall + self.z * sd / math.sqrt(max(1, n_queries))
        calibration = self.z * sd / math.sqrt(self.n_calibration)
        return float(min(1.0, min(whole, max(goal, batch)) + calibration))

    def ef_direct(self, share: float, n_queries: int | None = None) -> int:
        """The efSearch of a direct pushdown under a uniform filter of ``share`` for a batch of
        ``n_queries``: where the interpolated calibration curve crosses :meth:`aim`
        (``ef_needed(between=True)``), rounded up, within [k, n], and never below where the
        unfiltered curve crosses the same aim, nor below share 1's own efSearch (the plain
        search of a batch with no filter, at share 1's aim): ``ef_base`` is that crossing at
        the whole margin only.

        The aim keeps half the margin at least, and the whole margin where the per-query
        recall is spread wide or the batch is small: on the clustered corpus the scored
        queries' recall ran 0.02 below the held-out queries' at the same efSearch (aimed at
        the batch's goal, 0.96, a plain search returned 0.940). Cached per share and batch
        size: ``auto`` asks on every call, and at 100,000 vectors the numpy arithmetic was 3%
        of the search.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)))
        >>> p.ef_direct(0.5)  # 0.97 is 7/8 of the way from 0.9 to 0.98 in log ef
        30
        """

        def compute() -> int:
            wanted = self.aim(share, n_queries)
            cross, plain = self.ef_needed(np.array([share, 1.0]), between=True, wanted=wanted)
            lowest = math.ceil(float(plain) - 1e-9)  # no filter needs less than no filter
            if share < 1.0:  # ... at its own aim either (a share never reached aims lower)
                lowest = max(lowest, self.ef_direct(1.0, n_queries))
            return int(np.clip(max(math.ceil(float(cross) - 1e-9), lowest), self.k, self.n_docs))

        return int(self._remember(("direct", float(share), n_queries), compute))

    def direct_recall(self, share: float, n_queries: int | None = None) -> float:
        """The uniform-filter calibration's recall for pushdown at :meth:`ef_direct` (cached).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)))
        >>> p.ef_direct(0.5), round(p.direct_recall(0.5), 3)
        (30, 0.973)
        """
        ef = float(self.ef_direct(share, n_queries))
        return float(
            self._remember(
                ("recall", float(share), n_queries),
                lambda: self.filtered_recall(np.array([ef]), share)[0],
            )
        )

    @cached_property
    def z(self) -> float:
        """Standard errors of a batch's mean the aim keeps above the target: the one-sided
        ``confidence`` point of the normal distribution (2.58 at 0.995)."""
        return float(special.ndtri(self.confidence))

    def stratum(self, share: float, ef: float) -> Stratum | None:
        """The calibration's :class:`Stratum` at ``share`` and efSearch ``ef``, interpolated as
        :meth:`filtered_recall` is (linear in log efSearch, flat past either end; linear in log
        share between calibrated shares, flat past either end); ``None`` without a ``support``
        table. Cached per share and efSearch.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, support=(
        ...     (1.0, 16, 0.7, 0.8, 0.98, 0.9, 0.5), (1.0, 64, 0.8, 0.9, 1.0, 1.0, 0.9),
        ...     (0.5, 16, 0.5, 0.6, 0.9, 0.8, 0.3)))
        >>> [round(v, 3) for v in p.stratum(1.0, 32)]
        [0.75, 0.85, 0.99, 0.95, 0.7]
        >>> [round(v, 3) for v in p.stratum(0.5, 99)], round(p.stratum(2**-0.5, 16).tail_below, 3)
        ([0.5, 0.6, 0.9, 0.8, 0.3], 0.7)
        """
        if not self.support:
            return None
        return Stratum(
            *self._remember(("stratum", float(share), float(ef)), lambda: self._stratum(share, ef))
        )

    def _stratum(self, share: float, ef: float) -> tuple[float, ...]:
        """:meth:`stratum`, computed."""
        curves = self._support_curves
        shares = sorted(curves)
        log_ef = math.log(max(ef, 1.0))

        def at(g: float) -> npt.NDArray[np.float64]:
            log_efs, values = curves[g]
            return np.array([np.interp(log_ef, log_efs, column) for column in values.T])

        if share >= shares[-1] or share <= shares[0]:
            return tuple(float(v) for v in at(shares[-1] if share >= shares[-1] else shares[0]))
        hi = next(g for g in shares if g > share)
        lo = max(g for g in shares if g <= share)
        t = math.log(share / lo) / math.log(hi / lo)
        return tuple(float(v) for v in at(lo) + t * (at(hi) - at(lo)))

    @cached_property
    def _support_curves(
        self,
    ) -> dict[float, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
        """Per calibrated share, (log efSearch, the five values of ``support``), ascending;
        unbounded thresholds (a calibration too small to have a tail) as huge ones."""
        out = {}
        for share in sorted({p[0] for p in self.support}):
            points = sorted(p[1:] for p in self.support if p[0] == share)
            values = np.array([p[1:] for p in points], dtype=np.float64)
            values[:, :2] = np.clip(values[:, :2], -1e30, 1e30)
            out[share] = (np.log([float(p[0]) for p in points]), values)
        return out
